//! Audio for chat models that take it: WAV clips made locally (no download), deterministic
//! under a seed, sent as OpenAI `input_audio` content parts. As with images, a pool of
//! distinct clips is made once and each request draws from it.
//!
//! Each clip is 16-bit mono PCM, written with `hound`, holding a voice-like signal: a
//! fundamental between 100 and 250 Hz with two harmonics, its pitch gliding and its loudness
//! rising and falling at a syllable rate, over a little noise. A speech model's encoder
//! counts its tokens by duration, so only the length matters to the server's cost; the
//! signal is not silence so that no server can skip it as such.

use std::sync::Arc;

use base64::Engine as _;
use kneepoint_core::Audio;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use rand_distr::{Distribution, Normal};
use serde::{Deserialize, Serialize};

use crate::Error;

/// The most samples a pool may hold at its longest (about 128 MB of PCM while it is made).
const MAX_POOL_SAMPLES: f64 = 64.0 * 1024.0 * 1024.0;
/// The longest clip, seconds.
pub const MAX_CLIP_SECONDS: f64 = 600.0;
/// The most clips one request carries.
const MAX_PER_REQUEST: u32 = 64;
/// The most audio one request may carry, as WAV bytes before base64 (which adds a third): a
/// request of 64 ten-minute 48 kHz clips would be 5 GB, and a few in flight exhaust memory.
pub const MAX_REQUEST_AUDIO_BYTES: f64 = 32.0 * 1024.0 * 1024.0;
/// The shortest clip, seconds (a draw below it is raised to it).
const MIN_CLIP_SECONDS: f64 = 0.1;

/// Audio clips per request and their length (AIPerf's `--audio-*` options).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct AudioClips {
    /// Clips attached to each request (to the user's message).
    pub count: u32,
    /// Mean length, seconds.
    pub length_s_mean: f64,
    /// Standard deviation of the length, seconds (0: every clip the mean).
    pub length_s_stddev: f64,
    /// Samples per second.
    pub sample_rate: u32,
    /// Distinct clips made (each request draws from them at random).
    pub pool: u32,
}

impl AudioClips {
    /// `count` clips of `seconds` each per request, at 16 kHz, from a pool of 16.
    pub fn new(count: u32, seconds: f64) -> Self {
        AudioClips {
            count,
            length_s_mean: seconds,
            length_s_stddev: 0.0,
            sample_rate: 16_000,
            pool: 16,
        }
    }

    /// Checks the counts, lengths and rate (and that the pool is not too large to make).
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: &str| {
            Err(Error::InvalidAudio {
                reason: reason.into(),
            })
        };
        if self.count == 0 || self.pool == 0 {
            return bad("count and pool must be at least 1");
        }
        if self.count > MAX_PER_REQUEST {
            return bad("at most 64 clips per request");
        }
        if !(self.length_s_mean >= MIN_CLIP_SECONDS && self.length_s_mean <= MAX_CLIP_SECONDS) {
            return bad("the mean length must be between 0.1 and 600 seconds");
        }
        if !(self.length_s_stddev >= 0.0 && self.length_s_stddev.is_finite()) {
            return bad("the length's standard deviation must be 0 or more");
        }
        if !(8_000..=48_000).contains(&self.sample_rate) {
            return bad("the sample rate must be between 8000 and 48000 Hz");
        }
        let longest = self.longest_s();
        if f64::from(self.pool) * longest * f64::from(self.sample_rate) > MAX_POOL_SAMPLES {
            return bad("the pool holds at most 64 million samples (pool × length × rate)");
        }
        // 16-bit mono samples, the longest clips drawn for every slot of the request.
        let per_request = f64::from(self.count) * longest * f64::from(self.sample_rate) * 2.0;
        if per_request > MAX_REQUEST_AUDIO_BYTES {
            return Err(Error::InvalidAudio {
                reason: format!(
                    "a request would carry up to {:.0} MB of audio ({} clips × {:.1} s × {} Hz × 2 bytes, before base64); at most {:.0} MB: fewer or shorter clips, or a lower sample rate",
                    per_request / 1e6,
                    self.count,
                    longest,
                    self.sample_rate,
                    MAX_REQUEST_AUDIO_BYTES / 1e6
                ),
            });
        }
        Ok(())
    }

    /// The longest clip drawn: three standard deviations above the mean, at most 600 s.
    fn longest_s(&self) -> f64 {
        (self.length_s_mean + 3.0 * self.length_s_stddev).min(MAX_CLIP_SECONDS)
    }

    /// Makes the pool; lengths are drawn from a normal truncated to 0.1 s and three standard
    /// deviations above the mean (600 s at most), rounded to the millisecond.
    pub(crate) fn pool(&self, seed: u64) -> Result<Vec<Audio>, Error> {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x6175_6469_6f00);
        let normal = Normal::new(self.length_s_mean, self.length_s_stddev).map_err(|e| {
            Error::InvalidAudio {
                reason: e.to_string(),
            }
        })?;
        (0..self.pool)
            .map(|_| {
                let seconds = normal
                    .sample(&mut rng)
                    .clamp(MIN_CLIP_SECONDS, self.longest_s());
                let duration_ms = (seconds * 1000.0).round() as u32;
                let wav = wav_bytes(duration_ms, self.sample_rate, &mut rng)?;
                Ok(Audio {
                    format: Arc::from("wav"),
                    duration_ms,
                    data: Arc::from(base64::engine::general_purpose::STANDARD.encode(&wav)),
                })
            })
            .collect()
    }
}

/// A mono 16-bit WAV of `duration_ms` at `rate` holding the voice-like signal.
fn wav_bytes(duration_ms: u32, rate: u32, rng: &mut StdRng) -> Result<Vec<u8>, Error> {
    let spec = hound::WavSpec {
        channels: 1,
        sample_rate: rate,
        bits_per_sample: 16,
        sample_format: hound::SampleFormat::Int,
    };
    let encode = |e: hound::Error| Error::InvalidAudio {
        reason: format!("writing a WAV failed: {e}"),
    };
    let samples = u64::from(duration_ms) * u64::from(rate) / 1000;
    let pitch: f64 = rng.random_range(100.0..250.0);
    let glide: f64 = rng.random_range(-0.3..0.3);
    let syllables: f64 = rng.random_range(3.0..5.0);
    let mut out = std::io::Cursor::new(Vec::with_capacity(44 + 2 * samples as usize));
    {
        let mut w = hound::WavWriter::new(&mut out, spec).map_err(encode)?;
        let tau = std::f64::consts::TAU;
        let mut phase = 0.0f64;
        for n in 0..samples {
            let t = n as f64 / f64::from(rate);
            let f0 = pitch * (1.0 + glide * (tau * 0.25 * t).sin());
            phase += tau * f0 / f64::from(rate);
            let voice = phase.sin() + 0.5 * (2.0 * phase).sin() + 0.25 * (3.0 * phase).sin();
            let loudness = 0.5 + 0.5 * (tau * syllables * t).sin().abs();
            let noise: f64 = rng.random_range(-0.02..0.02);
            let x = (0.35 * loudness * voice / 1.75 + noise).clamp(-1.0, 1.0);
            w.write_sample((x * f64::from(i16::MAX)) as i16)
                .map_err(encode)?;
        }
        w.finalize().map_err(encode)?;
    }
    Ok(out.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_of_distinct_valid_wavs_of_the_asked_length() {
        let clips = AudioClips {
            pool: 3,
            length_s_stddev: 0.5,
            ..AudioClips::new(2, 1.5)
        };
        clips.validate().unwrap();
        let pool = clips.pool(7).unwrap();
        assert_eq!(pool.len(), 3);
        assert_ne!(pool[0].data, pool[1].data);
        for a in &pool {
            assert_eq!(&*a.format, "wav");
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(&*a.data)
                .unwrap();
            let r = hound::WavReader::new(std::io::Cursor::new(bytes)).unwrap();
            let spec = r.spec();
            assert_eq!(
                (spec.channels, spec.sample_rate, spec.bits_per_sample),
                (1, 16_000, 16)
            );
            // the header's length is the clip's, to the sample
            assert_eq!(
                u64::from(r.duration()),
                u64::from(a.duration_ms) * 16_000 / 1000
            );
            let peak = r
                .into_samples::<i16>()
                .map(|s| s.unwrap().unsigned_abs())
                .max()
                .unwrap();
            assert!(peak > 1000, "not silence: peak {peak}");
        }
        // the same seed, the same clips; lengths spread around the mean
        assert_eq!(clips.pool(7).unwrap(), pool);
        assert!(pool.iter().any(|a| a.duration_ms != 1500));
    }

    #[test]
    fn impossible_settings_are_refused() {
        assert!(AudioClips::new(0, 1.0).validate().is_err());
        assert!(AudioClips::new(65, 1.0).validate().is_err());
        assert!(AudioClips::new(1, 0.0).validate().is_err());
        assert!(AudioClips::new(1, f64::NAN).validate().is_err());
        assert!(AudioClips::new(1, 601.0).validate().is_err());
        let slow = AudioClips {
            sample_rate: 4_000,
            ..AudioClips::new(1, 1.0)
        };
        assert!(slow.validate().is_err());
        let huge = AudioClips {
            pool: 1000,
            ..AudioClips::new(1, 600.0)
        };
        assert!(huge.validate().is_err());
    }
}
