//! The typed keys of a level summary's maps, written as their names in files: where a
//! request's output token count came from ([`OslSource`]), and the reader that keeps the keys
//! it knows when a summary from another version is read back.

use std::collections::BTreeMap;
use std::fmt;

use kneepoint_core::TokenSource;
use serde::de::{Deserialize, Deserializer, IntoDeserializer};
use serde::{Serialize, Serializer};

/// Where a successful request's output token count came from: a [`TokenSource`], or none
/// (the server gave no usage and nothing counted the tokens). Written `usage`, `tokenizer`,
/// `estimate`, `chunks` or `none`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct OslSource(pub Option<TokenSource>);

impl OslSource {
    /// Its name in files and warnings.
    pub const fn name(self) -> &'static str {
        match self.0 {
            Some(TokenSource::Usage) => "usage",
            Some(TokenSource::Tokenizer) => "tokenizer",
            Some(TokenSource::Estimate) => "estimate",
            Some(TokenSource::Chunks) => "chunks",
            None => "none",
        }
    }
}

impl From<TokenSource> for OslSource {
    fn from(s: TokenSource) -> Self {
        OslSource(Some(s))
    }
}

impl fmt::Display for OslSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

impl Serialize for OslSource {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.name())
    }
}

impl<'de> Deserialize<'de> for OslSource {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        if name == "none" {
            return Ok(OslSource(None));
        }
        let de: serde::de::value::StrDeserializer<'_, D::Error> = name.as_str().into_deserializer();
        TokenSource::deserialize(de).map(OslSource::from)
    }
}

/// Reads a map written with string keys, keeping the entries whose key parses as a `K` (a
/// summary written by another version may name a metric or error kind this one does not
/// know: the rest of it still reads).
pub fn known_keys<'de, D, K, V>(d: D) -> Result<BTreeMap<K, V>, D::Error>
where
    D: Deserializer<'de>,
    K: Deserialize<'de> + Ord,
    V: Deserialize<'de>,
{
    let raw = BTreeMap::<String, V>::deserialize(d)?;
    Ok(raw
        .into_iter()
        .filter_map(|(k, v)| {
            let de: serde::de::value::StringDeserializer<serde::de::value::Error> =
                k.into_deserializer();
            K::deserialize(de).ok().map(|k| (k, v))
        })
        .collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::{ErrorKind, Metric};

    #[test]
    fn sources_are_their_names_and_unknown_keys_are_left_out() {
        for s in [
            OslSource(None),
            TokenSource::Usage.into(),
            TokenSource::Tokenizer.into(),
            TokenSource::Estimate.into(),
            TokenSource::Chunks.into(),
        ] {
            let json = serde_json::to_string(&s).unwrap();
            assert_eq!(json, format!("\"{s}\""));
            assert_eq!(serde_json::from_str::<OslSource>(&json).unwrap(), s);
        }
        let mut de = serde_json::Deserializer::from_str(
            r#"{"time_to_first_token": 1, "time_to_fifth_token": 2}"#,
        );
        let m: BTreeMap<Metric, u32> = known_keys(&mut de).unwrap();
        assert_eq!(m, BTreeMap::from([(Metric::TimeToFirstToken, 1)]));
        let mut de = serde_json::Deserializer::from_str(r#"{"http_status": 3, "solar_flare": 1}"#);
        let k: BTreeMap<ErrorKind, u32> = known_keys(&mut de).unwrap();
        assert_eq!(k, BTreeMap::from([(ErrorKind::HttpStatus, 3)]));
    }
}
