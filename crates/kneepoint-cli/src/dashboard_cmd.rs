//! `kneepoint dashboard`: the results store as a web page, served on loopback by default.
//! Routes: `/` (the runs, filtered by the query, and their trends), `/runs/ID/report.html`
//! (the run's own report, streamed from its folder while the folder exists), `/runs/ID.json`.
//! The store is opened once, for reading (never made by the dashboard), and reopened after
//! an error; connections are capped, and one that sends nothing is closed.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use clap::Args;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt as _, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use kneepoint_store::{Location, Store};

/// `kneepoint dashboard`.
#[derive(Debug, Clone, Args)]
pub struct DashboardArgs {
    /// The results store (default: $KNEEPOINT_STORE, else $XDG_DATA_HOME/kneepoint/results.db).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// The port (0: any free one; the address is printed).
    #[arg(long, value_name = "N", default_value_t = 8765)]
    pub port: u16,
    /// The address to listen on (loopback by default: the page lists endpoints and settings).
    #[arg(long, value_name = "IP", default_value = "127.0.0.1")]
    pub bind: std::net::IpAddr,
    /// Seconds a client may take to send a request's headers, and may stay idle between
    /// requests, before its connection is closed.
    #[arg(long, value_name = "S", default_value_t = 10.0)]
    pub header_timeout_s: f64,
}

/// The longest a connection is kept, whatever it does (a 1 GiB report streams in seconds on
/// loopback).
const CONNECTION_DEADLINE: Duration = Duration::from_secs(300);
/// Chunks a report is streamed in.
const CHUNK: usize = 64 * 1024;

/// Connections served at once: a quarter of the descriptors this process may open (each
/// takes one, and the store and the reports take others), from 8 to 1,024. Others wait in
/// the kernel's queue.
fn connection_cap() -> usize {
    let limit = kneepoint_transport::raise_fd_limit().unwrap_or(1024);
    usize::try_from(limit / 4).unwrap_or(1024).clamp(8, 1024)
}

/// The store, opened once for reading and reopened after an error (a restarted server), at
/// most once every [`RETRY`]: a server that hangs costs each attempt a deadline (and, on
/// PostgreSQL, a thread left waiting on it), so requests meanwhile get 503 at once.
struct Shared {
    location: Location,
    store: Mutex<Option<Store>>,
    failed_at: Mutex<Option<std::time::Instant>>,
}

/// How long after a failure the store is tried again.
const RETRY: Duration = Duration::from_secs(5);

impl Shared {
    /// Runs `f` on the store, opening it when it is not open; an error closes it.
    fn with<T>(
        &self,
        f: impl FnOnce(&mut Store) -> Result<T, kneepoint_store::Error>,
    ) -> Result<T, kneepoint_store::Error> {
        let mut guard = self.store.lock().unwrap_or_else(|p| p.into_inner());
        let mut failed_at = self.failed_at.lock().unwrap_or_else(|p| p.into_inner());
        let store = match guard.as_mut() {
            Some(s) => s,
            None => {
                if failed_at.is_some_and(|t| t.elapsed() < RETRY) {
                    return Err(kneepoint_store::Error::Unavailable {
                        location: self.location.display(),
                        retry_s: RETRY.as_secs(),
                    });
                }
                match Store::open_read(&self.location) {
                    Ok(s) => guard.insert(s),
                    Err(e) => {
                        // not yet made is no failure: it is served empty
                        if !matches!(e, kneepoint_store::Error::Missing { .. }) {
                            *failed_at = Some(std::time::Instant::now());
                        }
                        return Err(e);
                    }
                }
            }
        };
        let out = f(store);
        // the connection's failures close it; a question's own (an ambiguous id) do not
        use kneepoint_store::Error as E;
        if matches!(
            out,
            Err(E::Postgres { .. } | E::Timeout { .. } | E::Closed { .. } | E::Sqlite { .. })
        ) {
            *guard = None;
            *failed_at = Some(std::time::Instant::now());
        }
        out
    }
}

/// Serves until interrupted.
pub async fn run(args: &DashboardArgs) -> anyhow::Result<()> {
    let location = match &args.store {
        Some(s) => Location::parse(s)?,
        None => Location::from_env()?,
    };
    for secret in location.secrets() {
        kneepoint_core::secrets::register(&secret);
    }
    let header_deadline = Duration::try_from_secs_f64(args.header_timeout_s)
        .ok()
        .filter(|d| !d.is_zero() && *d <= Duration::from_secs(3600))
        .ok_or_else(|| {
            anyhow::anyhow!(
                "--header-timeout-s must be more than 0 and at most 3600, not {}",
                args.header_timeout_s
            )
        })?;
    // Opened once up front, for reading: a store that cannot be opened is an error now, not on
    // each page; one that does not exist yet is served empty (reading never makes it).
    let first = {
        let location = location.clone();
        tokio::task::spawn_blocking(move || Store::open_read(&location)).await?
    };
    let store = match first {
        Ok(s) => Some(s),
        Err(kneepoint_store::Error::Missing { .. }) => None,
        Err(e) => return Err(e.into()),
    };
    let shared = Arc::new(Shared {
        location: location.clone(),
        store: Mutex::new(store),
        failed_at: Mutex::new(None),
    });
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port)).await?;
    let addr = listener.local_addr()?;
    println!(
        "dashboard: http://{addr}/ (store {}; Ctrl-C stops it)",
        location.display()
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    let slots = Arc::new(tokio::sync::Semaphore::new(connection_cap()));
    let ctrl_c = tokio::signal::ctrl_c();
    tokio::pin!(ctrl_c);
    loop {
        // a free slot first: past the cap, connections wait in the kernel's queue
        let permit = tokio::select! {
            p = slots.clone().acquire_owned() => p?,
            _ = &mut ctrl_c => return Ok(()),
        };
        let stream = tokio::select! {
            a = listener.accept() => match a {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // out of descriptors, or a connection reset before it was taken: the
                    // server stays up and tries again shortly
                    tracing::warn!("dashboard: accepting a connection failed: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            },
            _ = &mut ctrl_c => return Ok(()),
        };
        let shared = shared.clone();
        tokio::spawn(async move {
            let _permit = permit;
            let service = service_fn(move |req| answer(shared.clone(), req));
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new())
                .header_read_timeout(header_deadline);
            let conn = http.serve_connection(TokioIo::new(stream), service);
            let _ = tokio::time::timeout(CONNECTION_DEADLINE, conn).await;
        });
    }
}

type Body = BoxBody<Bytes, std::io::Error>;
type Page = Response<Body>;

fn page(status: StatusCode, kind: &str, body: impl Into<Bytes>) -> Page {
    let body = Full::new(body.into())
        .map_err(|never| match never {})
        .boxed();
    let mut r = Response::new(body);
    *r.status_mut() = status;
    if let Ok(v) = kind.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

async fn answer(shared: Arc<Shared>, req: Request<Incoming>) -> Result<Page, Infallible> {
    if req.method() != hyper::Method::GET {
        return Ok(page(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only",
        ));
    }
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    // The store's drivers block: off the async threads.
    let done = tokio::task::spawn_blocking(move || route(&shared, &path, &query)).await;
    let routed = match done {
        Ok(r) => r,
        Err(_) => Routed::Page(page(
            StatusCode::INTERNAL_SERVER_ERROR,
            "text/plain",
            "failed",
        )),
    };
    Ok(match routed {
        Routed::Page(p) => p,
        Routed::Report(file, len) => stream_file(file, len),
    })
}

/// A page, or a report file to stream.
enum Routed {
    Page(Page),
    Report(std::fs::File, u64),
}

/// The file as the response's body, read a chunk at a time (a report of any size costs one
/// chunk of memory per connection).
fn stream_file(file: std::fs::File, len: u64) -> Page {
    let file = tokio::fs::File::from_std(file);
    let chunks = futures_util::stream::unfold(file, |mut file| async move {
        use tokio::io::AsyncReadExt as _;
        let mut buf = vec![0u8; CHUNK];
        match file.read(&mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(Frame::data(Bytes::from(buf))), file))
            }
            Err(e) => Some((Err(e), file)),
        }
    });
    let mut r = Response::new(StreamBody::new(chunks).boxed());
    let headers = r.headers_mut();
    headers.insert(
        hyper::header::CONTENT_TYPE,
        hyper::header::HeaderValue::from_static("text/html; charset=utf-8"),
    );
    headers.insert(hyper::header::CONTENT_LENGTH, len.into());
    r
}

fn route(shared: &Shared, path: &str, query: &str) -> Routed {
    let html = "text/html; charset=utf-8";
    let fail =
        |status, e: kneepoint_store::Error| Routed::Page(page(status, "text/plain", e.to_string()));
    if path == "/" {
        let filter = match kneepoint_store::parse_filter_query(query) {
            Ok(f) => f,
            Err(e) => return fail(StatusCode::BAD_REQUEST, e),
        };
        // the trends need each run's levels: read with them, in a few queries
        return match shared.with(|store| store.runs_with_levels(&filter)) {
            Ok(runs) => Routed::Page(page(
                StatusCode::OK,
                html,
                kneepoint_store::dashboard_page(&runs, &filter, &shared.location.display()),
            )),
            // nothing recorded yet: an empty page
            Err(kneepoint_store::Error::Missing { .. }) => Routed::Page(page(
                StatusCode::OK,
                html,
                kneepoint_store::dashboard_page(&[], &filter, &shared.location.display()),
            )),
            Err(e) => fail(StatusCode::SERVICE_UNAVAILABLE, e),
        };
    }
    let Some(rest) = path.strip_prefix("/runs/") else {
        return Routed::Page(page(StatusCode::NOT_FOUND, "text/plain", "not found"));
    };
    let (id, what) = match rest.split_once('/') {
        Some((id, "report.html")) => (id, "report"),
        None => match rest.strip_suffix(".json") {
            Some(id) => (id, "json"),
            None => return Routed::Page(page(StatusCode::NOT_FOUND, "text/plain", "not found")),
        },
        _ => return Routed::Page(page(StatusCode::NOT_FOUND, "text/plain", "not found")),
    };
    // ids are hex digits: nothing else reaches the store or the file system
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Routed::Page(page(StatusCode::NOT_FOUND, "text/plain", "not found"));
    }
    let run = match shared.with(|store| store.run(id)) {
        Ok(Some(r)) => r,
        Ok(None) | Err(kneepoint_store::Error::Missing { .. }) => {
            return Routed::Page(page(
                StatusCode::NOT_FOUND,
                "text/plain",
                format!("no run {id}"),
            ))
        }
        Err(e @ kneepoint_store::Error::Ambiguous { .. }) => return fail(StatusCode::NOT_FOUND, e),
        Err(e) => return fail(StatusCode::INTERNAL_SERVER_ERROR, e),
    };
    if what == "json" {
        return Routed::Page(match serde_json::to_vec_pretty(&run) {
            Ok(b) => page(StatusCode::OK, "application/json", b),
            Err(e) => page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                e.to_string(),
            ),
        });
    }
    let report = PathBuf::from(&run.artifact_dir).join(kneepoint_core::folder::REPORT_HTML);
    match std::fs::File::open(&report).and_then(|f| f.metadata().map(|m| (f, m))) {
        Ok((f, m)) if m.is_file() => Routed::Report(f, m.len()),
        _ => Routed::Page(page(
            StatusCode::NOT_FOUND,
            html,
            format!(
                "<!doctype html><meta charset=\"utf-8\"><title>report gone</title><p>Run {id}'s folder ({}) no longer holds report.html: the store keeps its figures (<a href=\"/runs/{id}.json\">{id}.json</a>), the folder its report.</p>",
                kneepoint_report::esc(&run.artifact_dir)
            ),
        )),
    }
}
