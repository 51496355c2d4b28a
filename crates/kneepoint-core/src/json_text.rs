//! JSON text written fast where it is long: prompts in request bodies and in `inputs.json`.
//!
//! Hand-written, and kept byte for byte equal to `serde_json`'s output (tests check it on every
//! byte value and on generated strings), because `serde_json` escapes a string one byte at a
//! time through a table: a 1,024-token prompt (about 5 KB) cost some 40,000 instructions each
//! time it was written, twice a request (its body and its `inputs.json` entry). Here the
//! string is scanned 16 bytes at a time with a test the compiler turns into vector
//! instructions, and runs with nothing to escape are copied whole.
//!
//! Everything that is not a long string (numbers, small maps) still goes through `serde_json`.

use serde_json::{Map, Value};

/// Bytes scanned as one block: a block with nothing to escape is copied with its run.
const BLOCK: usize = 16;

/// Whether `b` must be escaped inside a JSON string, as `serde_json` decides it: control
/// characters, the quote and the backslash (not DEL, not non-ASCII bytes).
#[inline]
fn needs_escape(b: u8) -> bool {
    b < 0x20 || b == b'"' || b == b'\\'
}

/// Whether any byte of `block` needs escaping (a fixed-size block with no early exit, so that
/// it compiles to a few vector instructions).
#[inline]
fn block_needs_escape(block: &[u8; BLOCK]) -> bool {
    block.iter().fold(false, |any, &b| any | needs_escape(b))
}

/// Appends `s` as a JSON string, quotes included, exactly as `serde_json::to_writer` writes it.
pub fn write_json_str(out: &mut Vec<u8>, s: &str) {
    out.reserve(s.len() + 2);
    out.push(b'"');
    write_json_str_contents(out, s);
    out.push(b'"');
}

/// Appends the escaped contents of `s` (no quotes).
pub fn write_json_str_contents(out: &mut Vec<u8>, s: &str) {
    let bytes = s.as_bytes();
    // Bytes before `run` are written; the ones after it up to the block in hand need no escape.
    let mut run = 0;
    let blocks = bytes.chunks_exact(BLOCK);
    let tail_at = bytes.len() - blocks.remainder().len();
    for (k, block) in blocks.enumerate() {
        if <&[u8; BLOCK]>::try_from(block).is_ok_and(|b| !block_needs_escape(b)) {
            continue;
        }
        escape_bytes(out, bytes, k * BLOCK, &mut run, block);
    }
    escape_bytes(out, bytes, tail_at, &mut run, &bytes[tail_at..]);
    out.extend_from_slice(&bytes[run..]);
}

/// Writes the escapes of `part` (which starts at `at` in `bytes`), each after the unwritten
/// run before it.
#[inline]
fn escape_bytes(out: &mut Vec<u8>, bytes: &[u8], at: usize, run: &mut usize, part: &[u8]) {
    for (j, &b) in part.iter().enumerate() {
        if needs_escape(b) {
            out.extend_from_slice(&bytes[*run..at + j]);
            push_escape(out, b);
            *run = at + j + 1;
        }
    }
}

/// The escape `serde_json` writes for `b`: the short forms where JSON has one, `\u00XX` with
/// lowercase hex digits for the other control characters.
fn push_escape(out: &mut Vec<u8>, b: u8) {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let short = match b {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x09 => b't',
        0x0A => b'n',
        0x0C => b'f',
        0x0D => b'r',
        _ => {
            out.extend_from_slice(&[
                b'\\',
                b'u',
                b'0',
                b'0',
                HEX[usize::from(b >> 4)],
                HEX[usize::from(b & 0xF)],
            ]);
            return;
        }
    };
    out.extend_from_slice(&[b'\\', short]);
}

/// Appends `value` as `serde_json::to_writer_pretty` writes it (two spaces a level, `": "`
/// after keys, `[]` and `{}` when empty), with `indent` more spaces after every line break:
/// a value that sits nested in a larger document written piece by piece.
pub fn write_pretty(out: &mut Vec<u8>, value: &Value, indent: usize) {
    match value {
        Value::String(s) => write_json_str(out, s),
        Value::Array(items) => write_pretty_list(out, items, indent),
        Value::Object(map) if !map.is_empty() => write_pretty_map(out, map, indent),
        // Numbers, booleans, null and empty containers: serde_json's own text. Writing a
        // value into a vector cannot fail.
        other => {
            let _ = serde_json::to_writer(&mut *out, other);
        }
    }
}

/// Appends `items` as the JSON array [`write_pretty`] writes for them.
pub fn write_pretty_list(out: &mut Vec<u8>, items: &[Value], indent: usize) {
    if items.is_empty() {
        out.extend_from_slice(b"[]");
        return;
    }
    out.push(b'[');
    for (k, item) in items.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        new_line(out, indent + 2);
        write_pretty(out, item, indent + 2);
    }
    new_line(out, indent);
    out.push(b']');
}

/// Appends a line break and `indent` spaces.
pub fn new_line(out: &mut Vec<u8>, indent: usize) {
    out.push(b'\n');
    out.resize(out.len() + indent, b' ');
}

fn write_pretty_map(out: &mut Vec<u8>, map: &Map<String, Value>, indent: usize) {
    out.push(b'{');
    for (k, (key, item)) in map.iter().enumerate() {
        if k > 0 {
            out.push(b',');
        }
        new_line(out, indent + 2);
        write_json_str(out, key);
        out.extend_from_slice(b": ");
        write_pretty(out, item, indent + 2);
    }
    new_line(out, indent);
    out.push(b'}');
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fast(s: &str) -> Vec<u8> {
        let mut out = Vec::new();
        write_json_str(&mut out, s);
        out
    }

    #[test]
    fn every_byte_value_is_escaped_as_serde_json_escapes_it() {
        for b in 0u8..=0x7F {
            let s = String::from(char::from(b));
            assert_eq!(fast(&s), serde_json::to_vec(&s).unwrap(), "byte {b:#x}");
            // inside a run, at a block edge and after it
            for at in [0, 1, 15, 16, 17, 31, 40] {
                let mut t = "a".repeat(at);
                t.push(char::from(b));
                t.push_str(&"é".repeat(9));
                assert_eq!(
                    fast(&t),
                    serde_json::to_vec(&t).unwrap(),
                    "byte {b:#x} at {at}"
                );
            }
        }
    }

    #[test]
    fn generated_strings_match_serde_json() {
        // a small linear congruential generator: no dependency, the same strings every run
        let mut x = 0x2545_F491_4F6C_DD1Du64;
        let alphabet: Vec<char> = "ab \"\\\n\r\t\u{8}\u{c}\u{1}\u{1f}\u{7f}é€😀/'"
            .chars()
            .collect();
        for len in 0..200 {
            let s: String = (0..len)
                .map(|_| {
                    x = x.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    alphabet[(x >> 33) as usize % alphabet.len()]
                })
                .collect();
            assert_eq!(fast(&s), serde_json::to_vec(&s).unwrap(), "{s:?}");
        }
        let long = "plain words only, ".repeat(400);
        assert_eq!(fast(&long), serde_json::to_vec(&long).unwrap());
    }

    #[test]
    fn pretty_values_match_serde_json_indented() {
        let values = [
            json!({"model": "m", "messages": [{"role": "user", "content": "a\n\"b\""}],
                   "stream": true, "max_tokens": 16, "temperature": 0.5, "top_p": -1.25e-7,
                   "empty_list": [], "empty_map": {}, "none": null,
                   "nested": [[1, 2], [], [{"k": [false]}]]}),
            json!([]),
            json!({}),
            json!("only a string"),
            json!(12345678901234567u64),
            json!([1.0, 0.1, 1e300, -0.0]),
        ];
        for v in &values {
            for indent in [0, 4] {
                let mut out = Vec::new();
                write_pretty(&mut out, v, indent);
                let plain = serde_json::to_string_pretty(v).unwrap();
                let want = plain.replace('\n', &format!("\n{}", " ".repeat(indent)));
                assert_eq!(String::from_utf8(out).unwrap(), want);
            }
        }
    }
}
