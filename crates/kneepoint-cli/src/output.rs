//! What the commands print at the end (stdout) and per probe (stderr).

use kneepoint_core::{Metric, Stat};
use std::fmt::Write as _;
use std::io::Write as _;

use kneepoint_planner::{Confidence, OperatingZone, ProbeRecord, StopReason};

use crate::lines::ms;
use crate::RecommendOutcome;
use crate::{SearchOutcome, SweepOutcome};
use kneepoint_engine::schema::LevelRow;

/// The per-level table of a sweep.
pub(crate) fn table(rows: &[LevelRow]) -> String {
    // A pooling endpoint generates nothing: its work is the input it reads.
    let pooling = rows.iter().any(|r| r.input_token_throughput > 0.0)
        && rows.iter().all(|r| r.output_token_throughput == 0.0);
    // with per-request SLOs: goodput and the share of requests that met them
    let goodput = rows.iter().any(|r| r.goodput.is_some());
    let mut out = format!(
        "{:>11} {:>8} {:>11} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>7}{}\n",
        "concurrency",
        "req/s",
        if pooling { "in tok/s" } else { "out tok/s" },
        "TTFT p50",
        "TTFT p95",
        "ITL p95",
        "e2e p50",
        "e2e p99",
        "p99-p50",
        "err %",
        if goodput {
            format!(" {:>9} {:>8}", "goodput/s", "SLO met%")
        } else {
            String::new()
        }
    );
    for r in rows {
        let mut marks = Vec::new();
        if r.is_knee {
            marks.push("knee".to_owned());
        }
        if let Some(b) = &r.first_breach {
            marks.push(format!("fails {b}"));
        }
        let slo = if goodput {
            let num = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v:.2}"));
            format!(
                " {:>9} {:>8}",
                num(r.goodput),
                num(r.slo_miss_rate.map(|m| (1.0 - m) * 100.0))
            )
        } else {
            String::new()
        };
        let _ = writeln!(
            out,
            "{:>11} {:>8.2} {:>11.1} {:>9} {:>9} {:>8} {:>9} {:>9} {:>9} {:>7.2}{slo}{}",
            r.concurrency,
            r.request_throughput,
            if pooling {
                r.input_token_throughput
            } else {
                r.output_token_throughput
            },
            ms(r.ttft_p50_ms),
            ms(r.ttft_p95_ms),
            ms(r.itl_p95_ms),
            ms(r.e2e_p50_ms),
            ms(r.e2e_p99_ms),
            ms(r.e2e_spread_ms),
            r.error_rate * 100.0,
            if marks.is_empty() {
                String::new()
            } else {
                format!("  <- {}", marks.join(", "))
            }
        );
    }
    out
}

/// What the server's metrics showed per level (only when some level was scraped).
pub(crate) fn server_table(rows: &[LevelRow]) -> String {
    if rows.iter().all(|r| r.server_metrics.is_none()) {
        return String::new();
    }
    let mut out = format!(
        "server view (scraped)\n{:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}\n",
        "concurrency", "running", "waiting", "KV max", "preempt", "srv TTFT95", "queue avg"
    );
    for r in rows {
        let get = |c: &str, st: &str| r.server_metrics.as_ref()?.get(c)?.get(st).copied();
        let num = |v: Option<f64>, p: usize| v.map_or("-".to_owned(), |v| format!("{v:.p$}"));
        let _ = writeln!(
            out,
            "{:>11} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
            r.concurrency,
            num(get("server_running", "avg"), 1),
            num(get("server_waiting", "avg"), 1),
            get("server_kv_cache_usage", "max")
                .map_or("-".to_owned(), |v| format!("{:.0}%", v * 100.0)),
            num(get("server_preemptions", "total"), 0),
            ms(get("server_ttft", "p95")),
            ms(get("server_queue_time", "avg")),
        );
    }
    out
}

fn zone_text(zone: &OperatingZone) -> String {
    let mut t = String::new();
    match zone.knee.knee {
        Some(k) => {
            let _ = writeln!(t, "knee: concurrency {k} ({})", zone.knee.reason);
        }
        None => {
            let _ = writeln!(t, "knee: not found ({})", zone.knee.reason);
        }
    }
    if let Some(b) = zone.sla_breaking_point {
        let _ = writeln!(t, "SLA breaking point: concurrency {b}");
    }
    let _ = writeln!(t, "operating zone: {}", zone.summary);
    if let Some(i) = &zone.intervals {
        let _ = writeln!(t, "{}", i.sentence());
    }
    t
}

/// A closed stdout (e.g. piped into `head`) must not turn finished work into a crash: the
/// files are already written.
/// Whatever it prints is scrubbed of the process's secrets (a recipe or a failure's reason
/// can quote a server's command line or log).
fn emit(text: &str) {
    let text = kneepoint_core::secrets::scrub(text);
    let _ = std::io::stdout().lock().write_all(text.as_bytes());
}

/// Prints a sweep's table, zone, fleet, warnings and where the files are.
/// Open-loop levels: offered vs achieved rate, latency from the actual and from the intended
/// start, and the schedule lag.
fn open_loop_table(o: &SweepOutcome) -> String {
    let mut t = String::from(
        "rate req/s  got req/s  e2e p50  e2e p99  from-intended p50  from-intended p99  lag p99   err %\n",
    );
    let v = |x: Option<f64>| x.map_or("-".to_owned(), |x| format!("{x:.1}"));
    for (rate, s) in o.request_rates.iter().zip(&o.summaries) {
        let _ = writeln!(
            t,
            "{rate:>10}  {:>9.2}  {:>7}  {:>7}  {:>17}  {:>17}  {:>7}  {:>6.2}",
            s.request_throughput,
            v(s.value(Metric::RequestLatency, Stat::P50)),
            v(s.value(Metric::RequestLatency, Stat::P99)),
            v(s.value(Metric::RequestLatencyFromSchedule, Stat::P50)),
            v(s.value(Metric::RequestLatencyFromSchedule, Stat::P99)),
            v(s.value(Metric::ScheduleLag, Stat::P99)),
            s.error_rate * 100.0
        );
    }
    t
}

pub(crate) fn print_sweep(o: &SweepOutcome) {
    let mut text = if o.request_rates.is_empty() {
        format!("\nlatencies in ms\n{}", table(&o.rows))
    } else {
        format!("\nopen loop; latencies in ms\n{}", open_loop_table(o))
    };
    text.push_str(&server_table(&o.rows));
    text.push_str(&zone_text(&o.zone));
    if let Some(e) = &o.knee_explanation {
        let _ = writeln!(text, "why: {}", e.summary);
    }
    if let Some(p) = &o.pareto {
        let _ = writeln!(text, "{}", p.sentence());
    }
    if let Some(f) = &o.fleet {
        let _ = writeln!(text, "fleet: {}", f.explanation);
        match f.instances_interval {
            Some([a, b]) if a == b => {
                let _ = writeln!(text, "fleet: {a} in at least 90 % of the redraws");
            }
            Some([a, b]) => {
                let _ = writeln!(text, "fleet: 90 % interval {a}–{b} instances");
            }
            None => {}
        }
    }
    for s in &o.summaries {
        for w in &s.warnings {
            let _ = writeln!(text, "warning (concurrency {}): {w}", s.concurrency);
        }
    }
    if o.interrupted {
        let _ = writeln!(
            text,
            "INTERRUPTED: the last level is partial; later levels did not run"
        );
    }
    let _ = writeln!(text, "artifacts: {}", o.artifact_dir.display());
    emit(&text);
}

/// Prints a search's probes (by concurrency), the answer and where the files are.
pub(crate) fn print_search(o: &SearchOutcome) {
    let mut rows: Vec<&ProbeRecord> = o.history.iter().collect();
    rows.sort_by_key(|r| (r.probe.concurrency, r.probe.iteration));
    let mut text =
        String::from("\n  probe  concurrency  verdict   out tok/s  measured against each SLA\n");
    for r in rows {
        let values: Vec<String> = r.checks.iter().map(crate::lines::check_text).collect();
        let _ = writeln!(
            text,
            "  {:>5}  {:>11}  {:>7}  {:>10.1}  {}",
            r.probe.iteration,
            r.probe.concurrency,
            if r.pass { "pass" } else { "FAIL" },
            r.throughput,
            values.join("; ")
        );
    }
    let b = &o.outcome;
    let _ = writeln!(text);
    match b.feasible_max {
        Some(c) => {
            let _ = writeln!(
                text,
                "answer: {c} concurrent requests meet every SLA ({:.1} output tokens/s){}",
                b.throughput_at_answer.unwrap_or(0.0),
                b.interval
                    .map_or(String::new(), |i| format!("; true boundary: {i}"))
            );
            text.push_str(&goodput_at(o, c));
        }
        None => {
            let _ = writeln!(text, "answer: no concurrency in range meets every SLA");
        }
    }
    if let Some(e) = b.estimate.filter(|e| Some(*e) != b.feasible_max) {
        let _ = writeln!(
            text,
            "point estimate: {e} (its readings passed, but not with 95 % probability on the measured noise)"
        );
    }
    if let Some(h) = b.infeasible_min {
        let _ = writeln!(
            text,
            "breaks at: {h} ({})",
            b.first_breach.as_deref().unwrap_or("an SLA")
        );
    }
    let stopped = match b.stop_reason {
        Some(StopReason::Converged) => "converged",
        Some(StopReason::MaxIterations) => "probe budget spent (search_max_iterations)",
        Some(StopReason::InfeasibleAtMin) => "an SLA fails at concurrency_min",
        Some(StopReason::FeasibleAtMax) => "every SLA holds at concurrency_max",
        None => "still searching",
    };
    let confidence = match b.confidence {
        Confidence::High => "high",
        Confidence::Medium => "medium",
        Confidence::Low => "low",
    };
    let _ = writeln!(
        text,
        "stopped: {stopped} after {} probes; confidence {confidence}: {}",
        b.probes, b.explanation
    );
    text.push_str(&cost_text(&o.cost));
    text.push_str(&zone_text(&o.zone));
    if o.interrupted {
        let _ = writeln!(
            text,
            "INTERRUPTED: the probe in progress is partial and was not counted"
        );
    }
    let _ = writeln!(text, "artifacts: {}", o.artifact_dir.display());
    emit(&text);
}

/// The goodput measured at the answer, when the search judged requests against SLOs (the last
/// probe of that level).
fn goodput_at(o: &SearchOutcome, c: u32) -> String {
    let at = o
        .history
        .iter()
        .zip(&o.summaries)
        .rfind(|(r, _)| r.probe.concurrency == c)
        .map(|(_, s)| s);
    match at.and_then(|s| Some((s.goodput?, s.slo_miss_rate?, s.goodput_slo?))) {
        Some((g, miss, slo)) => format!(
            "goodput at the answer: {g:.2} requests/s; {:.2} % of requests met every SLO ({slo})\n",
            (1.0 - miss) * 100.0
        ),
        None => String::new(),
    }
}

/// Prints the ranked recommendations and where the files are.
pub(crate) fn print_recommend(o: &RecommendOutcome) {
    let cur = &o.currency;
    // Columns as wide as their longest entry: matrix names run long.
    let nw = o
        .recommendations
        .iter()
        .map(|r| r.name.chars().count())
        .max()
        .unwrap_or(0)
        .max(18);
    let iw = o
        .recommendations
        .iter()
        .map(|r| r.instance_type.chars().count())
        .max()
        .unwrap_or(0)
        .max(16);
    let mut text = format!(
        "\nobjective: {} (latencies in ms; costs in {cur})\n{:>4}  {:<nw$} {:<iw$} {:>6} {:>10} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>11}\n",
        o.objective.describe(),
        "rank",
        "candidate",
        "instance",
        "conc",
        "out tok/s",
        "TTFT p99",
        "ITL p99",
        "e2e p50",
        "e2e p90",
        "e2e p99",
        "per Mtok",
        "instances",
        "per month",
    );
    for r in &o.recommendations {
        let p = r.point.as_ref();
        let money = |v: Option<f64>, d: usize| v.map_or("-".into(), |v| format!("{v:.d$}"));
        let _ = writeln!(
            text,
            "{:>4}  {:<nw$} {:<iw$} {:>6} {:>10} {:>9} {:>8} {:>9} {:>9} {:>9} {:>10} {:>9} {:>11}",
            match (r.rank, &r.provisional) {
                (Some(r), _) => format!("#{r}"),
                (None, Some(_)) => "prov".into(),
                (None, None) => "-".into(),
            },
            r.name,
            r.instance_type,
            p.map_or("-".into(), |p| p.concurrency.to_string()),
            p.map_or("-".into(), |p| format!("{:.1}", p.output_token_throughput)),
            ms(p.and_then(|p| p.ttft_p99_ms)),
            ms(p.and_then(|p| p.itl_p99_ms)),
            ms(p.and_then(|p| p.e2e_p50_ms)),
            ms(p.and_then(|p| p.e2e_p90_ms)),
            ms(p.and_then(|p| p.e2e_p99_ms)),
            money(r.cost_per_million_output_tokens, 3),
            r.instances_for_peak.map_or("-".into(), |n| n.to_string()),
            money(r.monthly_cost, 0),
        );
    }
    for r in &o.recommendations {
        let _ = writeln!(
            text,
            "{} {}: {}",
            r.rank.map_or("unranked".into(), |r| format!("#{r}")),
            r.name,
            r.explanation
        );
    }
    for c in &o.candidates {
        if let Some(line) = predicted_line(c) {
            let _ = writeln!(text, "{line}");
        }
    }
    deployment_lines(&mut text, o);
    spent_line(&mut text, o);
    if o.interrupted {
        let _ = writeln!(
            text,
            "{}",
            if o.strategy == "adaptive" {
                "INTERRUPTED: combinations not yet tried are listed as not measured"
            } else {
                "INTERRUPTED: candidates not yet measured are missing"
            }
        );
    }
    let _ = writeln!(text, "artifacts: {}", o.artifact_dir.display());
    emit(&text);
}

/// What kneepoint launched for each candidate (how long, at what cost, anything left
/// running), then the winner's configuration to deploy.
fn deployment_lines(text: &mut String, o: &RecommendOutcome) {
    let cur = &o.currency;
    for p in &o.proposals {
        let _ = writeln!(text, "tried: {p}");
    }
    for c in &o.candidates {
        let Some(d) = &c.deployment else { continue };
        let _ = writeln!(
            text,
            "launched {}: ready after {}, up {:.0} s, torn down in {:.1} s: {:.4} instance-hours, {:.4} {cur}{}",
            c.recommendation.name,
            d.launch_s.map_or("-".into(), |s| format!("{s:.1} s")),
            d.up_s,
            d.teardown_s,
            d.instance_hours,
            d.benchmark_cost,
            d.teardown_error
                .as_ref()
                .map(|e| format!("; NOT TORN DOWN ({e}): run `kneepoint cleanup`"))
                .unwrap_or_default()
        );
    }
    let winner = o
        .candidates
        .iter()
        .find(|c| c.recommendation.rank == Some(1));
    let Some((name, recipe)) = winner.and_then(|c| {
        Some((
            &c.recommendation.name,
            c.deployment.as_ref()?.recipe.as_ref()?,
        ))
    }) else {
        return;
    };
    if let Some(cmd) = recipe.get("command").and_then(|c| c.as_str()) {
        let _ = writeln!(text, "deploy {name} with: {cmd}");
    } else if recipe.get("kind").and_then(|k| k.as_str()) == Some("sagemaker") {
        let _ = writeln!(
            text,
            "deploy {name} with: the CreateModel, CreateEndpointConfig and CreateEndpoint requests of its recipe in recommendations.json"
        );
    }
}

/// Prints a comparison.
pub(crate) fn print_text(text: &str) {
    emit(text);
}

/// The search's cost beside doubling + bisection's, one line.
fn cost_text(c: &kneepoint_planner::SearchCost) -> String {
    let secs = |s: Option<f64>, approx: bool| {
        s.map(|s| {
            format!(
                ", {}{s:.0} s of endpoint time",
                if approx { "~" } else { "" }
            )
        })
        .unwrap_or_default()
    };
    let spent = format!(
        "cost: {} probes, {} requests{}",
        c.probes,
        c.requests,
        secs(c.endpoint_seconds, false)
    );
    match &c.baseline {
        Some(b) => format!(
            "{spent}; doubling + bisection would have needed {} probes, {} requests{} ({})\n",
            b.probes,
            b.requests,
            secs(b.endpoint_seconds, true),
            b.levels
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => format!("{spent}\n"),
    }
}

/// The stage-1 prediction beside the measurement, one line (when there is one).
fn predicted_line(c: &kneepoint_engine::schema::RankedCandidate) -> Option<String> {
    let p = c.prediction.as_ref()?;
    let r = &c.recommendation;
    let measured = r
        .point
        .as_ref()
        .filter(|m| m.output_token_throughput > 0.0)
        .map(|m| {
            let at = p
                .points
                .iter()
                .find(|x| x.concurrency == m.concurrency)
                .map(|x| {
                    format!(
                        ", predicted there {:.0} ({:+.0} %)",
                        x.output_tokens_per_s,
                        (x.output_tokens_per_s / m.output_token_throughput - 1.0) * 100.0
                    )
                })
                .unwrap_or_default();
            format!(
                "; measured {:.0} tok/s at concurrency {}{at}",
                m.output_token_throughput, m.concurrency
            )
        });
    Some(format!(
        "predicted {}: knee {}, {:.0} out tok/s at saturation ({} concurrent, tensor parallelism {}){}",
        r.name,
        p.knee.map_or("not reached".into(), |k| k.to_string()),
        p.peak_output_tokens_per_s,
        p.saturation_concurrency,
        p.tensor_parallel,
        measured.unwrap_or_default()
    ))
}

/// A merge's levels: records, the shards' start skew, the common window and the merged figures.
pub(crate) fn print_merge(r: &kneepoint_engine::MergeReport) {
    let mut text = format!(
        "merged {} shards into {}\n{:>11} {:>8} {:>10} {:>10} {:>11} {:>9} {:>9} {:>6}\n",
        r.shards,
        r.artifact_dir.display(),
        "concurrency",
        "records",
        "skew ms",
        "window s",
        "out tok/s",
        "TTFT p50",
        "e2e p99",
        "err %"
    );
    for (l, s) in r.levels.iter().zip(&r.summaries) {
        let _ = writeln!(
            text,
            "{:>11} {:>8} {:>10.1} {:>10.2} {:>11.1} {:>9} {:>9} {:>6.2}",
            l.concurrency,
            l.records,
            l.start_skew_ms,
            l.common_window_s,
            s.output_token_throughput,
            ms(s.value(Metric::TimeToFirstToken, Stat::P50)),
            ms(s.value(Metric::RequestLatency, Stat::P99)),
            s.error_rate * 100.0
        );
    }
    let _ = writeln!(
        text,
        "largest start skew between shards: {:.1} ms",
        r.max_start_skew_ms
    );
    emit(&text);
}

/// What the launches cost and what the grid would have: `spent: 7 launches, 0.52
/// instance-hours, 3.89 USD; the grid: 18 launches, about 1.34 instance-hours`.
fn spent_line(text: &mut String, o: &kneepoint_engine::RecommendReport) {
    if o.strategy == "adaptive" {
        if let Some(stop) = &o.search_stop {
            let _ = writeln!(text, "adaptive search stopped: {stop}");
        }
    }
    let Some(s) = &o.spent else { return };
    let grid = match (o.strategy.as_str(), s.grid_instance_hours) {
        ("adaptive", Some(h)) if h > 0.0 => format!(
            "; the grid would launch {} (about {h:.3} instance-hours: this search spent {:.0} % of that)",
            s.grid_launches,
            s.instance_hours / h * 100.0
        ),
        ("adaptive", None) => format!("; the grid would launch {}", s.grid_launches),
        _ => String::new(),
    };
    let _ = writeln!(
        text,
        "spent: {} launch{}, {:.3} instance-hours, {:.2} {}{grid}",
        s.launches,
        if s.launches == 1 { "" } else { "es" },
        s.instance_hours,
        s.cost,
        o.currency
    );
}
