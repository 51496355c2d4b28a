//! Where a run was measured from: the machine and the kneepoint that ran it.

use serde::{Deserialize, Serialize};

/// The client's machine and build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct Host {
    /// The host name.
    pub hostname: Option<String>,
    /// `linux`, `macos`...
    pub os: String,
    /// `x86_64`, `aarch64`...
    pub arch: String,
    /// The CPU's model name, when the system says.
    pub cpu: Option<String>,
    /// Cores the process may use.
    pub cores: Option<usize>,
    /// The kneepoint that recorded the run.
    pub kneepoint_version: String,
    /// The git commit of the working folder, when the run started inside a repository (the
    /// project being benchmarked, in a CI pipeline).
    pub git_commit: Option<String>,
}

impl Host {
    /// This machine, with `version` as the recording kneepoint's version.
    pub fn this(version: &str) -> Host {
        Host {
            hostname: read_trimmed("/proc/sys/kernel/hostname")
                .or_else(|| std::env::var("HOSTNAME").ok().filter(|h| !h.is_empty())),
            os: std::env::consts::OS.to_owned(),
            arch: std::env::consts::ARCH.to_owned(),
            cpu: cpu_model(),
            cores: std::thread::available_parallelism().ok().map(|n| n.get()),
            kneepoint_version: version.to_owned(),
            git_commit: git_commit(),
        }
    }
}

fn read_trimmed(path: &str) -> Option<String> {
    let s = std::fs::read_to_string(path).ok()?;
    let s = s.trim();
    (!s.is_empty()).then(|| s.to_owned())
}

fn cpu_model() -> Option<String> {
    let info = std::fs::read_to_string("/proc/cpuinfo").ok()?;
    info.lines()
        .find(|l| l.starts_with("model name"))
        .and_then(|l| l.split_once(':'))
        .map(|(_, v)| v.trim().to_owned())
}

/// `git rev-parse HEAD` in the working folder; `None` outside a repository or without git.
fn git_commit() -> Option<String> {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "HEAD"])
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .output()
        .ok()?;
    let sha = String::from_utf8(out.stdout).ok()?;
    let sha = sha.trim();
    (out.status.success() && sha.len() >= 7 && sha.bytes().all(|b| b.is_ascii_hexdigit()))
        .then(|| sha.to_owned())
}
