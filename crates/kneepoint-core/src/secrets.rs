//! The secrets this process knows, and what is written or printed with them scrubbed out.
//!
//! A secret is registered once, where it enters the process (an API key, a header value, a
//! URL's credentials, the results store's password, a variable of the environment that
//! kneepoint reads for a secret ([`OWN_VARIABLES`]), a launched server's secret-named
//! environment value or secret flag), and
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

/// Registers the secrets of every variable of this process's environment
/// ([`register_variable`]): what a launched server or a careless message could echo.
pub fn register_environment() {
    for (name, value) in std::env::vars_os() {
        if let (Some(n), Some(v)) = (name.to_str(), value.to_str()) {
            register_variable(n, v);
        }
    }
}

/// How a variable of the environment carries a secret.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum Carrier {
    /// The whole value is the secret (an API key, an access key, a token).
    Whole,
    /// A URL: its user info and credential-named query values ([`register_url`]).
    Url,
    /// A database connection string: a URL, or libpq's `key=value` words
    /// ([`register_connection`]).
    Connection,
}

/// The variables kneepoint reads (itself, or through its HTTP and AWS clients) that can carry
/// a secret whatever their name says, and how: the results store, the API key, the proxies,
/// AWS credentials and endpoints. (A variable named by `api_key_env` or `--sigv4-secret-env`
/// has its value registered where it is read.)
pub const OWN_VARIABLES: [(&str, Carrier); 15] = [
    ("KNEEPOINT_STORE", Carrier::Connection),
    ("OPENAI_API_KEY", Carrier::Whole),
    ("HTTPS_PROXY", Carrier::Url),
    ("https_proxy", Carrier::Url),
    ("HTTP_PROXY", Carrier::Url),
    ("http_proxy", Carrier::Url),
    ("ALL_PROXY", Carrier::Url),
    ("all_proxy", Carrier::Url),
    ("AWS_ACCESS_KEY_ID", Carrier::Whole),
    ("AWS_SECRET_ACCESS_KEY", Carrier::Whole),
    ("AWS_SESSION_TOKEN", Carrier::Whole),
    ("AWS_CONTAINER_AUTHORIZATION_TOKEN", Carrier::Whole),
    ("AWS_CONTAINER_CREDENTIALS_FULL_URI", Carrier::Url),
    ("AWS_ENDPOINT_URL", Carrier::Url),
    ("AWS_ENDPOINT_URL_S3", Carrier::Url),
];

/// How the variable `name` carries a secret: as [`OWN_VARIABLES`] lists it, a URL for any
/// other `*_proxy` (either case), else `None`.
pub fn carrier(name: &str) -> Option<Carrier> {
    OWN_VARIABLES
        .iter()
        .find(|(n, _)| *n == name)
        .map(|(_, c)| *c)
        .or_else(|| {
            name.to_ascii_lowercase()
                .ends_with("_proxy")
                .then_some(Carrier::Url)
        })
}

/// Registers what the variable `name` holds that is secret: its whole value when its name
/// says secret ([`name_is_secret`]), else as its [`carrier`] says (the password in
/// `KNEEPOINT_STORE`, a proxy's credentials).
pub fn register_variable(name: &str, value: &str) {
    if name_is_secret(name) {
        register(value);
    }
    match carrier(name) {
        Some(Carrier::Whole) => register(value),
        Some(Carrier::Url) => register_url(value),
        Some(Carrier::Connection) => register_connection(value),
        None => {}
    }
}

/// Whether a launched server is kept from inheriting the variable `name` of kneepoint's
/// environment (unless its deploy section sets it or names it in `pass_env`): its name says
/// secret, its value holds a registered secret, or kneepoint reads it for a secret
/// ([`OWN_VARIABLES`]): the store's location whatever it is, a key whatever it is, a URL when
/// it has credentials however short.
pub fn withheld_from_servers(name: &str, value: &str) -> bool {
    name_is_secret(name)
        || holds_secret(value)
        || match carrier(name) {
            Some(Carrier::Url) => !url_credentials(value).is_empty(),
            Some(_) => !value.trim().is_empty(),
            None => false,
        }
}

/// Registers what a URL carries that is secret: its user info (whole, and the password
/// alone; where it ends as [`redact_url`](crate::redact_url) reads it, so a password holding
/// `@` is registered whole) and the values of query and fragment parameters whose name says
/// credential ([`query_name_is_secret`]: `?key=...`; `?api-version=` is left alone).
pub fn register_url(url: &str) {
    for secret in url_credentials(url) {
        register(secret);
    }
}

/// Registers the secrets of a database connection string: a URL's ([`register_url`]: user
/// info, `?password=`), or the `password` of libpq's `key=value` words (`host=db
/// password='s3 cret'`), as written and with its escapes read.
pub fn register_connection(s: &str) {
    let s = s.trim();
    if crate::redact::scheme_len(s) > 0 {
        register_url(s);
        return;
    }
    for r in crate::redact::conninfo_passwords(s) {
        let raw = &s[r];
        register(raw);
        let mut read = String::with_capacity(raw.len());
        let mut chars = raw.chars();
        while let Some(c) = chars.next() {
            match c {
                '\\' => read.extend(chars.next()),
                c => read.push(c),
            }
        }
        register(&read);
    }
}

/// The secret parts of a URL that [`register_url`] registers (none empty).
fn url_credentials(url: &str) -> Vec<&str> {
    use crate::redact::UserInfo;
    fn user_info<'a>(out: &mut Vec<&'a str>, info: &'a str) {
        out.push(info);
        if let Some((_, password)) = info.split_once(':') {
            out.push(password);
        }
    }
    let rest = &url[crate::redact::scheme_len(url)..];
    let mut out = Vec::new();
    match crate::redact::userinfo(rest) {
        UserInfo::None => {}
        UserInfo::EndsAt(at) => user_info(&mut out, &rest[..at]),
        // Each `@` may end it.
        UserInfo::Unknown => {
            for (at, _) in rest.match_indices('@') {
                user_info(&mut out, &rest[..at]);
            }
        }
    }
    if let Some(i) = rest.find(['?', '#']) {
        for pair in rest[i + 1..].split(['&', ';', '#', '?']) {
            if let Some((name, value)) = pair.split_once('=') {
                if query_name_is_secret(name) {
                    out.push(value);
                }
            }
        }
    }
    out.retain(|s| !s.trim().is_empty());
    out
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

/// Registers what a JSON document holds under secret-named keys ([`name_is_secret`]:
/// `api_key`, `password`, `auth`...), at any depth: every string and number inside such a
/// key's value. A user's request-body fields (`extra_body`) can carry credentials.
pub fn register_json(value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(o) => {
            for (k, v) in o {
                if name_is_secret(k) {
                    register_leaves(v);
                } else {
                    register_json(v);
                }
            }
        }
        Value::Array(a) => a.iter().for_each(register_json),
        _ => {}
    }
}

/// Registers every string and number in `value`.
fn register_leaves(value: &serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::String(s) => register(s),
        Value::Number(n) => register(&n.to_string()),
        Value::Array(a) => a.iter().for_each(register_leaves),
        Value::Object(o) => o.values().for_each(register_leaves),
        Value::Null | Value::Bool(_) => {}
    }
}

/// `value` with what it holds under secret-named keys ([`name_is_secret`]), at any depth,
/// replaced by [`REDACTED`]: what may be shown of a document [`register_json`] registered
/// (a `null` or a boolean, which cannot be a credential, is kept).
pub fn redact_json(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Object(o) => {
            for (k, v) in o.iter_mut() {
                if !name_is_secret(k) {
                    redact_json(v);
                } else if !matches!(v, Value::Null | Value::Bool(_)) {
                    *v = Value::String(REDACTED.to_owned());
                }
            }
        }
        Value::Array(a) => a.iter_mut().for_each(redact_json),
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

    /// Issue 57 item 8: `KNEEPOINT_STORE`'s name says nothing, so its password (a URL's,
    /// raw `@` and all, or libpq's `password=`) was neither registered nor withheld.
    #[test]
    fn the_variables_kneepoint_reads_register_and_withhold_their_secrets() {
        register_variable(
            "KNEEPOINT_STORE",
            "postgres://bench:st@re-pw-5701@db:5432/kp",
        );
        register_variable(
            "KNEEPOINT_STORE",
            "host=db user=bench password='kv pw\\'5702' dbname=kp",
        );
        register_variable("HTTPS_PROXY", "http://proxy-user-5703:pp@proxy:3128");
        assert_eq!(
            scrub("auth st@re-pw-5701 failed for 'kv pw\\'5702' and kv pw'5702"),
            "auth [redacted] failed for '[redacted]' and [redacted]"
        );
        assert!(is_registered("proxy-user-5703:pp"));
        for (name, value) in [
            ("KNEEPOINT_STORE", "postgres://bench:pw@db/kp"),
            ("KNEEPOINT_STORE", "results.db"),
            ("https_proxy", "http://u:p@proxy:3128"),
            ("AWS_ENDPOINT_URL", "http://minio:k3y@minio:9000"),
            ("OPENAI_API_KEY", "sk"),
            ("FTP_PROXY", "ftp://u:p@proxy"),
        ] {
            assert!(withheld_from_servers(name, value), "{name}={value}");
        }
        for (name, value) in [
            ("HTTPS_PROXY", "http://proxy:3128"),
            ("NO_PROXY", "localhost,127.0.0.1"),
            ("HF_HOME", "/data/hf"),
            ("KNEEPOINT_STORE", " "),
        ] {
            assert!(!withheld_from_servers(name, value), "{name}={value}");
        }
        assert_eq!(carrier("KNEEPOINT_STORE"), Some(Carrier::Connection));
    }

    #[test]
    fn json_under_secret_named_keys_is_registered_and_redacted() {
        let mut body = serde_json::json!({
            "api_key": "json-key-value-31",
            "nested": {"password": "json-pass-value-32", "top_k": 123456789},
            "list": [{"auth": {"user": "json-user-value-33", "pin": 987654321}}],
            "use_auth": true,
            "temperature": "plain-value-34",
        });
        register_json(&body);
        for s in [
            "json-key-value-31",
            "json-pass-value-32",
            "json-user-value-33",
            "987654321",
        ] {
            assert!(is_registered(s), "{s}");
        }
        assert!(!is_registered("plain-value-34") && !is_registered("123456789"));
        redact_json(&mut body);
        assert_eq!(
            body,
            serde_json::json!({
                "api_key": REDACTED,
                "nested": {"password": REDACTED, "top_k": 123456789},
                "list": [{"auth": REDACTED}],
                "use_auth": true,
                "temperature": "plain-value-34",
            })
        );
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
