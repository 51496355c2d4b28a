//! What a trial found, as the caller reports it to the search.

/// What a trial found.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TrialOutcome {
    /// The score (`None`: nothing usable: it failed to start, or met no SLA).
    pub score: Option<f64>,
    /// The score's relative standard error.
    pub spread: f64,
    /// What the trial cost, in instance-hours.
    pub instance_hours: f64,
    /// Whether something was launched for it (false: nothing was started, or an earlier
    /// launch's measurement stood for it); only launches count against `max_launches` and
    /// the estimate of a launch's hours.
    pub launched: bool,
    /// Whether the launch failed to start (it never answered): it counts against the budget,
    /// but its hours do not estimate what a measured launch costs.
    pub failed_start: bool,
}

impl TrialOutcome {
    /// A measured `score` with relative standard error `spread`, at `instance_hours`.
    pub fn measured(score: f64, spread: f64, instance_hours: f64) -> Self {
        TrialOutcome {
            score: Some(score),
            spread,
            instance_hours,
            launched: true,
            failed_start: false,
        }
    }

    /// Nothing usable (it started but met no SLA, or failed part way), at `instance_hours`.
    pub fn unusable(instance_hours: f64) -> Self {
        TrialOutcome {
            score: None,
            spread: 0.0,
            instance_hours,
            launched: true,
            failed_start: false,
        }
    }

    /// A launch that failed to start, after `instance_hours` (from its launch until it failed
    /// and was taken down): nothing usable, one launch and those hours spent.
    pub fn did_not_start(instance_hours: f64) -> Self {
        TrialOutcome {
            failed_start: true,
            ..TrialOutcome::unusable(instance_hours)
        }
    }

    /// The same outcome, not counted as a launch.
    pub fn without_launch(mut self) -> Self {
        self.launched = false;
        self
    }
}
