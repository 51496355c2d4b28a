//! A candidate as a local server process: a command template filled with the candidate's
//! settings and a free port, started in a process group of its own with its output in a log
//! file, probed over HTTP until it answers, and stopped as a group (`SIGTERM`, a grace
//! period, `SIGKILL`).

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::{Duration, Instant};

use kneepoint_core::Fetch;
use kneepoint_runner::CancelToken;
use nix::sys::signal::Signal;
use tokio::process::{Child, Command};

use crate::error::LogTail;
use crate::leftovers::{tag, TAG_VAR};
use crate::log_pump::LogPump;
use crate::ports::{free_port, url_host};
use crate::process::{signal_group, stop_group};
use crate::template::{render, shell_line};
use crate::Error;

/// The port a recipe's command line names when kneepoint chose a free one for the run.
const RECIPE_PORT: u16 = 8000;

/// A rendered command line and environment.
type Rendered = (Vec<String>, Vec<(String, String)>);

/// How to run one candidate as a local process. Build it with [`LocalSpec::new`] and set the
/// fields; [`LocalSpec::validate`] runs before anything starts.
#[derive(Debug, Clone, PartialEq)]
#[non_exhaustive]
pub struct LocalSpec {
    /// The candidate's name (in messages and in the tag of its processes).
    pub name: String,
    /// The program and its arguments, each a template (`{port}`, `{host}` and every key of
    /// `values`).
    pub command: Vec<String>,
    /// Environment variables set for the server (values are templates too). Values of
    /// variables whose name says secret ([`kneepoint_core::secrets::name_is_secret`]) are shown
    /// as `[redacted]` in the recipe and scrubbed from the server's log.
    pub env: BTreeMap<String, String>,
    /// Variables of kneepoint's own environment passed on although they carry a secret
    /// (`HF_TOKEN` for a gated model). Every other secret-named variable of kneepoint's
    /// environment, any whose value holds a registered secret (the client's API key), and
    /// any kneepoint reads for a secret (`KNEEPOINT_STORE`, a proxy with credentials:
    /// [`kneepoint_core::secrets::withheld_from_servers`]) is withheld from the server.
    pub pass_env: Vec<String>,
    /// The candidate's settings, by placeholder name.
    pub values: BTreeMap<String, String>,
    /// The address the server is asked to listen on (`{host}`), and probed at.
    pub host: String,
    /// A fixed port; `None`: a free one is chosen (and another one if the server finds it
    /// taken, up to three tries).
    pub port: Option<u16>,
    /// The path probed for readiness: any `200` answer means ready.
    pub ready_path: String,
    /// How long the server may take to answer.
    pub ready_timeout: Duration,
    /// How long the server has to exit after `SIGTERM` before `SIGKILL`.
    pub stop_grace: Duration,
    /// The server's stdout and stderr go here (appended: each try is headed by its command).
    pub log_path: PathBuf,
}

impl LocalSpec {
    /// The longest readiness wait accepted, seconds (a day).
    pub const MAX_READY_TIMEOUT_S: f64 = 86_400.0;
    /// The longest grace between `SIGTERM` and `SIGKILL` accepted, seconds (an hour).
    pub const MAX_STOP_GRACE_S: f64 = 3_600.0;

    /// A spec running `command` for candidate `name`, logging to `log_path`; defaults: host
    /// 127.0.0.1, a free port, readiness `GET /v1/models` within 600 s, 30 s grace.
    pub fn new(name: impl Into<String>, command: Vec<String>, log_path: PathBuf) -> Self {
        LocalSpec {
            name: name.into(),
            command,
            env: BTreeMap::new(),
            pass_env: Vec::new(),
            values: BTreeMap::new(),
            host: "127.0.0.1".into(),
            port: None,
            ready_path: "/v1/models".into(),
            ready_timeout: Duration::from_secs(600),
            stop_grace: Duration::from_secs(30),
            log_path,
        }
    }

    /// Checks the spec without starting anything: a program, placeholders that all have a
    /// value, a readiness path, sane times.
    pub fn validate(&self) -> Result<(), Error> {
        if self.command.first().is_none_or(|p| p.trim().is_empty()) {
            return Err(Error::Invalid(format!(
                "candidate {:?}: the command is empty",
                self.name
            )));
        }
        self.render(0).map_err(|e| {
            // Said once: "invalid deployment settings" heads the outer error already.
            let why = match e {
                Error::Invalid(why) => why,
                other => other.to_string(),
            };
            Error::Invalid(format!("candidate {:?}: {why}", self.name))
        })?;
        if self.port == Some(0) {
            return Err(Error::Invalid(format!(
                "candidate {:?}: port 0 is no port to probe: leave port out and kneepoint picks a free one",
                self.name
            )));
        }
        if !self.ready_path.starts_with('/') {
            return Err(Error::Invalid(format!(
                "candidate {:?}: ready_path must start with '/', not {:?}",
                self.name, self.ready_path
            )));
        }
        for (what, d, max) in [
            (
                "ready_timeout",
                self.ready_timeout,
                Self::MAX_READY_TIMEOUT_S,
            ),
            ("stop_grace", self.stop_grace, Self::MAX_STOP_GRACE_S),
        ] {
            if d.is_zero() || d.as_secs_f64() > max {
                return Err(Error::Invalid(format!(
                    "candidate {:?}: {what} must be above 0 and at most {max} s",
                    self.name
                )));
            }
        }
        Ok(())
    }

    /// The command line and environment with `port` filled in.
    fn render(&self, port: u16) -> Result<Rendered, Error> {
        let mut values = self.values.clone();
        values.insert("port".into(), port.to_string());
        values.insert("host".into(), self.host.clone());
        let argv = self
            .command
            .iter()
            .map(|a| render(a, &values))
            .collect::<Result<Vec<_>, _>>()?;
        let env = self
            .env
            .iter()
            .map(|(k, v)| Ok((k.clone(), render(v, &values)?)))
            .collect::<Result<Vec<_>, Error>>()?;
        Ok((argv, env))
    }

    /// Starts the server and waits until `GET ready_path` answers `200` through `fetch`. The
    /// server is stopped again when it exits early, is not ready in time, or `cancel` fires.
    pub async fn launch(
        &self,
        fetch: Arc<dyn Fetch>,
        cancel: &CancelToken,
    ) -> Result<LocalDeployment, Error> {
        self.validate()?;
        if let Some(parent) = self.log_path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                path: parent.to_owned(),
                source,
            })?;
        }
        let tries = if self.port.is_some() { 1 } else { 3 };
        let mut last = None;
        for _ in 0..tries {
            let port = match self.port {
                Some(p) => p,
                None => free_port(&self.host)?,
            };
            match self.launch_on(port, fetch.clone(), cancel).await {
                Err(e @ Error::PortTaken { .. }) => last = Some(e),
                other => return other,
            }
        }
        Err(last.unwrap_or_else(|| Error::Invalid("no port tried".into())))
    }

    async fn launch_on(
        &self,
        port: u16,
        fetch: Arc<dyn Fetch>,
        cancel: &CancelToken,
    ) -> Result<LocalDeployment, Error> {
        let started = Instant::now();
        if self.port.is_some() && std::net::TcpListener::bind((self.host.as_str(), port)).is_err() {
            // Something already listens there: its answers would pass for this candidate's.
            return Err(Error::PortTaken {
                what: self.name.clone(),
                port,
                tail: Box::default(),
            });
        }
        let (argv, env) = self.render(port)?;
        // The recipe's command line does not quote a port that was free by chance: the fixed
        // one, or the usual 8000 (as in the Kubernetes manifest).
        let (recipe_argv, _) = self.render(self.port.unwrap_or(RECIPE_PORT))?;
        // Everything secret this server is given is scrubbed from its log from now on.
        for (k, v) in &env {
            kneepoint_core::secrets::register_variable(k, v);
        }
        let log = self.open_log(&argv)?;
        let io_error = |source| Error::Io {
            path: self.log_path.clone(),
            source,
        };
        let (reader, writer) = std::io::pipe().map_err(io_error)?;
        let err = writer.try_clone().map_err(io_error)?;
        let run_tag = tag(&self.name);
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        for name in self.withheld() {
            cmd.env_remove(name);
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)))
            .env(TAG_VAR, &run_tag)
            .stdin(Stdio::null())
            .stdout(Stdio::from(writer))
            .stderr(Stdio::from(err))
            .process_group(0);
        // Started first: a server that cannot be spawned leaves no pump (its pipe closes with
        // `cmd`), and one that runs is never without its log.
        let pump = LogPump::start(reader, log).map_err(io_error)?;
        let spawned = cmd.spawn();
        // The child holds the pipe's writing end now; this process's copies are gone with
        // `cmd`, so the pump sees the end when the server's last process closes it.
        drop(cmd);
        let child = spawned.map_err(|source| Error::Spawn {
            program: argv[0].clone(),
            source,
        })?;
        let pgid = child.id().map(|p| p as i32);
        if let Some(g) = pgid {
            crate::live::register(g);
        }
        let mut d = LocalDeployment {
            name: self.name.clone(),
            pgid,
            child: Some(child),
            base_url: format!("http://{}:{port}", url_host(&self.host)),
            port,
            argv,
            recipe_argv,
            env,
            log_path: self.log_path.clone(),
            ready_path: self.ready_path.clone(),
            launch_time: Duration::ZERO,
            stop_grace: self.stop_grace,
            tag: run_tag,
            pump,
        };
        match self.wait_ready(&mut d, fetch, cancel).await {
            Ok(()) => {
                d.launch_time = started.elapsed();
                Ok(d)
            }
            Err(e) => {
                // Best effort: the error says what went wrong starting it; a failure to stop
                // is left to the drop (SIGKILL) and to `kneepoint cleanup`.
                let _ = d.stop().await;
                Err(e)
            }
        }
    }

    /// The variables of kneepoint's environment the server does not inherit: those that carry
    /// a secret ([`kneepoint_core::secrets::withheld_from_servers`]), unless set in `env` or
    /// named in `pass_env`.
    fn withheld(&self) -> Vec<std::ffi::OsString> {
        std::env::vars_os()
            .filter(|(name, value)| {
                let n = name.to_string_lossy();
                let chosen = self.env.contains_key(&*n) || self.pass_env.iter().any(|p| *p == n);
                !chosen
                    && kneepoint_core::secrets::withheld_from_servers(&n, &value.to_string_lossy())
            })
            .map(|(name, _)| name)
            .collect()
    }

    fn open_log(&self, argv: &[String]) -> Result<std::fs::File, Error> {
        use std::io::Write as _;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log_path)
            .map_err(|source| Error::Io {
                path: self.log_path.clone(),
                source,
            })?;
        let _ = writeln!(
            f,
            "# kneepoint: starting {}",
            shell_line(&crate::argv_secrets::redact_argv(argv))
        );
        Ok(f)
    }

    async fn wait_ready(
        &self,
        d: &mut LocalDeployment,
        fetch: Arc<dyn Fetch>,
        cancel: &CancelToken,
    ) -> Result<(), Error> {
        let url = format!("{}{}", d.base_url, self.ready_path);
        let deadline = Instant::now() + self.ready_timeout;
        loop {
            if let Some(status) = d.exit_status() {
                d.pump.settle(Duration::from_secs(2)).await;
                let tail = Box::new(LogTail::read(&self.log_path));
                return Err(if tail.says_port_taken() {
                    Error::PortTaken {
                        what: self.name.clone(),
                        port: d.port,
                        tail,
                    }
                } else {
                    Error::Exited {
                        what: self.name.clone(),
                        status,
                        tail,
                    }
                });
            }
            if cancel.is_cancelled() {
                return Err(Error::Cancelled {
                    what: self.name.clone(),
                });
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Error::NotReady {
                    what: self.name.clone(),
                    url,
                    after: self.ready_timeout,
                    tail: Box::new(LogTail::read(&self.log_path)),
                });
            }
            let probe = fetch.get(&url, left.min(Duration::from_secs(5)), 64 * 1024);
            tokio::select! {
                answer = probe => {
                    // An answer counts only while the server runs: after it exited, another
                    // process on the port may be what answered.
                    if answer.is_ok_and(|a| a.status == 200) && d.exit_status().is_none() {
                        return Ok(());
                    }
                }
                _ = cancel.cancelled() => continue,
            }
            tokio::select! {
                _ = tokio::time::sleep(left.min(Duration::from_millis(250))) => {}
                _ = cancel.cancelled() => {}
            }
        }
    }
}

/// A running local server: where it listens, its log, and how it was started. Taken down by
/// [`LocalDeployment::stop`] (or [`Deployment::teardown`](kneepoint_engine::Deployment)); if
/// it is dropped still running, its group gets `SIGKILL` at once.
#[derive(Debug)]
pub struct LocalDeployment {
    name: String,
    child: Option<Child>,
    pgid: Option<i32>,
    base_url: String,
    port: u16,
    argv: Vec<String>,
    recipe_argv: Vec<String>,
    env: Vec<(String, String)>,
    log_path: PathBuf,
    ready_path: String,
    launch_time: Duration,
    stop_grace: Duration,
    tag: String,
    pump: LogPump,
}

impl LocalDeployment {
    /// `http://HOST:PORT`, the server's base URL.
    pub fn base_url(&self) -> &str {
        &self.base_url
    }

    /// The port it listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The process group (the server's pid), while it runs.
    pub fn pgid(&self) -> Option<i32> {
        self.pgid
    }

    /// The server's log.
    pub fn log_path(&self) -> &std::path::Path {
        &self.log_path
    }

    /// The command line it was started with.
    pub fn argv(&self) -> &[String] {
        &self.argv
    }

    /// How long it took to answer.
    pub fn launch_time(&self) -> Duration {
        self.launch_time
    }

    /// The exit status, once the server's leader process has exited.
    fn exit_status(&mut self) -> Option<String> {
        let child = self.child.as_mut()?;
        match child.try_wait() {
            Ok(Some(s)) => Some(s.to_string()),
            Ok(None) => None,
            Err(e) => Some(format!("unknown: {e}")),
        }
    }

    /// Stops the whole process group (`SIGTERM`, the grace period, `SIGKILL`). Idempotent.
    pub async fn stop(&mut self) -> Result<(), Error> {
        let Some(pgid) = self.pgid else {
            return Ok(());
        };
        let mut child = self.child.take();
        let r = stop_group(pgid, self.stop_grace, || {
            if let Some(c) = child.as_mut() {
                let _ = c.try_wait();
            }
        })
        .await;
        if let Some(mut c) = child {
            let _ = c.try_wait();
        }
        // A process that left the group (setsid, a daemon) still carries the tag.
        crate::leftovers::kill_tagged(&self.tag);
        self.pgid = None;
        crate::live::unregister(pgid);
        // One that also dropped the tag was adopted by this process (`adopt_orphans`).
        let left = crate::orphans::stop_adopted(self.stop_grace).await;
        r.and_then(|()| match left.is_empty() {
            true => Ok(()),
            false => Err(format!(
                "{} left its process group and still runs{}",
                left.join(", "),
                if crate::live::any_live() {
                    " (another launched server still runs, and whose it is cannot be told: it is stopped with the last one)"
                } else {
                    ""
                }
            )),
        })
        .map_err(|reason| Error::Stop {
            what: self.name.clone(),
            reason,
        })
    }
}

impl Drop for LocalDeployment {
    fn drop(&mut self) {
        if let Some(pgid) = self.pgid.take() {
            let _ = signal_group(pgid, Some(Signal::SIGKILL));
            crate::live::unregister(pgid);
        }
    }
}

#[async_trait::async_trait]
impl kneepoint_engine::Deployment for LocalDeployment {
    async fn teardown(&mut self) -> Result<(), kneepoint_engine::DeployError> {
        Ok(self.stop().await?)
    }

    fn recipe(&self) -> Option<serde_json::Value> {
        let env: serde_json::Map<String, serde_json::Value> = self
            .env
            .iter()
            .map(|(k, v)| {
                let v = if kneepoint_core::secrets::name_is_secret(k) {
                    "[redacted]"
                } else {
                    v.as_str()
                };
                (k.clone(), serde_json::Value::from(v))
            })
            .collect();
        let argv = crate::argv_secrets::redact_argv(&self.recipe_argv);
        Some(serde_json::json!({
            "kind": "local_process",
            "command": shell_line(&argv),
            "argv": argv,
            "env": env,
            "ready": format!("{}{}", self.base_url, self.ready_path),
            "measured_port": self.port,
        }))
    }

    fn launch_time(&self) -> Option<Duration> {
        Some(self.launch_time)
    }

    async fn exited(&mut self) -> Option<String> {
        let status = self.exit_status()?;
        // Its last words may still be on their way to the log.
        self.pump.settle(Duration::from_secs(2)).await;
        Some(format!(
            "{status}{}",
            LogTail::read(&self.log_path).describe()
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(command: &[&str]) -> LocalSpec {
        LocalSpec::new(
            "c",
            command.iter().map(|s| s.to_string()).collect(),
            PathBuf::from("/nonexistent/server.log"),
        )
    }

    /// Issue 46 items 15 and 17: port 0 is refused before anything starts; a bad placeholder
    /// says "invalid deployment settings" once; the limits are the ones the config states.
    #[test]
    fn bad_specs_are_refused_once_and_clearly() {
        let mut s = spec(&["srv", "--port", "{port}"]);
        s.port = Some(0);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("port 0") && e.contains("free one"), "{e}");
        let e = spec(&["srv", "{nope}"]).validate().unwrap_err().to_string();
        assert_eq!(e.matches("invalid deployment settings").count(), 1, "{e}");
        let mut s = spec(&["srv"]);
        s.stop_grace = Duration::from_secs_f64(LocalSpec::MAX_STOP_GRACE_S + 1.0);
        let e = s.validate().unwrap_err().to_string();
        assert!(e.contains("at most 3600"), "{e}");
    }

    #[test]
    fn secret_named_and_registered_variables_are_withheld_unless_chosen() {
        kneepoint_core::secrets::register("withheld-client-key-71");
        std::env::set_var("KNEEPOINT_UNIT_ODD_NAME", "withheld-client-key-71");
        std::env::set_var("KNEEPOINT_UNIT_TOKEN", "x");
        std::env::set_var("KNEEPOINT_UNIT_PASSED_TOKEN", "y");
        let mut s = spec(&["srv"]);
        s.pass_env = vec!["KNEEPOINT_UNIT_PASSED_TOKEN".into()];
        let withheld = s.withheld();
        for name in ["KNEEPOINT_UNIT_ODD_NAME", "KNEEPOINT_UNIT_TOKEN"] {
            assert!(withheld.iter().any(|n| n == name), "{name}");
        }
        assert!(!withheld.iter().any(|n| n == "KNEEPOINT_UNIT_PASSED_TOKEN"));
        assert!(!withheld.iter().any(|n| n == "PATH"));
    }

    /// Issue 57 item 8: the store's location (its password too short to be registered, its
    /// name saying nothing) reached every launched server, and `server.log` when it printed
    /// its environment.
    #[test]
    fn the_store_location_is_withheld_unless_chosen() {
        std::env::set_var("KNEEPOINT_STORE", "postgres://bench:pw@db.example/kp");
        let mut s = spec(&["srv"]);
        assert!(s.withheld().iter().any(|n| n == "KNEEPOINT_STORE"));
        s.pass_env = vec!["KNEEPOINT_STORE".into()];
        assert!(!s.withheld().iter().any(|n| n == "KNEEPOINT_STORE"));
    }
}
