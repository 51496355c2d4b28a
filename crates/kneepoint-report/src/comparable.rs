//! Whether two runs measured the same thing: the same workload (lengths, prefixes, dataset,
//! tokenizer; the seed aside), the same kind of target, the same model and API, and for the
//! built-in simulator the same profile and time scale. `compare` on runs that differ would
//! call a lighter workload an improvement and a slower simulator a regression.

use serde_json::Value;

use crate::Artifact;

/// The settings whose difference makes two runs incomparable, as JSON pointers into a run's
/// `settings`, with the name a message gives them.
const SAME: [(&str, &str); 6] = [
    ("/target/kind", "target"),
    ("/target/profile/name", "simulator profile"),
    ("/target/profile/time_scale", "simulator time scale"),
    ("/endpoint/model", "model"),
    ("/endpoint/type", "API"),
    ("/endpoint/streaming", "streaming"),
];

/// What differs between the runs `a` and `b` measured, one line each (`workload.isl: … in A,
/// … in B`); empty when they are comparable. Runs without saved settings are not judged.
pub fn differences(a: &Artifact, b: &Artifact) -> Vec<String> {
    let (Some(sa), Some(sb)) = (a.doc.get("settings"), b.doc.get("settings")) else {
        return Vec::new();
    };
    settings_differences(sa, sb)
}

/// [`differences`] between two runs' `settings` documents (`Null` for a run without saved
/// settings: not judged).
pub fn settings_differences(sa: &Value, sb: &Value) -> Vec<String> {
    if sa.is_null() || sb.is_null() {
        return Vec::new();
    }
    let mut out = Vec::new();
    let show = |v: Option<&Value>| v.map_or("none".to_owned(), Value::to_string);
    for (at, name) in SAME {
        let (x, y) = (sa.pointer(at), sb.pointer(at));
        if x != y {
            out.push(format!("{name}: {} in A, {} in B", show(x), show(y)));
        }
    }
    // A URL target is the same server only at the same URL (the simulator's port is new each
    // run, so its URL is not compared).
    let simulator = sa.pointer("/target/kind").and_then(Value::as_str) == Some("simulator");
    if !simulator && sa.pointer("/endpoint/url") != sb.pointer("/endpoint/url") {
        out.push(format!(
            "endpoint: {} in A, {} in B",
            show(sa.pointer("/endpoint/url")),
            show(sb.pointer("/endpoint/url"))
        ));
    }
    if let (Some(Value::Object(wa)), Some(Value::Object(wb))) =
        (sa.get("workload"), sb.get("workload"))
    {
        let keys: std::collections::BTreeSet<&String> = wa.keys().chain(wb.keys()).collect();
        for k in keys.into_iter().filter(|k| *k != "seed") {
            if wa.get(k) != wb.get(k) {
                out.push(format!(
                    "workload.{k}: {} in A, {} in B",
                    show(wa.get(k)),
                    show(wb.get(k))
                ));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::RunKind;

    fn run(settings: Value) -> Artifact {
        Artifact {
            root: "r".into(),
            kind: RunKind::Sweep,
            doc: serde_json::json!({ "settings": settings }),
            levels: Vec::new(),
            candidates: Vec::new(),
        }
    }

    #[test]
    fn workload_target_and_time_scale_differences_are_named() {
        let base = serde_json::json!({
            "target": {"kind": "simulator", "profile": {"name": "fast", "time_scale": 1.0}},
            "endpoint": {"model": "m", "type": "chat", "streaming": true, "url": "http://h:1/v1"},
            "workload": {"isl": {"fixed": 1024}, "osl": {"fixed": 256}, "seed": 0},
        });
        let mut other = base.clone();
        other["workload"]["isl"] = serde_json::json!({"fixed": 512});
        other["workload"]["seed"] = serde_json::json!(7);
        other["target"]["profile"]["time_scale"] = serde_json::json!(0.1);
        other["endpoint"]["url"] = serde_json::json!("http://h:2/v1");
        let d = differences(&run(base.clone()), &run(other));
        assert_eq!(d.len(), 2, "{d:?}");
        assert!(
            d[0].starts_with("simulator time scale: 1.0 in A, 0.1 in B"),
            "{d:?}"
        );
        assert!(d[1].starts_with("workload.isl:"), "{d:?}");
        // A seed and a simulator's port are not differences.
        assert!(differences(&run(base.clone()), &run(base)).is_empty());
    }
}
