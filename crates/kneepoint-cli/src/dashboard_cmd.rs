//! `kneepoint dashboard`: the results store as a web page, served on loopback by default.
//! Routes: `/` (the runs, filtered by the query, and their trends), `/runs/ID/report.html`
//! (the run's own report, from its folder while the folder exists), `/runs/ID.json`.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::path::PathBuf;

use bytes::Bytes;
use clap::Args;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
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
}

/// Serves until interrupted.
pub async fn run(args: &DashboardArgs) -> anyhow::Result<()> {
    let location = match &args.store {
        Some(s) => Location::parse(s)?,
        None => Location::from_env()?,
    };
    // Opened once up front: a store that cannot be opened is an error now, not on each page.
    Store::open(&location)?;
    let listener = tokio::net::TcpListener::bind(SocketAddr::new(args.bind, args.port)).await?;
    let addr = listener.local_addr()?;
    println!(
        "dashboard: http://{addr}/ (store {}; Ctrl-C stops it)",
        location.display()
    );
    use std::io::Write as _;
    let _ = std::io::stdout().flush();
    loop {
        let (stream, _) = tokio::select! {
            a = listener.accept() => a?,
            _ = tokio::signal::ctrl_c() => return Ok(()),
        };
        let location = location.clone();
        tokio::spawn(async move {
            let service = service_fn(move |req| answer(location.clone(), req));
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await;
        });
    }
}

type Page = Response<Full<Bytes>>;

fn page(status: StatusCode, kind: &str, body: impl Into<Bytes>) -> Page {
    let mut r = Response::new(Full::new(body.into()));
    *r.status_mut() = status;
    if let Ok(v) = kind.parse() {
        r.headers_mut().insert(hyper::header::CONTENT_TYPE, v);
    }
    r
}

async fn answer(location: Location, req: Request<Incoming>) -> Result<Page, Infallible> {
    if req.method() != hyper::Method::GET {
        return Ok(page(
            StatusCode::METHOD_NOT_ALLOWED,
            "text/plain",
            "GET only",
        ));
    }
    let path = req.uri().path().to_owned();
    let query = req.uri().query().unwrap_or("").to_owned();
    // The store's drivers block (PostgreSQL's runs a small runtime of its own): off the
    // async threads.
    let done = tokio::task::spawn_blocking(move || route(&location, &path, &query)).await;
    Ok(done.unwrap_or_else(|_| page(StatusCode::INTERNAL_SERVER_ERROR, "text/plain", "failed")))
}

fn route(location: &Location, path: &str, query: &str) -> Page {
    let html = "text/html; charset=utf-8";
    let mut store = match Store::open(location) {
        Ok(s) => s,
        Err(e) => return page(StatusCode::SERVICE_UNAVAILABLE, "text/plain", e.to_string()),
    };
    if path == "/" {
        let filter = kneepoint_store::filter_from_query(query);
        let runs = store.runs(&filter).map(|runs| {
            // the trends need each run's levels
            runs.into_iter()
                .map(|r| store.run(&r.id).ok().flatten().unwrap_or(r))
                .collect::<Vec<_>>()
        });
        return match runs {
            Ok(runs) => page(
                StatusCode::OK,
                html,
                kneepoint_store::dashboard_page(&runs, &filter, &store.location()),
            ),
            Err(e) => page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                e.to_string(),
            ),
        };
    }
    let Some(rest) = path.strip_prefix("/runs/") else {
        return page(StatusCode::NOT_FOUND, "text/plain", "not found");
    };
    let (id, what) = match rest.split_once('/') {
        Some((id, "report.html")) => (id, "report"),
        None => match rest.strip_suffix(".json") {
            Some(id) => (id, "json"),
            None => return page(StatusCode::NOT_FOUND, "text/plain", "not found"),
        },
        _ => return page(StatusCode::NOT_FOUND, "text/plain", "not found"),
    };
    // ids are hex digits: nothing else reaches the store or the file system
    if id.is_empty() || !id.bytes().all(|b| b.is_ascii_hexdigit()) {
        return page(StatusCode::NOT_FOUND, "text/plain", "not found");
    }
    let run = match store.run(id) {
        Ok(Some(r)) => r,
        Ok(None) => return page(StatusCode::NOT_FOUND, "text/plain", format!("no run {id}")),
        Err(e) => {
            return page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                e.to_string(),
            )
        }
    };
    if what == "json" {
        return match serde_json::to_vec_pretty(&run) {
            Ok(b) => page(StatusCode::OK, "application/json", b),
            Err(e) => page(
                StatusCode::INTERNAL_SERVER_ERROR,
                "text/plain",
                e.to_string(),
            ),
        };
    }
    let report = PathBuf::from(&run.artifact_dir).join(kneepoint_core::folder::REPORT_HTML);
    match std::fs::read(&report) {
        Ok(b) => page(StatusCode::OK, html, b),
        Err(_) => page(
            StatusCode::NOT_FOUND,
            html,
            format!(
                "<!doctype html><meta charset=\"utf-8\"><title>report gone</title><p>Run {id}'s folder ({}) no longer holds report.html: the store keeps its figures (<a href=\"/runs/{id}.json\">{id}.json</a>), the folder its report.</p>",
                kneepoint_report::esc(&run.artifact_dir)
            ),
        ),
    }
}
