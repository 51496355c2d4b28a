//! Sweep plans: concurrency levels run one after another, each with its own request count.

use serde::{Deserialize, Serialize};

use crate::Error;

/// The highest concurrency a plan accepts: a million requests in flight is far beyond one
/// client process (its ports alone allow about 28,000 connections to one endpoint), and a
/// typo such as `--concurrency 10000000` would otherwise prepare ten million requests.
pub const MAX_CONCURRENCY: u32 = 1_000_000;

/// One level of a sweep.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepLevel {
    /// Requests kept in flight.
    pub concurrency: u32,
    /// Measured requests at this level.
    pub request_count: u32,
}

/// A validated list of levels, run sequentially in the given order.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SweepPlan {
    levels: Vec<SweepLevel>,
}

impl SweepPlan {
    /// Every concurrency with the same `request_count` (SageMaker's `sweep_params`), raised to
    /// the level's concurrency where it is lower: a level with fewer requests than slots would
    /// never have `concurrency` requests in flight.
    pub fn uniform(concurrency: &[u32], request_count: u32) -> Result<Self, Error> {
        if request_count == 0 {
            return Err(Error::ZeroRequests {
                concurrency: concurrency.first().copied().unwrap_or(0),
            });
        }
        Self::new(
            concurrency
                .iter()
                .map(|&c| SweepLevel {
                    concurrency: c,
                    request_count: request_count.max(c),
                })
                .collect(),
        )
    }

    /// Levels with their own counts (concurrency 1 to [`MAX_CONCURRENCY`]).
    pub fn new(levels: Vec<SweepLevel>) -> Result<Self, Error> {
        if levels.is_empty() {
            return Err(Error::EmptyPlan);
        }
        let mut seen = std::collections::BTreeSet::new();
        for (index, l) in levels.iter().enumerate() {
            if l.concurrency == 0 {
                return Err(Error::ZeroConcurrency { index });
            }
            if l.concurrency > MAX_CONCURRENCY {
                return Err(Error::ConcurrencyTooHigh {
                    concurrency: l.concurrency,
                    max: MAX_CONCURRENCY,
                });
            }
            if l.request_count == 0 {
                return Err(Error::ZeroRequests {
                    concurrency: l.concurrency,
                });
            }
            if !seen.insert(l.concurrency) {
                return Err(Error::DuplicateLevel {
                    concurrency: l.concurrency,
                });
            }
        }
        Ok(SweepPlan { levels })
    }

    /// The levels, in run order.
    pub fn levels(&self) -> &[SweepLevel] {
        &self.levels
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn validation() {
        let p = SweepPlan::uniform(&[64, 256, 1024], 1024).unwrap();
        assert_eq!(p.levels().len(), 3);
        assert_eq!(
            p.levels()[1],
            SweepLevel {
                concurrency: 256,
                request_count: 1024
            }
        );
        assert_eq!(SweepPlan::uniform(&[], 1), Err(Error::EmptyPlan));
        assert_eq!(
            SweepPlan::uniform(&[1, 0], 1),
            Err(Error::ZeroConcurrency { index: 1 })
        );
        assert!(matches!(
            SweepPlan::uniform(&[10_000_000], 20),
            Err(Error::ConcurrencyTooHigh { .. })
        ));
        assert!(SweepPlan::uniform(&[MAX_CONCURRENCY], 1).is_ok());
        assert_eq!(
            SweepPlan::uniform(&[4], 0),
            Err(Error::ZeroRequests { concurrency: 4 })
        );
        assert_eq!(
            SweepPlan::uniform(&[4, 4], 1),
            Err(Error::DuplicateLevel { concurrency: 4 })
        );
    }
}
