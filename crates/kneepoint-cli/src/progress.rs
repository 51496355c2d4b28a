//! The engine's progress drawn on stderr: a bar per level, a line per probe and note, and
//! every warning (shown even with `--quiet`).

use std::sync::Mutex;

use indicatif::{ProgressBar, ProgressStyle};
use kneepoint_core::RequestRecord;
use kneepoint_engine::Observer;
use kneepoint_planner::ProbeRecord;

use crate::output::probe_line;

/// Draws progress when `show`; prints warnings always.
pub(crate) struct Progress {
    show: bool,
    bar: Mutex<Option<ProgressBar>>,
}

impl Progress {
    pub(crate) fn new(show: bool) -> Self {
        Progress {
            show,
            bar: Mutex::new(None),
        }
    }

    fn with_bar(&self, f: impl FnOnce(&ProgressBar)) {
        if let Ok(bar) = self.bar.lock() {
            if let Some(b) = bar.as_ref() {
                f(b);
            }
        }
    }
}

fn bar(label: &str, total: u64) -> ProgressBar {
    let bar = ProgressBar::new(total);
    // A timed level has no known total: count requests and show the time.
    let template = if total == 0 {
        "{prefix:>22} {pos} requests  {elapsed_precise}"
    } else {
        "{prefix:>22} [{bar:32}] {pos}/{len} requests  {elapsed_precise} (eta {eta})"
    };
    let style = ProgressStyle::with_template(template)
        .map(|s| s.progress_chars("=> "))
        .unwrap_or_else(|_| ProgressStyle::default_bar());
    bar.set_style(style);
    bar.set_prefix(label.to_owned());
    bar
}

impl Observer for Progress {
    fn level_started(&self, label: &str, total: u64) {
        if !self.show {
            return;
        }
        if let Ok(mut b) = self.bar.lock() {
            *b = Some(bar(label, total));
        }
    }

    fn request_finished(&self, _record: &RequestRecord) {
        self.with_bar(|b| b.inc(1));
    }

    fn level_finished(&self, _label: &str) {
        if let Ok(mut b) = self.bar.lock() {
            if let Some(b) = b.take() {
                b.finish_and_clear();
            }
        }
    }

    fn probe_decided(&self, probe: &ProbeRecord) {
        if self.show {
            eprintln!("{}", probe_line(probe));
        }
    }

    fn note(&self, message: &str) {
        if self.show {
            eprintln!("{message}");
        }
    }

    fn warning(&self, message: &str) {
        eprintln!("warning: {message}");
    }
}
