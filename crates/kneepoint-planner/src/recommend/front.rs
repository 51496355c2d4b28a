//! The Pareto objective: which candidates have a measured level on the front of per-user speed
//! against throughput per dollar (per GPU, per instance), and which dominate the rest.

use serde::{Deserialize, Serialize};

use super::{Candidate, Recommendation};
use crate::{pareto_front, ParetoBasis, ParetoFront, ParetoPoint};

/// A candidate's place on the front.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[non_exhaustive]
pub struct ParetoStanding {
    /// What throughput was counted per.
    pub basis: ParetoBasis,
    /// Its levels on the front (concurrency per endpoint), fastest per user first.
    pub on_front: Vec<u32>,
    /// The per-user speed of its fastest level on the front.
    pub fastest_per_user: Option<f64>,
    /// Its throughput on the basis at its highest-throughput level on the front.
    pub most_throughput: Option<f64>,
    /// When none of its levels is on the front: which level of which candidate beats its best.
    pub dominated_by: Option<String>,
}

impl ParetoStanding {
    /// One line for the recommendation's explanation.
    pub fn sentence(&self) -> String {
        match (self.on_front.as_slice(), self.fastest_per_user) {
            ([], _) | (_, None) => self.dominated_by.clone().unwrap_or_default(),
            (levels, Some(u)) => format!(
                "on the Pareto front at concurrency {} (from {u:.1} output tokens/s per user to {} {})",
                levels
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", "),
                self.most_throughput.map_or("-".into(), grouped),
                self.basis.label()
            ),
        }
    }
}

/// `v` rounded to a whole number with its thousands grouped (`11,737,842`).
pub fn grouped(v: f64) -> String {
    if !v.is_finite() {
        return "-".into();
    }
    let digits = format!("{:.0}", v.abs());
    let mut out = String::with_capacity(digits.len() + digits.len() / 3 + 1);
    if v < -0.5 {
        out.push('-');
    }
    for (i, d) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(d);
    }
    out
}

/// The basis every candidate can be compared on: dollars when all have a price, GPUs when all
/// have a GPU count, else instances.
fn basis(candidates: &[&Candidate]) -> ParetoBasis {
    if candidates.iter().all(|c| c.price_per_instance_hour > 0.0) {
        ParetoBasis::Dollar
    } else if candidates.iter().all(|c| c.gpus_per_instance.is_some()) {
        ParetoBasis::Gpu
    } else {
        ParetoBasis::Instance
    }
}

/// The front over every candidate's levels that met the SLAs (throughput per instance: each
/// level's endpoint throughput over the endpoint's instances).
pub(super) fn candidates_front(candidates: &[Candidate]) -> Option<ParetoFront> {
    let with: Vec<&Candidate> = candidates.iter().filter(|c| !c.levels.is_empty()).collect();
    if with.is_empty() {
        return None;
    }
    let basis = basis(&with);
    let points: Vec<ParetoPoint> = with
        .iter()
        .flat_map(|c| {
            let n = f64::from(c.instance_count.max(1));
            c.levels.iter().map(move |p| {
                let mut q = p.clone().of(&c.name);
                q.per_instance = p.per_instance / n;
                let q = q.price_per_hour(c.price_per_instance_hour);
                match c.gpus_per_instance {
                    Some(g) => q.gpus(g),
                    None => q,
                }
            })
        })
        .collect();
    Some(pareto_front(points, basis, true))
}

/// Sets each recommendation's standing on the candidates' front.
pub(super) fn stand(candidates: &[Candidate], all: &mut [Recommendation]) {
    let Some(front) = candidates_front(candidates) else {
        return;
    };
    for r in all.iter_mut() {
        let mine: Vec<&ParetoPoint> = front
            .points
            .iter()
            .filter(|p| p.candidate.as_deref() == Some(r.name.as_str()))
            .collect();
        if mine.is_empty() {
            continue;
        }
        let mut on: Vec<&ParetoPoint> = mine.iter().copied().filter(|p| p.on_front).collect();
        on.sort_by(|a, b| b.per_user.total_cmp(&a.per_user));
        let dominated_by = on.is_empty().then(|| {
            // its fastest eligible level, and who beats it
            mine.iter()
                .filter(|p| p.dominated_by.is_some())
                .max_by(|a, b| a.per_user.total_cmp(&b.per_user))
                .map(|p| {
                    format!(
                        "{} is as fast per user and carries as many {} (within 3 %), with more of one or a shorter wait for the first token, as its level at concurrency {}",
                        p.dominated_by.as_deref().unwrap_or("another level"),
                        front.basis.label(),
                        p.concurrency,
                    )
                })
                .unwrap_or_else(|| {
                    "none of its levels could be placed (none met the SLAs with output tokens, or the client limited them)".into()
                })
        });
        r.pareto = Some(ParetoStanding {
            basis: front.basis,
            on_front: on.iter().map(|p| p.concurrency).collect(),
            fastest_per_user: on.first().map(|p| p.per_user),
            most_throughput: on
                .iter()
                .filter_map(|p| p.throughput(front.basis))
                .reduce(f64::max),
            dominated_by,
        });
    }
}
