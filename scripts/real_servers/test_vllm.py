"""kneepoint against an unmodified vLLM CPU server (dummy weights, the real engine).

Every check is an assertion. Tolerances are stated where a number is compared; they come from
the measured spread recorded in docs/compatibility.md.
"""

import json
import statistics

import pytest

from conftest import check_all_ok, kneepoint, metric, records, scrape, sweep_levels

ISL, OSL = 64, 16


def sweep(server, tmp_path, *extra, levels="1,4", count=12):
    return sweep_levels(server, tmp_path / "run", ISL, OSL, levels, count, *extra)


def check_osl_exact_from_usage(recs):
    for r in recs:
        md = r["metadata"]
        assert metric(r, "output_sequence_length") == OSL, md
        assert md["output_tokens_source"] == "usage", md
        assert md["finish_reason"] == "length", md


@pytest.mark.parametrize("streaming", ["true", "false"])
def test_chat_isl_has_a_constant_template_offset_and_osl_is_exact(vllm, tmp_path, streaming):
    levels = sweep(vllm, tmp_path, "--endpoint-type", "chat", "--streaming", streaming)
    check_all_ok(levels, 12)
    recs = [r for lv in levels for r in lv]
    offsets = {r["metadata"]["server_input_tokens"] - metric(r, "input_sequence_length")
               for r in recs}
    # The chat template wraps the one user message in the same tokens every time.
    assert len(offsets) == 1 and offsets.pop() > 0
    check_osl_exact_from_usage(recs)


@pytest.mark.parametrize("streaming", ["true", "false"])
def test_completions_isl_is_exact_against_usage(vllm, tmp_path, streaming):
    levels = sweep(vllm, tmp_path, "--endpoint-type", "completions", "--streaming", streaming)
    check_all_ok(levels, 12)
    recs = [r for lv in levels for r in lv]
    for r in recs:
        assert r["metadata"]["server_input_tokens"] == ISL == metric(r, "input_sequence_length")
    check_osl_exact_from_usage(recs)


def test_request_ids_are_uuids_the_server_accepts(vllm, tmp_path):
    levels = sweep(vllm, tmp_path, levels="2", count=4)
    check_all_ok(levels, 4)
    ids = [r["metadata"]["x_request_id"] for r in levels[0]]
    assert len(set(ids)) == 4
    for i, r in zip(ids, levels[0]):
        assert len(i) == 36 and i[14] == "4"
        assert int(i[-12:], 16) == r["metadata"]["session_num"]


def test_client_latency_matches_vllms_own_histograms(vllm, tmp_path):
    """Mean TTFT and end-to-end latency against vLLM's Prometheus histograms over the same
    requests (sum/count deltas). vLLM stamps arrival in its API server and the first token in
    its output processor, so the client's figure is larger by HTTP parsing, the chat template,
    tokenisation and SSE framing on a 2-core machine shared with the engine."""
    before = scrape(vllm.url)
    levels = sweep(vllm, tmp_path, levels="1,4", count=16)
    after = scrape(vllm.url)
    check_all_ok(levels, 16)
    recs = [r for lv in levels for r in lv]

    def server_mean(name):
        n = after[f"{name}_count"] - before.get(f"{name}_count", 0)
        assert n == len(recs), (name, n, len(recs))
        return 1000 * (after[f"{name}_sum"] - before.get(f"{name}_sum", 0)) / n

    client_ttft = statistics.fmean(metric(r, "time_to_first_token") for r in recs)
    client_e2e = statistics.fmean(metric(r, "request_latency") for r in recs)
    server_ttft = server_mean("vllm:time_to_first_token_seconds")
    server_e2e = server_mean("vllm:e2e_request_latency_seconds")
    print(json.dumps({"client_ttft_ms": client_ttft, "server_ttft_ms": server_ttft,
                      "client_e2e_ms": client_e2e, "server_e2e_ms": server_e2e}))
    # The client cannot see a token much before the server made it; vLLM stamps a request's
    # end after the last chunk has gone out, so the client's end-to-end figure may be a little
    # smaller (measured: up to ~1 ms). The client's extra is bounded: 60 ms plus 50 % of the
    # server's figure. It is the API server's work before its arrival stamp (HTTP, the chat
    # template, tokenisation) and SSE framing, on two cores shared with the engine: measured
    # TTFT +10 ms at ~30 ms, and +19 ms and +38 ms at ~5 ms once vLLM's prefix cache serves
    # prompts an earlier test sent (2026-12-01); e2e within 1 %. A client that lost a scheduler
    # wake-up per token, or stamped late, would be off by far more.
    for what, c, s in [("ttft", client_ttft, server_ttft), ("e2e", client_e2e, server_e2e)]:
        assert c >= s - (2.0 + 0.02 * s), (what, c, s)
        assert c - s <= 60.0 + 0.5 * s, (what, c, s)


def search(server, out, sla_ms, iterations):
    kneepoint("search", "--url", server.url, "--isl", str(ISL), "--osl", str(OSL),
              "--tokenizer", str(server.tokenizer), "--request-count", "8",
              "--concurrency-min", "1", "--concurrency-max", "16",
              "--search-max-iterations", str(iterations), "--e2e-sla-ms", str(sla_ms),
              "--artifact-dir", str(out), "--quiet")
    return json.loads((out / "search_history.json").read_text())


def test_search_with_an_unmeetable_sla_answers_none(vllm, tmp_path):
    history = search(vllm, tmp_path / "search", 1, 3)
    assert history["complete"] is True
    assert history["boundary"]["feasible_max"] is None, history["boundary"]
    assert history["probes"][0]["probe"]["concurrency"] == 1
    assert history["probes"][0]["pass"] is False


def test_search_finds_a_boundary(vllm, tmp_path):
    out = tmp_path / "search"
    history = search(vllm, out, 60000, 6)
    assert history["complete"] is True
    assert history["probes"], history
    for p in history["probes"]:
        recs = records(out / p["dir"])
        assert recs and all(r["error"] is None for r in recs), p["dir"]
    # A generous SLA holds everywhere: the answer is the top of the range.
    assert history["boundary"]["feasible_max"] == 16, history["boundary"]


def test_server_metrics_are_scraped_per_level_and_explain_the_knee(vllm, tmp_path):
    """Issue 18 against real vLLM: its /metrics is scraped during every level (the default
    for an OpenAI-compatible URL), each level has AIPerf-shaped server_metrics_export files,
    and the sweep's knee explanation is computed from the scraped series."""
    out = tmp_path / "run"
    # vLLM CPU with dummy weights answers a request in a few tens of ms: 32 requests and a
    # 50 ms interval give every level several scrapes inside its measured window.
    levels = sweep_levels(vllm, out, ISL, OSL, "1,4", 32, "--server-metrics-interval", "0.05")
    check_all_ok(levels, 32)
    for c in (1, 4):
        level = out / f"concurrency_{c}"
        lines = (level / "server_metrics_export.jsonl").read_text().splitlines()
        assert len(lines) >= 3, (c, len(lines))
        first = json.loads(lines[0])
        assert first["endpoint_url"] == vllm.url + "/metrics", first["endpoint_url"]
        assert "vllm:num_requests_running" in first["metrics"], sorted(first["metrics"])[:20]
        doc = json.loads((level / "server_metrics_export.json").read_text())
        assert doc["schema_version"] == "1.0"
        assert doc["metrics"]["vllm:num_requests_running"]["type"] == "gauge"
        assert doc["metrics"]["vllm:generation_tokens"]["type"] == "counter"
        csv = (level / "server_metrics_export.csv").read_text()
        assert "vllm:time_to_first_token_seconds" in csv
        concepts = json.loads((level / "profile_export_aiperf.json").read_text())[
            "server_metrics"]["concepts"]
        assert concepts["server_running"]["samples"] >= 1, concepts["server_running"]
        assert concepts["server_running"]["max"] <= c, concepts["server_running"]
        # The level's 32 requests (no warm-up) between the baseline and the final scrape: the
        # server's TTFT histogram counted each once. vLLM counts a request's first token before
        # its response ends, so the final scrape sees them all.
        assert concepts["server_ttft"]["count"] == 32, concepts["server_ttft"]
        assert concepts["server_generation_tokens"]["total"] == 32 * OSL, concepts
    summary = json.loads((out / "sweep_summary.json").read_text())
    e = summary["knee_explanation"]
    assert e["cause"] != "no_server_data", e
    assert e["evidence"] and "running" in e["evidence"][0], e
    for row in summary["levels"]:
        assert "server_waiting" in row["server_metrics"], row


def test_multi_turn_conversations_fill_the_prefix_cache_turn_by_turn(vllm, tmp_path):
    """Issue 17 against real vLLM (prefix caching on by default): every turn is sent with the
    conversation so far, so the server's prefix-cache hit counter rises with the number of
    turns, and by about as much as the history the records say was repeated."""
    hits, repeated = {}, {}
    for turns in (1, 2, 3):
        out = tmp_path / f"turns_{turns}"
        before = scrape(vllm.url)
        # 12 requests at concurrency 2 (whole conversations), fresh prompts for every run
        levels = sweep_levels(vllm, out, 128, 16, "2", 12, "--seed", str(1000 + turns),
                              "--conversation-turn-mean", str(turns), "--no-server-metrics")
        after = scrape(vllm.url)
        check_all_ok(levels, 12)
        recs = levels[0]
        hits[turns] = after.get("vllm:prefix_cache_hits_total", 0.0) - before.get(
            "vllm:prefix_cache_hits_total", 0.0)
        repeated[turns] = sum(r["metadata"].get("history_tokens") or 0 for r in recs)
        if turns > 1:
            assert {r["metadata"]["turn_index"] for r in recs} == set(range(turns))
            assert all(r["metadata"]["conversation_id"] for r in recs)
            turn_summary = json.loads((out / "concurrency_2" / "turn_summary.json").read_text())
            assert len(turn_summary["turns"]) == turns
    print(json.dumps({"prefix_cache_hits": hits, "history_tokens": repeated}))
    assert repeated[1] == 0 < repeated[2] < repeated[3], repeated
    assert hits[1] < hits[2] < hits[3], hits
    # vLLM caches whole blocks of the repeated prefix: most of the history is a hit
    assert hits[3] - hits[1] >= 0.3 * repeated[3], (hits, repeated)


def test_length_sweep_measures_the_prefill_curve(vllm, tmp_path):
    """Issue 31 against real vLLM: a length sweep at concurrency 1 sends prompts of exactly the
    lengths asked for (the server's usage agrees), TTFT grows with the prompt, the fitted
    prefill rate is positive, and each length's prompts are new text (prefix caching is on by
    default, and a longer prompt must not start with a shorter one's). 16 output tokens, not 4:
    the dummy-weight model's tokens are bytes of a byte-level vocabulary, and 4 of them once
    held no whole UTF-8 character, so vLLM streamed no text and the request was recorded as
    malformed (CI, 2026-12-03)."""
    out = tmp_path / "lengths"
    before = scrape(vllm.url)
    kneepoint("sweep", "--url", vllm.url, "--endpoint-type", "completions",
              "--isl", "64,512,2048", "--osl", "16", "--concurrency", "1", "--request-count", "6",
              "--tokenizer", str(vllm.tokenizer), "--no-server-metrics", "--quiet",
              "--artifact-dir", str(out))
    after = scrape(vllm.url)
    doc = json.loads((out / "length_sweep.json").read_text())
    rows = doc["rows"]
    assert [r["isl"] for r in rows] == [64, 512, 2048]
    for r in rows:
        recs = records(out / r["dir"])
        check_all_ok([recs], 6)
        for x in recs:
            assert x["metadata"]["server_input_tokens"] == r["isl"] == metric(
                x, "input_sequence_length"), x["metadata"]
    ttft = [r["ttft_p50_ms"] for r in rows]
    fit = doc["prefill"]
    print(json.dumps({"ttft_p50_ms": ttft, "prefill": fit}))
    # The dummy model (2 layers of 128) prefills 2,048 tokens in less time than vLLM's
    # scheduling noise: TTFT p50 once read 28.5, 31.4, 27.1 ms (CI, 2026-12-06). That TTFT grows
    # with the prompt is checked on llama-server's real Gemma weights
    # (test_llama_server.py::test_length_sweep_sees_prefill_grow); here the fit is made and named.
    assert all(t > 0 for t in ttft), ttft
    assert fit["lengths"] == 3, fit
    assert fit["rate_tokens_per_s"] is None or fit["rate_tokens_per_s"] > 0, fit
    hits = after.get("vllm:prefix_cache_hits_total", 0.0) - before.get(
        "vllm:prefix_cache_hits_total", 0.0)
    assert hits < 0.25 * 6 * (64 + 512 + 2048), hits
    assert "Input-length sweep" in (out / "report.html").read_text()


def test_reset_prefix_cache_empties_vllms_cache_before_each_level(vllm, tmp_path):
    """Issue 31 against real vLLM (started with VLLM_SERVER_DEV_MODE=1): the same prompts sent
    again are served from vLLM's prefix cache, unless --reset-prefix-cache empties it before the
    level; vllm:prefix_cache_hits_total read before and after each run."""
    def hits(name, *extra):
        before = scrape(vllm.url)
        levels = sweep_levels(vllm, tmp_path / name, 512, 4, "1", 4, "--seed", "4242",
                              "--endpoint-type", "completions", "--no-server-metrics", *extra)
        check_all_ok(levels, 4)
        after = scrape(vllm.url)
        return after.get("vllm:prefix_cache_hits_total", 0.0) - before.get(
            "vllm:prefix_cache_hits_total", 0.0)

    hits("fill")  # the prompts enter the cache
    warm = hits("again")
    cold = hits("reset", "--reset-prefix-cache")
    print(json.dumps({"prompt_tokens": 4 * 512, "hits_warm": warm, "hits_after_reset": cold}))
    assert warm >= 0.5 * 4 * 512, warm
    assert cold < 0.1 * 4 * 512, cold
    level = json.loads((tmp_path / "reset" / "concurrency_1" /
                        "profile_export_aiperf.json").read_text())
    assert level["input_config"]["prefix_cache_reset"]["status"] == 200
