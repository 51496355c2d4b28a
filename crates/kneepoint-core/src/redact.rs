//! What may be shown of a URL.

/// A URL without user info, query or fragment (marked `…` where something was cut): what may
/// be shown of a `location` header or a configured URL, which can carry credentials.
///
/// User info is what comes before an `@` in the authority. A careless URL whose password holds
/// `/`, `?` or `#` ends the authority early, so when the authority is not a plain
/// `host[:port]`, everything up to the last `@` before any query goes; if that `@` could be in
/// a query or fragment, only the scheme is shown. (A user name alone that looks like a host,
/// `https://token/x@host`, cannot be told from a path holding `@`, and is shown.)
///
/// ```
/// use kneepoint_core::redact_url;
/// assert_eq!(redact_url("https://user:pw@host/v1?key=x"), "https://…@host/v1…");
/// assert_eq!(redact_url("http://u:pa/ss@host/metrics"), "http://…@host/metrics");
/// assert_eq!(redact_url("https://host/a@b"), "https://host/a@b");
/// ```
pub fn redact_url(v: &str) -> String {
    let scheme_len = scheme_len(v);
    let (scheme, rest) = v.split_at(scheme_len);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let after_userinfo = match authority.rfind('@') {
        Some(at) => Some(&rest[at + 1..]),
        None if !plain_host(authority) => match rest.rfind('@') {
            // The last `@` might sit in a query or fragment: show nothing past the scheme.
            Some(at) if rest[..at].contains(['?', '#']) => return format!("{scheme}…"),
            Some(at) => Some(&rest[at + 1..]),
            None => None,
        },
        None => None,
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

/// The length of a leading `scheme://` (RFC 3986: a letter, then letters, digits, `+`, `-`,
/// `.`), or 0.
fn scheme_len(v: &str) -> usize {
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
}
