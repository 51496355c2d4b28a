//! Each known server's metrics page, as its exporter writes it, read into the common concepts:
//! two scrapes one second apart around a measured window, as a level takes them.

use kneepoint_scrape::{summarise, text, Part, Timeline, Window};

/// A page with `r` running, `w` waiting, `kv` usage, and counters at `n` × their step.
type Page = fn(r: u32, w: u32, kv: f64, n: u32) -> String;

fn vllm(r: u32, w: u32, kv: f64, n: u32) -> String {
    format!(
        r#"# HELP vllm:num_requests_running Number of requests in model execution batches.
# TYPE vllm:num_requests_running gauge
vllm:num_requests_running{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {r}.0
# HELP vllm:num_requests_waiting Number of requests waiting to be processed.
# TYPE vllm:num_requests_waiting gauge
vllm:num_requests_waiting{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {w}.0
# HELP vllm:kv_cache_usage_perc KV-cache usage. 1 means 100 percent usage.
# TYPE vllm:kv_cache_usage_perc gauge
vllm:kv_cache_usage_perc{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {kv}
# HELP vllm:num_preemptions_total Cumulative number of preemption from the engine.
# TYPE vllm:num_preemptions_total counter
vllm:num_preemptions_total{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {p}.0
# HELP vllm:prompt_tokens_total Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_total counter
vllm:prompt_tokens_total{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {pt}.0
# HELP vllm:prompt_tokens_created Number of prefill tokens processed.
# TYPE vllm:prompt_tokens_created gauge
vllm:prompt_tokens_created{{engine="0",model_name="Qwen/Qwen3-0.6B"}} 1.764e+09
# HELP vllm:generation_tokens_total Number of generation tokens processed.
# TYPE vllm:generation_tokens_total counter
vllm:generation_tokens_total{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {gt}.0
# HELP vllm:prefix_cache_queries_total Prefix cache queries, in terms of number of queried tokens.
# TYPE vllm:prefix_cache_queries_total counter
vllm:prefix_cache_queries_total{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {pt}.0
# HELP vllm:prefix_cache_hits_total Prefix cache hits, in terms of number of cached tokens.
# TYPE vllm:prefix_cache_hits_total counter
vllm:prefix_cache_hits_total{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {hits}.0
# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds histogram
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.1",model_name="Qwen/Qwen3-0.6B"}} {half}.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="0.5",model_name="Qwen/Qwen3-0.6B"}} {c}.0
vllm:time_to_first_token_seconds_bucket{{engine="0",le="+Inf",model_name="Qwen/Qwen3-0.6B"}} {c}.0
vllm:time_to_first_token_seconds_count{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {c}.0
vllm:time_to_first_token_seconds_sum{{engine="0",model_name="Qwen/Qwen3-0.6B"}} {s}
# HELP vllm:time_to_first_token_seconds_created Histogram of time to first token in seconds.
# TYPE vllm:time_to_first_token_seconds_created gauge
vllm:time_to_first_token_seconds_created{{engine="0",model_name="Qwen/Qwen3-0.6B"}} 1.764e+09
"#,
        p = n,
        pt = 1000 * n,
        gt = 100 * n,
        hits = 250 * n,
        half = 5 * n,
        c = 10 * n,
        s = f64::from(n) * 2.0,
    )
}

fn sglang(r: u32, w: u32, kv: f64, n: u32) -> String {
    format!(
        r#"# HELP sglang:num_running_reqs The number of running requests.
# TYPE sglang:num_running_reqs gauge
sglang:num_running_reqs{{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"}} {r}.0
# HELP sglang:num_queue_reqs The number of requests in the waiting queue.
# TYPE sglang:num_queue_reqs gauge
sglang:num_queue_reqs{{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"}} {w}.0
# HELP sglang:token_usage The token usage.
# TYPE sglang:token_usage gauge
sglang:token_usage{{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"}} {kv}
# HELP sglang:cache_hit_rate The prefix cache hit rate.
# TYPE sglang:cache_hit_rate gauge
sglang:cache_hit_rate{{engine_type="unified",model_name="m",pp_rank="0",tp_rank="0"}} 0.25
# HELP sglang:prompt_tokens_total Number of prefill tokens processed.
# TYPE sglang:prompt_tokens_total counter
sglang:prompt_tokens_total{{model_name="m"}} {pt}.0
# HELP sglang:generation_tokens_total Number of generation tokens processed.
# TYPE sglang:generation_tokens_total counter
sglang:generation_tokens_total{{model_name="m"}} {gt}.0
# HELP sglang:num_retracted_requests_total Number of retracted requests.
# TYPE sglang:num_retracted_requests_total counter
sglang:num_retracted_requests_total{{model_name="m"}} {n}.0
# HELP sglang:time_to_first_token_seconds Histogram of time to first token in seconds.
# TYPE sglang:time_to_first_token_seconds histogram
sglang:time_to_first_token_seconds_sum{{model_name="m"}} {s}
sglang:time_to_first_token_seconds_bucket{{le="0.1",model_name="m"}} {half}.0
sglang:time_to_first_token_seconds_bucket{{le="0.5",model_name="m"}} {c}.0
sglang:time_to_first_token_seconds_bucket{{le="+Inf",model_name="m"}} {c}.0
sglang:time_to_first_token_seconds_count{{model_name="m"}} {c}.0
"#,
        pt = 1000 * n,
        gt = 100 * n,
        half = 5 * n,
        c = 10 * n,
        s = f64::from(n) * 2.0,
    )
}

fn tgi(r: u32, w: u32, _kv: f64, n: u32) -> String {
    format!(
        r#"# TYPE tgi_batch_current_size gauge
tgi_batch_current_size {r}
# TYPE tgi_queue_size gauge
tgi_queue_size {w}
# TYPE tgi_request_generated_tokens histogram
tgi_request_generated_tokens_bucket{{le="64"}} 0
tgi_request_generated_tokens_bucket{{le="128"}} {c}
tgi_request_generated_tokens_bucket{{le="+Inf"}} {c}
tgi_request_generated_tokens_sum {gt}
tgi_request_generated_tokens_count {c}
# TYPE tgi_request_input_length histogram
tgi_request_input_length_bucket{{le="1024"}} {c}
tgi_request_input_length_bucket{{le="+Inf"}} {c}
tgi_request_input_length_sum {pt}
tgi_request_input_length_count {c}
# TYPE tgi_request_queue_duration histogram
tgi_request_queue_duration_bucket{{le="0.1"}} {half}
tgi_request_queue_duration_bucket{{le="0.5"}} {c}
tgi_request_queue_duration_bucket{{le="+Inf"}} {c}
tgi_request_queue_duration_sum {s}
tgi_request_queue_duration_count {c}
"#,
        pt = 1000 * n,
        gt = 100 * n,
        half = 5 * n,
        c = 10 * n,
        s = f64::from(n) * 2.0,
    )
}

fn llamacpp(r: u32, w: u32, _kv: f64, n: u32) -> String {
    format!(
        r#"# HELP llamacpp:prompt_tokens_total Number of prompt tokens processed.
# TYPE llamacpp:prompt_tokens_total counter
llamacpp:prompt_tokens_total {pt}
# HELP llamacpp:prompt_seconds_total Prompt process time
# TYPE llamacpp:prompt_seconds_total counter
llamacpp:prompt_seconds_total {n}.5
# HELP llamacpp:tokens_predicted_total Number of generation tokens processed.
# TYPE llamacpp:tokens_predicted_total counter
llamacpp:tokens_predicted_total {gt}
# HELP llamacpp:prompt_tokens_seconds Average prompt throughput in tokens/s.
# TYPE llamacpp:prompt_tokens_seconds gauge
llamacpp:prompt_tokens_seconds 812.5
# HELP llamacpp:requests_processing Number of requests processing.
# TYPE llamacpp:requests_processing gauge
llamacpp:requests_processing {r}
# HELP llamacpp:requests_deferred Number of requests deferred.
# TYPE llamacpp:requests_deferred gauge
llamacpp:requests_deferred {w}
"#,
        pt = 1000 * n,
        gt = 100 * n,
    )
}

fn triton(r: u32, w: u32, kv: f64, n: u32) -> String {
    format!(
        r#"# HELP nv_inference_request_success Number of successful inference requests, all batch sizes
# TYPE nv_inference_request_success counter
nv_inference_request_success{{model="ensemble",version="1"}} {c}
# HELP nv_trt_llm_request_metrics TRT LLM request metrics
# TYPE nv_trt_llm_request_metrics gauge
nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="waiting",version="1"}} {w}
nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="active",version="1"}} {r}
nv_trt_llm_request_metrics{{model="tensorrt_llm",request_type="max",version="1"}} 256
# HELP nv_trt_llm_kv_cache_block_metrics TRT LLM KV cache block metrics
# TYPE nv_trt_llm_kv_cache_block_metrics gauge
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="fraction",model="tensorrt_llm",version="1"}} {kv}
nv_trt_llm_kv_cache_block_metrics{{kv_cache_block_type="used",model="tensorrt_llm",version="1"}} 900
# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.
# TYPE nv_inference_pending_request_count gauge
nv_inference_pending_request_count{{model="ensemble",version="1"}} {w}
"#,
        c = 10 * n,
    )
}

fn dcgm(_r: u32, _w: u32, _kv: f64, n: u32) -> String {
    let mut page = String::from(
        "# HELP DCGM_FI_DEV_GPU_UTIL GPU utilization (in %).\n# TYPE DCGM_FI_DEV_GPU_UTIL gauge\n# HELP DCGM_FI_DEV_FB_USED Framebuffer memory used (in MiB).\n# TYPE DCGM_FI_DEV_FB_USED gauge\n# HELP DCGM_FI_DEV_POWER_USAGE Power draw (in W).\n# TYPE DCGM_FI_DEV_POWER_USAGE gauge\n# HELP DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION Total energy consumption since boot (in mJ).\n# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n",
    );
    for gpu in 0..2 {
        let labels = format!("gpu=\"{gpu}\",UUID=\"GPU-{gpu}abc\",device=\"nvidia{gpu}\",modelName=\"NVIDIA H100 80GB HBM3\",Hostname=\"node-1\"");
        page += &format!("DCGM_FI_DEV_GPU_UTIL{{{labels}}} {}\n", 80 + 10 * gpu);
        page += &format!("DCGM_FI_DEV_FB_USED{{{labels}}} 70000\n");
        page += &format!("DCGM_FI_DEV_POWER_USAGE{{{labels}}} 350.5\n");
        // 700 J per second per GPU, in mJ.
        page += &format!(
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{{{labels}}} {}\n",
            5_000_000 + 700_000 * u64::from(n)
        );
    }
    page
}

/// Baseline at t=0 (counters at step 1), samples inside the window at 1 s and 2 s (step 3),
/// and the final scrape at 2.2 s, after the window's end, as a level takes them: the window
/// [0.5 s, 2 s] sees two steps of every counter.
fn read(page: Page) -> kneepoint_core::ServerSummary {
    let mut tl = Timeline::new("http://127.0.0.1:1/metrics");
    let s = 1_000_000_000u64;
    tl.add(0, 0, 1000, &text::parse(&page(0, 0, 0.0, 1)));
    tl.add(s, 1, 1000, &text::parse(&page(8, 4, 0.5, 2)));
    tl.add(2 * s, 2, 1000, &text::parse(&page(4, 0, 0.25, 3)));
    // The final scrape, 200 ms after the level ended: idle, nothing counted since.
    tl.add(2 * s + s / 5, 3, 1000, &text::parse(&page(0, 0, 0.0, 3)));
    let window = Window {
        start_ns: s / 2,
        end_ns: 2 * s,
    };
    summarise(&[Part {
        window,
        timelines: vec![tl],
    }])
}

#[test]
fn every_page_parses_without_skipped_lines() {
    for (name, page) in [
        ("vllm", vllm as Page),
        ("sglang", sglang),
        ("tgi", tgi),
        ("llamacpp", llamacpp),
        ("triton", triton),
        ("dcgm", dcgm),
    ] {
        let e = text::parse(&page(1, 2, 0.5, 3));
        assert_eq!(e.skipped, 0, "{name}: {:?}", e.first_problem);
        assert!(!e.families.is_empty(), "{name}");
        assert_eq!(read(page).endpoints[0].server.as_deref(), Some(name));
    }
}

#[test]
fn vllm_concepts() {
    let s = read(vllm);
    // Gauges: the samples inside the window (t = 1 s and 2 s).
    assert_eq!(s.get("server_running", "max"), Some(8.0));
    assert_eq!(s.get("server_running", "avg"), Some(6.0));
    assert_eq!(s.get("server_waiting", "max"), Some(4.0));
    assert_eq!(s.get("server_kv_cache_usage", "max"), Some(0.5));
    // Counters: two steps in the window.
    assert_eq!(s.get("server_preemptions", "total"), Some(2.0));
    assert_eq!(s.get("server_prompt_tokens", "total"), Some(2000.0));
    assert_eq!(s.get("server_generation_tokens", "total"), Some(200.0));
    assert!((s.get("server_generation_tokens", "rate").unwrap() - 200.0 / 1.5).abs() < 1e-9);
    assert_eq!(s.get("server_prefix_cache_hit_rate", "avg"), Some(0.25));
    // Histogram: 20 observations, 10 under 0.1 s, sum 4 s: avg 200 ms, p50 at 100 ms.
    assert_eq!(s.get("server_ttft", "count"), Some(20.0));
    assert!((s.get("server_ttft", "avg").unwrap() - 200.0).abs() < 1e-9);
    assert!((s.get("server_ttft", "p50").unwrap() - 100.0).abs() < 1e-9);
    assert!(s.get("server_ttft", "p99").unwrap() <= 500.0);
}

#[test]
fn sglang_tgi_llamacpp_triton_concepts() {
    let s = read(sglang);
    assert_eq!(s.get("server_running", "max"), Some(8.0));
    assert_eq!(s.get("server_kv_cache_usage", "max"), Some(0.5));
    assert_eq!(s.get("server_prefix_cache_hit_rate", "avg"), Some(0.25));
    assert_eq!(s.get("server_preemptions", "total"), Some(2.0));
    assert_eq!(s.get("server_ttft", "count"), Some(20.0));
    let s = read(tgi);
    assert_eq!(s.get("server_waiting", "avg"), Some(2.0));
    assert_eq!(s.get("server_generation_tokens", "total"), Some(200.0));
    assert_eq!(s.get("server_prompt_tokens", "total"), Some(2000.0));
    assert!((s.get("server_queue_time", "avg").unwrap() - 200.0).abs() < 1e-9);
    let s = read(llamacpp);
    assert_eq!(s.get("server_running", "max"), Some(8.0));
    assert_eq!(s.get("server_waiting", "max"), Some(4.0));
    assert_eq!(s.get("server_generation_tokens", "total"), Some(200.0));
    let s = read(triton);
    // Only the `active` and `waiting` request types; the first table row wins for waiting.
    assert_eq!(s.get("server_running", "max"), Some(8.0));
    assert_eq!(s.get("server_waiting", "max"), Some(4.0));
    assert_eq!(s.get("server_kv_cache_usage", "max"), Some(0.5));
}

#[test]
fn dcgm_concepts_combine_over_gpus() {
    let s = read(dcgm);
    assert_eq!(s.get("gpu_utilization", "avg"), Some(85.0));
    assert_eq!(s.get("gpu_memory_used", "max"), Some(140_000.0));
    assert_eq!(s.get("gpu_power", "avg"), Some(701.0));
    // Two GPUs × two steps × 700 J.
    assert!((s.get("gpu_energy", "total").unwrap() - 2800.0).abs() < 1e-6);
}

#[test]
fn exports_have_aiperfs_shape() {
    let mut tl = Timeline::new("http://127.0.0.1:1/metrics");
    tl.add(0, 0, 1000, &text::parse(&vllm(0, 0, 0.0, 1)));
    tl.add(1_000_000_000, 1, 1000, &text::parse(&vllm(8, 4, 0.5, 2)));
    tl.add(2_000_000_000, 2, 1000, &text::parse(&vllm(4, 0, 0.25, 3)));
    let parts = [Part {
        window: Window {
            start_ns: 500_000_000,
            end_ns: 2_000_000_000,
        },
        timelines: vec![tl],
    }];
    let summary = summarise(&parts);
    let doc = kneepoint_scrape::export_json(&parts, &summary);
    assert_eq!(doc["schema_version"], "1.0");
    let running = &doc["metrics"]["vllm:num_requests_running"];
    assert_eq!(running["type"], "gauge");
    assert_eq!(running["series"][0]["stats"]["max"], 8.0);
    assert_eq!(running["series"][0]["labels"]["engine"], "0");
    let tokens = &doc["metrics"]["vllm:generation_tokens"];
    assert_eq!(tokens["type"], "counter");
    assert_eq!(tokens["series"][0]["stats"]["total"], 200.0);
    let ttft = &doc["metrics"]["vllm:time_to_first_token_seconds"]["series"][0];
    assert_eq!(ttft["stats"]["count"], 20.0);
    assert_eq!(ttft["buckets"]["+Inf"], 20.0);
    assert!(ttft["stats"]["p50_estimate"].as_f64().is_some());
    assert!(doc["metrics"].get("vllm:prompt_tokens_created").is_none());
    assert_eq!(
        doc["summary"]["endpoint_info"]["http://127.0.0.1:1/metrics"]["total_fetches"],
        3
    );
    assert_eq!(doc["concepts"]["server_running"]["max"], 8.0);
    // The state at each scrape round, for plots over time: running 0, 8, 4; preemptions
    // since the first scrape 0, 1, 2.
    let timeline = doc["timeline"].as_array().unwrap();
    let running: Vec<f64> = timeline
        .iter()
        .map(|p| p["running"].as_f64().unwrap())
        .collect();
    assert_eq!(running, [0.0, 8.0, 4.0]);
    let preempted: Vec<f64> = timeline
        .iter()
        .map(|p| p["preemptions"].as_f64().unwrap())
        .collect();
    assert_eq!(preempted, [0.0, 1.0, 2.0]);
    assert_eq!(timeline[2]["kv_usage"], 0.25);
    assert_eq!(timeline[1]["t_ns"], 1_000_000_000u64);
    let csv = kneepoint_scrape::export_csv(&parts);
    assert!(csv.starts_with("# kneepoint server metrics export (CSV)\n"));
    let headers: Vec<&str> = csv.lines().filter(|l| l.starts_with("Endpoint,")).collect();
    assert_eq!(headers.len(), 3, "{csv}");
    assert!(headers[0].starts_with("Endpoint,Type,Metric,Unit,avg,std,min,max,p1"));
    assert!(
        headers[2].ends_with(",Description,buckets"),
        "{}",
        headers[2]
    );
    assert!(csv.contains("127.0.0.1:1,histogram,vllm:time_to_first_token_seconds,seconds,20,"));
    assert!(csv.contains("0.1=10;0.5=20;+Inf=20"), "{csv}");
}

#[test]
fn runaway_pages_stay_bounded() {
    // More series than kept: the rest are counted as skipped.
    let mut page = String::from("# TYPE m gauge\n");
    for i in 0..kneepoint_scrape::MAX_SERIES + 5 {
        page += &format!("m{{k=\"{i}\"}} 1\n");
    }
    let mut tl = Timeline::new("http://127.0.0.1:1/metrics");
    tl.add(0, 0, 1, &text::parse(&page));
    assert_eq!(tl.skipped, 5);
    // A section with more label names than columns: labels in one cell.
    let mut page = String::from("# TYPE g gauge\n");
    for i in 0..70 {
        page += &format!("g{{key{i}=\"v\"}} 1\n");
    }
    let mut tl = Timeline::new("http://127.0.0.1:1/metrics");
    for t in [0, 1, 2] {
        tl.add(t, t as u32, 1, &text::parse(&page));
    }
    let parts = [Part {
        window: Window {
            start_ns: 0,
            end_ns: 2,
        },
        timelines: vec![tl],
    }];
    let csv = kneepoint_scrape::export_csv(&parts);
    let header = csv.lines().find(|l| l.starts_with("Endpoint,")).unwrap();
    assert!(header.ends_with(",labels,Description"), "{header}");
    assert!(csv.contains(",key7=v,"), "{csv}");
}

#[test]
fn the_timeline_reads_counter_resets_and_label_filters() {
    let page = |p: u32, active: u32| {
        format!(
            "# TYPE vllm:num_preemptions_total counter\nvllm:num_preemptions_total{{engine=\"0\"}} {p}\n# TYPE nv_trt_llm_request_metrics gauge\nnv_trt_llm_request_metrics{{request_type=\"active\"}} {active}\nnv_trt_llm_request_metrics{{request_type=\"max\"}} 256\n"
        )
    };
    let mut tl = Timeline::new("http://127.0.0.1:1/metrics");
    for (round, (p, active)) in [(1, 1), (3, 2), (0, 3), (2, 4)].into_iter().enumerate() {
        tl.add(
            round as u64 * 10,
            round as u32,
            1,
            &text::parse(&page(p, active)),
        );
    }
    let points = kneepoint_scrape::concept_timeline(&[tl]);
    let preempted: Vec<Option<f64>> = points.iter().map(|p| p.preemptions).collect();
    // +2, then a reset to 0 (nothing new), then +2.
    assert_eq!(preempted, [Some(0.0), Some(2.0), Some(2.0), Some(4.0)]);
    // Only `request_type="active"` is the running batch, never `max`.
    let running: Vec<Option<f64>> = points.iter().map(|p| p.sample.running).collect();
    assert_eq!(running, [Some(1.0), Some(2.0), Some(3.0), Some(4.0)]);
}
