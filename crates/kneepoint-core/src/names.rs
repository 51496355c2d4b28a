//! The error of every `FromStr` over a closed set of names (an API, a dataset format, an
//! objective...): it says what was expected.

/// `got` is not one of the `valid` names of `what`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{what} must be {}, not {got:?}", one_of(valid))]
pub struct UnknownName {
    /// What was being named (`the endpoint type`).
    pub what: &'static str,
    /// The name given.
    pub got: String,
    /// The names accepted.
    pub valid: &'static [&'static str],
}

impl UnknownName {
    /// `got` is not a valid `what`.
    pub fn new(what: &'static str, got: &str, valid: &'static [&'static str]) -> Self {
        UnknownName {
            what,
            got: got.to_owned(),
            valid,
        }
    }
}

fn one_of(valid: &[&str]) -> String {
    match valid {
        [] => "nothing".into(),
        [one] => (*one).to_owned(),
        [init @ .., last] => format!("{} or {last}", init.join(", ")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_the_valid_names() {
        let e = UnknownName::new("the endpoint type", "chta", &["chat", "completions"]);
        assert_eq!(
            e.to_string(),
            "the endpoint type must be chat or completions, not \"chta\""
        );
        let e = UnknownName::new("sampling", "x", &["sequential", "random", "shuffle"]);
        assert!(e.to_string().contains("sequential, random or shuffle"));
    }
}
