//! What may be shown of a URL.

/// A URL without user info, query or fragment (marked `…` where something was cut): what may
/// be shown of a `location` header or a configured URL, which can carry credentials.
///
/// User info goes first, and generously: everything up to the last `@` goes when the part
/// before the path is not a plain `host[:port]` (a password may hold `/`, `?` or `#`, which
/// would otherwise end the authority early), so a careless URL shows less, never more.
///
/// ```
/// use kneepoint_core::redact_url;
/// assert_eq!(redact_url("https://user:pw@host/v1?key=x"), "https://…@host/v1…");
/// assert_eq!(redact_url("http://u:pa/ss@host/metrics"), "http://…@host/metrics");
/// assert_eq!(redact_url("https://host/a@b"), "https://host/a@b");
/// ```
pub fn redact_url(v: &str) -> String {
    let (scheme, rest) = match v.find("://") {
        Some(i) => (&v[..i + 3], &v[i + 3..]),
        None => ("", v),
    };
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let authority = &rest[..authority_end];
    let plain_host = !authority.contains('@')
        && authority
            .rsplit_once(':')
            .is_none_or(|(_, port)| port.chars().all(|c| c.is_ascii_digit()));
    let (userinfo_cut, rest) = match rest.rfind('@') {
        Some(at) if !plain_host => (true, &rest[at + 1..]),
        _ => (false, rest),
    };
    let (kept, cut) = match rest.find(['?', '#']) {
        Some(i) => (&rest[..i], true),
        None => (rest, false),
    };
    let mut out = String::with_capacity(v.len());
    out.push_str(scheme);
    if userinfo_cut {
        out.push_str("…@");
    }
    out.push_str(kept);
    if cut {
        out.push('…');
    }
    out
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
            ("http://u:p#w@host/", "http://…@host/"),
            ("http://u:p?w@host/x", "http://…@host/x"),
            ("user:pw@host:9090", "…@host:9090"),
            ("http://token@host/", "http://…@host/"),
        ] {
            let r = redact_url(given);
            assert_eq!(r, shown, "{given}");
            assert!(!r.contains("pw") && !r.contains("pa/ss") && !r.contains("token"));
        }
    }
}
