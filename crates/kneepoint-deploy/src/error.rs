//! The crate's one error type.

use std::path::PathBuf;
use std::time::Duration;

/// What went wrong bringing a candidate up or down.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The deployment's settings do not hold together (checked before anything starts).
    #[error("invalid deployment settings: {0}")]
    Invalid(String),
    /// The server's program could not be started at all.
    #[error("cannot start {program:?}: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server exited before it answered.
    #[error("{what} exited ({status}) before it was ready{}", tail.describe())]
    Exited {
        /// The candidate's server.
        what: String,
        /// Its exit status.
        status: String,
        /// The end of its log.
        tail: Box<LogTail>,
    },
    /// The server could not bind its port (another process holds it).
    #[error("{what} could not listen on port {port}: it is taken{}", tail.describe())]
    PortTaken {
        /// The candidate's server.
        what: String,
        /// The port.
        port: u16,
        /// The end of its log.
        tail: Box<LogTail>,
    },
    /// The server did not answer its readiness probe in time (it was stopped).
    #[error("{what} did not answer {url} within {:.0} s (stopped){}", after.as_secs_f64(), tail.describe())]
    NotReady {
        /// The candidate's server.
        what: String,
        /// The probe's URL.
        url: String,
        /// The deadline.
        after: Duration,
        /// The end of its log.
        tail: Box<LogTail>,
    },
    /// Interrupted while the server was starting (it was stopped).
    #[error("interrupted while {what} was starting (stopped)")]
    Cancelled {
        /// The candidate's server.
        what: String,
    },
    /// The deployment reported that it failed (a SageMaker endpoint's `Failed` status).
    #[error("{what} failed: {reason}")]
    Failed {
        /// The deployment.
        what: String,
        /// Its own reason.
        reason: String,
    },
    /// A cloud API call failed.
    #[cfg(feature = "sagemaker")]
    #[error("{what}: {source}")]
    Api {
        /// The candidate (or `cleanup`).
        what: String,
        /// The call's error.
        #[source]
        source: kneepoint_transport::sagemaker::ApiError,
    },
    /// Signalling or waiting for a process failed.
    #[error("stopping {what}: {reason}")]
    Stop {
        /// The candidate's server.
        what: String,
        /// Why.
        reason: String,
    },
    /// A file could not be read or written.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// The end of a server's log, for an error message: the last line that looks like an error
/// first (the server's own words), then the last lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct LogTail {
    /// The log file.
    pub path: PathBuf,
    /// The last line mentioning an error, when there is one.
    pub error_line: Option<String>,
    /// The last lines (at most [`LogTail::LINES`]).
    pub lines: Vec<String>,
}

impl LogTail {
    /// Lines kept.
    pub const LINES: usize = 12;
    /// Bytes read from the end of the log.
    const BYTES: u64 = 16 * 1024;

    /// Reads the end of the log at `path` (empty when it cannot be read).
    pub fn read(path: &std::path::Path) -> LogTail {
        use std::io::{Read, Seek, SeekFrom};
        let mut text = String::new();
        if let Ok(mut f) = std::fs::File::open(path) {
            let len = f.metadata().map(|m| m.len()).unwrap_or(0);
            let _ = f.seek(SeekFrom::Start(len.saturating_sub(Self::BYTES)));
            let mut bytes = Vec::new();
            // At most the tail's bytes, however fast the log grows while it is read.
            let _ = f.take(Self::BYTES).read_to_end(&mut bytes);
            text = kneepoint_core::secrets::scrub(&String::from_utf8_lossy(&bytes)).into_owned();
        }
        let all: Vec<String> = text
            .lines()
            .map(|l| l.trim_end().to_owned())
            .filter(|l| !l.is_empty())
            .collect();
        let error_line = all
            .iter()
            .rev()
            .find(|l| {
                let l = l.to_ascii_lowercase();
                l.contains("error") || l.contains("exception") || l.contains("fatal")
            })
            .cloned();
        let lines = all[all.len().saturating_sub(Self::LINES)..].to_vec();
        LogTail {
            path: path.to_owned(),
            error_line,
            lines,
        }
    }

    /// Whether the log says the port was taken.
    pub fn says_port_taken(&self) -> bool {
        self.lines.iter().any(|l| {
            let l = l.to_ascii_lowercase();
            l.contains("address already in use") || l.contains("eaddrinuse")
        })
    }

    pub(crate) fn describe(&self) -> String {
        if self.path.as_os_str().is_empty() {
            return String::new();
        }
        if self.lines.is_empty() {
            return format!(" (its log {} is empty)", self.path.display());
        }
        let mut s = String::new();
        if let Some(e) = &self.error_line {
            s.push_str(&format!(": {e}"));
        }
        s.push_str(&format!(
            "\n  last lines of {}:\n    {}",
            self.path.display(),
            self.lines.join("\n    ")
        ));
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_leads_with_the_servers_own_error_line() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("server.log");
        let mut text = String::new();
        for i in 0..40 {
            text.push_str(&format!("INFO line {i}\n"));
        }
        text.push_str("api_server.py: error: unrecognized arguments: --bogus\n\nbye\n");
        std::fs::write(&p, text).unwrap();
        let t = LogTail::read(&p);
        assert_eq!(
            t.error_line.as_deref(),
            Some("api_server.py: error: unrecognized arguments: --bogus")
        );
        assert_eq!(t.lines.len(), LogTail::LINES);
        assert_eq!(t.lines.last().map(String::as_str), Some("bye"));
        let e = Error::Exited {
            what: "vllm".into(),
            status: "exit status: 2".into(),
            tail: Box::new(t),
        }
        .to_string();
        assert!(e.starts_with("vllm exited (exit status: 2) before it was ready: api_server.py: error: unrecognized arguments: --bogus"), "{e}");
        assert!(LogTail::read(&d.path().join("none"))
            .describe()
            .contains("is empty"));
    }
}
