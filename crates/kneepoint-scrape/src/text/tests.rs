//! Unit tests of the parent module.

use super::*;

fn number(e: &Exposition, name: &str) -> Vec<f64> {
    e.family(name)
        .map(|f| {
            f.series
                .iter()
                .filter_map(|s| match s.value {
                    Value::Number(v) => Some(v),
                    _ => None,
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn families_group_their_samples() {
    let text = "# HELP vllm:num_requests_running Running.\n# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 3.0\n# TYPE vllm:prompt_tokens_total counter\nvllm:prompt_tokens_total{model_name=\"m\"} 1234\n# TYPE vllm:prompt_tokens_created gauge\nvllm:prompt_tokens_created{model_name=\"m\"} 1.7e9\n# TYPE vllm:time_to_first_token_seconds histogram\nvllm:time_to_first_token_seconds_bucket{le=\"0.1\",model_name=\"m\"} 2\nvllm:time_to_first_token_seconds_bucket{le=\"+Inf\",model_name=\"m\"} 5\nvllm:time_to_first_token_seconds_count{model_name=\"m\"} 5\nvllm:time_to_first_token_seconds_sum{model_name=\"m\"} 0.5\nvllm:time_to_first_token_seconds_created{model_name=\"m\"} 1.7e9\n";
    let e = parse(text);
    assert_eq!(e.skipped, 0, "{:?}", e.first_problem);
    let names: Vec<&str> = e.families.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "vllm:num_requests_running",
            "vllm:prompt_tokens",
            "vllm:time_to_first_token_seconds"
        ]
    );
    assert_eq!(number(&e, "vllm:num_requests_running"), [3.0]);
    assert_eq!(e.families[0].help, "Running.");
    assert_eq!(e.families[1].sample_name, "vllm:prompt_tokens_total");
    assert_eq!(e.families[1].kind, MetricType::Counter);
    let h = &e.families[2].series[0];
    assert_eq!(h.labels, vec![("model_name".into(), "m".into())]);
    assert_eq!(
        h.value,
        Value::Histogram {
            buckets: vec![(0.1, 2.0), (f64::INFINITY, 5.0)],
            sum: 0.5,
            count: 5.0
        }
    );
}

#[test]
fn openmetrics_counters_units_exemplars_and_eof() {
    let text = "# TYPE foo counter\n# UNIT foo seconds\n# HELP foo A \\\\ help\\n.\nfoo_total{a=\"x\"} 1.5 # {trace_id=\"abc\"} 1.0 123\nfoo_created{a=\"x\"} 123\n# EOF\n";
    let e = parse(text);
    assert_eq!(e.skipped, 0, "{:?}", e.first_problem);
    let f = e.family("foo").unwrap();
    assert_eq!((f.kind, f.unit.as_str()), (MetricType::Counter, "seconds"));
    assert_eq!(f.help, "A \\ help\n.");
    assert_eq!(f.series.len(), 1);
    assert_eq!(f.series[0].value, Value::Number(1.5));
}

#[test]
fn bad_lines_are_skipped_and_the_rest_kept() {
    let text = "ok_a 1\ngarbage line here {\nbad{a=\"b\"} abc\nbad2{a=\"unterminated} 1\n{a=\"b\"} 3\nok_b{x=\"y\",} 2 1700000000000\nok_c{x=\"\\\"q\\\"\\n\"} -Inf\n1bad 1\nok_d 1 2 3\n";
    let e = parse(text);
    assert_eq!(e.skipped, 6, "{e:?}");
    assert!(e.first_problem.as_deref().unwrap().starts_with("line 2"));
    assert_eq!(number(&e, "ok_a"), [1.0]);
    assert_eq!(number(&e, "ok_b"), [2.0]);
    assert_eq!(number(&e, "ok_c"), [f64::NEG_INFINITY]);
    assert_eq!(e.family("ok_c").unwrap().series[0].labels[0].1, "\"q\"\n");
}

#[test]
fn nan_bounds_are_skipped_and_gauges_ending_in_total_keep_their_name() {
    let text = "# TYPE h histogram\nh_bucket{le=\"NaN\"} 1\nh_bucket{le=\"-Inf\"} 1\nh_bucket{le=\"1\"} 2\nh_bucket{le=\"+Inf\"} 3\nh_count 3\nh_sum 1\n# TYPE g_total gauge\ng_total 4\n";
    let e = parse(text);
    assert_eq!(e.skipped, 2, "{e:?}");
    assert_eq!(
        e.family("h").unwrap().series[0].value,
        Value::Histogram {
            buckets: vec![(1.0, 2.0), (f64::INFINITY, 3.0)],
            sum: 1.0,
            count: 3.0
        }
    );
    assert_eq!(e.family("g_total").unwrap().name, "g_total");
    assert_eq!(le_label(f64::INFINITY), "+Inf");
    assert_eq!(le_label(0.25), "0.25");
}

#[test]
fn json_and_html_are_all_skipped_lines() {
    for text in [
        "{\"error\": \"not found\"}",
        "<html><body>404</body></html>",
    ] {
        let e = parse(text);
        assert!(e.families.is_empty());
        assert_eq!(e.skipped, 1);
    }
}

#[test]
fn summaries_keep_quantiles() {
    let text = "# TYPE rpc summary\nrpc{quantile=\"0.5\"} 4\nrpc{quantile=\"0.9\"} 9\nrpc_sum 100\nrpc_count 20\n";
    let e = parse(text);
    assert_eq!(
        e.family("rpc").unwrap().series[0].value,
        Value::Summary {
            quantiles: vec![(0.5, 4.0), (0.9, 9.0)],
            sum: 100.0,
            count: 20.0
        }
    );
}
