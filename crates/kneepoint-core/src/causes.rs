//! An error and its causes as one line of text, each cause said once.
//!
//! Many errors quote their cause in their own message (`"cannot start \"vllm\": {source}"`)
//! and also expose it as [`std::error::Error::source`]; a printer that joins the whole chain
//! (anyhow's `{:#}`) then says the cause twice. [`with_causes`] leaves out a cause whose text
//! the error before it already holds.
//!
//! ```
//! #[derive(Debug)]
//! struct Outer(std::io::Error);
//! impl std::fmt::Display for Outer {
//!     fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
//!         write!(f, "cannot start \"vllm\": {}", self.0)
//!     }
//! }
//! impl std::error::Error for Outer {
//!     fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
//!         Some(&self.0)
//!     }
//! }
//! let e = Outer(std::io::Error::other("no such file"));
//! assert_eq!(kneepoint_core::with_causes(&e), "cannot start \"vllm\": no such file");
//! ```

use std::error::Error;

/// `error` and every cause in its chain, joined by `": "`; a cause whose text is already part
/// of the error it caused (the cause that error quotes in its own message), or is empty, is
/// left out. The comparison is with the cause's immediate predecessor in the chain, so a
/// short cause that merely happens to occur further up (`cancelled`, `timed out`) is kept.
pub fn with_causes(error: &(dyn Error + 'static)) -> String {
    let mut previous = error.to_string();
    let mut text = previous.clone();
    let mut source = error.source();
    while let Some(cause) = source {
        let this = cause.to_string();
        if !this.is_empty() && !previous.contains(&this) {
            text.push_str(": ");
            text.push_str(&this);
        }
        previous = this;
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fmt;

    /// An error with a message and an optional cause, quoting it or not.
    #[derive(Debug)]
    struct E {
        message: String,
        quotes: bool,
        cause: Option<Box<E>>,
    }

    impl E {
        fn leaf(message: &str) -> E {
            E {
                message: message.into(),
                quotes: false,
                cause: None,
            }
        }

        fn over(message: &str, quotes: bool, cause: E) -> E {
            E {
                message: message.into(),
                quotes,
                cause: Some(Box::new(cause)),
            }
        }
    }

    impl fmt::Display for E {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(&self.message)?;
            match &self.cause {
                Some(c) if self.quotes => write!(f, ": {c}"),
                _ => Ok(()),
            }
        }
    }

    impl Error for E {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.cause.as_deref().map(|c| c as &(dyn Error + 'static))
        }
    }

    #[test]
    fn a_quoted_cause_is_said_once() {
        // context -> an error quoting its cause -> the cause
        let e = E::over(
            "in the model config c.json",
            false,
            E::over(
                "the model config is not a JSON object",
                true,
                E::leaf("EOF while parsing a value at line 1 column 0"),
            ),
        );
        assert_eq!(
            with_causes(&e),
            "in the model config c.json: the model config is not a JSON object: EOF while parsing a value at line 1 column 0"
        );
        // a skipped cause's own cause is judged against the skipped one
        let e = E::over(
            "store s.db",
            true,
            E::over("cannot read x", false, E::leaf("permission denied")),
        );
        assert_eq!(
            with_causes(&e),
            "store s.db: cannot read x: permission denied"
        );
    }

    #[test]
    fn causes_not_quoted_are_all_kept() {
        let e = E::over(
            "the level was cancelled early",
            false,
            E::over("reading records", false, E::leaf("cancelled")),
        );
        // `cancelled` occurs above, but not in the error it caused: kept
        assert_eq!(
            with_causes(&e),
            "the level was cancelled early: reading records: cancelled"
        );
        assert_eq!(with_causes(&E::leaf("alone")), "alone");
        assert_eq!(with_causes(&E::over("top", false, E::leaf(""))), "top");
    }
}
