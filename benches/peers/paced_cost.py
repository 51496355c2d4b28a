#!/usr/bin/env python3
"""The client's whole-process cost on a server that is not kneepoint's own (issue 52), beside the
floor under any client that reads each token as it arrives.

The server is benches/peers/mock-openai in its own process (no kneepoint code). Cases:
* paced: TTFT 50 ms, a token every 10 ms per stream, each event rendered and written as it is
  due (its own HTTP chunk), one runtime thread; ISL 1024 / OSL 128 streaming chat at 1,024 and
  4,096 streams, four requests per stream;
* zero latency, ISL 1024 / OSL 256 at 256 streams, 16,384 requests: the answer rendered once and
  reused (pre-rendered), rendered per request and written as one HTTP chunk, and rendered per
  request with each event its own HTTP chunk (what vLLM's server does).

kneepoint is `target/release/kneepoint sweep` (the README's command with `--url`), measured as a
whole process tree with getrusage (prompt generation, exports and all); its level alone is
`client_health.cpu_seconds` from the export. The floor is `floor-reader` (the same crate as the
mock): keep-alive connections that send the requests and do one `read` per readiness, stamp it
and look only for the chunked body's end (no HTTP, SSE or record work), on a current-thread
runtime and on two threads. Its CPU per token is the kernel's and the runtime's share alone.
On the per-event zero-latency case, `hyper-reader` is a bare hyper HTTP/1.1 client (each body
frame stamped, nothing parsed) with its connection in a task of its own (`spawn`, as a pooled
client runs it) or polled inside the request's task (`inline`).

    python3 benches/peers/paced_cost.py [--quick]

Results go to docs/PERFORMANCE.md ("Paced streams").
"""

import argparse
import json
import shutil
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aiperf_side_by_side as peers  # noqa: E402

WORK = peers.WORK / "paced"
FLOOR = peers.WORK / "mock-target" / "release" / "floor-reader"
HYPER = peers.WORK / "mock-target" / "release" / "hyper-reader"


def kneepoint(url, isl, osl, concurrency, requests, name):
    out = WORK / name
    shutil.rmtree(out, ignore_errors=True)
    cmd = [str(peers.KNEEPOINT), "sweep", "--url", url, "--model", "mock", "--isl", str(isl),
           "--osl", str(osl), "--seed", "7", "--quiet", "--no-server-metrics", "--no-store",
           "--concurrency", str(concurrency), "--request-count", str(requests),
           "--artifact-dir", str(out)]
    cpu, rss, wall = peers.run_measured(cmd)
    doc = json.loads((out / f"concurrency_{concurrency}" / "profile_export_aiperf.json").read_text())
    tokens = peers.metric(doc, "total_output_tokens")
    return {
        "cpu": cpu, "level_cpu": doc["client_health"]["cpu_seconds"], "rss": rss, "wall": wall,
        "tokens": tokens, "requests": requests,
        "ttft_p50": peers.metric(doc, "time_to_first_token", "p50"),
        "ttft_p99": peers.metric(doc, "time_to_first_token", "p99"),
        "itl_p50": peers.metric(doc, "inter_token_latency", "p50"),
        "itl_p99": peers.metric(doc, "inter_token_latency", "p99"),
    }


def floor(port, concurrency, requests, threads):
    out = subprocess.run([str(FLOOR), str(port), str(concurrency), str(requests), str(threads)],
                         check=True, capture_output=True, text=True).stdout
    f = dict(zip(out.split()[::2], out.split()[1::2]))
    return {"cpu": float(f["user"]) + float(f["sys"]), "user": float(f["user"]),
            "sys": float(f["sys"]), "reads": int(f["reads"])}


def hyper_reader(port, concurrency, requests, mode):
    out = subprocess.run([str(HYPER), str(port), str(concurrency), str(requests), mode],
                         check=True, capture_output=True, text=True).stdout.split()
    f = dict(zip(out[::2], out[1::2]))
    return float(f["user"]) + float(f["sys"])


def mock(*args):
    return peers.Simulator(command=[str(peers.MOCK), "0", *args])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="1,024 paced streams and one zero-latency case")
    a = ap.parse_args()
    peers.build_kneepoint()
    peers.build_mock()
    WORK.mkdir(parents=True, exist_ok=True)

    print("paced (TTFT 50 ms, ITL 10 ms, each event its own write), ISL 1024 / OSL 128, 4 requests per stream")
    print("| client | streams | CPU µs/token (whole) | level alone | TTFT p50 / p99 ms | ITL p50 / p99 ms | peak RSS MB |")
    print("|---|---|---|---|---|---|---|")
    for streams in [1024] if a.quick else [1024, 4096]:
        server = mock("128", "--ttft-ms", "50", "--itl-ms", "10")
        try:
            k = kneepoint(server.url, 1024, 128, streams, streams * 4, f"paced_{streams}")
            port = int(server.url.rsplit(":", 1)[1])
            floors = [(t, floor(port, streams, streams * 4, t)) for t in (0, 2)]
        finally:
            server.stop()
        per = lambda cpu: cpu / k["tokens"] * 1e6  # noqa: E731
        print(f"| kneepoint | {streams:,} | {per(k['cpu']):.2f} | {per(k['level_cpu']):.2f} | "
              f"{k['ttft_p50']:.1f} / {k['ttft_p99']:.1f} | {k['itl_p50']:.2f} / {k['itl_p99']:.2f} | {k['rss']:.0f} |")
        for threads, f in floors:
            rt = "current-thread" if threads == 0 else f"{threads} threads"
            print(f"| floor-reader, {rt} | {streams:,} | {per(f['cpu']):.2f} (user {per(f['user']):.2f}, "
                  f"system {per(f['sys']):.2f}; {f['reads'] / k['tokens']:.2f} reads/token) | | | | |")

    print("\nzero latency, ISL 1024 / OSL 256, 256 streams, 16,384 requests")
    print("| server | CPU ms/request (whole) | level alone | requests/s | peak RSS MB |")
    print("|---|---|---|---|---|")
    cases = [("rendered per request, each event its own chunk", ["--ttft-ms", "0", "--itl-ms", "0", "--threads", "2"])]
    if not a.quick:
        cases = [("pre-rendered", []), ("rendered per request, one chunk", ["--per-request"])] + cases
    for name, args in cases:
        server = mock("256", *args)
        bare = []
        try:
            k = kneepoint(server.url, 1024, 256, 256, 16384, "zero")
            if "--itl-ms" in args:
                port = int(server.url.rsplit(":", 1)[1])
                bare = [(m, hyper_reader(port, 256, 16384, m)) for m in ("spawn", "inline")]
        finally:
            server.stop()
        print(f"| {name} | {k['cpu'] / 16384 * 1e3:.3f} | {k['level_cpu'] / 16384 * 1e3:.3f} | "
              f"{16384 / k['wall']:,.0f} (whole run) | {k['rss']:.0f} |")
        for mode, cpu in bare:
            print(f"| the same, hyper-reader {mode} (a bare hyper client: frames stamped, nothing parsed) "
                  f"| {cpu / 16384 * 1e3:.3f} | | | |")


if __name__ == "__main__":
    main()
