//! The stage-1 table: every fit of a model on the instance types asked for, with the
//! prediction and price of those that fit and the one to deploy per instance type marked.

use serde::{Deserialize, Serialize};

use crate::{
    best_fit, plan_fits, predict, Catalog, Efficiency, Error, Fit, FitSettings, ModelSpec,
    Prediction,
};

/// One instance type at one tensor-parallel degree, with what it is predicted to carry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanRow {
    /// The memory fit.
    pub fit: Fit,
    /// The first-order prediction (when it fits).
    pub prediction: Option<Prediction>,
    /// Price of one instance-hour, when the catalog has one.
    pub price_per_hour: Option<f64>,
    /// When and where that price was read.
    pub price_as_of: String,
    /// The price's region.
    pub region: String,
    /// Instance price / predicted output tokens per hour at saturation × 10⁶.
    pub predicted_cost_per_million_output_tokens: Option<f64>,
    /// The degree to deploy on this instance type (see [`best_fit`]).
    pub chosen: bool,
}

/// The whole table and what it assumed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Plan {
    /// The model's name.
    pub model: String,
    /// Its parameters, billions.
    pub total_params_b: f64,
    /// Parameters one token uses, billions.
    pub active_params_b: f64,
    /// Its weights, GiB.
    pub weights_gib: f64,
    /// The weights' format.
    pub weight_format: String,
    /// KV bytes per token over the full-attention layers, unsharded (sliding-window layers and
    /// Mamba state are per sequence: see `mamba_state_mib` and each fit's `sequence_mib`).
    pub kv_bytes_per_token: f64,
    /// Mamba state per sequence, MiB, unsharded.
    pub mamba_state_mib: f64,
    /// The engine settings assumed.
    pub settings: FitSettings,
    /// The efficiencies assumed by the prediction.
    pub efficiency: Efficiency,
    /// The prices' currency.
    pub currency: String,
    /// One row per instance type and degree, in the order asked.
    pub rows: Vec<PlanRow>,
}

impl Plan {
    /// The chosen row of `instance`, when one of its degrees fits.
    pub fn chosen(&self, instance: &str) -> Option<&PlanRow> {
        self.rows
            .iter()
            .find(|r| r.chosen && r.fit.instance == instance)
    }
}

/// Concurrency levels for a predicted curve: powers of two up to four times `saturation`.
pub fn prediction_levels(saturation: u32) -> Vec<u32> {
    let top = saturation.max(1).saturating_mul(4);
    (0..31)
        .map(|p| 1u32 << p)
        .take_while(|c| *c <= top)
        .collect()
}

/// The table for `model` on `instances` (names in `catalog`; all of the catalog when empty).
pub fn plan(
    model: &ModelSpec,
    catalog: &Catalog,
    instances: &[String],
    s: &FitSettings,
    e: Efficiency,
) -> Result<Plan, Error> {
    let chosen_types: Vec<&crate::InstanceType> = if instances.is_empty() {
        catalog.instances.iter().collect()
    } else {
        instances
            .iter()
            .map(|n| catalog.get(n))
            .collect::<Result<_, _>>()?
    };
    let fits = plan_fits(model, &chosen_types, s)?;
    let mut rows = Vec::with_capacity(fits.len());
    for f in &fits {
        let inst = catalog.get(&f.instance)?;
        let best = best_fit(&fits, &f.instance);
        let prediction = if f.fits {
            let levels = prediction_levels(f.instance_max_concurrency);
            Some(predict(model, inst, f, s, e, &levels)?)
        } else {
            None
        };
        let (as_of, region) = catalog.price_date(inst);
        let cost = match (inst.price_per_hour, &prediction) {
            (Some(price), Some(p)) if p.peak_output_tokens_per_s > 0.0 => {
                Some(price / (3600.0 * p.peak_output_tokens_per_s) * 1e6)
            }
            _ => None,
        };
        rows.push(PlanRow {
            chosen: best.is_some_and(|b| b.tensor_parallel == f.tensor_parallel),
            fit: f.clone(),
            prediction,
            price_per_hour: inst.price_per_hour,
            price_as_of: as_of.to_owned(),
            region: region.to_owned(),
            predicted_cost_per_million_output_tokens: cost,
        });
    }
    let p = model.params();
    Ok(Plan {
        model: model.name.clone(),
        total_params_b: p.total() / 1e9,
        active_params_b: p.active() / 1e9,
        weights_gib: model.weight_bytes() / crate::fit::GIB,
        weight_format: model.weights.label.clone(),
        kv_bytes_per_token: model.kv_bytes_per_token(1, s.kv_cache_bits),
        mamba_state_mib: model.mamba_state_bytes(1) / crate::fit::MIB,
        settings: s.clone(),
        efficiency: e,
        currency: catalog.currency.clone(),
        rows,
    })
}
