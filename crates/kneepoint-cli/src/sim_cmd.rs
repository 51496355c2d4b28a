//! `kneepoint sim serve`.

use std::io::Write as _;
use std::net::SocketAddr;

use anyhow::Context;
use kneepoint_sim::{SimProfile, SimServer};

use crate::args::{SimArgs, SimCommand};

pub(crate) async fn run(args: SimArgs) -> anyhow::Result<()> {
    match args.command {
        SimCommand::Serve {
            port,
            profile,
            time_scale,
            seed,
        } => {
            let mut p = SimProfile::by_name(&profile)?;
            if let Some(t) = time_scale {
                p.time_scale = t;
            }
            if let Some(s) = seed {
                p.seed = s;
            }
            let server = SimServer::start(p.clone(), SocketAddr::from(([127, 0, 0, 1], port)))
                .await
                .context("starting the simulator")?;
            // A closed stdout (e.g. piped into `head`) must not stop the server.
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "kneepoint-sim ({} profile, model {:?}, time scale {}) listening on {}",
                p.name,
                p.model,
                p.time_scale,
                server.base_url()
            );
            let _ = writeln!(out, "OpenAI-compatible routes: POST /v1/chat/completions, POST /v1/completions, GET /v1/models, GET /health");
            let _ = out.flush();
            drop(out);
            tokio::signal::ctrl_c()
                .await
                .context("waiting for Ctrl-C")?;
            Ok(())
        }
    }
}
