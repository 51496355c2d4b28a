//! A real PostgreSQL server for tests: a temporary cluster made with Debian's server programs
//! (`initdb`, `pg_ctl`, from the `postgresql` package), started on a free loopback port and
//! stopped when dropped. Where the programs are missing, [`Cluster::start`] says so and the
//! test skips, unless `KNEEPOINT_REQUIRE_POSTGRES` is set (as `.ci/run` sets it): then the
//! missing server is an error.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The environment variable that turns a missing PostgreSQL into an error.
pub const REQUIRE_ENV: &str = "KNEEPOINT_REQUIRE_POSTGRES";

/// A temporary PostgreSQL cluster, stopped (and its files removed) when dropped.
#[derive(Debug)]
pub struct Cluster {
    bin: PathBuf,
    data: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
}

/// PostgreSQL's server programs: on `PATH`, or in Debian's versioned folder.
pub fn server_programs() -> Option<PathBuf> {
    let on_path = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default();
    let debian: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.flatten().map(|e| e.path().join("bin")).collect())
        .unwrap_or_default();
    on_path
        .into_iter()
        .chain(debian)
        .find(|d| d.join("initdb").is_file() && d.join("pg_ctl").is_file())
}

impl Cluster {
    /// Starts a cluster (user `kneepoint`, any password accepted), or `Ok(None)` with a note
    /// on standard error when the server programs are missing and not required.
    pub fn start() -> Result<Option<Cluster>, String> {
        Cluster::start_with(&[], &[])
    }

    /// [`Cluster::start`] with `files` written into its folder first (private to the server:
    /// a TLS key, its certificate) and `settings` (`name=value`) for the server, where
    /// `{dir}` stands for that folder: `ssl=on`, `ssl_cert_file={dir}/server.crt`.
    pub fn start_with(
        settings: &[&str],
        files: &[(&str, &[u8])],
    ) -> Result<Option<Cluster>, String> {
        let Some(bin) = server_programs() else {
            if std::env::var_os(REQUIRE_ENV).is_some() {
                return Err(format!(
                    "{REQUIRE_ENV} is set but initdb/pg_ctl are not on this machine"
                ));
            }
            eprintln!("skipped PostgreSQL: no initdb/pg_ctl on this machine (install Debian's postgresql package; .ci/run does)");
            return Ok(None);
        };
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        for (name, bytes) in files {
            let path = dir.path().join(name);
            std::fs::write(&path, bytes).map_err(|e| format!("{name}: {e}"))?;
            #[cfg(unix)]
            {
                use std::os::unix::fs::PermissionsExt as _;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .map_err(|e| format!("{name}: {e}"))?;
            }
        }
        let data = dir.path().join("data");
        let mut initdb = Command::new(bin.join("initdb"));
        initdb
            .args(["-A", "trust", "-U", "kneepoint", "-D"])
            .arg(&data);
        run(&mut as_owner(dir.path(), initdb)?, "initdb")?;
        let port = free_port()?;
        let mut opts = format!(
            "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
            dir.path().display()
        );
        for s in settings {
            let s = s.replace("{dir}", &dir.path().display().to_string());
            opts.push_str(&format!(" -c {s}"));
        }
        let cluster = Cluster {
            bin,
            data,
            dir,
            port,
        };
        let mut start = cluster.pg_ctl();
        start
            .args(["-o", &opts, "-w", "-l"])
            .arg(cluster.dir.path().join("log"))
            .arg("start");
        run(&mut as_owner(cluster.dir.path(), start)?, "pg_ctl start")?;
        Ok(Some(cluster))
    }

    /// Its port on 127.0.0.1.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// `postgres://kneepoint:PASSWORD@127.0.0.1:PORT/postgres` (the cluster trusts any
    /// password: it stands for a secret that must never be shown).
    pub fn url(&self, password: &str) -> String {
        format!(
            "postgres://kneepoint:{password}@127.0.0.1:{}/postgres",
            self.port
        )
    }

    /// The folder the cluster lives in (its data, log and socket): files for `ssl_cert_file`
    /// go here.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    /// The postmaster's process id.
    pub fn postmaster_pid(&self) -> Option<i32> {
        let text = std::fs::read_to_string(self.data.join("postmaster.pid")).ok()?;
        text.lines().next()?.trim().parse().ok()
    }

    /// Sends `signal` (`STOP`, `CONT`) to the postmaster: `STOP` freezes it as a hung server
    /// would be (the kernel still completes new connections' handshakes).
    pub fn signal(&self, signal: &str) -> Result<(), String> {
        let pid = self.postmaster_pid().ok_or("no postmaster.pid")?;
        let mut kill = Command::new("kill");
        kill.arg(format!("-{signal}")).arg(pid.to_string());
        run(&mut kill, "kill")
    }

    fn pg_ctl(&self) -> Command {
        let mut cmd = Command::new(self.bin.join("pg_ctl"));
        cmd.arg("-D").arg(&self.data);
        cmd
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.signal("CONT");
        let mut stop = self.pg_ctl();
        stop.args(["-m", "immediate", "stop"]);
        if let Ok(mut cmd) = as_owner(self.dir.path(), stop) {
            let _ = cmd.output();
        }
    }
}

/// `cmd` run as the owner of `dir`: this user, unless this is root, which initdb refuses:
/// then Debian's `postgres` user, given the folder.
fn as_owner(dir: &Path, cmd: Command) -> Result<Command, String> {
    if !is_root() {
        return Ok(cmd);
    }
    run(
        Command::new("chown").args(["-R", "postgres"]).arg(dir),
        "chown",
    )?;
    let mut su = Command::new("runuser");
    su.args(["-u", "postgres", "--"])
        .arg(cmd.get_program())
        .args(cmd.get_args());
    Ok(su)
}

fn run(cmd: &mut Command, what: &str) -> Result<(), String> {
    let out = cmd.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() {
        Ok(())
    } else {
        Err(format!(
            "{what}: {}{}",
            String::from_utf8_lossy(&out.stderr),
            String::from_utf8_lossy(&out.stdout)
        ))
    }
}

fn is_root() -> bool {
    Command::new("id")
        .arg("-u")
        .output()
        .is_ok_and(|o| o.stdout.starts_with(b"0\n"))
}

fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| e.to_string())
}
