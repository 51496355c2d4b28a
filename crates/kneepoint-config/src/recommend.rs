//! `kneepoint recommend`: measure each candidate deployment (an SLA search when SLAs are given,
//! a sweep otherwise), cost it at its operating point, size a fleet for the peak, and rank by
//! one objective. Each candidate's run lands in its own sub-folder with its own report;
//! `recommendations.json` and `report.html` sit on top.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use kneepoint_engine::schema::PriceSource;
use kneepoint_engine::Strategy;
use kneepoint_engine::{
    CancelToken, CandidateRun, CandidateSource, CandidateSpec, DeployError, Observer, Prepared,
    Recommend, Search, Sweep,
};
use kneepoint_planner::config_search::Budget;
use kneepoint_planner::{Objective, PeakPlan};
use serde::Deserialize;

use crate::error::{bail, Context};
use crate::expanded::Expanded;
use crate::file::{CandidateSection, FileConfig};
use crate::SearchStrategy;
use crate::{
    FitArgs, FitInputs, RecommendArgs, Result, SearchArgs, SearchSettings, SweepArgs, SweepSettings,
};

/// A dated price list: `as_of`, optional `currency` and `source`, and `[prices]` by instance type.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PriceTable {
    /// When the prices were read (prices change; the report shows this date).
    pub as_of: String,
    /// Currency of the prices.
    pub currency: Option<String>,
    /// Where the prices come from.
    pub source: Option<String>,
    /// Price of one instance-hour by instance type.
    pub prices: BTreeMap<String, f64>,
}

impl PriceTable {
    fn load(path: &Path) -> Result<Self> {
        let text = kneepoint_core::read_capped_to_string(path, kneepoint_core::MAX_SETTINGS_BYTES)
            .with_context(|| format!("reading price table {}", path.display()))?;
        if path
            .extension()
            .is_some_and(|e| e.eq_ignore_ascii_case("json"))
        {
            serde_json::from_str(&text)
                .with_context(|| format!("parsing price table {} as JSON", path.display()))
        } else {
            toml::from_str(&text)
                .with_context(|| format!("parsing price table {} as TOML", path.display()))
        }
    }
}

/// Where a launched candidate answers.
enum At<'a> {
    /// An OpenAI-compatible server's base URL.
    Url(&'a str),
    /// A SageMaker endpoint's name.
    SageMaker(&'a str),
}

/// Makes each candidate's run from the config file: the candidate's endpoint or simulator in
/// place of the file's, resolved as `kneepoint search` (with SLAs) or `sweep` would.
struct FromFile {
    file: FileConfig,
    by_name: BTreeMap<String, Expanded>,
    with_slas: bool,
    observer: Arc<dyn Observer>,
}

#[async_trait::async_trait]
impl CandidateSource for FromFile {
    async fn prepare(
        &self,
        candidate: &CandidateSpec,
        dir: &Path,
        cancel: &CancelToken,
    ) -> Result<Prepared, DeployError> {
        let e = self
            .by_name
            .get(&candidate.name)
            .ok_or_else(|| format!("candidate {:?} is not in the config", candidate.name))?;
        let c = &e.section;
        if c.deploy.is_none() {
            let f = self.file_for(e, dir, None);
            return Ok(self.run(candidate, &f).await?.into());
        }
        #[cfg(feature = "sagemaker")]
        if crate::deploy::is_sagemaker(e) {
            return self.prepare_sagemaker(candidate, e, dir, cancel).await;
        }
        let mut server = crate::deploy::launch(e, dir, cancel).await?;
        self.observer.note(&format!(
            "{} answers on {} after {:.1} s (log: {})",
            c.name,
            server.base_url(),
            server.launch_time().as_secs_f64(),
            server.log_path().display()
        ));
        let f = self.file_for(e, dir, Some(At::Url(server.base_url())));
        let kubernetes = match c.deploy.as_ref().map(|d| crate::deploy::kubernetes(e, d)) {
            Some(Ok(Some(docs))) => {
                crate::deploy::write_manifests(dir, &docs)?;
                Some(docs)
            }
            Some(Err(err)) => {
                let _ = server.stop().await;
                return Err(err.into());
            }
            _ => None,
        };
        let launched = crate::deploy::Launched { server, kubernetes };
        match self.run(candidate, &f).await {
            Ok(run) => Ok(Prepared::launched(run, Box::new(launched))),
            Err(err) => {
                // Nothing is left running for a candidate that cannot be measured.
                let mut server = launched.server;
                if let Err(stop) = server.stop().await {
                    self.observer.warning(&stop.to_string());
                }
                Err(err.into())
            }
        }
    }

    fn launches(&self, candidate: &CandidateSpec) -> bool {
        self.by_name
            .get(&candidate.name)
            .is_some_and(|e| e.section.deploy.is_some())
    }
}

impl FromFile {
    /// The settings of candidate `e`, writing into `dir`: the file's, with the candidate's
    /// endpoint or simulator in place of the file's (and `url`, the server launched for it).
    fn file_for(&self, e: &Expanded, dir: &Path, at: Option<At<'_>>) -> FileConfig {
        let c = &e.section;
        let mut f = self.file.clone();
        f.candidates.clear();
        f.endpoint = c.endpoint.clone();
        f.simulator = c.simulator.clone().or(self.file.simulator.clone());
        f.artifact_dir = Some(dir.to_owned());
        if let Some(at) = at {
            let mut ep = c.endpoint.clone().unwrap_or_default();
            match at {
                At::Url(url) => ep.url = Some(vec![url.to_owned()]),
                At::SageMaker(name) => ep.sagemaker_endpoint = Some(name.to_owned()),
            }
            f.endpoint = Some(ep);
            f.simulator = None;
        }
        f
    }

    /// Creates candidate `e`'s SageMaker endpoint, and the run that measures it; the endpoint
    /// is deleted again if that run cannot be made.
    #[cfg(feature = "sagemaker")]
    async fn prepare_sagemaker(
        &self,
        candidate: &CandidateSpec,
        e: &Expanded,
        dir: &Path,
        cancel: &CancelToken,
    ) -> Result<Prepared, DeployError> {
        let Some(d) = e.section.deploy.as_ref() else {
            return Err("no [candidates.deploy]".into());
        };
        let Some(s) = d.sagemaker.as_ref() else {
            return Err("no [candidates.deploy.sagemaker]".into());
        };
        let mut endpoint = crate::deploy_sagemaker::launch(e, d, s, cancel).await?;
        self.observer.note(&format!(
            "{}: SageMaker endpoint {} is InService after {:.0} s",
            e.section.name,
            endpoint.endpoint_name(),
            endpoint.launch_time().as_secs_f64()
        ));
        let f = self.file_for(e, dir, Some(At::SageMaker(endpoint.endpoint_name())));
        match self.run(candidate, &f).await {
            Ok(run) => Ok(Prepared::launched(run, Box::new(endpoint))),
            Err(err) => {
                if let Err(del) = endpoint.delete().await {
                    self.observer.warning(&del.to_string());
                }
                Err(err.into())
            }
        }
    }

    /// Resolves every candidate's settings (a launched one's with a stand-in URL), so that a
    /// bad setting is refused before anything is launched or measured.
    fn check(&self, root: &Path) -> Result<()> {
        for e in self.by_name.values() {
            let at = match &e.section.deploy {
                None => None,
                Some(_) if crate::deploy::is_sagemaker(e) => Some(At::SageMaker("kneepoint-check")),
                Some(_) => Some(At::Url("http://127.0.0.1:1")),
            };
            let f = self.file_for(e, root, at);
            let checked = if self.with_slas {
                SearchSettings::resolve_with(&SearchArgs::default(), &f).map(|_| ())
            } else {
                SweepSettings::resolve_with(&SweepArgs::default(), &f).map(|_| ())
            };
            checked.map_err(|why| {
                crate::Error::Invalid(format!("candidate {:?}: {why}", e.section.name))
            })?;
        }
        Ok(())
    }

    /// The run measuring a candidate whose settings are file `f`.
    async fn run(&self, candidate: &CandidateSpec, f: &FileConfig) -> Result<CandidateRun> {
        let run = if self.with_slas {
            let mut s = SearchSettings::resolve_with(&SearchArgs::default(), f)?;
            if let Some(bound) = candidate.max_concurrency {
                // Past the engine's bound requests only queue: search below it.
                let c = &mut s.search;
                c.concurrency_max = c.concurrency_max.min(bound.max(1));
                c.concurrency_min = c.concurrency_min.min(c.concurrency_max);
            }
            let bench = crate::prepare::prepare(&s.common, self.observer.clone()).await?;
            CandidateRun::Search(
                Search::on(bench)
                    .config(s.search)
                    .sla_by_confidence(s.sla_by_confidence)
                    .build()?,
            )
        } else {
            let s = SweepSettings::resolve_with(&SweepArgs::default(), f)?;
            let bench = crate::prepare::prepare(&s.common, self.observer.clone()).await?;
            CandidateRun::Sweep(
                Sweep::on(bench)
                    .plan(s.plan)
                    .slas(s.slas)
                    .peak(s.peak)
                    .headroom(s.headroom)
                    .extend_to(candidate.max_concurrency)
                    .build()?,
            )
        };
        Ok(run)
    }
}

fn price(
    c: &CandidateSection,
    table: Option<&PriceTable>,
    table_path: Option<&Path>,
    catalog: Option<&kneepoint_fit::Catalog>,
) -> Result<f64> {
    if let Some(p) = c.price_per_hour {
        return Ok(p);
    }
    let it = c.instance_type.as_deref().unwrap_or_default();
    let from_catalog = catalog
        .and_then(|k| k.get(it).ok())
        .and_then(|i| i.price_per_hour);
    let Some(t) = table else {
        return from_catalog.with_context(|| {
            format!(
                "candidate {:?} has no price_per_hour, no price table was given, and the instance catalog has no price for {it:?}",
                c.name
            )
        });
    };
    t.prices.get(it).copied().or(from_catalog).with_context(|| {
        format!(
            "candidate {:?}: instance type {it:?} is not in the price table {}",
            c.name,
            table_path
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
    })
}

/// The recommendation `kneepoint recommend --config FILE` runs: every `[[candidates]]` entry
/// priced (its own price or the price table's), each measured by a search when the file has
/// SLAs and by a sweep otherwise, ranked by the objective. Call `run` on it.
pub fn recommendation(args: &RecommendArgs, observer: Arc<dyn Observer>) -> Result<Recommend> {
    let file = FileConfig::load(&args.config)?;
    if file.candidates.is_empty() {
        bail!(
            "{} lists no [[candidates]] to compare",
            args.config.display()
        );
    }
    let base = args.config.parent().unwrap_or(Path::new("."));
    let options = crate::flags_over(&args.options, &file.recommend_options(base));
    let objective = options.objective.unwrap_or(Objective::Cost);
    let table = options
        .price_table
        .as_deref()
        .map(PriceTable::load)
        .transpose()?;
    let wl = file.workload.clone().unwrap_or_default();
    let (isl, osl) = crate::workload::mean_lengths(&wl);
    let fit = FitInputs::resolve(
        &FitArgs::default(),
        file.model.as_ref(),
        Some(base),
        isl,
        osl,
    )?;
    let levels = file
        .sweep_params
        .as_ref()
        .and_then(|s| s.concurrency.clone())
        .unwrap_or_else(|| crate::DEFAULT_CONCURRENCY.to_vec());
    // GPUs per instance from the catalog in use (the user's over the built-in one)
    let builtin = kneepoint_fit::Catalog::builtin();
    let catalog = fit.as_ref().map_or(&builtin, |f| &f.catalog);
    let gpus_of = |t: &str| catalog.get(t).ok().map(|i| i.gpu_count);
    let (expanded, proposals) = crate::deploy::expand(&file.candidates, objective, &gpus_of)?;
    let parallel = parallel_candidates(&file, &expanded)?;
    for why in &proposals {
        observer.note(why);
    }
    let mut specs = Vec::new();
    for e in &expanded {
        specs.push(candidate_spec(
            e,
            (table.as_ref(), options.price_table.as_deref()),
            fit.as_ref(),
            &levels,
            observer.as_ref(),
        )?);
    }
    let root = options
        .artifact_dir
        .clone()
        .unwrap_or_else(|| crate::common::default_artifact_dir("recommend"));
    let sp = file.search_params.clone().unwrap_or_default();
    let with_slas = sp.ttft_sla_ms.is_some()
        || sp.tpot_sla_ms.is_some()
        || sp.e2e_sla_ms.is_some()
        || sp.error_rate_sla.is_some()
        || !sp.slas.is_empty();
    // The peak and headroom, resolved the way a sweep resolves them.
    let mut probe_file = file.clone();
    probe_file.candidates.clear();
    let peak_settings = SweepSettings::resolve_with(&SweepArgs::default(), &probe_file)?;
    let peak = peak_settings.peak.map(|peak| PeakPlan {
        peak,
        headroom: peak_settings.headroom,
    });

    let currency = file
        .currency
        .clone()
        .or(table.as_ref().and_then(|t| t.currency.clone()))
        .unwrap_or_else(|| "USD".into());
    let source = FromFile {
        by_name: expanded
            .iter()
            .map(|e| (e.section.name.clone(), e.clone()))
            .collect(),
        file: file.clone(),
        with_slas,
        observer: observer.clone(),
    };
    source.check(&root)?;
    crate::expanded::warn_leftovers(&expanded, observer.as_ref());
    let observer_note = observer.clone();
    let mut r = Recommend::builder(objective, &root, source)
        .by_search(with_slas)
        .peak(peak)
        .currency(currency)
        .price_table(table.as_ref().map(|t| {
            PriceSource::new(
                options
                    .price_table
                    .as_ref()
                    .map(|p| p.display().to_string()),
                t.as_of.clone(),
                t.source.clone(),
            )
        }))
        .observer(observer)
        .proposals(proposals)
        .parallel(parallel)
        .strategy(strategy(
            args,
            &options,
            &file,
            parallel,
            observer_note.as_ref(),
        )?)
        .slas(crate::commands::slas(&crate::SlaArgs::default(), &sp)?)
        .overwrite(args.overwrite);
    for s in specs {
        r = r.candidate(s);
    }
    Ok(r.build()?)
}

/// Candidates measured at a time (`parallel_candidates`, default 1): refused where local
/// servers run at once would outnumber the cores and measure each other's load.
fn parallel_candidates(file: &FileConfig, expanded: &[crate::deploy::Expanded]) -> Result<usize> {
    let parallel = match file.parallel_candidates {
        Some(0) => bail!("parallel_candidates must be at least 1"),
        Some(n) => n as usize,
        None => 1,
    };
    let local = expanded
        .iter()
        .filter(|e| {
            e.section
                .deploy
                .as_ref()
                .is_some_and(|d| d.kind.as_deref().unwrap_or("local") == "local")
        })
        .count();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    if parallel > 1 && local > 1 && parallel.min(local) > cores {
        bail!(
        "parallel_candidates = {parallel} would run {} local servers at once on {cores} cores: each would measure the others' load, not its own; use at most {cores}",
        parallel.min(local)
    );
    }
    Ok(parallel)
}

/// One expanded candidate, priced, with its GPUs, its stage-1 fit and prediction (given a
/// `[model]`) and the bound its engine's `max_num_seqs` sets.
fn candidate_spec(
    e: &crate::deploy::Expanded,
    (table, table_path): (Option<&PriceTable>, Option<&Path>),
    fit: Option<&FitInputs>,
    levels: &[u32],
    observer: &dyn Observer,
) -> Result<CandidateSpec> {
    let c = &e.section;
    let p = price(c, table, table_path, fit.map(|f| &f.catalog))?;
    let count = c.instance_count.unwrap_or(1);
    let instance_type = c.instance_type.clone().unwrap_or_default();
    // GPUs per instance from the catalog in use (the user's over the built-in one)
    let gpus = match fit {
        Some(f) => f.catalog.get(&instance_type).ok().map(|t| t.gpu_count),
        None => kneepoint_fit::Catalog::builtin()
            .get(&instance_type)
            .ok()
            .map(|t| t.gpu_count),
    };
    let mut spec = CandidateSpec::new(&c.name, instance_type, p)
        .with_instance_count(count)
        .with_gpus(gpus)
        .with_settings(e.combination.clone())
        .with_parallelism(c.tensor_parallel, e.replicas);
    if let Some(fit) = fit {
        spec = stage_one(spec, (c, &e.values, e.replicas), fit, levels, observer)?;
    }
    // A launched engine told to run at most N sequences at once holds no more than N
    // per instance, whatever its memory would allow: the same bound as stage 1's.
    if let Some(n) = e
        .values
        .get("max_num_seqs")
        .and_then(|v| v.parse::<u32>().ok())
    {
        // every engine of every instance
        let engines = e.replicas.unwrap_or(1).max(1);
        let engine = n.max(1).saturating_mul(engines).saturating_mul(count);
        let bound = spec.max_concurrency.map_or(engine, |b| b.min(engine));
        spec = spec.with_max_concurrency(Some(bound));
    }
    Ok(spec)
}

/// Stage 1 for one candidate: whether the model fits its instance type (at its tensor
/// parallelism, or the degree that holds the most), the bound on its concurrency (per
/// instance × instances) and the prediction for the whole endpoint at the sweep's levels. A
/// candidate whose instance type is not in the catalog is measured without them (with a
/// warning).
fn stage_one(
    spec: CandidateSpec,
    (c, engine, engines): (
        &CandidateSection,
        &std::collections::BTreeMap<String, String>,
        Option<u32>,
    ),
    fit: &FitInputs,
    levels: &[u32],
    observer: &dyn Observer,
) -> Result<CandidateSpec> {
    let it = c.instance_type.as_deref().unwrap_or_default();
    let Ok(inst) = fit.catalog.get(it) else {
        observer.warning(&format!(
            "candidate {:?}: instance type {it:?} is not in the instance catalog, so it is measured without the stage-1 fit",
            c.name
        ));
        return Ok(spec);
    };
    let (settings, one) = match fit.chosen_fit(it, c.tensor_parallel, engine)? {
        Ok(x) => x,
        Err(why) => return Ok(spec.unfit(why)),
    };
    // The endpoint is `instance_count` instances: as many times the replicas. A launch runs
    // the engines its command starts: `data_parallel_size` of them when it reads that
    // placeholder or pins it, one for a local command that does neither.
    let count = spec.instance_count.max(1);
    let mut one = one;
    if let Some(r) = engines.filter(|r| *r != one.replicas) {
        if r > one.replicas {
            return Ok(spec.unfit(format!(
                "{r} engines at tensor parallelism {} need {} GPUs; {it} has room for {}",
                one.tensor_parallel,
                r.saturating_mul(one.tensor_parallel),
                one.replicas
            )));
        }
        let per_engine = one.instance_max_concurrency / one.replicas.max(1);
        one.instance_max_concurrency = per_engine.saturating_mul(r);
        one.replicas = r;
    }
    let spec = spec.with_parallelism(Some(one.tensor_parallel), Some(one.replicas));
    let mut endpoint = one.clone();
    endpoint.replicas = one.replicas.saturating_mul(count);
    endpoint.instance_max_concurrency = one.instance_max_concurrency.saturating_mul(count);
    let bound = endpoint.instance_max_concurrency;
    let mut at: Vec<u32> = levels.to_vec();
    at.extend(kneepoint_fit::prediction_levels(bound));
    at.sort_unstable();
    at.dedup();
    let prediction =
        kneepoint_fit::predict(&fit.model, inst, &endpoint, &settings, fit.efficiency, &at)?;
    observer.note(&format!(
        "candidate {:?}: {} fits {it} at tensor parallelism {} ({} replica(s) per instance); its KV cache holds {} sequences of {} tokens per replica, so concurrency is bounded at {bound}; predicted knee {}",
        c.name,
        fit.model.name,
        one.tensor_parallel,
        one.replicas,
        one.kv_max_concurrency,
        settings.isl + settings.osl,
        prediction
            .knee
            .map_or("not reached".to_owned(), |k| k.to_string())
    ));
    Ok(spec
        .with_max_concurrency(Some(bound))
        .with_prediction(Some(prediction)))
}

/// The strategy the flag or the file names (grid by default), with its budget.
fn strategy(
    args: &RecommendArgs,
    options: &crate::RecommendOptions,
    file: &FileConfig,
    parallel: usize,
    observer: &dyn Observer,
) -> Result<Strategy> {
    let name = options.strategy.unwrap_or(SearchStrategy::Grid);
    let budget = Budget {
        max_launches: file.max_launches,
        max_instance_hours: file.max_instance_hours,
    };
    if let Some(h) = budget.max_instance_hours {
        if !(h.is_finite() && h > 0.0) {
            bail!("max_instance_hours must be above 0, not {h}");
        }
    }
    if budget.max_launches == Some(0) {
        bail!("max_launches must be at least 1");
    }
    match name {
        SearchStrategy::Grid => {
            let budgeted = budget.max_launches.is_some() || budget.max_instance_hours.is_some();
            if budgeted && args.options.strategy.is_some() {
                // the flag chose the grid over the file's adaptive search, to compare them
                observer.note("--strategy grid: the file's max_launches / max_instance_hours bound the adaptive strategy only, and are not applied");
            } else if budgeted {
                bail!("max_launches and max_instance_hours bound the adaptive strategy: set search_strategy = \"adaptive\" (the grid measures every combination)");
            }
            Ok(Strategy::Grid)
        }
        SearchStrategy::Adaptive if parallel > 1 => bail!(
            "the adaptive strategy chooses each launch from the ones before it: parallel_candidates must be 1"
        ),
        SearchStrategy::Adaptive => Ok(Strategy::Adaptive(budget)),
    }
}
