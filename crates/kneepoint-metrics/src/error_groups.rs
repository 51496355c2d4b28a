//! A level's failures grouped by kind, code and message, the message's numbers hidden so that
//! failures differing only in a request id, a byte count or a port count as one group.

use std::collections::BTreeMap;

use kneepoint_core::ErrorRecord;

use crate::summary::ErrorGroup;

/// Distinct failure groups a streamed level counts apart; later new messages count as one
/// "other" group per kind and code (servers that put a random word in every message would
/// otherwise grow the table with the level).
pub(crate) const MAX_ERROR_GROUPS: usize = 10_000;

/// One group's count, its first message, and whether its messages differed (in numbers).
#[derive(Debug, Clone)]
struct Count {
    count: usize,
    first: String,
    varied: bool,
}

/// The groups, by (kind, code, message with its numbers as `#`).
#[derive(Debug, Clone)]
pub(crate) struct ErrorGroups {
    groups: BTreeMap<(String, Option<u16>, String), Count>,
    max: usize,
}

impl Default for ErrorGroups {
    /// Unbounded (the exact summary).
    fn default() -> Self {
        ErrorGroups::bounded(usize::MAX)
    }
}

impl ErrorGroups {
    /// At most `max` groups apart.
    pub(crate) fn bounded(max: usize) -> Self {
        ErrorGroups {
            groups: BTreeMap::new(),
            max,
        }
    }

    /// Groups counted apart.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.groups.len()
    }

    /// Counts `e`.
    pub(crate) fn add(&mut self, e: &ErrorRecord) {
        let mut key = (e.kind.to_string(), e.code, numbers_hidden(&e.message));
        if self.groups.len() >= self.max && !self.groups.contains_key(&key) {
            key.2 = "(other messages)".into();
        }
        let g = self.groups.entry(key).or_insert_with(|| Count {
            count: 0,
            first: e.message.clone(),
            varied: false,
        });
        g.count += 1;
        g.varied |= g.first != e.message;
    }

    /// Every group: one message as it was, or, when its messages differed in their numbers,
    /// the message with them as `#`.
    pub(crate) fn summary(&self) -> Vec<ErrorGroup> {
        self.groups
            .iter()
            .map(|((kind, code, hidden), g)| ErrorGroup {
                kind: kind.clone(),
                code: *code,
                message: if g.varied {
                    hidden.clone()
                } else {
                    g.first.clone()
                },
                count: g.count,
            })
            .collect()
    }
}

/// `message` with every run of digits as `#`.
fn numbers_hidden(message: &str) -> String {
    let mut out = String::with_capacity(message.len());
    let mut in_number = false;
    for c in message.chars() {
        if c.is_ascii_digit() {
            if !in_number {
                out.push('#');
            }
            in_number = true;
        } else {
            out.push(c);
            in_number = false;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use kneepoint_core::ErrorKind;

    /// Issue 34: messages that differ only by a number (a request id) split into groups.
    #[test]
    fn messages_differing_in_numbers_are_one_group() {
        let mut g = ErrorGroups::default();
        let fail = |message: String| ErrorRecord {
            kind: ErrorKind::Server,
            code: Some(503),
            message,
        };
        for i in 0..40u64 {
            g.add(&fail(format!(
                "request req-{i} failed after {} ms",
                100 + i
            )));
        }
        g.add(&fail("overloaded: retry later".into()));
        g.add(&fail("overloaded: retry later".into()));
        assert_eq!(numbers_hidden("a1b22 c333"), "a#b# c#");
        let groups: Vec<(String, usize)> = g
            .summary()
            .into_iter()
            .map(|g| (g.message, g.count))
            .collect();
        assert_eq!(
            groups,
            vec![
                ("overloaded: retry later".to_owned(), 2),
                ("request req-# failed after # ms".to_owned(), 40),
            ]
        );
    }
}
