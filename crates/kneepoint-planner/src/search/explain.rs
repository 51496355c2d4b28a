//! The outcome's paragraph for people.

use super::StopReason;

pub(super) fn explain(
    stop: Option<StopReason>,
    lo: Option<u32>,
    hi: Option<u32>,
    breach: &Option<String>,
    (non_monotone, cliff): (bool, bool),
    confirmed: bool,
    close: bool,
) -> String {
    let mut s = match (stop, lo, hi) {
        (None, _, _) => "the search is still running".to_owned(),
        (Some(StopReason::InfeasibleAtMin), _, Some(h)) => format!(
            "an SLA ({}) already fails at the minimum concurrency {h}; lower concurrency_min or relax the SLAs",
            breach.as_deref().unwrap_or("?")
        ),
        (Some(StopReason::FeasibleAtMax), Some(l), _) => format!(
            "every SLA holds up to concurrency_max = {l}; the real limit is higher (raise concurrency_max)"
        ),
        (Some(r), Some(l), Some(h)) => format!(
            "{l} concurrent requests meet every SLA; {h} breaks {} ({})",
            breach.as_deref().unwrap_or("an SLA"),
            if r == StopReason::Converged {
                "the boundary is located within the requested precision"
            } else {
                "stopped by search_max_iterations before the precision was reached"
            }
        ),
        (Some(_), Some(l), None) => format!(
            "{l} concurrent requests meet every SLA; search_max_iterations ran out before any level failed (the limit may be higher)"
        ),
        (Some(_), None, Some(h)) => format!(
            "no level probed met every SLA ({h} breaks {}); search_max_iterations ran out before a passing level was found",
            breach.as_deref().unwrap_or("an SLA")
        ),
        (Some(_), None, None) => "the search stopped before any probe finished".to_owned(),
    };
    if non_monotone {
        s.push_str("; verdicts near the boundary disagreed (noise): the failing reading is kept");
    }
    if let (true, Some(l), Some(h)) = (cliff, lo, hi) {
        s.push_str(&format!(
            "; the SLA breaks abruptly between {l} and {h} (a cliff, far beyond the noise)"
        ));
    }
    if confirmed {
        s.push_str("; the answer was re-measured and passed again");
    } else if close && lo.is_some() {
        s.push_str("; the answer passed by a small margin and was not re-measured");
    }
    s
}

/// How the answer relates to the point estimate under measured noise (empty on exact readings).
pub(super) fn answer_rule(noisy: bool, answer: Option<u32>, estimate: Option<u32>) -> String {
    match (noisy, answer, estimate) {
        (false, _, _) | (true, _, None) => String::new(),
        (true, Some(a), Some(e)) if a == e => {
            format!("; on the measured noise, every SLA holds at {a} with probability at least 95 %")
        }
        (true, Some(a), Some(e)) => format!(
            "; the answer is {a}, the highest level at which every SLA holds with probability at least 95 % on the measured noise; the point estimate is {e}, where the readings passed but not with that confidence"
        ),
        (true, None, Some(e)) => format!(
            "; no level held every SLA with probability 95 % on the measured noise; the point estimate is {e}"
        ),
    }
}

/// The note on levels the client itself may have shaped.
pub(super) fn limited(levels: &[u32]) -> String {
    format!(
        "; the client itself was the bottleneck at {} (its CPU or scheduling lag), so the verdict there may be the client's: rerun with more client capacity",
        levels
            .iter()
            .map(u32::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    )
}
