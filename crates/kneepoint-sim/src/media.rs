//! Prompt tokens of the media in a chat message's content parts: images by their patches,
//! audio by its length, read from the headers of the data sent (a PNG's IHDR, a WAV's `fmt `
//! and `data` chunks; a few dozen bytes each, decoded by hand rather than with a codec, since
//! only the sizes matter). Media the simulator cannot read are refused, as servers refuse
//! what they cannot decode.

use base64::Engine as _;
use serde_json::Value;

/// Prompt tokens of an image: one per 28 × 28 patch of a PNG `data:` URL (as vision models
/// that cut images into patches count them), 256 for a URL the simulator does not fetch. An
/// image that is not a PNG is refused, as servers refuse an image they cannot decode.
pub(crate) const PATCH: u32 = 28;
/// The tokens of an image the simulator does not fetch.
pub(crate) const REMOTE_IMAGE_TOKENS: usize = 256;

pub(crate) fn image_tokens(part: &Value) -> Result<usize, String> {
    use base64::Engine as _;
    let url = part
        .get("image_url")
        .and_then(|u| u.get("url").or(Some(u)))
        .and_then(Value::as_str)
        .ok_or("an `image_url` part needs `image_url.url`")?;
    let Some(data) = url.strip_prefix("data:") else {
        return Ok(REMOTE_IMAGE_TOKENS);
    };
    let b64 = data
        .split_once(";base64,")
        .map(|(_, b)| b)
        .ok_or("an image data URL must be base64")?;
    // The PNG signature and IHDR chunk: width and height at bytes 16..24.
    let head: String = b64.chars().take(32).collect();
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(head)
        .map_err(|_| "invalid base64 in an image data URL".to_owned())?;
    if bytes.len() < 24 || &bytes[..8] != b"\x89PNG\r\n\x1a\n" {
        return Err("the image is not a PNG".into());
    }
    let dim = |i: usize| u32::from_be_bytes([bytes[i], bytes[i + 1], bytes[i + 2], bytes[i + 3]]);
    let (w, h) = (dim(16), dim(20));
    Ok((w.div_ceil(PATCH) as usize * h.div_ceil(PATCH) as usize).max(1))
}

/// Prompt tokens per second of audio: 25, one per 40 ms frame, as audio-language models whose
/// encoder pools Whisper's 20 ms frames in pairs count them.
pub(crate) const AUDIO_TOKENS_PER_SECOND: u64 = 25;

/// The base64 characters decoded to find a WAV's chunks (3 KB of header at most).
const WAV_HEAD_CHARS: usize = 4096;

/// Prompt tokens of an `input_audio` part: its length times [`AUDIO_TOKENS_PER_SECOND`],
/// rounded up, at least 1. The data must be a PCM WAV whose `format` is `wav`.
pub(crate) fn audio_tokens(part: &Value) -> Result<usize, String> {
    let audio = part
        .get("input_audio")
        .ok_or("an `input_audio` part needs `input_audio.data` and `input_audio.format`")?;
    let format = audio.get("format").and_then(Value::as_str);
    if format != Some("wav") {
        return Err(format!(
            "the simulator reads WAV audio only (`input_audio.format` is {})",
            format.map_or("missing".to_owned(), |f| format!("`{f}`"))
        ));
    }
    let data = audio
        .get("data")
        .and_then(Value::as_str)
        .ok_or("an `input_audio` part needs `input_audio.data` (base64)")?;
    let head = &data.as_bytes()[..data.len().min(WAV_HEAD_CHARS)];
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(head)
        .map_err(|_| "invalid base64 in `input_audio.data`".to_owned())?;
    // the bytes the body holds: a header's data size beyond them is not believed
    let sent = (data.len() / 4 * 3) as u64;
    let ms = wav_duration_ms(&bytes, sent).ok_or("the audio is not a PCM WAV file")?;
    Ok((ms * AUDIO_TOKENS_PER_SECOND).div_ceil(1000).max(1) as usize)
}

/// A PCM WAV's length in ms from its header: the `data` chunk's size (at most what follows it
/// of the `sent` bytes) over the `fmt ` chunk's bytes per second. Not PCM (format 1): `None`.
fn wav_duration_ms(b: &[u8], sent: u64) -> Option<u64> {
    if b.len() < 12 || &b[..4] != b"RIFF" || &b[8..12] != b"WAVE" {
        return None;
    }
    let le32 = |i: usize| Some(u32::from_le_bytes(b.get(i..i + 4)?.try_into().ok()?));
    let mut at = 12;
    let mut byte_rate = None;
    while at + 8 <= b.len() {
        let id = &b[at..at + 4];
        let size = le32(at + 4)?;
        if id == b"fmt " {
            let pcm = size >= 16 && b.get(at + 8..at + 10) == Some(&[1, 0][..]);
            byte_rate = le32(at + 16).filter(|&r| r > 0 && pcm);
        } else if id == b"data" {
            let size = u64::from(size).min(sent.saturating_sub(at as u64 + 8));
            return Some(size * 1000 / u64::from(byte_rate?));
        }
        at += 8 + size as usize + (size as usize & 1);
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wav_header_gives_its_length() {
        let mut b = b"RIFF\0\0\0\0WAVEfmt ".to_vec();
        b.extend_from_slice(&16u32.to_le_bytes());
        b.extend_from_slice(&[1, 0, 1, 0]);
        b.extend_from_slice(&8_000u32.to_le_bytes());
        b.extend_from_slice(&16_000u32.to_le_bytes());
        b.extend_from_slice(&[2, 0, 16, 0]);
        b.extend_from_slice(b"data");
        b.extend_from_slice(&24_000u32.to_le_bytes());
        assert_eq!(wav_duration_ms(&b, 44 + 24_000), Some(1500));
        // a size beyond the bytes sent counts what was sent
        assert_eq!(wav_duration_ms(&b, 44 + 8_000), Some(500));
        assert_eq!(wav_duration_ms(&b[..30], 44 + 24_000), None);
        assert_eq!(wav_duration_ms(b"RIFF\0\0\0\0AVI LIST", 100), None);
        // IEEE float (format 3) is not PCM
        let mut float = b.clone();
        float[20] = 3;
        assert_eq!(wav_duration_ms(&float, 44 + 24_000), None);
    }
}
