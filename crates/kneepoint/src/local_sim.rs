//! The built-in simulator on a loopback port with the OpenAI-compatible client pointed at it:
//! the server with known truth that tests and demos sweep.

use kneepoint_engine::BenchOptions;
use std::net::SocketAddr;
use std::sync::Arc;

use kneepoint_core::Transport;
use kneepoint_engine::{Search, SearchBuilder, Sweep, SweepBuilder};
use kneepoint_sim::{SimProfile, SimServer};
use kneepoint_transport::{OpenAiConfig, OpenAiTransport};

use crate::Error;

/// A simulator serving on `127.0.0.1` and a client for it, set up as the CLI sets up its own:
/// the client tells the simulator each prompt's length (the simulator does not tokenise it
/// again on the CPU the client needs), and reaches it without any proxy from the
/// environment.
///
/// ```
/// use kneepoint::prelude::*;
///
/// # tokio::runtime::Runtime::new().unwrap().block_on(async {
/// let dir = tempfile::tempdir().unwrap();
/// let report = LocalSim::start(SimProfile::fast()).await.unwrap()
///     .sweep()
///     .workload(kneepoint::synthetic(64, 8, 1).unwrap())
///     .levels([1, 4])
///     .request_count(8)
///     .artifacts(dir.path())
///     .build().unwrap()
///     .run(&CancelToken::new()).await.unwrap();
/// assert_eq!(report.rows[1].error_count, 0);
/// # });
/// ```
#[derive(Debug)]
pub struct LocalSim {
    server: SimServer,
    transport: Arc<OpenAiTransport>,
}

impl LocalSim {
    /// Starts the simulator with `profile` on a free loopback port (on the current Tokio
    /// runtime) and makes a client for it.
    pub async fn start(profile: SimProfile) -> Result<LocalSim, Error> {
        let model = profile.model.clone();
        let server = SimServer::start(profile, SocketAddr::from(([127, 0, 0, 1], 0))).await?;
        let mut config = OpenAiConfig::new(server.base_url(), model);
        // As the CLI does for its own simulator: no proxy from the environment on loopback,
        // and the prompt's length told to the server instead of tokenised again on the CPU
        // the client needs.
        config.connect.proxy = kneepoint_transport::ProxySetting::Off;
        config.send_input_token_hint = true;
        let transport = OpenAiTransport::new(config)?;
        Ok(LocalSim {
            server,
            transport: Arc::new(transport),
        })
    }

    /// The client.
    pub fn transport(&self) -> Arc<dyn Transport> {
        self.transport.clone()
    }

    /// The server: its address, its ground truth, its load history.
    pub fn server(&self) -> &SimServer {
        &self.server
    }

    /// A sweep over the simulator, which the sweep keeps running until it is dropped.
    pub fn sweep(self) -> SweepBuilder {
        Sweep::builder(self.transport()).keep_alive(self.server)
    }

    /// A search over the simulator, which the search keeps running until it is dropped.
    pub fn search(self) -> SearchBuilder {
        Search::builder(self.transport()).keep_alive(self.server)
    }
}
