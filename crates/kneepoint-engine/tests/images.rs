//! Images in chat: PNGs made locally, sent as OpenAI content parts; the simulator counts a prompt
//! token per 28 × 28 patch, so the server's prompt count is the text's plus the images'.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use kneepoint_engine::LevelSettings;
use kneepoint_sim::SimProfile;
use kneepoint_transport::Api;
use kneepoint_workload::{Images, LengthDist, SyntheticConfig};
use serde_json::Value;

async fn sweep(images: Option<Images>, dir: &std::path::Path) -> anyhow::Result<Vec<Value>> {
    let (_server, transport) = support::simulator(SimProfile::fast(), Api::Chat).await?;
    let mut config = SyntheticConfig::new(LengthDist::Fixed(40), LengthDist::Fixed(8), 2);
    config.images = images;
    let settings = LevelSettings::default();
    let level = support::one_level(transport, config, settings, (4, 16), dir).await?;
    support::records(&level)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn images_go_as_content_parts_and_count_in_the_servers_prompt() -> anyhow::Result<()> {
    let (with, without) = (tempfile::tempdir()?, tempfile::tempdir()?);
    // 64 x 60 pixels: 3 x 3 patches of 28, so 9 prompt tokens an image
    let images = Images {
        pool: 4,
        ..Images::new(2, 64, 60)
    };
    let a = sweep(Some(images), with.path()).await?;
    let b = sweep(None, without.path()).await?;
    assert_eq!((a.len(), b.len()), (16, 16));
    for (x, y) in a.iter().zip(&b) {
        assert!(x["error"].is_null() && y["error"].is_null(), "{x} {y}");
        let (mx, my) = (&x["metadata"], &y["metadata"]);
        assert_eq!(mx["session_num"], my["session_num"]);
        assert_eq!(mx["image_count"], 2);
        assert!(my["image_count"].is_null());
        // the same prompt, plus 2 x 9 image tokens on the server's side
        let (sx, sy) = (
            mx["server_input_tokens"].as_u64().unwrap(),
            my["server_input_tokens"].as_u64().unwrap(),
        );
        assert_eq!(sx, sy + 18, "{sx} vs {sy}");
    }
    let level = std::fs::read_dir(with.path())?
        .filter_map(Result::ok)
        .find(|e| e.path().join("inputs.json").is_file())
        .unwrap()
        .path();
    let inputs = support::json(&level, "inputs.json")?;
    let parts = inputs["data"][0]["payloads"][0]["messages"][0]["content"]
        .as_array()
        .unwrap();
    assert_eq!(parts.len(), 3);
    assert_eq!(parts[0]["type"], "text");
    // the image as sent, shortened in the file: its kind, size and hash
    let url = parts[1]["image_url"]["url"].as_str().unwrap();
    assert!(
        url.starts_with("data:image/png;base64,<") && url.contains("bytes, fnv1a "),
        "{url}"
    );
    Ok(())
}
