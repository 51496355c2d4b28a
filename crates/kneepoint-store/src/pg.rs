//! PostgreSQL on a thread of its own. The `postgres` client blocks on a small Tokio runtime
//! of its own, which panics when its calls are made from inside another runtime (as every
//! command of an async program makes them); here the client lives on a plain thread and each
//! call is a job sent to it, whose answer is awaited with a deadline. So the store works from
//! any thread, async or not, and a frozen server (stopped, unreachable, holding a lock) costs
//! the caller a deadline, not the run: the stuck thread is left behind and the store refuses
//! later calls.

use std::sync::mpsc;
use std::time::{Duration, Instant};

use crate::tls::Tls;
use crate::Error;

/// How long the store waits for PostgreSQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub struct Deadlines {
    /// Connecting: the TCP connection, TLS and the start-up exchange together.
    pub connect: Duration,
    /// One call: a query, a migration, or one run's write (one transaction).
    pub statement: Duration,
    /// Everything from opening the store, when set (a run recording itself as it ends).
    pub total: Option<Duration>,
}

impl Default for Deadlines {
    fn default() -> Self {
        Deadlines {
            connect: Duration::from_secs(10),
            statement: Duration::from_secs(60),
            total: None,
        }
    }
}

impl Deadlines {
    /// These deadlines with a total one.
    pub fn with_total(mut self, total: Duration) -> Self {
        self.total = Some(total);
        self
    }
}

type Job = Box<dyn FnOnce(&mut postgres::Client) + Send>;

/// A PostgreSQL client on its own thread.
pub(crate) struct PgConn {
    jobs: Option<mpsc::Sender<Job>>,
    /// The server, printable.
    pub(crate) location: String,
    deadlines: Deadlines,
    opened: Instant,
}

impl PgConn {
    pub(crate) fn open(
        mut config: postgres::Config,
        tls: Tls,
        location: String,
        deadlines: Deadlines,
    ) -> Result<PgConn, Error> {
        let opened = Instant::now();
        config.connect_timeout(deadlines.connect);
        config.application_name("kneepoint");
        config.keepalives(true);
        config.keepalives_idle(Duration::from_secs(30));
        let (jobs, inbox) = mpsc::channel::<Job>();
        let (ready, connected) = mpsc::sync_channel::<Result<(), postgres::Error>>(1);
        std::thread::Builder::new()
            .name("kneepoint-store-postgres".into())
            .spawn(move || {
                let client = match tls {
                    Tls::Off => config.connect(postgres::NoTls),
                    Tls::On(make) => config.connect(*make),
                };
                match client {
                    Ok(mut client) => {
                        if ready.send(Ok(())).is_err() {
                            return;
                        }
                        for job in inbox {
                            job(&mut client);
                        }
                    }
                    Err(e) => {
                        let _ = ready.send(Err(e));
                    }
                }
            })
            .map_err(|source| Error::Thread { source })?;
        let wait = limit(deadlines.connect, deadlines.total, opened);
        match connected.recv_timeout(wait) {
            Ok(Ok(())) => Ok(PgConn {
                jobs: Some(jobs),
                location,
                deadlines,
                opened,
            }),
            Ok(Err(source)) => Err(Error::Postgres { location, source }),
            Err(_) => Err(Error::Timeout {
                location,
                what: "connecting".into(),
                after: wait,
            }),
        }
    }

    /// Runs `f` on the client's thread and waits for its answer within the deadlines.
    pub(crate) fn call<T, F>(&mut self, what: &str, f: F) -> Result<T, Error>
    where
        T: Send + 'static,
        F: FnOnce(&mut postgres::Client) -> Result<T, postgres::Error> + Send + 'static,
    {
        let Some(jobs) = &self.jobs else {
            return Err(Error::Timeout {
                location: self.location.clone(),
                what: format!("{what} (an earlier call timed out: the connection is abandoned)"),
                after: Duration::ZERO,
            });
        };
        let wait = limit(self.deadlines.statement, self.deadlines.total, self.opened);
        if wait.is_zero() {
            // nothing left of the total: not even sent (it would commit unseen)
            return Err(Error::Timeout {
                location: self.location.clone(),
                what: what.to_owned(),
                after: self.deadlines.total.unwrap_or_default(),
            });
        }
        let (answer, answered) = mpsc::sync_channel(1);
        let job: Job = Box::new(move |client| {
            let _ = answer.send(f(client));
        });
        if jobs.send(job).is_err() {
            self.jobs = None;
            return Err(Error::Closed {
                location: self.location.clone(),
            });
        }
        match answered.recv_timeout(wait) {
            Ok(Ok(v)) => Ok(v),
            Ok(Err(source)) => Err(Error::Postgres {
                location: self.location.clone(),
                source,
            }),
            Err(mpsc::RecvTimeoutError::Timeout) => {
                // The thread is stuck on the server: leave it, and refuse further calls.
                self.jobs = None;
                Err(Error::Timeout {
                    location: self.location.clone(),
                    what: what.to_owned(),
                    after: wait,
                })
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                self.jobs = None;
                Err(Error::Closed {
                    location: self.location.clone(),
                })
            }
        }
    }
}

/// The wait for one step: its own deadline, or what is left of the total, whichever is less.
fn limit(step: Duration, total: Option<Duration>, opened: Instant) -> Duration {
    match total {
        Some(t) => step.min(t.saturating_sub(opened.elapsed())),
        None => step,
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    /// Issue 57.2: a server that accepts connections and then says nothing (as a stopped
    /// postmaster does: the kernel still completes the TCP handshake) costs the connect
    /// deadline, not forever.
    #[test]
    fn a_silent_server_costs_the_connect_deadline() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let config: postgres::Config = format!("postgres://u:pw@127.0.0.1:{port}/db")
            .parse()
            .unwrap();
        let deadlines = Deadlines {
            connect: Duration::from_millis(300),
            ..Deadlines::default()
        };
        let started = Instant::now();
        let e = PgConn::open(config, Tls::Off, "127.0.0.1".into(), deadlines)
            .err()
            .unwrap();
        assert!(matches!(e, Error::Timeout { .. }), "{e}");
        assert!(e.to_string().contains("connecting"), "{e}");
        // generous: the deadline is 0.3 s
        assert!(started.elapsed() < Duration::from_secs(20));
        drop(listener);
    }

    /// The total deadline caps each step.
    #[test]
    fn the_total_deadline_caps_each_step() {
        let opened = Instant::now() - Duration::from_secs(5);
        assert_eq!(
            limit(
                Duration::from_secs(60),
                Some(Duration::from_secs(4)),
                opened
            ),
            Duration::ZERO
        );
        assert_eq!(
            limit(Duration::from_secs(2), None, opened),
            Duration::from_secs(2)
        );
    }
}
