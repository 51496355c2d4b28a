//! `--request-count 256,512,2048` and `request_count = [256, 512, 2048]`: one measured request
//! count for every level, or one per level (paired with the levels in order), as GuideLLM and
//! the default sweep do.

use serde::Deserialize;

/// Measured requests per level: one count for all, or one per level.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RequestCounts(Vec<u32>);

impl RequestCounts {
    /// The counts, checked: at least one, each at least 1.
    pub fn new(counts: Vec<u32>) -> Result<Self, String> {
        if counts.is_empty() {
            return Err("request_count needs at least one count".into());
        }
        if counts.contains(&0) {
            return Err("request_count must be at least 1".into());
        }
        Ok(RequestCounts(counts))
    }

    /// The count of the first level (every level's, when only one was given).
    pub fn first(&self) -> u32 {
        self.0.first().copied().unwrap_or(1)
    }

    /// One count per level when several were given, or `None` when one applies to all.
    pub fn per_level(&self) -> Option<&[u32]> {
        (self.0.len() > 1).then_some(self.0.as_slice())
    }

    /// Each level's count for `levels`: the one count for all, or the per-level counts when
    /// their number matches the levels'.
    pub fn for_levels(&self, levels: &[u32]) -> crate::Result<Vec<u32>> {
        match self.per_level() {
            None => Ok(vec![self.first(); levels.len()]),
            Some(c) if c.len() == levels.len() => Ok(c.to_vec()),
            Some(c) => Err(crate::Error::Invalid(format!(
                "request_count has {} counts for {} concurrency levels ({}): give one count per level, in the levels' order, or one for all",
                c.len(),
                levels.len(),
                levels
                    .iter()
                    .map(u32::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            ))),
        }
    }
}

impl std::str::FromStr for RequestCounts {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let counts = s
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<u32>()
                    .map_err(|_| format!("{:?} is not a request count (a whole number, or one per level: 256,512,2048)", p.trim()))
            })
            .collect::<Result<Vec<u32>, String>>()?;
        RequestCounts::new(counts)
    }
}

impl<'de> Deserialize<'de> for RequestCounts {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(u32),
            Many(Vec<u32>),
        }
        let counts = match OneOrMany::deserialize(d).map_err(|_| {
            serde::de::Error::custom(
                "request_count must be a whole number or a list of them, one per level",
            )
        })? {
            OneOrMany::One(n) => vec![n],
            OneOrMany::Many(v) => v,
        };
        RequestCounts::new(counts).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_count_or_one_per_level() {
        let one: RequestCounts = "64".parse().unwrap();
        assert_eq!(one.for_levels(&[1, 8]).unwrap(), [64, 64]);
        let per: RequestCounts = "256, 512,2048".parse().unwrap();
        assert_eq!(per.for_levels(&[64, 256, 1024]).unwrap(), [256, 512, 2048]);
        let e = per.for_levels(&[64, 256]).unwrap_err().to_string();
        assert!(
            e.contains("3 counts for 2 concurrency levels (64, 256)"),
            "{e}"
        );
        assert!("0".parse::<RequestCounts>().is_err());
        assert!("8,x"
            .parse::<RequestCounts>()
            .unwrap_err()
            .contains("\"x\""));
    }
}
