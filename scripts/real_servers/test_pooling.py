"""Issue 17 against real vLLM CPU: the tiny Llama served as a pooling model (`--runner pooling
--convert embed`, dummy weights) answers kneepoint's embeddings and rerank requests; every
request succeeds with one item per input, and the server's prompt count is the workload's."""
import json

import pytest

from conftest import kneepoint, metric, records, venv_python
from servers import start_vllm

ISL, BATCH, COUNT = 32, 4, 16


@pytest.fixture(scope="module")
def vllm_pooling():
    server = start_vllm(venv_python("vllm"), "vllm-pooling",
                        ("--runner", "pooling", "--convert", "embed"))
    yield server
    server.stop()


def sweep(server, out, endpoint_type):
    kneepoint("sweep", "--url", server.url, "--model", server.model, "--endpoint-type",
              endpoint_type, "--batch-size", str(BATCH), "--isl", str(ISL), "--concurrency", "1,4",
              "--request-count", str(COUNT), "--tokenizer", str(server.tokenizer),
              "--artifact-dir", str(out), "--quiet", "--no-server-metrics")
    return [(c, records(out / f"concurrency_{c}")) for c in (1, 4)]


def test_embeddings_batches_are_answered_with_one_vector_each(vllm_pooling, tmp_path):
    out = tmp_path / "embeddings"
    for c, recs in sweep(vllm_pooling, out, "embeddings"):
        assert len(recs) == COUNT
        for r in recs:
            assert r["error"] is None, r["error"]
            assert r["metadata"]["pooled_items"] == BATCH
            # the server counted exactly the tokens the workload made
            assert r["metadata"]["server_input_tokens"] == BATCH * ISL == metric(
                r, "input_sequence_length")
            assert metric(r, "request_latency") > 0
        agg = json.loads((out / f"concurrency_{c}" / "profile_export_aiperf.json").read_text())
        rps = agg["request_throughput"]["avg"]
        assert abs(agg["input_throughput"]["avg"] - BATCH * rps) < 1e-6 * BATCH * rps
        assert abs(agg["input_token_throughput"]["avg"] - BATCH * ISL * rps) < 1e-3 * rps


def test_rerank_queries_are_answered_with_a_score_per_document(vllm_pooling, tmp_path):
    out = tmp_path / "rerank"
    for _, recs in sweep(vllm_pooling, out, "rerank"):
        assert len(recs) == COUNT
        for r in recs:
            assert r["error"] is None, r["error"]
            assert r["metadata"]["pooled_items"] == BATCH
        body = json.loads((out / "concurrency_1" / "inputs.json").read_text())["data"][0][
            "payloads"][0]
        assert isinstance(body["query"], str) and len(body["documents"]) == BATCH
