//! What may be shown of a URL (and where a connection string's password is).

use std::ops::Range;

/// A URL without user info, query or fragment (marked `…` where something was cut): what may
/// be shown of a `location` header or a configured URL, which can carry credentials.
///
/// User info is what comes before an `@` in the authority. A careless password may hold `@`,
/// `/`, `?` or `#` unencoded, so when the authority is not a plain `host[:port]`, everything
/// up to the last `@` before any query goes (a path holding `@` behind user info goes with
/// it). If that `@` could be in a query or fragment, only the scheme is shown, unless a path
/// follows the last `@` before them (`user@host/x?mail=a@b`). (A user name alone that looks
/// like a host, `https://token/x@host`, cannot be told from a path holding `@`, and is shown;
/// so is the part before `?` or `#` of a password holding `@`, `/` and `?` or `#` unencoded.)
///
/// ```
/// use kneepoint_core::redact_url;
/// assert_eq!(redact_url("https://user:pw@host/v1?key=x"), "https://…@host/v1…");
/// assert_eq!(redact_url("http://u:pa/ss@host/metrics"), "http://…@host/metrics");
/// assert_eq!(redact_url("postgres://u:p@ss/x@db/kp"), "postgres://…@db/kp");
/// assert_eq!(redact_url("https://host/a@b"), "https://host/a@b");
/// ```
pub fn redact_url(v: &str) -> String {
    let (scheme, rest) = v.split_at(scheme_len(v));
    let after_userinfo = match userinfo(rest) {
        UserInfo::None => None,
        UserInfo::EndsAt(at) => Some(&rest[at + 1..]),
        // The last `@` might sit in a query or fragment: show nothing past the scheme.
        UserInfo::Unknown => return format!("{scheme}…"),
    };
    let shown = after_userinfo.unwrap_or(rest);
    let (kept, cut) = match shown.find(['?', '#']) {
        Some(i) => (&shown[..i], true),
        None => (shown, false),
    };
    let mut out = String::with_capacity(v.len());
    out.push_str(scheme);
    if after_userinfo.is_some() {
        out.push_str("…@");
    }
    out.push_str(kept);
    if cut {
        out.push('…');
    }
    out
}

/// Where a URL's user info ends (in the text after its scheme).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum UserInfo {
    /// There is none: the authority is a plain host.
    None,
    /// It ends at the `@` at this index.
    EndsAt(usize),
    /// An `@` after a `?` or `#` may end it, or sit in a query or fragment.
    Unknown,
}

/// Where the user info of `rest` (a URL without its scheme) ends: at the last `@` when the
/// authority holds one or is not a plain host (a password holding `@`, `/`, `?` or `#`
/// unencoded), as [`redact_url`] says.
pub(crate) fn userinfo(rest: &str) -> UserInfo {
    let authority = &rest[..rest.find(['/', '?', '#']).unwrap_or(rest.len())];
    if !authority.contains('@') && plain_host(authority) {
        return UserInfo::None;
    }
    let Some(last) = rest.rfind('@') else {
        return UserInfo::None;
    };
    let query = rest.find(['?', '#']).unwrap_or(rest.len());
    if last < query {
        return UserInfo::EndsAt(last);
    }
    // The last `@` is past a `?` or `#`: the `@` before them ends the user info when a path
    // follows it (`user@host/x?mail=a@b`); else the `?` or `#` may be the password's.
    match rest[..query].rfind('@') {
        Some(at) if rest[at + 1..query].contains('/') => UserInfo::EndsAt(at),
        _ => UserInfo::Unknown,
    }
}

/// The byte ranges of the `password` values among libpq's `key=value` words, as written
/// (inside the quotes of a quoted one, its backslash escapes kept).
pub(crate) fn conninfo_passwords(s: &str) -> Vec<Range<usize>> {
    let b = s.as_bytes();
    let skip_space = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_whitespace) {
            i += 1;
        }
        i
    };
    let mut out = Vec::new();
    let mut i = skip_space(0);
    while i < b.len() {
        let key_start = i;
        while b
            .get(i)
            .is_some_and(|c| !c.is_ascii_whitespace() && *c != b'=')
        {
            i += 1;
        }
        let key = &s[key_start..i];
        i = skip_space(i);
        if b.get(i) != Some(&b'=') {
            // Not `key=value` (the driver refuses it): the next word is read as a key.
            continue;
        }
        i = skip_space(i + 1);
        let quoted = b.get(i) == Some(&b'\'');
        if quoted {
            i += 1;
        }
        let start = i;
        while let Some(&c) = b.get(i) {
            if c == b'\\' {
                i += 2;
            } else if (quoted && c == b'\'') || (!quoted && c.is_ascii_whitespace()) {
                break;
            } else {
                i += 1;
            }
        }
        // An escape at the very end steps past it.
        i = i.min(b.len());
        if key == "password" {
            out.push(start..i);
        }
        if quoted && i < b.len() {
            i += 1;
        }
        i = skip_space(i);
    }
    out
}

/// The length of a leading `scheme://` (RFC 3986: a letter, then letters, digits, `+`, `-`,
/// `.`), or 0.
pub(crate) fn scheme_len(v: &str) -> usize {
    let Some(i) = v.find("://") else { return 0 };
    let scheme = &v[..i];
    let mut chars = scheme.chars();
    let valid = chars.next().is_some_and(|c| c.is_ascii_alphabetic())
        && chars.all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if valid {
        i + 3
    } else {
        0
    }
}

/// Whether an authority (no `@` in it) reads as `host`, `host:port` or `[v6]`, `[v6]:port`.
fn plain_host(authority: &str) -> bool {
    let port_ok = |p: &str| p.chars().all(|c| c.is_ascii_digit());
    if let Some(v6) = authority.strip_prefix('[') {
        return match v6.split_once(']') {
            Some((_, "")) => true,
            Some((_, tail)) => tail.strip_prefix(':').is_some_and(port_ok),
            None => false,
        };
    }
    authority
        .rsplit_once(':')
        .is_none_or(|(_, port)| port_ok(port))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn credentials_never_survive_however_the_url_is_written() {
        for (given, shown) in [
            ("https://h/p", "https://h/p"),
            ("https://u:pw@h:1/p?a=b", "https://…@h:1/p…"),
            ("/login#token=abc", "/login…"),
            ("https://h/a@b", "https://h/a@b"),
            ("http://h:8000/metrics", "http://h:8000/metrics"),
            ("http://u:pa/ss@host/metrics", "http://…@host/metrics"),
            ("http://u:p#w@host/", "http://…"),
            ("http://u:p?w@host/x", "http://…"),
            ("/cb?code=SECRET&next=https://app/x", "/cb…"),
            ("http://user@host/x?email=a@b.example", "http://…@host/x…"),
            ("http://[::1]/v1?token=abc@def", "http://[::1]/v1…"),
            ("http://[::1]:8000/metrics", "http://[::1]:8000/metrics"),
            ("http://[::1]/@scope/pkg", "http://[::1]/@scope/pkg"),
            ("user:pw@host:9090", "…@host:9090"),
            ("http://token@host/", "http://…@host/"),
        ] {
            let r = redact_url(given);
            assert_eq!(r, shown, "{given}");
            for secret in ["pw", "pa/ss", "token", "SECRET", "abc"] {
                assert!(!r.contains(secret), "{given} -> {r}");
            }
        }
    }

    /// Issue 57 item 14a: a raw `@` in a password followed by a `/`, `?` or `#` showed the
    /// password's end (`…@ss/w0rd@host/db`, `…@ss…`).
    #[test]
    fn a_raw_at_sign_in_a_password_shows_none_of_it() {
        for (given, shown) in [
            ("postgres://user:p@ss@host/db", "postgres://…@host/db"),
            (
                "postgres://user:p@ss/w0rd@host:5432/db?sslmode=off",
                "postgres://…@host:5432/db…",
            ),
            ("postgres://user:p@ss#w0rd@host/db", "postgres://…"),
            ("http://user:p@ss?w0rd@host/", "http://…"),
            ("user:p@ss/w0rd@host/db", "…@host/db"),
        ] {
            let r = redact_url(given);
            assert_eq!(r, shown, "{given}");
            assert!(!r.contains("ss") && !r.contains("w0rd"), "{given} -> {r}");
        }
    }

    #[test]
    fn connection_string_passwords_are_found_as_written() {
        for (given, password) in [
            ("host=db password=s3cret dbname=kp", "s3cret"),
            (" host = db password = 'p w\\' x' user=u ", "p w\\' x"),
            ("password=end\\", "end\\"),
            ("host=db nonsense password=x", "x"),
        ] {
            let found: Vec<&str> = conninfo_passwords(given)
                .into_iter()
                .map(|r| &given[r])
                .collect();
            assert_eq!(found, [password], "{given}");
        }
        assert!(conninfo_passwords("host=db user=u").is_empty());
        let ranges = conninfo_passwords("password=é\\é x");
        assert_eq!(ranges.len(), 1);
        assert_eq!(ranges.first().cloned(), Some(9..14));
    }
}
