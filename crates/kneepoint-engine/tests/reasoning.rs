//! A reasoning model (the simulator streaming half of each response as `reasoning_content`):
//! reasoning tokens are counted apart from the answer's, from the server's usage
//! (`completion_tokens_details.reasoning_tokens`) and by the client, and the time to the first
//! answer token is later than the time to the first token.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod support;

use kneepoint_engine::LevelSettings;
use kneepoint_sim::SimProfile;
use kneepoint_transport::Api;
use kneepoint_workload::{LengthDist, SyntheticConfig};

const OSL: u32 = 20;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reasoning_tokens_are_counted_apart_and_delay_the_first_answer_token() -> anyhow::Result<()>
{
    let dir = tempfile::tempdir()?;
    let mut profile = SimProfile::fast();
    profile.reasoning_share = 0.5;
    let (_server, transport) = support::simulator(profile, Api::Chat).await?;
    let config = SyntheticConfig::new(LengthDist::Fixed(32), LengthDist::Fixed(OSL), 3);
    let mut settings = LevelSettings::default();
    settings.export_outputs = true;
    let level = support::one_level(transport, config, settings, (4, 24), dir.path()).await?;
    let mut n = 0;
    for r in support::records(&level)? {
        let (md, m) = (&r["metadata"], &r["metrics"]);
        assert!(r["error"].is_null(), "{r}");
        // the server's count: half of the 20 tokens, all of them in the output length
        assert_eq!(md["usage_reasoning_tokens"], 10, "{md}");
        assert_eq!(m["reasoning_token_count"]["value"], 10.0);
        assert_eq!(m["output_token_count"]["value"], 10.0);
        assert_eq!(m["output_sequence_length"]["value"], f64::from(OSL));
        // the client counted the reasoning text on its own (one word a token, give or take)
        let client = md["client_reasoning_tokens"].as_u64().unwrap();
        assert!((8..=14).contains(&client), "{client}");
        // ten reasoning tokens stream before the first answer token
        let (ttft, ttfo) = (
            m["time_to_first_token"]["value"].as_f64().unwrap(),
            m["time_to_first_output_token"]["value"].as_f64().unwrap(),
        );
        // Never earlier; equal when a stalled read took both in one segment (the averages
        // below show the reasoning time).
        assert!(ttfo >= ttft, "{ttfo} vs {ttft}");
        n += 1;
    }
    assert_eq!(n, 24);
    // outputs.json: each request's answer and reasoning, as generated
    let outputs = support::json(&level, "outputs.json")?;
    let data = outputs["data"].as_array().unwrap();
    assert_eq!(data.len(), 24);
    for o in data {
        let words = |k: &str| o[k].as_str().unwrap().split_whitespace().count();
        assert_eq!(
            (words("reasoning_text"), words("response_text")),
            (10, 10),
            "{o}"
        );
        assert_eq!(o["metrics"]["reasoning_token_count"], 10);
    }
    let agg = support::json(&level, "profile_export_aiperf.json")?;
    assert_eq!(
        agg["reasoning_token_count"]["avg"], 10.0,
        "{}",
        agg["reasoning_token_count"]
    );
    assert_eq!(agg["output_token_count"]["avg"], 10.0);
    assert!(
        agg["time_to_first_output_token"]["avg"].as_f64().unwrap()
            > agg["time_to_first_token"]["avg"].as_f64().unwrap()
    );
    Ok(())
}
