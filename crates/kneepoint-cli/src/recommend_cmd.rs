//! `kneepoint recommend`: measure each candidate deployment (an SLA search when SLAs are given,
//! a sweep otherwise), cost it at its operating point, size a fleet for the peak, and rank by
//! one objective. Each candidate's run lands in its own sub-folder with its own report;
//! `recommendations.json` and `report.html` sit on top.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use kneepoint_metrics::export::write_atomic;
use kneepoint_metrics::LevelSummary;
use kneepoint_planner::{
    recommend, Candidate, CurvePoint, Objective, OperatingPoint, PeakPlan, Recommendation,
};
use kneepoint_runner::CancelToken;
use serde::Deserialize;
use serde_json::json;

use crate::args::{CommonArgs, RecommendArgs, SearchArgs, SweepArgs};
use crate::config::{CandidateSection, FileConfig, SearchSettings, SweepSettings};
use crate::{run_search_with, run_sweep_with};

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
    fn load(path: &Path) -> anyhow::Result<Self> {
        let text = std::fs::read_to_string(path)
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

/// What `recommend` produced.
#[derive(Debug)]
pub struct RecommendOutcome {
    /// The objective ranked by.
    pub objective: Objective,
    /// Ranked candidates, then those that meet no SLA.
    pub recommendations: Vec<Recommendation>,
    /// Currency of the costs.
    pub currency: String,
    /// Where the files are.
    pub artifact_dir: PathBuf,
    /// True when interrupted (candidates not yet measured are missing).
    pub interrupted: bool,
}

/// A folder name from a candidate name.
fn folder(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("candidate_{s}")
}

fn point(s: &LevelSummary) -> OperatingPoint {
    let st = |m: &str, q: &str| s.stat(m, q);
    OperatingPoint {
        concurrency: s.concurrency,
        output_token_throughput: s.output_token_throughput,
        request_throughput: s.request_throughput,
        ttft_p50_ms: st("time_to_first_token", "p50"),
        ttft_p99_ms: st("time_to_first_token", "p99"),
        itl_p50_ms: st("inter_token_latency", "p50"),
        itl_p99_ms: st("inter_token_latency", "p99"),
        e2e_p50_ms: st("request_latency", "p50"),
        e2e_p90_ms: st("request_latency", "p90"),
        e2e_p99_ms: st("request_latency", "p99"),
        error_rate: s.error_rate,
    }
}

fn curve(summaries: &[LevelSummary]) -> Vec<CurvePoint> {
    let mut by_c: BTreeMap<u32, f64> = BTreeMap::new();
    for s in summaries {
        if let Some(p99) = s.stat("request_latency", "p99") {
            by_c.insert(s.concurrency, p99);
        }
    }
    by_c.into_iter()
        .map(|(concurrency, e2e_p99_ms)| CurvePoint {
            concurrency,
            e2e_p99_ms,
        })
        .collect()
}

struct Measured {
    point: Option<OperatingPoint>,
    curve: Vec<CurvePoint>,
    reason: Option<String>,
    interrupted: bool,
}

async fn measure(
    file: &FileConfig,
    with_slas: bool,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<Measured> {
    let common = CommonArgs {
        quiet: !progress,
        ..CommonArgs::default()
    };
    if with_slas {
        let args = SearchArgs {
            common,
            ..SearchArgs::default()
        };
        let settings = SearchSettings::resolve_with(&args, file)?;
        let o = run_search_with(&settings, progress, cancel).await?;
        let at = o.outcome.feasible_max.and_then(|c| {
            o.history
                .iter()
                .zip(&o.summaries)
                .rev()
                .find(|(r, _)| r.probe.concurrency == c && r.pass)
                .map(|(_, s)| point(s))
        });
        Ok(Measured {
            reason: at.is_none().then(|| o.outcome.explanation.clone()),
            point: at,
            curve: curve(&o.summaries),
            interrupted: o.interrupted,
        })
    } else {
        let args = SweepArgs {
            common,
            ..SweepArgs::default()
        };
        let settings = SweepSettings::resolve_with(&args, file)?;
        let o = run_sweep_with(&settings, progress, cancel).await?;
        let at = o
            .zone
            .ideal_balance
            .and_then(|c| o.summaries.iter().find(|s| s.concurrency == c))
            .map(point);
        Ok(Measured {
            reason: at.is_none().then(|| o.zone.summary.clone()),
            point: at,
            curve: curve(&o.summaries),
            interrupted: o.interrupted,
        })
    }
}

fn price(
    c: &CandidateSection,
    table: Option<&PriceTable>,
    table_path: Option<&Path>,
) -> anyhow::Result<f64> {
    if let Some(p) = c.price_per_hour {
        return Ok(p);
    }
    let Some(t) = table else {
        bail!(
            "candidate {:?} has no price_per_hour and no price table was given",
            c.name
        );
    };
    let it = c.instance_type.as_deref().unwrap_or_default();
    t.prices.get(it).copied().with_context(|| {
        format!(
            "candidate {:?}: instance type {it:?} is not in the price table {}",
            c.name,
            table_path
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        )
    })
}

fn default_dir() -> PathBuf {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0);
    let stamp: String = kneepoint_metrics::export::rfc3339(now)
        .chars()
        .take(19)
        .filter(|c| c.is_ascii_digit() || *c == 'T')
        .collect();
    PathBuf::from("artifacts").join(format!("recommend-{stamp}Z"))
}

/// Runs `kneepoint recommend`: measures every candidate in turn, ranks them, and writes
/// `recommendations.json`, plots and `report.html`. Stops early (keeping what was measured) when
/// `cancel` fires.
pub async fn run_recommend_with(
    args: &RecommendArgs,
    progress: bool,
    cancel: &CancelToken,
) -> anyhow::Result<RecommendOutcome> {
    let file = FileConfig::load(&args.config)?;
    if file.candidates.is_empty() {
        bail!(
            "{} lists no [[candidates]] to compare",
            args.config.display()
        );
    }
    let objective_name = args
        .objective
        .clone()
        .or(file.objective.clone())
        .unwrap_or_else(|| "cost".into());
    let objective = Objective::parse(&objective_name).with_context(|| {
        format!("objective must be cost, latency or throughput, not {objective_name:?}")
    })?;
    let base = args.config.parent().unwrap_or(Path::new("."));
    let table_path = args
        .price_table
        .clone()
        .or(file.price_table.as_ref().map(|p| base.join(p)));
    let table = table_path.as_deref().map(PriceTable::load).transpose()?;
    let mut seen = std::collections::BTreeSet::new();
    let mut priced = Vec::new();
    for c in &file.candidates {
        if c.name.trim().is_empty() {
            bail!("every candidate needs a name");
        }
        if !seen.insert(folder(&c.name)) {
            bail!("two candidates share the name {:?}", c.name);
        }
        let p = price(c, table.as_ref(), table_path.as_deref())?;
        if !p.is_finite() || p < 0.0 {
            bail!("candidate {:?}: the price must be a number ≥ 0", c.name);
        }
        if c.instance_count == Some(0) {
            bail!("candidate {:?}: instance_count must be at least 1", c.name);
        }
        priced.push((c, p));
    }
    let root = args
        .artifact_dir
        .clone()
        .or(file.artifact_dir.clone())
        .unwrap_or_else(default_dir);
    std::fs::create_dir_all(&root)
        .with_context(|| format!("creating artifact directory {}", root.display()))?;
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

    let mut candidates = Vec::new();
    let mut dirs = Vec::new();
    let mut interrupted = false;
    for (i, (c, price)) in priced.iter().enumerate() {
        if cancel.is_cancelled() {
            interrupted = true;
            break;
        }
        if progress {
            eprintln!(
                "\ncandidate {} of {}: {} ({})",
                i + 1,
                priced.len(),
                c.name,
                if with_slas { "SLA search" } else { "sweep" }
            );
        }
        let mut f = file.clone();
        f.candidates.clear();
        f.endpoint = c.endpoint.clone();
        f.simulator = c.simulator.clone().or(file.simulator.clone());
        let dir = folder(&c.name);
        f.artifact_dir = Some(root.join(&dir));
        let m = measure(&f, with_slas, progress, cancel)
            .await
            .with_context(|| format!("measuring candidate {:?}", c.name))?;
        candidates.push(Candidate {
            name: c.name.clone(),
            instance_type: c.instance_type.clone().unwrap_or_default(),
            instance_count: c.instance_count.unwrap_or(1),
            price_per_instance_hour: *price,
            point: m.point,
            curve: m.curve,
            unmet_reason: m.reason,
        });
        dirs.push(dir);
        if m.interrupted {
            interrupted = true;
            break;
        }
    }
    let recommendations = recommend(&candidates, objective, peak)?;
    let currency = file
        .currency
        .clone()
        .or(table.as_ref().and_then(|t| t.currency.clone()))
        .unwrap_or_else(|| "USD".into());
    let by_name: BTreeMap<&str, &str> = candidates
        .iter()
        .zip(&dirs)
        .map(|(c, d)| (c.name.as_str(), d.as_str()))
        .collect();
    let listed: Vec<serde_json::Value> = recommendations
        .iter()
        .map(|r| {
            let mut v = serde_json::to_value(r).unwrap_or_default();
            v["artifact_dir"] = json!(by_name.get(r.name.as_str()));
            v
        })
        .collect();
    let doc = json!({
        "kneepoint_version": env!("CARGO_PKG_VERSION"),
        "complete": !interrupted,
        "interrupted": interrupted,
        "objective": objective,
        "mode": if with_slas { "max-concurrency-under-sla" } else { "sweep" },
        "currency": currency,
        "price_table": table.as_ref().map(|t| json!({
            "path": table_path.as_ref().map(|p| p.display().to_string()),
            "as_of": t.as_of,
            "source": t.source,
        })),
        "peak": peak,
        "hours_per_month": kneepoint_planner::HOURS_PER_MONTH,
        "candidates": listed,
        "not_measured": priced.iter().skip(candidates.len()).map(|(c, _)| c.name.clone()).collect::<Vec<_>>(),
    });
    write_atomic(
        &root.join("recommendations.json"),
        &serde_json::to_vec_pretty(&doc)?,
    )?;
    crate::report_cmd::render_quietly(&root);
    Ok(RecommendOutcome {
        objective,
        recommendations,
        currency,
        artifact_dir: root,
        interrupted,
    })
}
