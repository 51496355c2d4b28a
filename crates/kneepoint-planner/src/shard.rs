//! Splitting one sweep across N processes (`--shard K/N`): each level's concurrency and request
//! count are shared out so that the shards add up to the whole, and each shard draws its own
//! prompts (a seed of its own, derived from the sweep's).

use serde::{Deserialize, Serialize};

use crate::{Error, SweepLevel, SweepPlan};

/// Shard `index` of `count` (0-based, as Kubernetes' completion index is).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    /// 0 ≤ index < count.
    pub index: u32,
    /// Shards in all (at least 1).
    pub count: u32,
}

impl Shard {
    /// Parses `K/N`.
    pub fn parse(s: &str) -> Result<Self, Error> {
        let bad = || Error::InvalidSearch {
            field: "shard",
            reason: format!(
                "{s:?}: give K/N with 0 ≤ K < N, e.g. 0/4 (Kubernetes' completion index)"
            ),
        };
        let (k, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            k.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 || index >= count || count > 10_000 {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }

    /// This shard's part of `total`: `total / count`, one more for the first `total % count`
    /// shards, so that the parts add up to `total`.
    pub fn share(&self, total: u32) -> u32 {
        total / self.count + u32::from(self.index < total % self.count)
    }

    /// This shard's part of a rate (requests/s).
    pub fn share_rate(&self, rate: f64) -> f64 {
        rate / f64::from(self.count)
    }

    /// The seed of this shard's workload: the sweep's seed mixed with the index (SplitMix64),
    /// so that shards do not send the same prompts (a server's prefix cache would see through
    /// identical ones); shard 0 of 1 keeps the sweep's seed.
    pub fn seed(&self, seed: u64) -> u64 {
        if self.count == 1 {
            return seed;
        }
        let mut z = seed ^ (u64::from(self.index) + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
}

impl SweepPlan {
    /// The plan shard `s` runs: each level's concurrency and request count shared out. Every
    /// level needs at least one slot per shard.
    pub fn shard(&self, s: Shard) -> Result<SweepPlan, Error> {
        let levels = self
            .levels()
            .iter()
            .map(|l| {
                if l.concurrency < s.count {
                    return Err(Error::InvalidSearch {
                        field: "shard",
                        reason: format!(
                            "concurrency {} cannot be split across {} shards: every shard needs at least one slot",
                            l.concurrency, s.count
                        ),
                    });
                }
                let concurrency = s.share(l.concurrency);
                Ok(SweepLevel {
                    concurrency,
                    request_count: s.share(l.request_count).max(concurrency),
                })
            })
            .collect::<Result<Vec<_>, _>>()?;
        SweepPlan::new(levels)
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_and_seeds_differ() {
        let shards: Vec<Shard> = (0..4)
            .map(|i| Shard::parse(&format!("{i}/4")).unwrap())
            .collect();
        for total in [4u32, 7, 64, 1025] {
            assert_eq!(shards.iter().map(|s| s.share(total)).sum::<u32>(), total);
        }
        assert_eq!(
            shards.iter().map(|s| s.share(7)).collect::<Vec<_>>(),
            [2, 2, 2, 1]
        );
        let seeds: std::collections::BTreeSet<u64> = shards.iter().map(|s| s.seed(42)).collect();
        assert_eq!(seeds.len(), 4);
        assert_eq!(Shard::parse("0/1").unwrap().seed(42), 42);
        for bad in ["4/4", "1", "a/b", "0/0", "-1/4"] {
            assert!(Shard::parse(bad).is_err(), "{bad}");
        }
        let plan = SweepPlan::uniform(&[8, 32], 100).unwrap();
        let parts: Vec<SweepPlan> = shards.iter().map(|s| plan.shard(*s).unwrap()).collect();
        for (i, l) in plan.levels().iter().enumerate() {
            let c: u32 = parts.iter().map(|p| p.levels()[i].concurrency).sum();
            let n: u32 = parts.iter().map(|p| p.levels()[i].request_count).sum();
            assert_eq!((c, n), (l.concurrency, l.request_count));
        }
        assert!(SweepPlan::uniform(&[2], 8)
            .unwrap()
            .shard(shards[3])
            .is_err());
    }
}
