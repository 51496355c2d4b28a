//! The results store from the command line: each run recorded as it ends (`--store`,
//! `--no-store`, `--label`), `kneepoint import DIR...` for folders written before, and
//! `kneepoint history`.

use std::path::{Path, PathBuf};

use clap::Args;
use kneepoint_config::Publish;
use kneepoint_store::{Host, Location, Recorded, RunFilter, RunRecord, Store};

/// `kneepoint import`.
#[derive(Debug, Clone, Args)]
pub struct ImportArgs {
    /// Artifact folders of sweeps, searches, length sweeps or recommendations.
    #[arg(required = true, value_name = "DIR")]
    pub dirs: Vec<PathBuf>,
    /// The results store (default: $KNEEPOINT_STORE, else $XDG_DATA_HOME/kneepoint/results.db).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// A KEY=VALUE label stored with each run (repeatable).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
}

/// Which stored runs: the store, and the filters `history` lists by and `check`'s `latest`
/// picks from.
#[derive(Debug, Clone, Args)]
pub struct StoredRuns {
    /// The results store (default: $KNEEPOINT_STORE, else $XDG_DATA_HOME/kneepoint/results.db).
    #[arg(long, value_name = "URL")]
    pub store: Option<String>,
    /// Runs whose endpoint contains this text.
    #[arg(long, value_name = "TEXT")]
    pub endpoint: Option<String>,
    /// Runs whose model contains this text.
    #[arg(long, value_name = "TEXT")]
    pub model: Option<String>,
    /// Runs with this KEY=VALUE label (repeatable: all of them).
    #[arg(long = "label", value_name = "KEY=VALUE")]
    pub labels: Vec<String>,
}

impl StoredRuns {
    /// The store named, else the default one.
    pub fn location(&self) -> anyhow::Result<Location> {
        location(self.store.as_deref())
    }

    /// The filters, labels checked.
    pub fn filter(&self) -> anyhow::Result<RunFilter> {
        let mut filter = RunFilter::new();
        filter.endpoint = self.endpoint.clone();
        filter.model = self.model.clone();
        for (k, v) in kneepoint_config::parse_labels(&self.labels)? {
            filter = filter.label(&k, &v);
        }
        Ok(filter)
    }
}

/// `kneepoint history`.
#[derive(Debug, Clone, Args)]
pub struct HistoryArgs {
    /// The store and the filters.
    #[command(flatten)]
    pub runs: StoredRuns,
    /// Only runs of this command (sweep, search, recommend, length-sweep).
    #[arg(long, value_name = "COMMAND")]
    pub command: Option<String>,
    /// At most this many runs, newest first.
    #[arg(long, value_name = "N", default_value_t = 50)]
    pub limit: usize,
    /// The runs as JSON (an array, newest first).
    #[arg(long)]
    pub json: bool,
}

/// Where runs are recorded: `None` with `--no-store`. A location that cannot be parsed is an
/// error before anything is measured.
pub fn target(p: &Publish) -> anyhow::Result<Option<Location>> {
    if p.no_store {
        return Ok(None);
    }
    location(p.store.as_deref()).map(Some)
}

fn location(given: Option<&str>) -> anyhow::Result<Location> {
    let location = match given {
        Some(s) => Location::parse(s)?,
        None => Location::from_env()?,
    };
    // its password is scrubbed from whatever is written or printed from now on
    for secret in location.secrets() {
        kneepoint_core::secrets::register(&secret);
    }
    Ok(location)
}

/// How long a run's end may wait on the store before it gives up with a warning (the folder
/// keeps everything; `kneepoint import` adds it later).
const RECORD_DEADLINE: std::time::Duration = std::time::Duration::from_secs(60);

/// Opens the store named for reading (never made or changed by a read).
pub fn open_read(location: &Location) -> anyhow::Result<Store> {
    Ok(Store::open_read(location)?)
}

/// Records the run in `dir` in the store `p` names, as it ends. A store that cannot be opened
/// or written is a warning: the folder holds everything, and `kneepoint import` adds it later.
pub fn record(p: &Publish, dir: &Path) {
    let location = match target(p) {
        Ok(Some(l)) => l,
        Ok(None) => return,
        Err(e) => {
            eprintln!("warning: the run was not recorded in the results store: {e:#}");
            return;
        }
    };
    let labels = p.labels.clone();
    let dir = dir.to_owned();
    // The folder keeps the labels first: a store that cannot be reached loses nothing.
    if let Err(e) = kneepoint_store::write_labels(&dir, &labels) {
        eprintln!("warning: the run's labels were not written to its folder: {e}");
    }
    // The store blocks (its PostgreSQL client on a thread of its own, with deadlines): off
    // the async threads.
    let outcome = std::thread::scope(|s| {
        s.spawn(|| -> anyhow::Result<(String, Recorded, String)> {
            let mut run = RunRecord::from_folder(&dir)?;
            run.labels.extend(labels);
            run.host = Some(Host::this(env!("CARGO_PKG_VERSION")));
            let options = kneepoint_store::OpenOptions::default()
                .deadlines(kneepoint_store::Deadlines::default().with_total(RECORD_DEADLINE));
            let mut store = Store::open_with(&location, &options)?;
            let recorded = store.record(&run)?;
            Ok((run.id, recorded, store.location()))
        })
        .join()
    });
    match outcome {
        Ok(Ok((id, _, at))) => eprintln!("recorded as run {id} in the results store {at}"),
        // the store's error names the store (without its password)
        Ok(Err(e)) => eprintln!(
            "warning: the run was not recorded in the results store: {}; its folder holds everything, labels included (kneepoint import {} adds it later)",
            crate::error_text(&e),
            dir.display()
        ),
        Err(_) => eprintln!("warning: recording the run in the results store failed"),
    }
}

/// `kneepoint import`: each folder added (or found already stored).
pub fn import(args: &ImportArgs) -> anyhow::Result<()> {
    let location = location(args.store.as_deref())?;
    let labels = kneepoint_config::parse_labels(&args.labels)?;
    let mut store = Store::open(&location)?;
    let mut failed = 0;
    for dir in &args.dirs {
        // the folder's own labels, and the flags' over them
        let run = RunRecord::from_folder(dir).map(|mut r| {
            r.labels.extend(labels.clone());
            r
        });
        match run.map_err(anyhow::Error::from).and_then(|r| {
            let recorded = store.record(&r)?;
            Ok((r.id, recorded))
        }) {
            Ok((id, Recorded::Added)) => println!("{}: stored as run {id}", dir.display()),
            Ok((id, _)) => println!("{}: already stored as run {id}", dir.display()),
            Err(e) => {
                failed += 1;
                eprintln!("error: {}: {}", dir.display(), crate::error_text(&e));
            }
        }
    }
    if failed > 0 {
        anyhow::bail!(
            "{failed} of {} folders could not be imported",
            args.dirs.len()
        );
    }
    Ok(())
}

/// `kneepoint history`: the stored runs, newest first.
pub fn history(args: &HistoryArgs) -> anyhow::Result<()> {
    let location = args.runs.location()?;
    let mut store = match Store::open_read(&location) {
        Ok(s) => s,
        // nothing recorded yet: an empty history, and no store made by reading it
        Err(kneepoint_store::Error::Missing { .. }) => {
            if args.json {
                println!("[]");
            } else {
                println!("no runs recorded in {} yet", location.display());
            }
            return Ok(());
        }
        Err(e) => return Err(e.into()),
    };
    let mut filter = args.runs.filter()?.limit(args.limit);
    filter.command = args.command.clone();
    let runs = store.runs(&filter)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&runs)?);
        return Ok(());
    }
    if runs.is_empty() {
        println!("no runs in {} match", store.location());
        return Ok(());
    }
    print!("{}", kneepoint_store::history_table(&runs));
    Ok(())
}
