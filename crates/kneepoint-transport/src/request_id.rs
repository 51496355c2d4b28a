//! How each request is named to the server (the `x-request-id` header by default).
//!
//! Real servers are strict about it: llama-cpp-python's server answers `400` with an empty
//! body to any `x-request-id` that is not a UUID, and vLLM uses the header as its internal
//! request id (so two clients sending `0`, `1`, ... to one server collide). The default is
//! therefore a UUID that is unique per transport yet still names the request: its last
//! twelve hex digits are the request's id, so `…-00000000002a` is request 42. The same
//! string goes into the record (`x_request_id` in `profile_export.jsonl`) through
//! [`kneepoint_core::Transport::request_id`], so a server's logs join the client's records.

use std::hash::{BuildHasher, Hasher};

use http::header::HeaderName;
use serde::{Deserialize, Serialize};

use crate::Error;

/// The form of the id sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RequestIdStyle {
    /// A UUID (version 4 layout) whose last 48 bits are the request's id and whose other
    /// random bits are fixed per transport: accepted by servers that validate UUIDs.
    #[default]
    Uuid,
    /// The request's id in decimal (`0`, `1`, ...), as kneepoint sent before.
    Integer,
}

impl std::str::FromStr for RequestIdStyle {
    type Err = kneepoint_core::UnknownName;

    /// `uuid` or `integer`.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "uuid" => Ok(RequestIdStyle::Uuid),
            "integer" => Ok(RequestIdStyle::Integer),
            _ => Err(kneepoint_core::UnknownName::new(
                "the request id format",
                s,
                &["uuid", "integer"],
            )),
        }
    }
}

/// Which header names each request, and how. `name: None` sends no id at all.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RequestIdHeader {
    /// The header's name (`x-request-id` by default), or `None` to omit the header.
    pub name: Option<String>,
    /// The form of the value.
    pub style: RequestIdStyle,
}

impl Default for RequestIdHeader {
    fn default() -> Self {
        RequestIdHeader {
            name: Some("x-request-id".into()),
            style: RequestIdStyle::Uuid,
        }
    }
}

/// A validated [`RequestIdHeader`] with the transport's random UUID bits.
#[derive(Debug, Clone)]
pub(crate) struct RequestIds {
    name: Option<HeaderName>,
    style: RequestIdStyle,
    nonce: u64,
}

impl RequestIds {
    /// Validates the header name and draws the per-transport random bits.
    pub(crate) fn new(config: &RequestIdHeader) -> Result<Self, Error> {
        let name =
            match &config.name {
                None => None,
                Some(n) => Some(HeaderName::from_bytes(n.as_bytes()).map_err(|e| {
                    Error::InvalidHeader {
                        name: n.clone(),
                        reason: e.to_string(),
                    }
                })?),
            };
        Ok(RequestIds {
            name,
            style: config.style,
            nonce: random_u64(),
        })
    }

    /// The header to send, if any.
    pub(crate) fn header_name(&self) -> Option<&HeaderName> {
        self.name.as_ref()
    }

    /// The id sent for request `id`, or `None` when no header is sent.
    pub(crate) fn sent(&self, id: u64) -> Option<String> {
        self.name.as_ref().map(|_| self.value(id))
    }

    /// The id that names request `id` in this transport's form.
    pub(crate) fn value(&self, id: u64) -> String {
        match self.style {
            RequestIdStyle::Integer => id.to_string(),
            RequestIdStyle::Uuid => uuid(self.nonce, id),
        }
    }
}

/// A UUID string with version 4 and RFC 4122 variant bits: 58 bits of `nonce`, the high 16
/// bits of `id` in the third group's place and its low 48 bits as the last group.
pub fn uuid(nonce: u64, id: u64) -> String {
    let a = (nonce >> 32) as u32;
    let b = (id >> 48) as u16;
    let c = 0x4000 | ((nonce >> 20) & 0x0fff) as u16;
    let d = 0x8000 | ((nonce >> 6) & 0x3fff) as u16;
    format!(
        "{a:08x}-{b:04x}-{c:04x}-{d:04x}-{:012x}",
        id & 0xffff_ffff_ffff
    )
}

/// The request id a [`uuid`] carries, or a decimal id; `None` for anything else.
pub fn id_of(wire: &str) -> Option<u64> {
    if let Ok(n) = wire.parse::<u64>() {
        return Some(n);
    }
    let parts: Vec<&str> = wire.split('-').collect();
    if parts.len() != 5 || parts[1].len() != 4 || parts[4].len() != 12 {
        return None;
    }
    let hi = u64::from_str_radix(parts[1], 16).ok()?;
    let lo = u64::from_str_radix(parts[4], 16).ok()?;
    Some(hi << 48 | lo)
}

/// 64 random bits from the standard library's per-process random hasher keys, mixed with the
/// time and a counter (no RNG crate needed for bits that only have to differ between clients).
fn random_u64() -> u64 {
    static COUNTER: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, std::sync::atomic::Ordering::Relaxed));
    if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
        h.write_u128(t.as_nanos());
    }
    h.write_u32(std::process::id());
    h.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn is_uuid_v4(s: &str) -> bool {
        let groups: Vec<&str> = s.split('-').collect();
        groups.iter().map(|g| g.len()).collect::<Vec<_>>() == [8, 4, 4, 4, 12]
            && s.chars().all(|c| c == '-' || c.is_ascii_hexdigit())
            && groups[2].starts_with('4')
            && matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b')
    }

    #[test]
    fn uuids_are_valid_and_carry_the_id() {
        for id in [0, 1, 42, 0xffff_ffff_ffff, u64::MAX] {
            for nonce in [0, 1, u64::MAX, 0x0123_4567_89ab_cdef] {
                let s = uuid(nonce, id);
                assert!(is_uuid_v4(&s), "{s}");
                assert_eq!(id_of(&s), Some(id), "{s}");
            }
        }
        assert_eq!(uuid(0, 42), "00000000-0000-4000-8000-00000000002a");
        assert_eq!(id_of("17"), Some(17));
        assert_eq!(id_of("not-a-uuid"), None);
    }

    #[test]
    fn each_transport_draws_its_own_bits() {
        let h = RequestIdHeader::default();
        let (a, b) = (RequestIds::new(&h).unwrap(), RequestIds::new(&h).unwrap());
        assert_ne!(a.value(7), b.value(7));
        assert_eq!(id_of(&a.value(7)), Some(7));
        let plain = RequestIds::new(&RequestIdHeader {
            name: None,
            style: RequestIdStyle::Integer,
        })
        .unwrap();
        assert!(plain.header_name().is_none());
        assert_eq!(plain.value(7), "7");
        assert_eq!(plain.sent(7), None, "no header, no id in the record");
        assert_eq!(a.sent(7), Some(a.value(7)));
        let bad = RequestIdHeader {
            name: Some("bad header".into()),
            style: RequestIdStyle::Uuid,
        };
        assert!(RequestIds::new(&bad).is_err());
    }
}
