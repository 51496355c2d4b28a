//! The secrets this process knows, and what is written or printed with them scrubbed out.
//!
//! A secret is registered once, where it enters the process (an API key, a header value, a
//! URL's credentials, a launched server's secret-named environment value or secret flag), and
//! every writer of text a person or a file may see ([`scrub`]) replaces each registered value
//! by [`REDACTED`], wherever it stands in the text: inside a shell line, a
//! JSON string, a server's own log line. The registry is process-wide on purpose: a launched
//! server can echo the client's key into its log, and the log's writer knows nothing of the
//! transport that holds the key.
//!
//! Values shorter than [`MIN_LEN`] are not registered: blanking every `abc` in a report would
//! garble it, and a key that short protects nothing.
//!
//! ```
//! use kneepoint_core::secrets;
//! secrets::register("sk-doc-example-1234");
//! assert_eq!(
//!     secrets::scrub("sh -c 'serve --api-key sk-doc-example-1234'"),
//!     "sh -c 'serve --api-key [redacted]'"
//! );
//! assert!(secrets::name_is_secret("OPENAI_API_KEY"));
//! assert!(!secrets::name_is_secret("MAX_NUM_BATCHED_TOKENS"));
//! ```

use std::borrow::Cow;
use std::sync::RwLock;

pub use crate::REDACTED;

/// The shortest value registered as a secret.
pub const MIN_LEN: usize = 6;

/// Registered values, longest first (a secret holding another is replaced whole).
static SECRETS: RwLock<Vec<Box<str>>> = RwLock::new(Vec::new());

/// Registers `value` as a secret (trimmed; ignored when shorter than [`MIN_LEN`]).
pub fn register(value: &str) {
    let v = value.trim();
    if v.len() < MIN_LEN {
        return;
    }
    let Ok(mut all) = SECRETS.write() else { return };
    if all.iter().any(|s| &**s == v) {
        return;
    }
    all.push(v.into());
    all.sort_by_key(|s| std::cmp::Reverse(s.len()));
}

/// Registers the value of every variable of this process's environment whose name says it
/// holds a secret ([`name_is_secret`]): what a launched server or a careless message could
/// echo.
pub fn register_environment() {
    for (name, value) in std::env::vars_os() {
        if let (Some(n), Some(v)) = (name.to_str(), value.to_str()) {
            if name_is_secret(n) {
                register(v);
            } else if n.to_ascii_lowercase().ends_with("_proxy") {
                register_url(v);
            }
        }
    }
}

/// Registers what a URL carries that is secret: the user info before an `@` in its authority
/// (whole, and the password alone) and the values of query and fragment parameters whose name
/// says credential ([`query_name_is_secret`]: `?key=...`; `?api-version=` is left alone).
pub fn register_url(url: &str) {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    if let Some(at) = rest[..authority_end].rfind('@') {
        let info = &rest[..at];
        register(info);
        if let Some((_, password)) = info.split_once(':') {
            register(password);
        }
    }
    if let Some(i) = rest.find(['?', '#']) {
        for pair in rest[i + 1..].split(['&', ';', '#', '?']) {
            if let Some((name, value)) = pair.split_once('=') {
                if query_name_is_secret(name) {
                    register(value);
                }
            }
        }
    }
}

/// Whether a URL's query parameter carries a credential: its name says secret
/// ([`name_is_secret`]: `key`, `api_key`, `token`...), or it is a signature or an OAuth code
/// (`sig`, `signature`, `code`).
pub fn query_name_is_secret(name: &str) -> bool {
    name_is_secret(name)
        || ["sig", "signature", "code"]
            .iter()
            .any(|n| name.eq_ignore_ascii_case(n))
}

/// Registers a header's value unless its name is one of the ordinary headers that carry no
/// credential (`Content-Type`, `Accept`, `User-Agent`...).
pub fn register_header(name: &str, value: &str) {
    const PLAIN: [&str; 9] = [
        "content-type",
        "accept",
        "accept-encoding",
        "accept-language",
        "user-agent",
        "cache-control",
        "connection",
        "x-request-id",
        "content-encoding",
    ];
    if !PLAIN.iter().any(|p| name.trim().eq_ignore_ascii_case(p)) {
        register(value);
        // `Bearer KEY`, `Basic KEY`: the credential alone too.
        if let Some((_, cred)) = value.trim().split_once(' ') {
            register(cred);
        }
    }
}

/// Whether `value` is a registered secret.
pub fn is_registered(value: &str) -> bool {
    let v = value.trim();
    SECRETS
        .read()
        .is_ok_and(|all| all.iter().any(|s| &**s == v))
}

/// Whether `text` holds a registered secret anywhere in it.
pub fn holds_secret(text: &str) -> bool {
    !spans(text.as_bytes()).is_empty()
}

/// The length of the longest registered secret (0 when none is).
pub fn longest() -> usize {
    SECRETS
        .read()
        .map_or(0, |all| all.first().map_or(0, |s| s.len()))
}

/// `text` with every registered secret replaced by [`REDACTED`] (borrowed when none occurs).
pub fn scrub(text: &str) -> Cow<'_, str> {
    let Ok(all) = SECRETS.read() else {
        return Cow::Borrowed(text);
    };
    let mut out = Cow::Borrowed(text);
    for s in all.iter() {
        if out.contains(&**s) {
            out = Cow::Owned(out.replace(&**s, REDACTED));
        }
    }
    out
}

/// `text` scrubbed in place.
pub fn scrub_string(text: &mut String) {
    if let Cow::Owned(s) = scrub(text) {
        *text = s;
    }
}

/// `bytes` (a server's log, not necessarily UTF-8) with every registered secret replaced.
pub fn scrub_bytes(bytes: &[u8]) -> Cow<'_, [u8]> {
    let Ok(all) = SECRETS.read() else {
        return Cow::Borrowed(bytes);
    };
    let mut out = Cow::Borrowed(bytes);
    for s in all.iter() {
        let finder = memchr::memmem::Finder::new(s.as_bytes());
        if finder.find(&out).is_none() {
            continue;
        }
        let mut next = Vec::with_capacity(out.len());
        let mut at = 0;
        for i in finder.find_iter(&out) {
            next.extend_from_slice(&out[at..i]);
            next.extend_from_slice(REDACTED.as_bytes());
            at = i + s.len();
        }
        next.extend_from_slice(&out[at..]);
        out = Cow::Owned(next);
    }
    out
}

/// Where registered secrets occur in `bytes` (overlapping occurrences of different secrets
/// each listed).
pub fn spans(bytes: &[u8]) -> Vec<std::ops::Range<usize>> {
    let Ok(all) = SECRETS.read() else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for s in all.iter() {
        for i in memchr::memmem::find_iter(bytes, s.as_bytes()) {
            out.push(i..i + s.len());
        }
    }
    out
}

/// `value` scrubbed as a JSON tree: every string (and object key) in it.
pub fn scrub_json(value: &mut serde_json::Value) {
    match value {
        serde_json::Value::String(s) => scrub_string(s),
        serde_json::Value::Array(a) => a.iter_mut().for_each(scrub_json),
        serde_json::Value::Object(o) => {
            let renamed: Vec<(String, String)> = o
                .keys()
                .filter_map(|k| match scrub(k) {
                    Cow::Owned(n) => Some((k.clone(), n)),
                    Cow::Borrowed(_) => None,
                })
                .collect();
            for (old, new) in renamed {
                if let Some(v) = o.remove(&old) {
                    o.insert(new, v);
                }
            }
            o.values_mut().for_each(scrub_json);
        }
        _ => {}
    }
}

/// Whether a variable's, flag's or header's name says it holds a secret: one of its words
/// (split at anything but letters and digits) is `TOKEN`, `KEY`, `APIKEY`, `SECRET`,
/// `PASSWORD`, `PASSWD`, `PASS`, `AUTH`, `AUTHORIZATION`, `BEARER`, `CREDENTIAL(S)` or
/// `COOKIE`. Whole words only: `--hf-token`,
/// `AUTH_HEADER` and `AWS_SECRET_ACCESS_KEY` are secret, `--max-num-batched-tokens`,
/// `--tokenizer` and `--ssl-keyfile` are not.
pub fn name_is_secret(name: &str) -> bool {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .any(|w| {
            let w = w.to_ascii_uppercase();
            matches!(
                w.as_str(),
                "TOKEN"
                    | "KEY"
                    | "APIKEY"
                    | "SECRET"
                    | "PASSWORD"
                    | "PASSWD"
                    | "PASS"
                    | "AUTH"
                    | "AUTHORIZATION"
                    | "BEARER"
                    | "CREDENTIAL"
                    | "CREDENTIALS"
                    | "COOKIE"
            )
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn registered_values_are_scrubbed_wherever_they_stand() {
        register("unit-secret-9b1c");
        register("unit-secret-9b1c-longer");
        register("abc"); // too short to be a secret
        for (given, shown) in [
            ("key=unit-secret-9b1c;", "key=[redacted];"),
            ("'unit-secret-9b1c-longer'", "'[redacted]'"),
            ("abc unchanged", "abc unchanged"),
        ] {
            assert_eq!(scrub(given), shown);
            assert_eq!(&*scrub_bytes(given.as_bytes()), shown.as_bytes());
        }
        assert!(matches!(scrub("nothing here"), Cow::Borrowed(_)));
        assert!(is_registered(" unit-secret-9b1c ") && !is_registered("abc"));
        assert!(holds_secret("Bearer unit-secret-9b1c") && !holds_secret("unit-secret"));
        let mut v = serde_json::json!({"unit-secret-9b1c": ["x unit-secret-9b1c", 1]});
        scrub_json(&mut v);
        assert_eq!(v, serde_json::json!({"[redacted]": ["x [redacted]", 1]}));
        assert!(longest() >= "unit-secret-9b1c-longer".len());
    }

    #[test]
    fn urls_and_headers_register_their_credentials() {
        register_url("http://proxyuser:proxy-pass-77@proxy:3128");
        register_url("https://host/v1?key=query-key-55&x=plain-value-1#token=frag-tok-66");
        register_header("api-key", "hdr-key-value-88");
        register_header("Authorization", "Bearer bearer-cred-99");
        register_header("Content-Type", "application/json");
        for s in [
            "proxyuser:proxy-pass-77",
            "proxy-pass-77",
            "query-key-55",
            "frag-tok-66",
            "hdr-key-value-88",
            "bearer-cred-99",
        ] {
            assert!(is_registered(s), "{s}");
        }
        assert!(!is_registered("application/json") && !is_registered("plain-value-1"));
    }

    #[test]
    fn names_say_whether_they_hold_secrets() {
        for secret in [
            "OPENAI_API_KEY",
            "HF_TOKEN",
            "AWS_SECRET_ACCESS_KEY",
            "AWS_ACCESS_KEY_ID",
            "AWS_SESSION_TOKEN",
            "AUTH_HEADER",
            "--auth",
            "--api-key",
            "db_password",
            "X-Api-Key",
            "api-key",
        ] {
            assert!(name_is_secret(secret), "{secret}");
        }
        for plain in [
            "MAX_NUM_BATCHED_TOKENS",
            "--tokenizer",
            "--ssl-keyfile",
            "PATH",
            "HF_HOME",
            "--max-num-seqs",
            "Content-Type",
            "PWD",
            "XDG_SESSION_ID",
        ] {
            assert!(!name_is_secret(plain), "{plain}");
        }
    }
}
