//! Cutting an input into pieces whose sizes the input itself chooses.

/// Splits `data` into its control bytes (the first byte says how many, 1 to 4) and the body,
/// then cuts the body into pieces whose sizes cycle through the control bytes (1 to 64 each).
pub(crate) fn pieces(data: &[u8]) -> (Vec<&[u8]>, &[u8]) {
    let Some((&first, rest)) = data.split_first() else {
        return (Vec::new(), &[]);
    };
    let n = usize::from(first % 4) + 1;
    let (ctl, body) = rest.split_at(n.min(rest.len()));
    let sizes: Vec<usize> = if ctl.is_empty() {
        vec![1]
    } else {
        ctl.iter().map(|&b| usize::from(b % 64) + 1).collect()
    };
    let mut out = Vec::new();
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at >= body.len() {
            break;
        }
        let end = (at + size).min(body.len());
        out.push(&body[at..end]);
        at = end;
    }
    (out, body)
}

#[cfg(test)]
mod tests {
    #[test]
    fn pieces_cover_the_body_in_order() {
        let data = b"\x01\x02\x00abcdefg";
        let (parts, body) = super::pieces(data);
        assert_eq!(body, b"abcdefg");
        assert_eq!(parts, vec![&b"abc"[..], b"d", b"efg"]);
        assert_eq!(parts.concat(), body);
        assert!(super::pieces(b"").0.is_empty());
    }
}
