//! What to send: lengths, mixtures, shared prefixes and datasets, from the flags and
//! `[workload]`.

use kneepoint_workload::{Conversations, DatasetConfig, LengthDist, Lengths, SharedPrefix};

use crate::error::bail;
use crate::file::WorkloadSection;
use crate::limits::dist;
use crate::{CommonArgs, Result};

/// The mean input and output lengths the flags and `[workload]` ask for (1024 / 256 unless
/// set).
pub(crate) fn mean_lengths(wl: &WorkloadSection) -> (f64, f64) {
    let first = |l: &Option<Vec<f64>>| l.as_ref().and_then(|l| l.first().copied());
    (
        first(&wl.isl).unwrap_or(1024.0),
        first(&wl.osl).unwrap_or(256.0),
    )
}

/// The seed of one length's prompts in a length sweep: each length draws its own text (with
/// one seed, a longer prompt would start with a shorter one's text, and a server's prefix cache
/// would prefill only the difference).
pub(crate) fn length_seed(seed: u64, p: kneepoint_planner::LengthPoint) -> u64 {
    seed ^ (u64::from(p.isl) << 32 | u64::from(p.osl))
}

/// The length pairs of a length sweep: `None` unless `--isl` or `--osl` lists several lengths
/// (a single one of either comes from the flags, `[workload]` or the default).
pub(crate) fn length_points(
    wl: &WorkloadSection,
) -> Result<Option<Vec<kneepoint_planner::LengthPoint>>> {
    let (isl, osl) = (
        wl.isl.as_deref().unwrap_or_default(),
        wl.osl.as_deref().unwrap_or_default(),
    );
    if isl.len() <= 1 && osl.len() <= 1 {
        return Ok(None);
    }
    let (isl_mean, osl_mean) = mean_lengths(wl);
    let whole = |v: f64, what: &str| -> Result<u32> {
        dist(v, 0.0, what)?;
        if v.fract() != 0.0 {
            bail!("{what} {v} is not a whole number of tokens");
        }
        Ok(v as u32)
    };
    let list = |given: &[f64], fallback: f64, what: &str| -> Result<Vec<u32>> {
        if given.is_empty() {
            return Ok(vec![whole(fallback.round(), what)?]);
        }
        given.iter().map(|&v| whole(v, what)).collect()
    };
    let points = kneepoint_planner::length_points(
        &list(isl, isl_mean, "input length")?,
        &list(osl, osl_mean, "output length")?,
    )?;
    Ok(Some(points))
}

/// Input and output length distributions.
pub(crate) fn lengths(wl: &WorkloadSection) -> Result<(LengthDist, LengthDist)> {
    let (isl_mean, osl_mean) = mean_lengths(wl);
    let isl = dist(isl_mean, wl.isl_stddev.unwrap_or(0.0), "input length")?;
    let osl = dist(osl_mean, wl.osl_stddev.unwrap_or(0.0), "output length")?;
    Ok((isl, osl))
}

/// A weighted mixture of (isl, osl) pairs replacing the two distributions.
pub(crate) fn mixture(wl: &WorkloadSection) -> Result<Option<Lengths>> {
    Ok(match (&wl.mix, &wl.mixture) {
        (Some(m), _) => Some(Lengths::parse_mixture(m)?),
        (None, Some(entries)) => {
            let l = Lengths::Mixture(entries.clone());
            l.validate()?;
            Some(l)
        }
        (None, None) => None,
    })
}

/// Multi-turn conversations (none when the mean is absent or 1 without spread).
pub(crate) fn conversations(wl: &WorkloadSection) -> Result<Option<Conversations>> {
    let mean = wl.conversation_turn_mean;
    let stddev = wl.conversation_turn_stddev.unwrap_or(0.0);
    let Some(mean) = mean else {
        if stddev > 0.0 {
            bail!("conversation_turn_stddev needs conversation_turn_mean");
        }
        return Ok(None);
    };
    if !(mean.is_finite() && mean >= 1.0 && stddev.is_finite() && stddev >= 0.0) {
        bail!(
            "conversation_turn_mean must be at least 1 and conversation_turn_stddev not negative"
        );
    }
    if mean == 1.0 && stddev == 0.0 {
        return Ok(None);
    }
    let max = f64::from(kneepoint_workload::MAX_TURNS);
    if mean > max || mean + 10.0 * stddev > max {
        bail!("conversation_turn_mean (+ 10 stddev) must be at most {max} turns");
    }
    let mut c = turn_delays(wl)?;
    c.turns = LengthDist::mean_stddev(mean, stddev);
    Ok(Some(c))
}

/// The think-time options alone (the turns come from elsewhere: a dataset).
pub(crate) fn turn_delays(wl: &WorkloadSection) -> Result<Conversations> {
    let c = Conversations {
        turns: LengthDist::Fixed(1),
        delay_ms_mean: wl.conversation_turn_delay_mean.unwrap_or(0.0),
        delay_ms_stddev: wl.conversation_turn_delay_stddev.unwrap_or(0.0),
        delay_ratio: wl.conversation_turn_delay_ratio.unwrap_or(1.0),
    };
    c.validate()?;
    if c.delay_ms_mean * c.delay_ratio > kneepoint_workload::MAX_THINK_TIME_MS {
        bail!("the mean think time must be at most a day (86,400,000 ms)");
    }
    Ok(c)
}

/// Shared system-prompt prefixes.
pub(crate) fn prefix(wl: &WorkloadSection) -> Option<SharedPrefix> {
    match wl.shared_prefix_tokens {
        None | Some(0) => None,
        Some(tokens) => Some(SharedPrefix {
            tokens,
            pool: wl.shared_prefix_pool.unwrap_or(1),
        }),
    }
}

/// A dataset or trace instead of synthetic prompts.
pub(crate) fn dataset(
    args: &CommonArgs,
    wl: &WorkloadSection,
    osl: &LengthDist,
) -> Result<Option<DatasetConfig>> {
    Ok(match wl.dataset.clone() {
        None => None,
        Some(path) => {
            let mut d = DatasetConfig::new(path);
            if let Some(f) = wl.dataset_format {
                d.format = Some(f);
            }
            if let Some(o) = wl.sampling {
                d.sampling = o;
            }
            if let Some(b) = wl.trace_block_tokens {
                d.trace_block_tokens = b;
            }
            if let Some(l) = wl.session_input_length {
                d.session_length = l;
            }
            d.seed = wl.seed.unwrap_or(0);
            d.default_output_tokens = osl.mean().round().max(1.0) as u32;
            d.output_control =
                !args.endpoint.no_output_control && wl.output_control.unwrap_or(true);
            Some(d)
        }
    })
}

/// Audio clips per request, where they can be sent: chat requests of synthetic prompts.
pub(crate) fn audio(
    wl: &WorkloadSection,
    api: kneepoint_transport::Api,
    sagemaker: bool,
) -> Result<Option<kneepoint_workload::AudioClips>> {
    let count = wl.audio_per_request.unwrap_or(0);
    if count == 0 {
        return Ok(None);
    }
    if api != kneepoint_transport::Api::Chat || sagemaker {
        bail!(
            "audio goes in chat requests to an OpenAI-compatible endpoint (--endpoint-type chat)"
        );
    }
    if wl.dataset.is_some() {
        bail!("audio is added to synthetic prompts: drop --dataset or --audio-per-request");
    }
    let clips = kneepoint_workload::AudioClips {
        count,
        length_s_mean: wl.audio_length_mean.unwrap_or(5.0),
        length_s_stddev: wl.audio_length_stddev.unwrap_or(0.0),
        sample_rate: wl.audio_sample_rate.unwrap_or(16_000),
        pool: wl.audio_pool.unwrap_or(16),
    };
    clips.validate()?;
    Ok(Some(clips))
}
