//! The adaptive strategy of a recommendation (issue 49): the candidates of one matrix are the
//! combinations of a [`ConfigSearch`]; a trial launches one of them, screens it (a coarse
//! search) or measures it fully, and feeds its value on the objective back; combinations that
//! cannot fit, or whose prediction or screening cannot win, are never launched (or launched
//! once). Every launch is still torn down by [`measure_candidate`]. A launch that fails to
//! start counts against the budget (one launch, and its instance-hours until it failed); a
//! `max_instance_hours` that cannot pay for the least launch is refused before anything runs.

use std::collections::BTreeMap;

use kneepoint_planner::config_search::{
    Budget, ConfigAnswer, ConfigSearch, Dimension, Fidelity, Goal, Prior, Status, Stop, Trial,
    TrialOutcome,
};
use kneepoint_planner::{objective_value, Candidate, Objective};
use kneepoint_runner::CancelToken;

use crate::candidate::{CandidateSource, CandidateSpec};
use crate::measure::{measure_candidate, NOT_MEASURED};
use crate::strategy::{Gathered, Launches};
use crate::Error;

/// The dimension the instance type is searched along, when the candidates span several.
const INSTANCE_TYPE: &str = "instance_type";

/// Each candidate's place in the search: its matrix settings, after its instance type when the
/// candidates span several (then each type is a value of one more dimension, searched jointly
/// with the engine's settings, each combination priced at its own type and predicted by its
/// own stage-1 fit).
fn keyed(specs: &[CandidateSpec]) -> Vec<Vec<(String, String)>> {
    let types: std::collections::BTreeSet<&str> =
        specs.iter().map(|s| s.instance_type.as_str()).collect();
    specs
        .iter()
        .map(|s| {
            let mut k = Vec::with_capacity(s.settings.len() + 1);
            if types.len() > 1 {
                k.push((INSTANCE_TYPE.to_owned(), s.instance_type.clone()));
            }
            k.extend(s.settings.iter().cloned());
            k
        })
        .collect()
}

/// The matrix's dimensions from the candidates' settings (each value in first-seen order,
/// numbers sorted), or why the candidates are not one matrix.
fn dimensions(specs: &[CandidateSpec], objective: Objective) -> Result<Vec<Dimension>, Error> {
    let keyed = keyed(specs);
    let keys: Vec<&str> = keyed[0].iter().map(|(k, _)| k.as_str()).collect();
    let one_matrix = keys.iter().any(|k| *k != INSTANCE_TYPE)
        && keyed
            .iter()
            .all(|s| s.len() == keys.len() && s.iter().zip(&keys).all(|((k, _), key)| k == key));
    let distinct = keyed
        .iter()
        .collect::<std::collections::BTreeSet<_>>()
        .len()
        == specs.len();
    if !one_matrix || !distinct {
        return Err(Error::invalid(
            "the adaptive strategy searches the combinations of a [candidates.matrix] (on one instance type, or the same matrix on several): every candidate needs the same matrix keys, and no two on one instance type the same values (use the grid strategy for hand-picked candidates)",
        ));
    }
    Ok(keys
        .iter()
        .enumerate()
        .map(|(d, key)| {
            let mut values: Vec<String> = Vec::new();
            for s in &keyed {
                let v = &s[d].1;
                if !values.contains(v) {
                    values.push(v.clone());
                }
            }
            if values.iter().all(|v| v.parse::<f64>().is_ok()) {
                values.sort_by(|a, b| {
                    let n = |x: &String| x.parse::<f64>().unwrap_or(0.0);
                    n(a).total_cmp(&n(b))
                });
            }
            let d = Dimension::new(key, values);
            // a larger batch limit runs every level a smaller one does the same way, and
            // more: under the throughput and cost goals it never scores worse (until memory
            // binds, which the SLA search then stops below); a latency goal prefers less
            let numeric = d.values.iter().all(|v| v.parse::<f64>().is_ok());
            if *key == "max_num_seqs" && numeric && objective != Objective::Latency {
                d.monotone()
            } else {
                d
            }
        })
        .collect())
}

/// A measured candidate as the planner ranks it.
fn candidate(spec: &CandidateSpec, m: crate::measure::Measured, screened: bool) -> Candidate {
    let lower_bound = m.lower_bound.or_else(|| {
        (screened && m.point.is_some()).then(|| {
            format!(
                "screened only (a coarse search of at most {} probes), so its capacity is a lower bound",
                crate::search::SCREEN_ITERATIONS
            )
        })
    });
    Candidate {
        name: spec.name.clone(),
        instance_type: spec.instance_type.clone(),
        instance_count: spec.instance_count,
        price_per_instance_hour: spec.price_per_instance_hour,
        point: m.point,
        curve: m.curve,
        unmet_reason: m.reason,
        lower_bound,
        levels: m.levels,
        gpus_per_instance: spec.gpus_per_instance,
    }
}

/// The screening folder of candidate `spec` (beside its own folder).
fn screen_dir(spec: &CandidateSpec) -> String {
    format!("{}-screen", spec.folder())
}

/// One trial's line for `trials`: what ran, and its value or why it has none.
fn trial_line(full: bool, value: Option<f64>, why: Option<&str>) -> String {
    let what = if full { "searched" } else { "screened" };
    match (value, why) {
        (Some(v), _) => format!("{what} ({v:.4})"),
        (None, Some(why)) => format!("{what} (no value: {why})"),
        (None, None) => format!("{what} (no value: no level met the SLAs)"),
    }
}

/// The goal of `objective`, or why the adaptive strategy cannot serve it.
fn goal(objective: Objective, specs: &[CandidateSpec]) -> Result<Goal, Error> {
    match objective {
        Objective::Cost => match specs.iter().find(|s| s.price_per_instance_hour <= 0.0) {
            Some(s) => Err(Error::invalid(format!(
                "the adaptive strategy compares costs, and candidate {:?} has no price (0): give price_per_hour, or rank by throughput",
                s.name
            ))),
            None => Ok(Goal::Minimize),
        },
        Objective::Latency => Ok(Goal::Minimize),
        Objective::Throughput => Ok(Goal::Maximize),
        Objective::Pareto => Err(Error::invalid(
            "the adaptive strategy searches for one best value (cost, latency or throughput); the Pareto objective needs every candidate: use the grid strategy",
        )),
    }
}

/// The least time a launch keeps its instances up, s: bringing a server up, measuring it and
/// taking it down take longer than this on any launcher (most take minutes).
const LEAST_LAUNCH_S: f64 = 1.0;

/// The least instance-hours one launch of the candidates can cost: [`LEAST_LAUNCH_S`] of the
/// smallest endpoint that `source` launches and that fits (`None`: it launches none).
fn least_launch_hours(specs: &[CandidateSpec], source: &dyn CandidateSource) -> Option<f64> {
    specs
        .iter()
        .filter(|s| s.unfit.is_none() && source.launches(s))
        .map(|s| LEAST_LAUNCH_S / 3600.0 * f64::from(s.instance_count.max(1)))
        .min_by(f64::total_cmp)
}

/// Refuses a `max_instance_hours` that cannot pay for one launch (it would launch nothing, or,
/// counted after the fact, launch once and overrun it), naming the budget and what the least
/// launch costs.
pub(crate) fn check_budget(
    specs: &[CandidateSpec],
    source: &dyn CandidateSource,
    budget: Budget,
) -> Result<(), Error> {
    let (Some(max), Some(least)) = (budget.max_instance_hours, least_launch_hours(specs, source))
    else {
        return Ok(());
    };
    if max < least {
        return Err(Error::invalid(format!(
            "max_instance_hours = {max:?} cannot pay for one launch: the least launch of these candidates costs at least {least:.6} instance-hours ({LEAST_LAUNCH_S} s of its instances; a real server takes minutes to load and measure): raise max_instance_hours, or leave it out"
        )));
    }
    Ok(())
}

/// A kept result: the candidate as ranked, its folder, and whether it is a full measurement.
type Kept = (Candidate, Option<String>, bool);

/// Every combination neither measured nor screened, listed as not measured with why (it
/// cannot fit, was skipped, or the search stopped first).
fn list_untried(
    specs: &[CandidateSpec],
    (search, of, answer, interrupted): (&ConfigSearch, &[Option<usize>], &ConfigAnswer, bool),
    results: &mut BTreeMap<usize, Kept>,
    trials: &mut BTreeMap<usize, Vec<String>>,
) {
    let untried = match answer.stop {
        Some(Stop::Budget) => "not tried: the budget ran out first",
        _ if interrupted => "not tried: interrupted first",
        _ => "not tried",
    };
    for (i, c) in of.iter().enumerate() {
        let Some(ci) = *c else { continue };
        if results.contains_key(&ci) {
            continue;
        }
        let spec = &specs[ci];
        let why = match search.status(i) {
            Some(Status::Skipped(why)) => format!("skipped: {why}"),
            _ => untried.to_owned(),
        };
        trials.entry(ci).or_default().push(why.clone());
        let reason = match &spec.unfit {
            Some(fit) => format!("{NOT_MEASURED}the model does not fit ({fit})"),
            None => format!("{NOT_MEASURED}the adaptive search: {why}"),
        };
        let m = crate::measure::Measured::unmeasured(reason);
        results.insert(ci, (candidate(spec, m, false), None, true));
    }
}

/// Why the search stopped, in words (`provisional`: its winner's capacity is a lower bound).
fn stop_line(answer: &ConfigAnswer, provisional: bool, interrupted: bool) -> String {
    match answer.stop {
        Some(Stop::Certain) => format!(
            "certain: the winner's lead holds with probability {:.2}{}",
            answer.ahead_of_next.unwrap_or(1.0),
            if provisional {
                " (its capacity is a lower bound, so it is listed, not ranked)"
            } else {
                ""
            }
        ),
        Some(Stop::Exhausted) => "exhausted: every combination was measured or skipped".into(),
        Some(Stop::Budget) => format!(
            "budget: {} launch{} and {:.4} instance-hours spent; max_launches or max_instance_hours is reached, or the next launch would overrun it",
            answer.launches,
            if answer.launches == 1 { "" } else { "es" },
            answer.instance_hours
        ),
        None if interrupted => "interrupted".into(),
        None => "stopped".into(),
    }
}

/// The planner over the candidates' matrix, with each combination's prior, and the
/// candidate each combination is (`None`: not among the candidates).
fn planner(r: &Launches<'_>, budget: Budget) -> Result<(ConfigSearch, Vec<Option<usize>>), Error> {
    let specs = r.specs;
    let goal = goal(r.objective, specs)?;
    let folders: std::collections::BTreeSet<String> = specs.iter().map(|s| s.folder()).collect();
    if let Some(s) = specs.iter().find(|s| folders.contains(&screen_dir(s))) {
        return Err(Error::invalid(format!(
            "candidate {:?}'s screening folder {} is another candidate's folder: rename one",
            s.name,
            screen_dir(s)
        )));
    }
    let mut search = ConfigSearch::new(dimensions(specs, r.objective)?, goal)
        .map_err(|e| Error::invalid(e.to_string()))?
        .with_budget(budget);
    // A prediction of a launched engine is first-order: only one clearly behind is skipped.
    search.prior_error = 0.5;
    search.least_launch_hours = least_launch_hours(specs, r.source).unwrap_or(0.0);
    if r.objective == Objective::Latency {
        // A coarse search stops at a lower concurrency, whose latency flatters: no screening.
        search.direct_below = usize::MAX;
    }
    let keyed = keyed(specs);
    let by_settings: BTreeMap<&[(String, String)], usize> = keyed
        .iter()
        .enumerate()
        .map(|(i, s)| (s.as_slice(), i))
        .collect();
    let of: Vec<Option<usize>> = (0..search.len())
        .map(|i| {
            let key: Vec<(String, String)> = search
                .settings(i)
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect();
            by_settings.get(key.as_slice()).copied()
        })
        .collect();
    for (i, c) in of.iter().enumerate() {
        let prior = match c.map(|c| &specs[c]) {
            None => Prior {
                cannot_fit: Some("not among the candidates".into()),
                ..Prior::default()
            },
            Some(s) if s.prediction.is_none() => Prior {
                cannot_fit: s.unfit.clone(),
                ..Prior::default()
            },
            Some(s) => Prior::from_speeds(s.unfit.clone(), |speed| {
                crate::adaptive_prior::predicted(s, r.objective, r.slas, speed)
            }),
        };
        search.set_prior(i, prior);
    }
    Ok((search, of))
}

/// Runs the configuration search over the recommendation's candidates.
pub(crate) async fn gather(
    r: &Launches<'_>,
    budget: Budget,
    cancel: &CancelToken,
) -> Result<Gathered, Error> {
    let specs = r.specs;
    let (mut search, of) = planner(r, budget)?;
    let mut g = Gathered::default();
    let mut results: BTreeMap<usize, Kept> = BTreeMap::new();
    let mut trials: BTreeMap<usize, Vec<String>> = BTreeMap::new();
    let total = specs.len();
    while let Some(t) = search.next_trial() {
        if cancel.is_cancelled() {
            g.interrupted = true;
            break;
        }
        let Some(ci) = of[t.combination] else { break };
        let spec = &specs[ci];
        let screen = t.fidelity == Fidelity::Screen;
        r.observer.note(&format!(
            "\ncandidate {} of {total}: {} ({})",
            ci + 1,
            spec.name,
            if screen {
                "screening"
            } else {
                "full measurement"
            }
        ));
        let dir = if screen {
            screen_dir(spec)
        } else {
            spec.folder()
        };
        let Some((m, record, full)) = measure_candidate(
            r.source,
            r.observer,
            spec,
            &r.artifact_dir.join(&dir),
            screen,
            cancel,
        )
        .await?
        else {
            g.interrupted = true;
            break;
        };
        let (ran, stopped) = (m.ran, m.interrupted);
        let c = candidate(spec, m, screen && !full);
        let value = objective_value(&c, r.objective, r.peak)?.filter(|_| !stopped);
        let hours = record.as_ref().map_or(0.0, |d| d.instance_hours);
        // A launch that failed to start is spent, but is no full measurement to estimate by.
        g.count(record.as_ref(), full && ran);
        let measured = TrialOutcome {
            score: value.map(|v| v.0),
            spread: value.map_or(0.0, |v| v.1),
            ..TrialOutcome::unusable(hours)
        };
        let outcome = match (&record, ran) {
            (None, _) => measured.without_launch(),
            (Some(_), false) => TrialOutcome::did_not_start(hours),
            (Some(_), true) => measured,
        };
        // A screened sweep is the full measurement: the planner is told so, and never asks
        // for it again.
        let told = Trial {
            fidelity: if full { Fidelity::Full } else { t.fidelity },
            ..t
        };
        search.observe(told, outcome);
        let why = c
            .unmet_reason
            .clone()
            .or_else(|| stopped.then(|| "interrupted".to_owned()));
        trials
            .entry(ci)
            .or_default()
            .push(trial_line(full, value.map(|v| v.0), why.as_deref()));
        // A full measurement that ran to its end replaces a screening; a launch that failed
        // or was interrupted keeps what the screening found.
        let replaces = match results.get(&ci) {
            None => true,
            Some((_, _, was_full)) => !was_full && full && ran && !stopped,
        };
        if replaces {
            results.insert(ci, (c, ran.then_some(dir), full));
        }
        if record.is_some() || !g.deployments.contains_key(&spec.name) {
            g.deployments.insert(spec.name.clone(), record);
        }
        if stopped {
            g.interrupted = true;
            break;
        }
    }
    let answer = search.answer();
    let provisional = answer
        .best
        .and_then(|b| of[b])
        .and_then(|ci| results.get(&ci))
        .is_some_and(|(c, _, _)| c.lower_bound.is_some());
    g.stop = Some(stop_line(&answer, provisional, g.interrupted));
    list_untried(
        specs,
        (&search, &of, &answer, g.interrupted),
        &mut results,
        &mut trials,
    );
    for (ci, (c, dir, _)) in results {
        g.candidates.push(c);
        g.dirs.push(dir);
        g.trials.insert(
            specs[ci].name.clone(),
            trials.remove(&ci).unwrap_or_default(),
        );
    }
    Ok(g)
}
