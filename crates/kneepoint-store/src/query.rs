//! Reading runs back: the newest first, filtered by endpoint, model, command and labels.

use std::collections::BTreeMap;

use crate::backend::Param;
use crate::record::{RunRecord, RunStatus, StoredLevel};
use crate::{Error, Store};

/// Which runs to list. Every field set must match; `None` and an empty list match all.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct RunFilter {
    /// The endpoint contains this text.
    pub endpoint: Option<String>,
    /// The model contains this text.
    pub model: Option<String>,
    /// The command is this one (`sweep`, `search`, `recommend`, `length-sweep`).
    pub command: Option<String>,
    /// Every `key=value` label is on the run.
    pub labels: Vec<(String, String)>,
    /// At most this many runs (`None`: all).
    pub limit: Option<usize>,
}

impl RunFilter {
    /// Every run.
    pub fn new() -> Self {
        RunFilter::default()
    }

    /// Runs whose endpoint contains `text`.
    pub fn endpoint(mut self, text: &str) -> Self {
        self.endpoint = Some(text.to_owned());
        self
    }

    /// Runs whose model contains `text`.
    pub fn model(mut self, text: &str) -> Self {
        self.model = Some(text.to_owned());
        self
    }

    /// Runs of `command`.
    pub fn command(mut self, command: &str) -> Self {
        self.command = Some(command.to_owned());
        self
    }

    /// Runs labelled `key=value`.
    pub fn label(mut self, key: &str, value: &str) -> Self {
        self.labels.push((key.to_owned(), value.to_owned()));
        self
    }

    /// At most `n` runs.
    pub fn limit(mut self, n: usize) -> Self {
        self.limit = Some(n);
        self
    }
}

const COLUMNS: &str = "id, command, status, started_at, recorded_at, artifact_dir, endpoint, model, kneepoint_version, host, settings, server, answer, figures";

impl Store {
    /// The runs `filter` matches, newest first, each without its levels (see
    /// [`Store::run`]).
    pub fn runs(&mut self, filter: &RunFilter) -> Result<Vec<RunRecord>, Error> {
        // Parameters are numbered in the order they appear (SQLite numbers `$N` that way).
        let mut sql = format!("SELECT {COLUMNS} FROM runs WHERE 1 = 1");
        let mut params = Vec::new();
        let next = |p: Param, params: &mut Vec<Param>| {
            params.push(p);
            params.len()
        };
        if let Some(e) = &filter.endpoint {
            let n = next(Param::from(like(e)), &mut params);
            sql += &format!(" AND endpoint LIKE ${n} ESCAPE '\\'");
        }
        if let Some(m) = &filter.model {
            let n = next(Param::from(like(m)), &mut params);
            sql += &format!(" AND model LIKE ${n} ESCAPE '\\'");
        }
        if let Some(c) = &filter.command {
            let n = next(Param::from(c.clone()), &mut params);
            sql += &format!(" AND command = ${n}");
        }
        for (k, v) in &filter.labels {
            let a = next(Param::from(k.clone()), &mut params);
            let b = next(Param::from(v.clone()), &mut params);
            sql += &format!(
                " AND EXISTS (SELECT 1 FROM labels WHERE labels.run_id = runs.id AND key = ${a} AND value = ${b})"
            );
        }
        // Newest by when the run ran: an old folder imported today is not the latest run.
        sql += " ORDER BY COALESCE(started_at, recorded_at) DESC, id DESC";
        if let Some(limit) = filter.limit {
            let n = next(
                Param::Int(i64::try_from(limit).unwrap_or(i64::MAX)),
                &mut params,
            );
            sql += &format!(" LIMIT ${n}");
        }
        let rows = self.conn.rows(&sql, &params)?;
        let mut out = rows
            .iter()
            .map(|r| run_from_row(r))
            .collect::<Result<Vec<_>, _>>()?;
        let ids: Vec<String> = out.iter().map(|r| r.id.clone()).collect();
        let mut labels = self.labels_of(&ids)?;
        for run in &mut out {
            run.labels = labels.remove(&run.id).unwrap_or_default();
        }
        Ok(out)
    }

    /// The runs `filter` matches, newest first, each with its levels: what trends need, read
    /// in a few queries (not one per run).
    pub fn runs_with_levels(&mut self, filter: &RunFilter) -> Result<Vec<RunRecord>, Error> {
        let mut out = self.runs(filter)?;
        let ids: Vec<String> = out.iter().map(|r| r.id.clone()).collect();
        let mut levels: BTreeMap<String, Vec<StoredLevel>> = BTreeMap::new();
        for chunk in ids.chunks(IN_CHUNK) {
            let sql = format!(
                "SELECT run_id, name, CAST(concurrency AS TEXT), summary FROM levels WHERE run_id IN ({}) ORDER BY run_id, position",
                placeholders(chunk.len())
            );
            let params: Vec<Param> = chunk.iter().map(|i| Param::from(i.clone())).collect();
            for r in self.conn.rows(&sql, &params)? {
                let text = |i: usize| r.get(i).cloned().flatten().unwrap_or_default();
                let id = text(0);
                let level = level_from(&id, &text(1), &text(2), &text(3))?;
                levels.entry(id).or_default().push(level);
            }
        }
        for run in &mut out {
            run.levels = levels.remove(&run.id).unwrap_or_default();
        }
        Ok(out)
    }

    /// The labels of `ids`, by run.
    fn labels_of(
        &mut self,
        ids: &[String],
    ) -> Result<BTreeMap<String, BTreeMap<String, String>>, Error> {
        let mut out: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
        for chunk in ids.chunks(IN_CHUNK) {
            let sql = format!(
                "SELECT run_id, key, value FROM labels WHERE run_id IN ({})",
                placeholders(chunk.len())
            );
            let params: Vec<Param> = chunk.iter().map(|i| Param::from(i.clone())).collect();
            for r in self.conn.rows(&sql, &params)? {
                if let [Some(id), Some(k), Some(v)] = r.as_slice() {
                    out.entry(id.clone())
                        .or_default()
                        .insert(k.clone(), v.clone());
                }
            }
        }
        Ok(out)
    }

    /// The run `id` with its levels; `None` when no run has that id. `latest` is the newest
    /// run; an id prefix of at least 4 digits names the one run it starts
    /// ([`Error::Ambiguous`] when it starts several).
    pub fn run(&mut self, id: &str) -> Result<Option<RunRecord>, Error> {
        let found = if id == "latest" {
            self.runs(&RunFilter::new().limit(1))?.into_iter().next()
        } else {
            let rows = self.conn.rows(
                &format!("SELECT {COLUMNS} FROM runs WHERE id LIKE $1 ORDER BY id"),
                &[Param::from(format!("{}%", like_escape(id)))],
            )?;
            let exact = rows
                .iter()
                .find(|r| r.first().and_then(Option::as_deref) == Some(id));
            match (rows.as_slice(), exact) {
                (_, Some(row)) => Some(run_from_row(row)?),
                ([row], None) if id.len() >= 4 => Some(run_from_row(row)?),
                (rows, None) if rows.len() > 1 && id.len() >= 4 => {
                    return Err(Error::Ambiguous {
                        prefix: id.to_owned(),
                        ids: rows
                            .iter()
                            .take(5)
                            .filter_map(|r| r.first().cloned().flatten())
                            .collect(),
                    })
                }
                _ => None,
            }
        };
        let Some(mut run) = found else {
            return Ok(None);
        };
        run.labels = self.labels(&run.id)?;
        let rows = self.conn.rows(
            "SELECT name, CAST(concurrency AS TEXT), summary FROM levels WHERE run_id = $1 ORDER BY position",
            &[Param::from(run.id.clone())],
        )?;
        for r in rows {
            let text = |i: usize| r.get(i).cloned().flatten().unwrap_or_default();
            run.levels
                .push(level_from(&run.id, &text(0), &text(1), &text(2))?);
        }
        Ok(Some(run))
    }

    fn labels(&mut self, id: &str) -> Result<BTreeMap<String, String>, Error> {
        Ok(self
            .labels_of(&[id.to_owned()])?
            .remove(id)
            .unwrap_or_default())
    }
}

/// Ids per `IN (...)` list (SQLite allows 32,766 parameters, PostgreSQL 65,535).
const IN_CHUNK: usize = 500;

/// `$1, $2, ... $n`.
fn placeholders(n: usize) -> String {
    (1..=n)
        .map(|i| format!("${i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

fn level_from(
    id: &str,
    name: &str,
    concurrency: &str,
    summary: &str,
) -> Result<StoredLevel, Error> {
    let summary = serde_json::from_str(summary).map_err(|e| Error::Corrupt {
        id: id.to_owned(),
        reason: format!("level {name}: {e}"),
    })?;
    Ok(StoredLevel {
        name: name.to_owned(),
        concurrency: concurrency.parse().unwrap_or(0),
        summary,
    })
}

/// `%text%` for LIKE, with the pattern characters in `text` taken literally.
fn like(text: &str) -> String {
    format!("%{}%", like_escape(text))
}

fn like_escape(text: &str) -> String {
    text.replace('\\', "\\\\")
        .replace('%', "\\%")
        .replace('_', "\\_")
}

fn run_from_row(row: &[Option<String>]) -> Result<RunRecord, Error> {
    let text = |i: usize| row.get(i).cloned().flatten();
    let id = text(0).unwrap_or_default();
    let json = |i: usize| -> Result<serde_json::Value, Error> {
        serde_json::from_str(text(i).as_deref().unwrap_or("null")).map_err(|e| Error::Corrupt {
            id: id.clone(),
            reason: e.to_string(),
        })
    };
    let host = json(9)?;
    let figures = json(13)?;
    Ok(RunRecord {
        id: id.clone(),
        command: text(1).unwrap_or_default(),
        status: RunStatus::parse(text(2).as_deref().unwrap_or("")),
        started_at: text(3),
        recorded_at: text(4).unwrap_or_default(),
        artifact_dir: text(5).unwrap_or_default(),
        endpoint: text(6),
        model: text(7),
        kneepoint_version: text(8),
        labels: BTreeMap::new(),
        host: serde_json::from_value(host).unwrap_or(None),
        settings: json(10)?,
        server: json(11)?,
        answer: json(12)?,
        figures: serde_json::from_value(figures).unwrap_or_default(),
        levels: Vec::new(),
    })
}
