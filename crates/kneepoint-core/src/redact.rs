//! What may be shown of a URL.

/// A URL without user info, query or fragment (marked `…` where something was cut): what may
/// be shown of a `location` header or a configured URL, which can carry credentials.
///
/// ```
/// assert_eq!(
///     kneepoint_core::redact_url("https://user:pw@host/v1?key=x"),
///     "https://…@host/v1…"
/// );
/// ```
pub fn redact_url(v: &str) -> String {
    let (mut kept, cut) = match v.find(['?', '#']) {
        Some(i) => (v[..i].to_owned(), true),
        None => (v.to_owned(), false),
    };
    if let Some(scheme_end) = kept.find("://") {
        let rest = &kept[scheme_end + 3..];
        let authority_end = rest.find('/').unwrap_or(rest.len());
        if let Some(at) = rest[..authority_end].rfind('@') {
            kept = format!("{}…@{}", &kept[..scheme_end + 3], &rest[at + 1..]);
        }
    }
    if cut {
        kept.push('…');
    }
    kept
}
