//! Images for multimodal chat requests: PNGs made locally (no download), deterministic under a
//! seed, sent as `data:` URLs in OpenAI content parts. A pool of distinct images is made once
//! and each request draws from it, so that a long run does not hold a million encoded images
//! (and a server that caches images by content sees repeats, as it would from real users).

use std::sync::Arc;

use base64::Engine as _;
use kneepoint_core::Image;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde::{Deserialize, Serialize};

use crate::Error;

/// The most pixels a pool may hold (about 200 MB of raw pixels while it is made).
const MAX_POOL_PIXELS: u64 = 64 << 20;

/// Images per request and their size.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Images {
    /// Images attached to each request (to the user's message).
    pub count: u32,
    /// Pixels across.
    pub width: u32,
    /// Pixels down.
    pub height: u32,
    /// Distinct images made (each request draws from them at random).
    pub pool: u32,
}

impl Images {
    /// `count` images of `width` × `height` per request, from a pool of 16.
    pub fn new(count: u32, width: u32, height: u32) -> Self {
        Images {
            count,
            width,
            height,
            pool: 16,
        }
    }

    /// Checks the counts and sizes (and that the pool is not too large to make).
    pub fn validate(&self) -> Result<(), Error> {
        let bad = |reason: &str| {
            Err(Error::InvalidImages {
                reason: reason.into(),
            })
        };
        if self.count == 0 || self.pool == 0 {
            return bad("count and pool must be at least 1");
        }
        if self.count > 64 {
            return bad("at most 64 images per request");
        }
        if self.width == 0 || self.height == 0 || self.width > 8192 || self.height > 8192 {
            return bad("width and height must be between 1 and 8192 pixels");
        }
        let pixels = u64::from(self.pool) * u64::from(self.width) * u64::from(self.height);
        if pixels > MAX_POOL_PIXELS {
            return bad("the pool holds at most 64 million pixels (pool × width × height)");
        }
        Ok(())
    }

    /// Makes the pool: each image a colour gradient with noise (so that it does not compress
    /// to nothing), PNG-encoded.
    pub(crate) fn pool(&self, seed: u64) -> Result<Vec<Image>, Error> {
        let mut rng = StdRng::seed_from_u64(seed ^ 0x696d_6167_6573);
        (0..self.pool)
            .map(|_| {
                let png = png_bytes(self.width, self.height, &mut rng)?;
                let url = format!(
                    "data:image/png;base64,{}",
                    base64::engine::general_purpose::STANDARD.encode(&png)
                );
                Ok(Image {
                    width: self.width,
                    height: self.height,
                    url: Arc::from(url),
                })
            })
            .collect()
    }
}

fn png_bytes(width: u32, height: u32, rng: &mut StdRng) -> Result<Vec<u8>, Error> {
    let (r0, g0, b0): (u8, u8, u8) = (rng.random(), rng.random(), rng.random());
    let mut pixels = Vec::with_capacity(width as usize * height as usize * 3);
    for y in 0..height {
        for x in 0..width {
            let fx = (x * 255 / width.max(1)) as u8;
            let fy = (y * 255 / height.max(1)) as u8;
            let n: u8 = rng.random_range(0..32);
            pixels.extend_from_slice(&[
                r0.wrapping_add(fx).wrapping_add(n),
                g0.wrapping_add(fy).wrapping_add(n),
                b0.wrapping_add(fx / 2 + fy / 2),
            ]);
        }
    }
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, width, height);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let encode = |e: png::EncodingError| Error::InvalidImages {
            reason: format!("encoding a PNG failed: {e}"),
        };
        let mut writer = enc.write_header().map_err(encode)?;
        writer.write_image_data(&pixels).map_err(encode)?;
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pool_of_distinct_valid_pngs_of_the_asked_size() {
        let imgs = Images {
            pool: 3,
            ..Images::new(2, 40, 30)
        };
        let pool = imgs.pool(7).unwrap();
        assert_eq!(pool.len(), 3);
        assert_ne!(pool[0].url, pool[1].url);
        for i in &pool {
            let b64 = i.url.strip_prefix("data:image/png;base64,").unwrap();
            let bytes = base64::engine::general_purpose::STANDARD
                .decode(b64)
                .unwrap();
            let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
            let reader = decoder.read_info().unwrap();
            assert_eq!((reader.info().width, reader.info().height), (40, 30));
        }
        // the same seed, the same images
        assert_eq!(imgs.pool(7).unwrap(), pool);
        assert!(Images::new(0, 4, 4).validate().is_err());
        assert!(Images::new(65, 4, 4).validate().is_err());
        assert!(Images::new(1, 0, 4).validate().is_err());
        let huge = Images {
            pool: 1000,
            ..Images::new(1, 8192, 8192)
        };
        assert!(huge.validate().is_err());
    }
}
