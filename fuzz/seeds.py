#!/usr/bin/env python3
"""Writes the hand-made seed inputs of each fuzz target into fuzz/corpus/<target>/seed-*.

The fuzzer grows the corpus from these; `cargo fuzz cmin` keeps it small. Re-running this
script only rewrites the seed-* files.
"""
import json
import struct
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parent / "corpus"


def write(target, name, data):
    d = ROOT / target
    d.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    (d / f"seed-{name}").write_bytes(data)


def chat(text, finish=None):
    return json.dumps({"choices": [{"delta": {"content": text}, "finish_reason": finish}]})


# --- SSE: control bytes (count, sizes) then the stream
stream = "".join(f"data: {chat(w)}\n\n" for w in ["Hello", " world", "!"])
stream += f"data: {chat('', 'stop')}\n\n"
stream += 'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":3}}\n\ndata: [DONE]\n\n'
write("sse_stream", "chat", b"\x01\x07\x03" + stream.encode())
write("sse_stream", "crlf", b"\x00\x02" + stream.replace("\n", "\r\n").encode())
write("sse_stream", "cr", b"\x02\x01\x05\x09" + stream.replace("\n", "\r").encode())
write("sse_stream", "fields", b"\x00\x10: keep-alive\nevent: error\nid: 7\ndata: a\ndata: b\nretry: 5\n\n")
write("sse_stream", "error", b"\x00\x04data: {\"error\":{\"message\":\"overloaded\",\"type\":\"server_error\",\"code\":503}}\n\n")
write("sse_stream", "completions", b"\x00\x08data: {\"choices\":[{\"text\":\"hi\",\"finish_reason\":\"length\"}]}\n\n")
write("sse_stream", "long-line", b"\x00\x3f" + b"data: " + b"x" * 300 + b"\n\n")
write("sse_stream", "bad-utf8", b"\x00\x03data: \xff\xfe\n\n")
# Chunks whose skipped values change from one to the next (read by the stream's shape), then
# one whose number turns into a string and one that says it is an error.
vary = "".join(
    'data: {"id":"c%d","created":%s,"sent_ns":%d,"obfuscation":"%s","choices":[{"index":0,'
    '"delta":{"content":"%s"},"finish_reason":null}]}\n\n' % (i, c, 10**i, "x" * i, w)
    for i, (c, w) in enumerate([("17", "a"), ("18", " b"), ("-1.5e3", "c"), ('"19"', "d"), ("1 9", "e"), ("20", "f")])
)
vary += 'data: {"id":"c9","created":21,"sent_ns":1,"obfuscation":"","object":"error","choices":[]}\n\n'
write("sse_stream", "varying-fields", b"\x01\x09\x05" + vary.encode())
write("sse_stream", "reasoning", b"\x01\x05\x06data: {\"choices\":[{\"delta\":{\"reasoning_content\":\"hm\"}}]}\n\n")


# --- event stream
def header(name, value):
    n = name.encode()
    v = value.encode()
    return bytes([len(n)]) + n + b"\x07" + struct.pack(">H", len(v)) + v


def frame(headers, payload):
    hb = b"".join(header(k, v) for k, v in headers)
    total = 12 + len(hb) + len(payload) + 4
    prelude = struct.pack(">II", total, len(hb))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    msg = prelude + hb + payload
    return msg + struct.pack(">I", zlib.crc32(msg))


def part(payload):
    return frame([(":message-type", "event"), (":event-type", "PayloadPart"),
                  (":content-type", "application/octet-stream")], payload)


sse_payload = stream.encode()
tgi = b"".join(json.dumps({"token": {"text": w, "special": False}}).encode() + b"\n"
               for w in ["a", "b"]) + json.dumps({"generated_text": "ab", "details": {"finish_reason": "length"}}).encode() + b"\n"
# Odd first byte: a payload cut into parts.
write("event_stream", "payload-sse", b"\x01\x05\x0b" + sse_payload)
write("event_stream", "payload-jsonl", b"\x03\x03\x02\x07\x01" + tgi)
write("event_stream", "payload-openai-lines", b"\x01\x13" + b"".join(
    f"data: {chat(w)}\n".encode() for w in ["x", "y"]))
# Even first byte: raw frames.
frames = part(sse_payload[:40]) + part(sse_payload[40:])
write("event_stream", "frames", b"\x00\x09" + frames)
write("event_stream", "frames-tgi", b"\x02\x01\x02\x03" + part(tgi))
bad = bytearray(part(b"data: {}\n\n"))
bad[-1] ^= 0xFF
write("event_stream", "bad-crc", b"\x00\x05" + bytes(bad))
exc = frame([(":message-type", "exception"), (":exception-type", "ModelStreamError"),
             (":content-type", "application/json")],
            json.dumps({"Message": "CUDA out of memory", "ErrorCode": "500"}).encode())
write("event_stream", "model-stream-error", b"\x00\x02" + part(b"data: {}\n\n") + exc)
err = frame([(":message-type", "error"), (":error-code", "InternalStreamFailure"),
             (":error-message", "stream failed")], b"")
write("event_stream", "internal-failure", b"\x00\x07" + err)
write("event_stream", "truncated", b"\x00\x01" + frames[:-7])

# --- config files
write("config_text", "readme", """[endpoint]
url = "http://127.0.0.1:8000"
type = "chat"
model = "my-model"
api_key_env = "OPENAI_API_KEY"

[workload]
tokenizer = "builtin"
streaming = true
prompt_input_tokens_mean = 1024
prompt_input_tokens_stddev = 0
output_tokens_mean = 256
shared_prefix_tokens = 0

[sweep_params]
concurrency = [64, 256, 1024]
request_count = 1024
""")
write("config_text", "search", """[search_params]
ttft_p95_ms = 2000
tpot_p95_ms = 60
e2e_p99_ms = 30000
error_rate_sla = 0.01
concurrency_min = 1
concurrency_max = 1024
search_max_iterations = 8
sla = ["time_to_first_token:p95:<=:2000"]
""")
write("config_text", "sagemaker", """[endpoint]
sagemaker_endpoint = "my-llm"
region = "us-east-1"
endpoint_url = "http://127.0.0.1:8080"
inference_component = "ic-1"
payload_codec = "sse"
sagemaker_body = "tgi"

[simulator]
profile = "fast"
slowdown = 1.2
faults = { rate = 0.05, kinds = ["http_429", "stall"], stall_ms = 100 }
""")
write("config_text", "json", json.dumps({
    "endpoint": {"url": "http://127.0.0.1:8000", "type": "completions"},
    "workload": {"prompt_input_tokens_mean": 0, "prompt_input_tokens_stddev": -1},
    "sweep_params": {"concurrency": [0], "request_count": 1}}))
write("config_text", "candidates", """objective = "cost"
[fleet]
peak_concurrency = 500
headroom = 0.2
[[candidates]]
name = "a"
instance_type = "ml.g6e.2xlarge"
price_per_hour = 2.24
""")

# --- datasets
write("datasets", "jsonl", '{"text": "hello there", "output_length": 16}\n{"prompt": "hi", "max_tokens": 8, "temperature": 0.5}\n')
write("datasets", "trace", '{"timestamp": 0, "input_length": 512, "output_length": 32, "hash_ids": [1, 2]}\n'
      '{"timestamp": 120, "input_length": 700, "output_length": 8, "hash_ids": [1, 3]}\n')
write("datasets", "sharegpt", json.dumps([
    {"id": "x", "conversations": [{"from": "system", "value": "Be brief."},
                                  {"from": "human", "value": "What is a knee?"},
                                  {"from": "gpt", "value": "A bend in a curve."}]},
    {"conversations": [{"from": "gpt", "value": "no human turn"}]}]))
write("datasets", "bad-lines", '{"text": 1}\n\n{not json}\n')
