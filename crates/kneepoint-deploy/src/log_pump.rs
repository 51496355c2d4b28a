//! A launched server's output on its way to `server.log`: read from a pipe by a thread of its
//! own and written with every registered secret ([`kneepoint_core::secrets`]) scrubbed out, so
//! a server that prints its environment or its arguments leaves no key on disk.
//!
//! Whole lines are written as they come; a line that grows past [`HOLD`] bytes without an end
//! is written too, all but its last bytes (as many as the longest secret less one, so a secret
//! cut by a read is still found whole). The thread ends when every process holding the pipe
//! has closed it.

use std::io::{Read, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kneepoint_core::secrets;

/// The longest unfinished line held back before it is written in part.
const HOLD: usize = 64 * 1024;

/// The pump's state, shared with the launcher.
#[derive(Debug, Clone, Default)]
pub(crate) struct LogPump {
    done: Arc<AtomicBool>,
}

impl LogPump {
    /// Starts a thread copying `reader` into `log`, scrubbed.
    pub fn start(reader: std::io::PipeReader, log: std::fs::File) -> std::io::Result<LogPump> {
        let pump = LogPump::default();
        let done = pump.done.clone();
        std::thread::Builder::new()
            .name("kneepoint-server-log".into())
            .spawn(move || {
                copy_scrubbed(reader, log);
                done.store(true, Ordering::Release);
            })?;
        Ok(pump)
    }

    /// Waits up to `limit` for the server's last output to reach the log (after it exited).
    pub async fn settle(&self, limit: Duration) {
        let until = Instant::now() + limit;
        while !self.done.load(Ordering::Acquire) && Instant::now() < until {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
}

fn copy_scrubbed(mut reader: impl Read, mut log: impl Write) {
    let mut pending: Vec<u8> = Vec::new();
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match reader.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(_) => break,
        };
        pending.extend_from_slice(&buf[..n]);
        let cut = match memchr::memrchr(b'\n', &pending) {
            Some(i) => i + 1,
            None if pending.len() > HOLD => {
                pending.len() - secrets::longest().saturating_sub(1).min(pending.len())
            }
            None => continue,
        };
        let (ready, kept) = split_scrubbed(&pending, cut);
        let _ = log.write_all(&ready);
        let _ = log.flush();
        pending = kept;
    }
    let _ = log.write_all(&secrets::scrub_bytes(&pending));
    let _ = log.flush();
}

/// `pending` scrubbed up to `cut` (moved later when a secret straddles it), and the rest.
fn split_scrubbed(pending: &[u8], mut cut: usize) -> (Vec<u8>, Vec<u8>) {
    let spans = secrets::spans(pending);
    while let Some(end) = spans
        .iter()
        .filter(|r| r.start < cut && r.end > cut)
        .map(|r| r.end)
        .max()
    {
        cut = end;
    }
    (
        secrets::scrub_bytes(&pending[..cut]).into_owned(),
        pending[cut..].to_vec(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A reader that hands its bytes over `step` at a time.
    struct Trickle(Vec<u8>, usize);

    impl Read for Trickle {
        fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
            let n = self.1.min(self.0.len()).min(buf.len());
            buf[..n].copy_from_slice(&self.0[..n]);
            self.0.drain(..n);
            Ok(n)
        }
    }

    #[test]
    fn secrets_are_scrubbed_however_the_reads_cut_them() {
        let secret = "pump-secret-value-31";
        secrets::register(secret);
        let mut text = format!("env: OPENAI_API_KEY={secret}\nargs: --api-key {secret}");
        // A line longer than what is held back, with the secret near the cut.
        text.push_str(&"x".repeat(HOLD - 7));
        text.push_str(secret);
        text.push_str(" end, no newline");
        for step in [1, 3, 7, 4096, 1 << 20] {
            let mut out = Vec::new();
            copy_scrubbed(Trickle(text.clone().into_bytes(), step), &mut out);
            let out = String::from_utf8(out).unwrap();
            assert!(!out.contains(secret), "step {step}");
            assert_eq!(out.matches("[redacted]").count(), 3, "step {step}");
            assert!(out.ends_with(" end, no newline"));
        }
    }
}
