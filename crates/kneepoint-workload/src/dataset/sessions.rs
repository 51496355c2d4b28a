//! Traces with sessions (Mooncake's records with a `session_id`, as AIPerf reads them): the
//! records that share an id are the turns of one conversation, sent one after another in one
//! slot, each `delay` ms after the previous reply ended. What a turn's `input_length` counts is
//! the user's choice ([`SessionLength`]), since traces are written both ways.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::TraceEntry;

/// What a session trace's `input_length` counts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SessionLength {
    /// The turn's own new text (AIPerf's reading). Each turn is sent after the conversation so
    /// far (earlier turns and the server's actual replies), so the server sees the history
    /// plus `input_length`.
    #[default]
    Turn,
    /// The whole context the server sees (the reading of traces recorded at a server, where a
    /// later turn's `hash_ids` repeat the earlier turn's). Each turn is one prompt of exactly
    /// `input_length` tokens that starts with what it shares with the turn before it: the
    /// blocks of its `hash_ids`, or, without them, that turn's whole prompt (standing in for
    /// the earlier turns; the server's replies are not inserted, so lengths stay exact).
    Context,
}

impl SessionLength {
    /// Parses `turn` or `context`.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "turn" => SessionLength::Turn,
            "context" => SessionLength::Context,
            _ => return None,
        })
    }
}

impl std::str::FromStr for SessionLength {
    type Err = kneepoint_core::UnknownName;

    /// `turn` or `context` (see [`SessionLength::parse`]).
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::parse(s).ok_or_else(|| {
            kneepoint_core::UnknownName::new("the session input length", s, &["turn", "context"])
        })
    }
}

/// A trace's records in sending order: each session's turns together, in file order, where
/// the session's first record stands; records without a session keep their place.
#[derive(Debug, Default)]
pub(crate) struct Grouped {
    /// The records.
    pub entries: Vec<TraceEntry>,
    /// Per record: its session's number, None for a record without one or alone in its
    /// session (a session of one record is a single request).
    pub conversation: Vec<Option<usize>>,
    /// Per record: the turn before it in its session.
    pub previous: Vec<Option<usize>>,
}

impl Grouped {
    /// Sessions of more than one record in the trace.
    pub fn sessions(&self) -> usize {
        self.conversation
            .iter()
            .flatten()
            .max()
            .map_or(0, |&n| n + 1)
    }
}

enum Slot {
    Single(TraceEntry),
    Session(usize),
}

/// Groups `raw` by `session_id`.
pub(crate) fn group(raw: Vec<TraceEntry>) -> Grouped {
    let mut slots = Vec::with_capacity(raw.len());
    let mut sessions: Vec<Vec<TraceEntry>> = Vec::new();
    let mut by_id: HashMap<String, usize> = HashMap::new();
    for e in raw {
        match e.session_id.clone() {
            None => slots.push(Slot::Single(e)),
            Some(id) => {
                let n = *by_id.entry(id).or_insert_with(|| {
                    sessions.push(Vec::new());
                    slots.push(Slot::Session(sessions.len() - 1));
                    sessions.len() - 1
                });
                sessions[n].push(e);
            }
        }
    }
    let mut out = Grouped::default();
    let mut numbered = 0;
    for slot in slots {
        match slot {
            Slot::Single(e) => {
                out.entries.push(e);
                out.conversation.push(None);
                out.previous.push(None);
            }
            Slot::Session(n) => {
                let turns = std::mem::take(&mut sessions[n]);
                // a session of one record is a single request
                let number = (turns.len() > 1).then_some(numbered);
                numbered += usize::from(turns.len() > 1);
                for (k, e) in turns.into_iter().enumerate() {
                    let here = out.entries.len();
                    out.entries.push(e);
                    out.conversation.push(number);
                    out.previous.push((k > 0).then(|| here - 1));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(session: Option<&str>, input: u32) -> TraceEntry {
        TraceEntry {
            timestamp: None,
            session_id: session.map(str::to_owned),
            delay: None,
            input_length: input,
            output_length: 4,
            hash_ids: Vec::new(),
        }
    }

    #[test]
    fn interleaved_sessions_are_gathered_where_they_start() {
        let g = group(vec![
            entry(Some("a"), 1),
            entry(None, 2),
            entry(Some("b"), 3),
            entry(Some("a"), 4),
            entry(Some("b"), 5),
            entry(None, 6),
            entry(Some("c"), 7),
        ]);
        let lengths: Vec<u32> = g.entries.iter().map(|e| e.input_length).collect();
        assert_eq!(lengths, vec![1, 4, 2, 3, 5, 6, 7]);
        // "c" has one record: a single request
        assert_eq!(
            g.conversation,
            vec![Some(0), Some(0), None, Some(1), Some(1), None, None]
        );
        assert_eq!(
            g.previous,
            vec![None, Some(0), None, None, Some(3), None, None]
        );
        assert_eq!(g.sessions(), 2);
        assert_eq!(group(vec![entry(None, 1)]).sessions(), 0);
    }

    #[test]
    fn the_readings_parse() {
        assert_eq!(
            "turn".parse::<SessionLength>().ok(),
            Some(SessionLength::Turn)
        );
        assert_eq!(
            "context".parse::<SessionLength>().ok(),
            Some(SessionLength::Context)
        );
        assert!("total".parse::<SessionLength>().is_err());
    }
}
