//! What `inputs.json` lists for a request: the body the transport sends, with media shortened.

/// Images longer than this are shortened in `inputs.json`.
const INPUT_IMAGE_BYTES: usize = 256;

/// The body `transport` sends for `request`, for `inputs.json`: as sent, but with image data
/// URLs and audio data longer than [`INPUT_IMAGE_BYTES`] shortened to their kind, size and a
/// hash (a run's media would otherwise make the file hundreds of megabytes; the seed
/// reproduces them), and fields under secret-named keys (an `extra_body`'s `api_key`)
/// `[redacted]`: the file is written as requests go, not through the scrubbing writer.
pub(crate) fn input_payload(
    transport: &dyn kneepoint_core::Transport,
    request: &kneepoint_core::Request,
) -> Option<serde_json::Value> {
    let mut body = transport.payload(request)?;
    if !request.images.is_empty() || !request.audio.is_empty() {
        shorten_media(&mut body);
    }
    kneepoint_core::secrets::redact_json(&mut body);
    Some(body)
}

/// `<N bytes, fnv1a H>` for base64 `data`.
fn summary(data: &str) -> String {
    let hash = data.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    });
    format!("<{} bytes, fnv1a {hash:016x}>", data.len())
}

fn shorten_media(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) if s.starts_with("data:image/") && s.len() > INPUT_IMAGE_BYTES => {
            let (head, data) = s.split_once(',').unwrap_or((s.as_str(), ""));
            *s = format!("{head},{}", summary(data));
        }
        Value::Array(a) => a.iter_mut().for_each(shorten_media),
        Value::Object(o) => {
            if let Some(Value::String(s)) = o
                .get_mut("input_audio")
                .and_then(|a| a.get_mut("data"))
                .filter(|d| d.as_str().is_some_and(|s| s.len() > INPUT_IMAGE_BYTES))
            {
                *s = summary(s);
            }
            o.values_mut().for_each(shorten_media)
        }
        _ => {}
    }
}
