//! The Prometheus text exposition format (0.0.4) and OpenMetrics 1.0 text, read line by line.
//!
//! A line that cannot be read is skipped and counted, never a failed scrape: one exporter's
//! odd line must not cost the whole level's server view. Samples are grouped into families
//! by their `# TYPE` declarations (a histogram's `_bucket`, `_sum` and `_count`, a counter's
//! `_total`); `_created` series (start times, not measurements) are dropped.

use std::collections::HashMap;

/// A metric family's type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MetricType {
    /// A cumulative count.
    Counter,
    /// A value sampled now.
    Gauge,
    /// Cumulative buckets, sum and count.
    Histogram,
    /// Client-side quantiles, sum and count.
    Summary,
    /// No `# TYPE` line (or `unknown`): treated as a gauge.
    Untyped,
}

impl MetricType {
    fn parse(s: &str) -> MetricType {
        match s {
            "counter" => MetricType::Counter,
            "gauge" => MetricType::Gauge,
            "histogram" | "gaugehistogram" => MetricType::Histogram,
            "summary" => MetricType::Summary,
            _ => MetricType::Untyped,
        }
    }

    /// The name used in exports.
    pub fn as_str(self) -> &'static str {
        match self {
            MetricType::Counter => "counter",
            MetricType::Gauge => "gauge",
            MetricType::Histogram => "histogram",
            MetricType::Summary => "summary",
            MetricType::Untyped => "untyped",
        }
    }
}

/// Label pairs, sorted by name.
pub type Labels = Vec<(String, String)>;

/// One series' value in one scrape.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// A counter's, gauge's or untyped metric's value.
    Number(f64),
    /// A histogram: cumulative `(le, count)` buckets in increasing `le`, sum and count.
    Histogram {
        /// `(upper bound, cumulative count)`, the last usually `+Inf`.
        buckets: Vec<(f64, f64)>,
        /// Sum of observations.
        sum: f64,
        /// Number of observations.
        count: f64,
    },
    /// A summary: `(quantile, value)` pairs, sum and count (kept, not summarised: its
    /// quantiles cover the server's lifetime, not the level).
    Summary {
        /// `(quantile, value)`.
        quantiles: Vec<(f64, f64)>,
        /// Sum of observations.
        sum: f64,
        /// Number of observations.
        count: f64,
    },
}

/// One series: its labels (without `le` / `quantile`) and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Sorted label pairs.
    pub labels: Labels,
    /// The value.
    pub value: Value,
}

/// One metric family.
#[derive(Debug, Clone, PartialEq)]
pub struct Family {
    /// The family's name (a counter's without `_total`, as OpenMetrics names it; its samples'
    /// name is kept in `sample_name`).
    pub name: String,
    /// The name its samples carry (`vllm:prompt_tokens_total`).
    pub sample_name: String,
    /// The declared type.
    pub kind: MetricType,
    /// `# HELP` text.
    pub help: String,
    /// `# UNIT` (OpenMetrics), or empty.
    pub unit: String,
    /// Its series, in first-seen order.
    pub series: Vec<Series>,
}

/// A parsed exposition.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Exposition {
    /// Families in first-seen order.
    pub families: Vec<Family>,
    /// Lines that could not be read.
    pub skipped: u64,
    /// The first unreadable line's problem, for the warning.
    pub first_problem: Option<String>,
}

impl Exposition {
    /// The family called `name` (its family name or its samples' name).
    pub fn family(&self, name: &str) -> Option<&Family> {
        self.families
            .iter()
            .find(|f| f.name == name || f.sample_name == name)
    }
}

/// One sample line read.
struct Line<'a> {
    name: &'a str,
    labels: Labels,
    value: f64,
}

/// Where a family's pieces are being gathered.
struct Builder {
    family: Family,
    /// series labels → index in `family.series`.
    index: HashMap<Labels, usize>,
}

/// Reads `text`. Never fails: unreadable lines are skipped and counted.
pub fn parse(text: &str) -> Exposition {
    let mut declared: HashMap<String, (MetricType, String, String)> = HashMap::new();
    let mut order: Vec<String> = Vec::new();
    let mut builders: HashMap<String, Builder> = HashMap::new();
    let mut out = Exposition::default();
    let problem = |out: &mut Exposition, line_no: usize, what: &str| {
        out.skipped += 1;
        if out.first_problem.is_none() {
            out.first_problem = Some(format!("line {line_no}: {what}"));
        }
    };
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() {
            continue;
        }
        if let Some(rest) = line.strip_prefix('#') {
            let rest = rest.trim_start();
            let mut parts = rest.splitn(3, char::is_whitespace);
            let keyword = parts.next().unwrap_or("");
            let (Some(name), tail) = (parts.next(), parts.next().unwrap_or("").trim()) else {
                continue;
            };
            let entry = declared.entry(name.to_owned()).or_insert((
                MetricType::Untyped,
                String::new(),
                String::new(),
            ));
            match keyword {
                "TYPE" => entry.0 = MetricType::parse(tail),
                "HELP" => entry.1 = unescape_help(tail),
                "UNIT" => entry.2 = tail.to_owned(),
                _ => {}
            }
            continue;
        }
        let sample = match sample_line(line) {
            Ok(s) => s,
            Err(what) => {
                problem(&mut out, i + 1, what);
                continue;
            }
        };
        let Some((family, kind, part)) = family_of(sample.name, &declared) else {
            // A `_created` series: a start time, not a measurement.
            continue;
        };
        let builder = builders.entry(family.clone()).or_insert_with(|| {
            order.push(family.clone());
            let (help, unit) = declared
                .get(&family)
                .map(|d| (d.1.clone(), d.2.clone()))
                .unwrap_or_default();
            Builder {
                family: Family {
                    name: if kind == MetricType::Counter {
                        family.strip_suffix("_total").unwrap_or(&family).to_owned()
                    } else {
                        family.clone()
                    },
                    sample_name: String::new(),
                    kind,
                    help,
                    unit,
                    series: Vec::new(),
                },
                index: HashMap::new(),
            }
        });
        if let Err(what) = builder.add(sample, part) {
            problem(&mut out, i + 1, what);
        }
    }
    for name in order {
        if let Some(mut b) = builders.remove(&name) {
            b.finish();
            if !b.family.series.is_empty() {
                out.families.push(b.family);
            }
        }
    }
    out
}

/// Which part of a family a sample is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Part {
    Value,
    Bucket,
    Sum,
    Count,
}

/// The family a sample belongs to (its declared name), its type and the part; `None` for a
/// `_created` series.
fn family_of(
    name: &str,
    declared: &HashMap<String, (MetricType, String, String)>,
) -> Option<(String, MetricType, Part)> {
    let typed = |n: &str| {
        declared
            .get(n)
            .map(|d| d.0)
            .filter(|t| *t != MetricType::Untyped)
    };
    // A `_created` series of a declared counter, histogram or summary (the Python client
    // even declares it a gauge of its own): a start time, not a measurement.
    if let Some(base) = name.strip_suffix("_created") {
        let cumulative = |n: &str| {
            matches!(
                typed(n),
                Some(MetricType::Counter | MetricType::Histogram | MetricType::Summary)
            )
        };
        if cumulative(base) || cumulative(&format!("{base}_total")) {
            return None;
        }
    }
    if let Some(t) = typed(name) {
        return Some((name.to_owned(), t, Part::Value));
    }
    for (suffix, part) in [
        ("_bucket", Part::Bucket),
        ("_sum", Part::Sum),
        ("_count", Part::Count),
        ("_total", Part::Value),
    ] {
        let Some(base) = name.strip_suffix(suffix) else {
            continue;
        };
        // OpenMetrics declares a counter `x` and exposes `x_total`.
        let fits = |t: MetricType| match t {
            MetricType::Histogram => part != Part::Value,
            MetricType::Summary => matches!(part, Part::Sum | Part::Count),
            MetricType::Counter => part == Part::Value,
            _ => false,
        };
        if let Some(t) = typed(base).filter(|t| fits(*t)) {
            return Some((base.to_owned(), t, part));
        }
    }
    let kind = declared.get(name).map_or(MetricType::Untyped, |d| d.0);
    Some((name.to_owned(), kind, Part::Value))
}

impl Builder {
    fn add(&mut self, line: Line<'_>, part: Part) -> Result<(), &'static str> {
        if self.family.sample_name.is_empty() || part == Part::Value {
            self.family.sample_name = line.name.to_owned();
        }
        let mut labels = line.labels;
        let special = match (self.family.kind, part) {
            (MetricType::Histogram, Part::Bucket) => Some("le"),
            (MetricType::Summary, Part::Value) => Some("quantile"),
            _ => None,
        };
        let bound = match special {
            Some(key) => {
                let Some(pos) = labels.iter().position(|(k, _)| k == key) else {
                    return Err("a bucket or quantile without its le/quantile label");
                };
                let (_, v) = labels.remove(pos);
                let bound = parse_float(&v).ok_or("an le/quantile label that is not a number")?;
                // A bucket bound is finite or +Inf; NaN or -Inf would poison every quantile.
                if bound.is_nan() || bound == f64::NEG_INFINITY {
                    return Err("an le/quantile label that is NaN or -Inf");
                }
                Some(bound)
            }
            None => None,
        };
        let kind = self.family.kind;
        let next = self.family.series.len();
        let idx = *self.index.entry(labels.clone()).or_insert(next);
        if idx == next {
            let value = match kind {
                MetricType::Histogram => Value::Histogram {
                    buckets: Vec::new(),
                    sum: f64::NAN,
                    count: f64::NAN,
                },
                MetricType::Summary => Value::Summary {
                    quantiles: Vec::new(),
                    sum: f64::NAN,
                    count: f64::NAN,
                },
                _ => Value::Number(f64::NAN),
            };
            self.family.series.push(Series { labels, value });
        }
        let Some(series) = self.family.series.get_mut(idx) else {
            return Err("internal: series index");
        };
        match (&mut series.value, part, bound) {
            (Value::Number(v), Part::Value, _) => *v = line.value,
            (Value::Histogram { buckets, .. }, Part::Bucket, Some(le)) => {
                buckets.push((le, line.value))
            }
            (Value::Summary { quantiles, .. }, Part::Value, Some(q)) => {
                quantiles.push((q, line.value))
            }
            (Value::Histogram { sum, .. } | Value::Summary { sum, .. }, Part::Sum, _) => {
                *sum = line.value
            }
            (Value::Histogram { count, .. } | Value::Summary { count, .. }, Part::Count, _) => {
                *count = line.value
            }
            _ => return Err("a sample that does not fit its family's type"),
        }
        Ok(())
    }

    /// Sorts buckets and fills a histogram's missing count from its `+Inf` bucket.
    fn finish(&mut self) {
        for s in &mut self.family.series {
            match &mut s.value {
                Value::Histogram {
                    buckets,
                    count,
                    sum,
                } => {
                    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
                    buckets.dedup_by(|a, b| a.0 == b.0);
                    if count.is_nan() {
                        *count = buckets.last().map_or(0.0, |b| b.1);
                    }
                    if sum.is_nan() {
                        *sum = 0.0;
                    }
                }
                Value::Summary {
                    quantiles,
                    count,
                    sum,
                } => {
                    quantiles.sort_by(|a, b| a.0.total_cmp(&b.0));
                    if count.is_nan() {
                        *count = 0.0;
                    }
                    if sum.is_nan() {
                        *sum = 0.0;
                    }
                }
                Value::Number(_) => {}
            }
        }
    }
}

/// `name{labels} value [timestamp] [# exemplar]`.
fn sample_line(line: &str) -> Result<Line<'_>, &'static str> {
    let name_end = line
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == ':'))
        .unwrap_or(line.len());
    let name = &line[..name_end];
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("no metric name");
    }
    let mut rest = &line[name_end..];
    let mut labels = Vec::new();
    if let Some(r) = rest.strip_prefix('{') {
        let (l, after) = label_set(r)?;
        labels = l;
        rest = after;
    }
    // An OpenMetrics exemplar follows ` # `.
    let rest = rest.split(" # ").next().unwrap_or(rest);
    let mut fields = rest.split_whitespace();
    let value = fields
        .next()
        .and_then(parse_float)
        .ok_or("no value, or a value that is not a number")?;
    if let Some(ts) = fields.next() {
        if ts.parse::<f64>().is_err() {
            return Err("a timestamp that is not a number");
        }
    }
    if fields.next().is_some() {
        return Err("text after the timestamp");
    }
    labels.sort();
    Ok(Line {
        name,
        labels,
        value,
    })
}

/// The labels after `{`, and the text after the closing `}`.
fn label_set(mut s: &str) -> Result<(Labels, &str), &'static str> {
    let mut labels = Vec::new();
    loop {
        s = s.trim_start();
        if let Some(after) = s.strip_prefix('}') {
            return Ok((labels, after));
        }
        let key_end = s
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .ok_or("an unterminated label set")?;
        let key = &s[..key_end];
        if key.is_empty() {
            return Err("a label without a name");
        }
        s = s[key_end..].trim_start();
        s = s
            .strip_prefix('=')
            .ok_or("a label without `=`")?
            .trim_start();
        s = s.strip_prefix('"').ok_or("a label value without quotes")?;
        let mut value = String::new();
        let mut chars = s.char_indices();
        let end = loop {
            match chars.next() {
                None => return Err("an unterminated label value"),
                Some((i, '"')) => break i,
                Some((_, '\\')) => match chars.next() {
                    Some((_, 'n')) => value.push('\n'),
                    Some((_, c)) => value.push(c),
                    None => return Err("an unterminated label value"),
                },
                Some((_, c)) => value.push(c),
            }
        };
        labels.push((key.to_owned(), value));
        s = s[end + 1..].trim_start();
        if let Some(after) = s.strip_prefix(',') {
            s = after;
        } else if !s.starts_with('}') {
            return Err("labels not separated by commas");
        }
    }
}

/// A Go-style float: decimal, `NaN`, `+Inf`, `-Inf`.
fn parse_float(s: &str) -> Option<f64> {
    match s {
        "+Inf" | "Inf" | "+inf" | "inf" => Some(f64::INFINITY),
        "-Inf" | "-inf" => Some(f64::NEG_INFINITY),
        "NaN" | "nan" => Some(f64::NAN),
        _ => s.parse().ok(),
    }
}

/// A bucket bound as the text format writes it (`+Inf`, else the shortest decimal).
pub(crate) fn le_label(bound: f64) -> String {
    if bound == f64::INFINITY {
        "+Inf".to_owned()
    } else {
        format!("{bound}")
    }
}

/// `# HELP` escapes `\\` and `\n`.
fn unescape_help(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some(c) => out.push(c),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

#[cfg(test)]
mod tests;
