#!/usr/bin/env python3
"""kneepoint's max-concurrency-under-SLA search beside AIPerf's, on the same simulator with
injected noise.

Each tool searches the built-in simulator (`kneepoint sim serve`, calibrated profile, ten times
faster than the modelled GPU, so the SLA scales by 1/10) for the highest concurrency whose
request-latency p99 meets the SLA, at SageMaker's defaults: concurrency 16..4096, 10 levels,
1,024 requests per level, ISL 1024 / OSL 256 streaming chat. Noise: `--jitter` (each engine
step) and `--drift` (a slowly wandering slowdown, as noisy neighbours cause). Each run gets a
fresh simulator with its own seed. The reference boundary is kneepoint's search on a
noise-free simulator (jitter 0, drift 0) at 2 % precision with 20 levels.

Reported per run: the answer, the levels probed (repeats included), requests sent, seconds of
endpoint time (the sum of the levels' benchmark durations) and the client's CPU seconds (the
tool's process tree, from getrusage), and wall time.

    python3 benches/peers/search_side_by_side.py [--runs 2] [--drift 0.05] [--jitter 0.05]

AIPerf comes from PyPI (`aiperf==0.13.0`, whose search recipe is the same code as
`aiperf-nightly` 0.13.0.dev20261023) into target/peers/aiperf-venv, or from `$AIPERF` (a path
to an `aiperf` executable). Its smooth-isotonic style warms each new level up for 60 s by
default; the script lowers that to 1 s (AIPERF_SEARCH_PLANNER_* variables) so that endpoint
time compares like with like, and says so in the table. Results go to docs/search.md.
"""

import argparse
import json
import os
import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import aiperf_side_by_side as peers  # noqa: E402

WORK = peers.WORK / "search"
SPEC = ["--isl", "1024", "--osl", "256"]


def kneepoint_search(url, model, sla_ms, artifact, extra=()):
    shutil.rmtree(artifact, ignore_errors=True)
    cmd = [str(peers.KNEEPOINT), "search", "--url", url, "--model", model, *SPEC,
           "--e2e-sla-ms", str(sla_ms), "--artifact-dir", str(artifact), *extra]
    cpu, rss, wall = peers.run_measured(cmd)
    doc = json.loads((artifact / "search_history.json").read_text())
    b = doc["boundary"]
    interval = b.get("interval") or {}
    return {
        "answer": b.get("feasible_max"),
        # the point estimate beside the answer (issue 51); the answer itself before
        "estimate": b.get("estimate", b.get("feasible_max")),
        "interval": (interval.get("low"), interval.get("high")),
        "levels": len(doc["probes"]),
        "requests": doc["cost"]["requests"],
        "endpoint_s": doc["cost"]["endpoint_seconds"],
        "cpu_s": cpu, "rss_mb": rss, "wall_s": wall,
    }


def aiperf_search(aiperf, url, model, sla_ms, style, artifact, seed):
    shutil.rmtree(artifact, ignore_errors=True)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "TIKTOKEN_CACHE_DIR": str(peers.seed_tiktoken_cache()),
           "AIPERF_SEARCH_PLANNER_DEFAULT_WARMUP_SECONDS": "1",
           "AIPERF_SEARCH_PLANNER_FIRST_PROBE_WARMUP_FLOOR": "1",
           "AIPERF_SEARCH_PLANNER_REPLICATE_WARMUP_FLOOR": "1"}
    cmd = [str(aiperf), "profile", "--url", url, "--model", model, "--endpoint-type", "chat",
           "--streaming", "--synthetic-input-tokens-mean", "1024",
           "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", "256",
           "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
           "--tokenizer", "builtin", "--random-seed", str(seed), "--ui-type", "none",
           "--search-recipe", "max-concurrency-under-sla", "--search-style", style,
           "--e2e-sla-ms", str(sla_ms), "--concurrency-min", "16", "--concurrency-max", "4096",
           "--search-max-iterations", "10", "--request-count", "1024",
           "--artifact-dir", str(artifact)]
    cpu, rss, wall = peers.run_measured(cmd, env=env)
    doc = json.loads((artifact / "search_history.json").read_text())
    answer = ((doc.get("boundary_summary") or {}).get("feasible_max") or {}).get("value")
    levels = len(doc.get("iterations") or [])
    requests, endpoint = 0, 0.0
    for p in sorted(artifact.glob("search_iter_*/profile_runs/run_*/profile_export_aiperf.json")):
        d = json.loads(p.read_text())
        requests += int(peers.metric(d, "request_count"))
        endpoint += peers.metric(d, "benchmark_duration")
    return {"answer": answer, "interval": None, "levels": levels, "requests": requests,
            "endpoint_s": endpoint, "cpu_s": cpu, "rss_mb": rss, "wall_s": wall}


def row(tool, run, r, truth):
    a = r["answer"]
    err = f"{(a / truth - 1) * 100:+.0f} %" if a and truth else "-"
    iv = r["interval"]
    ivs = f"{iv[0]}–{iv[1]}" if iv and iv[0] is not None else "-"
    return (f"| {tool} | {run} | {a} | {err} | {ivs} | {r['levels']} | {r['requests']} | "
            f"{r['endpoint_s']:.0f} | {r['cpu_s']:.1f} | {r['wall_s']:.0f} |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=2)
    ap.add_argument("--sla-ms", type=int, default=5000)
    ap.add_argument("--jitter", type=float, default=0.05)
    ap.add_argument("--drift", type=float, default=0.05)
    ap.add_argument("--styles", default="smooth_isotonic,monotonic")
    ap.add_argument("--kneepoint-only", action="store_true",
                    help="run kneepoint's searches alone (no AIPerf to install)")
    opts = ap.parse_args()
    if not peers.KNEEPOINT.exists():
        peers.build_kneepoint()
    if opts.kneepoint_only:
        opts.styles, aiperf = "", None
    else:
        aiperf = (Path(os.environ["AIPERF"]) if os.environ.get("AIPERF")
                  else peers.install_aiperf("0.13.0")[0])
    WORK.mkdir(parents=True, exist_ok=True)
    model = "kneepoint-sim/nemotron-like-30b-a3b"
    sim_args = ["--time-scale", "0.1", "--prompt-tokens", "builtin"]

    peers.log("reference: kneepoint on a noise-free simulator, 2 % precision, 20 levels")
    quiet = peers.Simulator(*sim_args, "--jitter", "0", "--drift", "0")
    ref = kneepoint_search(quiet.url, model, opts.sla_ms, WORK / "reference",
                           ["--search-max-iterations", "20", "--precision", "0.02"])
    quiet.stop()
    # the reference is where the boundary lies: its point estimate, not its safe answer
    truth = ref["estimate"]
    peers.log(f"reference boundary: {truth} (interval {ref['interval']})")

    lines = ["| tool | run | answer | vs reference | 90 % interval | levels | requests | "
             "endpoint s | client CPU s | wall s |", "|---|---|---|---|---|---|---|---|---|---|",
             row("reference (noise-free)", "-", ref, truth)]
    for run in range(1, opts.runs + 1):
        noisy = ["--jitter", str(opts.jitter), "--drift", str(opts.drift), "--seed", str(run)]
        sim = peers.Simulator(*sim_args, *noisy)
        peers.log(f"run {run}: kneepoint")
        lines.append(row("kneepoint", run, kneepoint_search(sim.url, model, opts.sla_ms,
                                                            WORK / f"kneepoint-{run}"), truth))
        sim.stop()
        for style in filter(None, opts.styles.split(",")):
            sim = peers.Simulator(*sim_args, *noisy)
            peers.log(f"run {run}: aiperf {style}")
            r = aiperf_search(aiperf, sim.url, model, opts.sla_ms, style,
                              WORK / f"aiperf-{style}-{run}", run)
            lines.append(row(f"aiperf {style}", run, r, truth))
            sim.stop()
        print("\n".join(lines), flush=True)
    print(f"\nsimulator: calibrated, --time-scale 0.1, --jitter {opts.jitter}, --drift {opts.drift}; "
          f"SLA request_latency p99 < {opts.sla_ms} ms; aiperf warm-up per level lowered to 1 s")


if __name__ == "__main__":
    main()
