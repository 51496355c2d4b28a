//! The candidates of a recommendation: what each one is, how it is measured, and the source
//! that makes (and launches) each one's run when its turn comes.

use std::path::Path;

use kneepoint_core::folder;
use kneepoint_runner::CancelToken;

use crate::deployment::{DeployError, Deployment};
use crate::{Search, Sweep};

/// A deployment to measure and rank.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct CandidateSpec {
    /// Its name (also its folder: `candidate_<name>`).
    pub name: String,
    /// Instance type, for the report.
    pub instance_type: String,
    /// Instances behind the endpoint measured.
    pub instance_count: u32,
    /// Price of one instance-hour.
    pub price_per_instance_hour: f64,
    /// The stage-1 bound: concurrent sequences the endpoint's engines hold at once (KV cache
    /// and scheduler). A sweep that has not saturated is extended up to it; a search's answer
    /// at its top counts as established.
    pub max_concurrency: Option<u32>,
    /// Why the model cannot run on this candidate (stage 1): it is listed, not measured.
    pub unfit: Option<String>,
    /// The first-order prediction for this candidate, shown beside the measurement.
    pub prediction: Option<kneepoint_fit::Prediction>,
    /// GPUs per instance, when known (throughput per GPU on the Pareto front).
    pub gpus_per_instance: Option<u32>,
    /// Its engine settings (a matrix combination's `(name, value)` pairs), for the adaptive
    /// strategy.
    pub settings: Vec<(String, String)>,
    /// GPUs one engine spans (tensor parallelism), when known.
    pub tensor_parallel: Option<u32>,
    /// Engines (replicas) one instance runs, when known: a launch at tensor parallelism t on
    /// an instance of g GPUs runs g / t unless the candidate pins `data_parallel_size`. Cost,
    /// capacity and fleet count the whole instance either way.
    pub replicas_per_instance: Option<u32>,
}

impl CandidateSpec {
    /// A candidate of one `instance_type` instance at `price_per_instance_hour`.
    pub fn new(name: impl Into<String>, instance_type: impl Into<String>, price: f64) -> Self {
        CandidateSpec {
            name: name.into(),
            instance_type: instance_type.into(),
            instance_count: 1,
            price_per_instance_hour: price,
            max_concurrency: None,
            unfit: None,
            prediction: None,
            gpus_per_instance: None,
            settings: Vec::new(),
            tensor_parallel: None,
            replicas_per_instance: None,
        }
    }

    /// Tensor parallelism and engines per instance (see
    /// [`CandidateSpec::replicas_per_instance`]).
    pub fn with_parallelism(mut self, tensor_parallel: Option<u32>, replicas: Option<u32>) -> Self {
        self.tensor_parallel = tensor_parallel.filter(|t| *t >= 1);
        self.replicas_per_instance = replicas.filter(|r| *r >= 1);
        self
    }

    /// GPUs per instance (see [`CandidateSpec::gpus_per_instance`]).
    pub fn with_gpus(mut self, gpus: Option<u32>) -> Self {
        self.gpus_per_instance = gpus.filter(|g| *g >= 1);
        self
    }

    /// The stage-1 bound on concurrency (see [`CandidateSpec::max_concurrency`]).
    pub fn with_max_concurrency(mut self, bound: Option<u32>) -> Self {
        self.max_concurrency = bound;
        self
    }

    /// Marks the candidate as unable to hold the model: it is listed with `reason`, not
    /// measured.
    pub fn unfit(mut self, reason: impl Into<String>) -> Self {
        self.unfit = Some(reason.into());
        self
    }

    /// The first-order prediction to show beside the measurement.
    pub fn with_prediction(mut self, p: Option<kneepoint_fit::Prediction>) -> Self {
        self.prediction = p;
        self
    }

    /// Its engine settings as `(name, value)` pairs (a matrix combination's), which the
    /// adaptive strategy searches over.
    pub fn with_settings(mut self, settings: Vec<(String, String)>) -> Self {
        self.settings = settings;
        self
    }

    /// Instances behind the endpoint.
    pub fn with_instance_count(mut self, n: u32) -> Self {
        self.instance_count = n;
        self
    }

    /// The candidate's folder under the recommendation's.
    pub fn folder(&self) -> String {
        let s: String = self
            .name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '.' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        folder::candidate_dir(&s)
    }
}

/// How one candidate is measured.
#[derive(Debug)]
pub enum CandidateRun {
    /// A sweep; the candidate is judged at its ideal balance.
    Sweep(Sweep),
    /// A search; the candidate is judged at its highest feasible concurrency.
    Search(Search),
}

impl CandidateRun {
    /// The run made coarse for a screening: a search of at most
    /// [`SCREEN_ITERATIONS`](crate::SCREEN_ITERATIONS) probes. A sweep has no cheaper
    /// form that keeps its answer, so a screened sweep is the full sweep (and its full trial
    /// reuses it without a second launch).
    pub fn screening(self) -> Self {
        match self {
            CandidateRun::Search(s) => CandidateRun::Search(s.screening()),
            sweep => sweep,
        }
    }

    /// Whether a screening of this run is already its full measurement (a sweep).
    pub fn screens_fully(&self) -> bool {
        matches!(self, CandidateRun::Sweep(_))
    }
}

/// Makes each candidate's run when its turn comes, one candidate at a time (the previous one's
/// run is dropped and its deployment torn down first). `dir` is the candidate's folder, to give
/// to the run's builder.
#[async_trait::async_trait]
pub trait CandidateSource: Send + Sync {
    /// The run that measures `candidate`, writing into `dir`, with what was launched for it.
    /// An error fails this candidate only (its message is listed as the reason), unless
    /// `cancel` fired: then the recommendation stops. A source that launched something and
    /// then fails must take it down before returning the error.
    async fn prepare(
        &self,
        candidate: &CandidateSpec,
        dir: &Path,
        cancel: &CancelToken,
    ) -> Result<Prepared, DeployError>;

    /// Whether preparing `candidate` launches something that costs instance-hours (a server,
    /// an endpoint): a launch that fails has spent them all the same, from its start until
    /// [`CandidateSource::prepare`] returned the error, and they count in what the
    /// recommendation spent and against an adaptive budget. False by default (a target that
    /// kneepoint does not launch).
    fn launches(&self, candidate: &CandidateSpec) -> bool {
        let _ = candidate;
        false
    }
}

/// A candidate's run, and the deployment kneepoint brought up for it (if any), which
/// [`Recommend`](crate::Recommend) tears down when the run ends.
#[derive(Debug)]
#[non_exhaustive]
pub struct Prepared {
    /// How the candidate is measured.
    pub run: CandidateRun,
    /// What was launched for it.
    pub deployment: Option<Box<dyn Deployment>>,
}

impl Prepared {
    /// A run of a target that kneepoint did not launch.
    pub fn new(run: CandidateRun) -> Self {
        Prepared {
            run,
            deployment: None,
        }
    }

    /// A run of a target that kneepoint launched: torn down when the run ends.
    pub fn launched(run: CandidateRun, deployment: Box<dyn Deployment>) -> Self {
        Prepared {
            run,
            deployment: Some(deployment),
        }
    }
}

impl From<CandidateRun> for Prepared {
    fn from(run: CandidateRun) -> Self {
        Prepared::new(run)
    }
}
