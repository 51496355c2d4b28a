"""kneepoint against an unmodified llama-cpp-python server (Gemma 3 270M, Q4_K_M, from PyPI).

That server runs one sequence at a time, sends no usage in streams, rejects any x-request-id
that is not a UUID, and prepends Gemma's BOS token to every prompt. Every check is an assertion.
"""

import pytest

from conftest import check_all_ok, kneepoint, metric, records, sweep_levels

ISL, OSL = 32, 8


def sweep(server, tmp_path, *extra, levels="1,2", count=4):
    recs = sweep_levels(server, tmp_path / "run", ISL, OSL, levels, count, *extra)
    check_all_ok(recs, count)
    return [r for lv in recs for r in lv]


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_streaming_counts_output_with_the_models_tokenizer(llamacpp, tmp_path, api):
    recs = sweep(llamacpp, tmp_path, "--endpoint-type", api)
    for r in recs:
        md = r["metadata"]
        # No usage in a llama-cpp-python stream: the count is the tokenizer's, of the text.
        assert md["output_tokens_source"] == "tokenizer", md
        assert md["server_input_tokens"] is None, md
        assert 1 <= metric(r, "output_sequence_length") <= OSL + 2, md
        assert metric(r, "time_to_first_token") is not None


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_whole_responses_use_usage_and_isl_is_exact(llamacpp, tmp_path, api):
    recs = sweep(llamacpp, tmp_path, "--endpoint-type", api, "--streaming", "false")
    offsets = set()
    for r in recs:
        md = r["metadata"]
        assert md["output_tokens_source"] == "usage", md
        assert 1 <= metric(r, "output_sequence_length") <= OSL, md
        offsets.add(md["server_input_tokens"] - metric(r, "input_sequence_length"))
    # Completions: exactly the BOS token Gemma's prompts start with; chat: the template's
    # constant wrapping.
    assert len(offsets) == 1, offsets
    offset = offsets.pop()
    assert offset == 1 if api == "completions" else offset > 1, offset


def test_search_runs_to_an_answer(llamacpp, tmp_path):
    import json
    out = tmp_path / "search"
    kneepoint("search", "--url", llamacpp.url, "--isl", str(ISL), "--osl", str(OSL),
              "--tokenizer", str(llamacpp.tokenizer), "--request-count", "4",
              "--concurrency-min", "1", "--concurrency-max", "2", "--search-max-iterations", "3",
              "--e2e-sla-ms", "600000", "--artifact-dir", str(out), "--quiet")
    history = json.loads((out / "search_history.json").read_text())
    assert history["complete"] is True
    assert history["boundary"]["feasible_max"] == 2, history["boundary"]
    for p in history["probes"]:
        assert all(r["error"] is None for r in records(out / p["dir"])), p["dir"]


def test_integer_request_ids_are_refused_and_the_record_says_so(llamacpp, tmp_path):
    """What a user met before UUIDs: llama-cpp-python answers 400 with an empty body to an
    x-request-id that is not a UUID. The record must say that the body was empty."""
    import subprocess
    from conftest import BIN
    out = tmp_path / "ints"
    subprocess.run([str(BIN), "sweep", "--url", llamacpp.url, "--concurrency", "1",
                    "--request-count", "2", "--isl", "16", "--osl", "4", "--request-id-format",
                    "integer", "--artifact-dir", str(out), "--quiet"],
                   capture_output=True, text=True, timeout=300)
    recs = records(out / "concurrency_1")
    assert len(recs) == 2
    for r in recs:
        assert r["error"]["code"] == 400, r["error"]
        assert "empty body" in r["error"]["message"], r["error"]
    # Without the header at all, the same server is happy.
    sweep(llamacpp, tmp_path / "none", "--request-id-header", "none", levels="1", count=2)
