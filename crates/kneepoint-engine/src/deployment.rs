//! A candidate that kneepoint brought up for its measurement (a local server, an endpoint, a
//! Deployment), and what [`Recommend`](crate::Recommend) needs of it: to take it down, and to
//! say how to deploy it again. Launching lives outside the engine (the `kneepoint-deploy`
//! crate); the engine only guarantees the teardown.

use std::time::Duration;

/// An error of a deployment, as its launcher words it.
pub type DeployError = Box<dyn std::error::Error + Send + Sync>;

/// A candidate brought up for its measurement. [`Recommend`](crate::Recommend) calls
/// [`Deployment::teardown`] once the candidate's run ends, whatever the outcome: measured,
/// failed, interrupted, or an error in kneepoint.
#[async_trait::async_trait]
pub trait Deployment: Send + Sync + std::fmt::Debug {
    /// Stops what was started and deletes what was created. Idempotent: a second call (or a
    /// call after the deployment went away by itself) succeeds without doing anything.
    async fn teardown(&mut self) -> Result<(), DeployError>;

    /// The exact configuration to deploy this candidate again (a command line, request
    /// bodies, manifests), for `recommendations.json`; `None` when there is nothing to say.
    fn recipe(&self) -> Option<serde_json::Value> {
        None
    }

    /// How long bringing it up took (until it answered), for the benchmark's own cost.
    fn launch_time(&self) -> Option<Duration> {
        None
    }

    /// Whether it stopped by itself while it was measured (a local server that exited), and
    /// how (its exit status and the end of its log); `None` while it runs, or when the
    /// launcher cannot tell. Asked once its run ends, before [`Deployment::teardown`]: a
    /// candidate whose server went away is not ranked on what it measured before.
    async fn exited(&mut self) -> Option<String> {
        None
    }
}
