//! Instance types: GPUs, their memory, bandwidth and compute, and a dated price. A built-in
//! table of common SageMaker GPU instances, extended or overridden by a TOML or JSON file.

use serde::{Deserialize, Serialize};

use crate::Error;

/// One instance type.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct InstanceType {
    /// Its name, e.g. `ml.g7e.2xlarge`.
    pub name: String,
    /// The GPU model.
    pub gpu: String,
    /// GPUs per instance.
    pub gpu_count: u32,
    /// Memory of one GPU as the driver reports it, GiB (what `gpu_memory_utilization` is a
    /// share of).
    pub gpu_memory_gib: f64,
    /// Memory bandwidth of one GPU, GB/s.
    pub memory_bandwidth_gb_s: f64,
    /// Peak dense (not sparse) BF16 tensor throughput of one GPU, TFLOP/s.
    pub bf16_tflops: f64,
    /// Price of one instance-hour, when known.
    #[serde(default)]
    pub price_per_hour: Option<f64>,
    /// When the price was read (defaults to the catalog's date).
    #[serde(default)]
    pub price_as_of: Option<String>,
    /// The region the price is for (defaults to the catalog's).
    #[serde(default)]
    pub region: Option<String>,
    /// How its GPUs exchange a tensor-parallel engine's all-reduces (absent: PCIe Gen4's
    /// figures, [`Interconnect::pcie_gen4`]).
    #[serde(default)]
    pub interconnect: Option<Interconnect>,
}

/// The link between an instance's GPUs, as a ring all-reduce sees it: what a tensor-parallel
/// step pays per all-reduce is `2(t-1)/t` of its bytes at [`Interconnect::allreduce_gb_s`]
/// plus `2(t-1)` hops of [`Interconnect::hop_latency_us`]. Figures and their sources:
/// docs/recommend.md, "Tensor parallelism that costs".
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Interconnect {
    /// `pcie` or `nvlink`.
    pub kind: String,
    /// PCIe's or NVLink's generation (4 for PCIe Gen4 x16 or NVLink 4).
    pub generation: u32,
    /// The bandwidth an all-reduce achieves between the GPUs (NCCL's "bus bandwidth"), GB/s:
    /// measured, well below the link's datasheet figure.
    pub allreduce_gb_s: f64,
    /// What each hop of a ring all-reduce adds, µs (small messages).
    pub hop_latency_us: f64,
}

impl Interconnect {
    const fn of(kind: &'static str, generation: u32, gb_s: f64, hop_us: f64) -> Link {
        (kind, generation, gb_s, hop_us)
    }

    fn from_link((kind, generation, gb_s, hop_us): Link) -> Self {
        Interconnect {
            kind: kind.into(),
            generation,
            allreduce_gb_s: gb_s,
            hop_latency_us: hop_us,
        }
    }

    /// PCIe Gen4 x16 between GPUs (no NVLink): the figures an instance without its own take.
    pub fn pcie_gen4() -> Self {
        Interconnect::from_link(PCIE4)
    }

    /// Seconds one all-reduce of `bytes` takes over `t` GPUs (0 for one).
    pub fn allreduce_s(&self, bytes: f64, t: u32) -> f64 {
        if t <= 1 {
            return 0.0;
        }
        let t = f64::from(t);
        2.0 * (t - 1.0) / t * bytes / (self.allreduce_gb_s * 1e9)
            + 2.0 * (t - 1.0) * self.hop_latency_us * 1e-6
    }
}

/// (kind, generation, all-reduce GB/s, µs a hop).
type Link = (&'static str, u32, f64, f64);
// PCIe: NCCL bus bandwidth measured 24.7 GB/s on Gen4 x16 (5 GPUs), 28-35 GB/s on Gen5 x16;
// small all-reduces 19-24 µs over 4 GPUs and 45 µs over 8 (about 3.3 µs a hop).
const PCIE4: Link = Interconnect::of("pcie", 4, 24.0, 3.3);
const PCIE5: Link = Interconnect::of("pcie", 5, 30.0, 3.3);
// NVLink: about 200 GB/s bus bandwidth on 8 A100s (NVLink 3); NCCL ring 10 / 16.9 / 33.7 µs
// over 2 / 4 / 8 A100s (about 2.5 µs a hop); vLLM's custom all-reduce 3.7-5.9 µs over 2-8
// H100s (NVLink 4, under 1 µs a hop).
const NVLINK3: Link = Interconnect::of("nvlink", 3, 200.0, 2.5);
const NVLINK4: Link = Interconnect::of("nvlink", 4, 400.0, 0.8);
const NVLINK5: Link = Interconnect::of("nvlink", 5, 700.0, 0.6);

/// A list of instance types with the date and region of its prices.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Catalog {
    /// When the prices were read.
    pub as_of: String,
    /// The prices' region.
    pub region: String,
    /// The prices' currency.
    #[serde(default = "usd")]
    pub currency: String,
    /// Where the numbers come from.
    #[serde(default)]
    pub source: Option<String>,
    /// The instance types.
    pub instances: Vec<InstanceType>,
}

fn usd() -> String {
    "USD".into()
}

/// (GPU, memory GiB as the driver reports it, GB/s, dense BF16 TFLOP/s).
type Gpu = (&'static str, f64, f64, f64);
const A10G: Gpu = ("NVIDIA A10G", 22.5, 600.0, 70.0);
const L4: Gpu = ("NVIDIA L4", 22.5, 300.0, 121.0);
const L40S: Gpu = ("NVIDIA L40S", 45.0, 864.0, 362.0);
const RTX_PRO_6000: Gpu = ("NVIDIA RTX PRO 6000 Blackwell Server", 95.6, 1597.0, 500.0);
const A100_40: Gpu = ("NVIDIA A100 40GB", 40.0, 1555.0, 312.0);
const A100_80: Gpu = ("NVIDIA A100 80GB", 80.0, 2039.0, 312.0);
const H100: Gpu = ("NVIDIA H100 80GB", 79.6, 3350.0, 989.0);
const H200: Gpu = ("NVIDIA H200", 140.4, 4800.0, 989.0);
const B200: Gpu = ("NVIDIA B200", 179.0, 8000.0, 2250.0);

/// (instance, GPU, count, SageMaker real-time price per hour in us-east-1 when known, the
/// GPUs' link).
const BUILT_IN: &[(&str, Gpu, u32, Option<f64>, Link)] = &[
    ("ml.g5.xlarge", A10G, 1, Some(1.408), PCIE4),
    ("ml.g5.2xlarge", A10G, 1, Some(1.515), PCIE4),
    ("ml.g5.12xlarge", A10G, 4, Some(7.09), PCIE4),
    ("ml.g5.48xlarge", A10G, 8, Some(20.36), PCIE4),
    ("ml.g6.xlarge", L4, 1, Some(1.1267), PCIE4),
    ("ml.g6.2xlarge", L4, 1, Some(1.222), PCIE4),
    ("ml.g6.12xlarge", L4, 4, Some(5.752), PCIE4),
    ("ml.g6.48xlarge", L4, 8, Some(16.688), PCIE4),
    ("ml.g6e.xlarge", L40S, 1, Some(2.61), PCIE4),
    ("ml.g6e.2xlarge", L40S, 1, Some(2.80), PCIE4),
    ("ml.g6e.12xlarge", L40S, 4, Some(13.12), PCIE4),
    ("ml.g6e.48xlarge", L40S, 8, Some(37.66), PCIE4),
    ("ml.g7e.2xlarge", RTX_PRO_6000, 1, None, PCIE5),
    ("ml.g7e.12xlarge", RTX_PRO_6000, 2, None, PCIE5),
    ("ml.g7e.24xlarge", RTX_PRO_6000, 4, None, PCIE5),
    ("ml.g7e.48xlarge", RTX_PRO_6000, 8, None, PCIE5),
    ("ml.p4d.24xlarge", A100_40, 8, Some(25.2513), NVLINK3),
    ("ml.p4de.24xlarge", A100_80, 8, Some(31.5641), NVLINK3),
    ("ml.p5.48xlarge", H100, 8, Some(63.296), NVLINK4),
    ("ml.p5e.48xlarge", H200, 8, None, NVLINK4),
    ("ml.p5en.48xlarge", H200, 8, None, NVLINK4),
    ("ml.p6-b200.48xlarge", B200, 8, None, NVLINK5),
];

impl Catalog {
    /// The built-in table: GPU counts from AWS's instance pages; per-GPU memory, bandwidth and
    /// dense BF16 throughput from NVIDIA's datasheets; indicative SageMaker real-time prices
    /// for us-east-1 where a dated reading was found (none for g7e, p5e, p5en, p6-b200: give
    /// them in a catalog file or per candidate). Check prices before you rely on them.
    pub fn builtin() -> Self {
        Catalog {
            as_of: "2026-09-27".into(),
            region: "us-east-1".into(),
            currency: usd(),
            source: Some(
                "kneepoint built-in table: AWS instance pages (GPU counts), NVIDIA datasheets \
                 (memory, bandwidth, dense BF16), indicative SageMaker on-demand prices"
                    .into(),
            ),
            instances: BUILT_IN
                .iter()
                .map(|&(name, (gpu, mem, bw, tf), n, price, link)| InstanceType {
                    name: name.into(),
                    gpu: gpu.into(),
                    gpu_count: n,
                    gpu_memory_gib: mem,
                    memory_bandwidth_gb_s: bw,
                    bf16_tflops: tf,
                    price_per_hour: price,
                    price_as_of: None,
                    region: None,
                    interconnect: Some(Interconnect::from_link(link)),
                })
                .collect(),
        }
    }

    /// Reads a catalog file's text: JSON when it starts with `{`, TOML otherwise.
    pub fn parse(text: &str) -> Result<Self, Error> {
        let c: Catalog = if text.trim_start().starts_with('{') {
            serde_json::from_str(text).map_err(|e| Error::Catalog {
                format: "JSON",
                reason: e.to_string(),
            })?
        } else {
            toml::from_str(text).map_err(|e| Error::Catalog {
                format: "TOML",
                reason: e.to_string(),
            })?
        };
        c.validate()?;
        Ok(c)
    }

    fn validate(&self) -> Result<(), Error> {
        for i in &self.instances {
            let bad = |field: &'static str, what: &str| Error::InvalidSetting {
                field,
                reason: format!("instance {:?}: {what}", i.name),
            };
            if i.gpu_count == 0 {
                return Err(bad("gpu_count", "must be at least 1"));
            }
            for (field, v) in [
                ("gpu_memory_gib", i.gpu_memory_gib),
                ("memory_bandwidth_gb_s", i.memory_bandwidth_gb_s),
                ("bf16_tflops", i.bf16_tflops),
            ] {
                if !v.is_finite() || v <= 0.0 {
                    return Err(bad(field, "must be a number above 0"));
                }
            }
            if i.price_per_hour.is_some_and(|p| !p.is_finite() || p < 0.0) {
                return Err(bad("price_per_hour", "must be a number ≥ 0"));
            }
            if let Some(l) = &i.interconnect {
                if !matches!(l.kind.as_str(), "pcie" | "nvlink") {
                    return Err(bad("interconnect.kind", "must be pcie or nvlink"));
                }
                if !(l.allreduce_gb_s.is_finite() && l.allreduce_gb_s > 0.0) {
                    return Err(bad(
                        "interconnect.allreduce_gb_s",
                        "must be a number above 0",
                    ));
                }
                if !(l.hop_latency_us.is_finite() && l.hop_latency_us >= 0.0) {
                    return Err(bad("interconnect.hop_latency_us", "must be a number ≥ 0"));
                }
            }
        }
        Ok(())
    }

    /// This catalog with `other`'s instance types added; an entry of the same name replaces
    /// this one's (and takes `other`'s date and region with it).
    pub fn overlaid(mut self, other: Catalog) -> Self {
        for mut i in other.instances {
            i.price_as_of.get_or_insert_with(|| other.as_of.clone());
            i.region.get_or_insert_with(|| other.region.clone());
            match self.instances.iter_mut().find(|x| x.name == i.name) {
                Some(x) => *x = i,
                None => self.instances.push(i),
            }
        }
        self
    }

    /// The instance type called `name`.
    pub fn get(&self, name: &str) -> Result<&InstanceType, Error> {
        self.instances
            .iter()
            .find(|i| i.name == name)
            .ok_or_else(|| Error::UnknownInstance {
                name: name.to_owned(),
                known: self
                    .instances
                    .iter()
                    .map(|i| i.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", "),
            })
    }

    /// The date and region of `instance`'s price.
    pub fn price_date<'a>(&'a self, instance: &'a InstanceType) -> (&'a str, &'a str) {
        (
            instance.price_as_of.as_deref().unwrap_or(&self.as_of),
            instance.region.as_deref().unwrap_or(&self.region),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn files_extend_and_override_the_table() {
        let file = r#"
            as_of = "2026-11-30"
            region = "eu-west-1"
            [[instances]]
            name = "ml.g7e.2xlarge"
            gpu = "RTX PRO 6000"
            gpu_count = 1
            gpu_memory_gib = 95.6
            memory_bandwidth_gb_s = 1597
            bf16_tflops = 500
            price_per_hour = 4.5
            [[instances]]
            name = "my.box"
            gpu = "H100"
            gpu_count = 2
            gpu_memory_gib = 79.6
            memory_bandwidth_gb_s = 3350
            bf16_tflops = 989
        "#;
        let c = Catalog::builtin().overlaid(Catalog::parse(file).unwrap());
        let g7e = c.get("ml.g7e.2xlarge").unwrap();
        assert_eq!(g7e.price_per_hour, Some(4.5));
        assert_eq!(c.price_date(g7e), ("2026-11-30", "eu-west-1"));
        assert_eq!(c.get("my.box").unwrap().gpu_count, 2);
        assert_eq!(c.price_date(c.get("ml.g5.xlarge").unwrap()).0, "2026-09-27");
        assert!(matches!(
            c.get("ml.nope"),
            Err(Error::UnknownInstance { .. })
        ));
        let zero = file.replace("gpu_count = 2", "gpu_count = 0");
        assert!(Catalog::parse(&zero).is_err());
        assert!(Catalog::parse("as_of = 1").is_err());
        let json = r#"{"as_of":"x","region":"r","instances":[]}"#;
        assert!(Catalog::parse(json).unwrap().instances.is_empty());
    }
}
