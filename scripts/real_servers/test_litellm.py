"""kneepoint through LiteLLM's proxy (a gateway teams put in front of their models) in front of
the same vLLM CPU server the vLLM checks use: every request succeeds, lengths are exact against
the usage the proxy passes on, and the proxy's cost is stated against the direct run.

The proxy needs a master key (it refuses to start without one): kneepoint reads it with
`--api-key-env`, and it never appears in kneepoint's files.
"""

import json
import statistics
import subprocess

from conftest import BIN, check_all_ok, metric, records, sweep_levels

ISL, OSL = 64, 16


def run(server, tmp_path, name, *extra, levels="1,4", count=12):
    return sweep_levels(server, tmp_path / name, ISL, OSL, levels, count, *extra)


def test_chat_through_the_proxy_has_exact_lengths_and_no_failure(litellm, tmp_path, monkeypatch):
    monkeypatch.setenv("LITELLM_KEY", litellm.key)
    for streaming in ("true", "false"):
        levels = run(litellm, tmp_path, f"s-{streaming}", "--api-key-env", "LITELLM_KEY",
                     "--endpoint-type", "chat", "--streaming", streaming)
        check_all_ok(levels, 12)
        recs = [r for lv in levels for r in lv]
        offsets = {r["metadata"]["server_input_tokens"] - metric(r, "input_sequence_length")
                   for r in recs}
        assert len(offsets) == 1 and offsets.pop() > 0, offsets  # vLLM's chat template
        for r in recs:
            md = r["metadata"]
            assert metric(r, "output_sequence_length") == OSL, md
            assert md["output_tokens_source"] == "usage", md
            assert md["finish_reason"] == "length", md
    text = "".join(p.read_text() for p in (tmp_path).rglob("*") if p.is_file()
                   and p.suffix in (".json", ".jsonl", ".log", ".txt", ".csv", ".html"))
    assert litellm.key not in text


def test_completions_through_the_proxy_are_exact(litellm, tmp_path, monkeypatch):
    monkeypatch.setenv("LITELLM_KEY", litellm.key)
    levels = run(litellm, tmp_path, "c", "--api-key-env", "LITELLM_KEY",
                 "--endpoint-type", "completions")
    check_all_ok(levels, 12)
    for r in [r for lv in levels for r in lv]:
        assert r["metadata"]["server_input_tokens"] == ISL == metric(r, "input_sequence_length")
        assert metric(r, "output_sequence_length") == OSL


def test_a_wrong_key_fails_every_request_as_unauthorised(litellm, tmp_path, monkeypatch):
    monkeypatch.setenv("LITELLM_KEY", "sk-wrong-key-for-this-test")
    p = kneepoint_fails("sweep", "--url", litellm.url, "--model", "tiny", "--api-key-env",
                        "LITELLM_KEY", "--concurrency", "1", "--request-count", "2",
                        "--isl", str(ISL), "--osl", str(OSL), "--tokenizer",
                        str(litellm.tokenizer), "--artifact-dir", str(tmp_path / "w"), "--quiet")
    assert p.returncode == 1
    assert "sk-wrong-key-for-this-test" not in p.stdout + p.stderr
    recs = records(tmp_path / "w" / "concurrency_1")
    assert recs and all(r["error"] and r["error"].get("code") in (400, 401) for r in recs), \
        [r["error"] for r in recs]


def kneepoint_fails(*args):
    """Runs the binary expecting a failure: its exit code and output, no assertion."""
    return subprocess.run([str(BIN), *args], capture_output=True, text=True, timeout=300)


def test_the_proxys_cost_against_the_direct_run(vllm, litellm, tmp_path, monkeypatch):
    """Same workload direct and through the proxy, one after the other: the proxy adds to TTFT
    and end-to-end latency (stated in docs/compatibility.md), and changes no token count."""
    monkeypatch.setenv("LITELLM_KEY", litellm.key)
    direct = run(vllm, tmp_path, "direct", levels="4", count=24)[0]
    proxied = run(litellm, tmp_path, "proxied", "--api-key-env", "LITELLM_KEY", levels="4",
                  count=24)[0]
    check_all_ok([direct, proxied], 24)
    med = lambda recs, m: statistics.median(metric(r, m) for r in recs)  # noqa: E731
    summary = {
        "ttft_p50_ms": (med(direct, "time_to_first_token"), med(proxied, "time_to_first_token")),
        "e2e_p50_ms": (med(direct, "request_latency"), med(proxied, "request_latency")),
    }
    print(json.dumps(summary))
    assert [metric(r, "output_sequence_length") for r in proxied] == [OSL] * 24
    # A gateway cannot make the same server answer sooner (beyond this 2-core machine's noise).
    assert summary["e2e_p50_ms"][1] > 0.8 * summary["e2e_p50_ms"][0], summary
