#!/usr/bin/env python3
"""kneepoint and NVIDIA AIPerf side by side, against the same simulator process.

Run from anywhere (needs the Rust toolchain, Python 3.10+ and PyPI):

    python3 benches/peers/aiperf_side_by_side.py            # both parts, a few minutes
    python3 benches/peers/aiperf_side_by_side.py --part capacity
    python3 benches/peers/aiperf_side_by_side.py --part fidelity
    python3 benches/peers/aiperf_side_by_side.py --part capacity --server mock

It installs AIPerf from PyPI into a virtual environment under target/peers/ (nothing of AIPerf
is committed). Both tools use the same tokenizer, tiktoken's o200k_base (AIPerf's `builtin`,
kneepoint's default); Python's tiktoken would download its BPE file, so the script seeds
tiktoken's cache with the identical file shipped in the tiktoken-rs crate that kneepoint builds
with (checked against tiktoken's own SHA-256). Both tools then run against one `kneepoint sim
serve` process:

* capacity: the zero-latency `instant` simulator (or, with --server mock, benches/peers/mock-openai:
  a small hyper server that shares no code with kneepoint and answers every request with the
  same 256 chunks at once), ISL 1024 / OSL 256, streaming chat,
  concurrency 256 — AIPerf with its default workers and each --workers-max given, then
  kneepoint; requests/s, output tokens/s, the average requests in flight (Little's law over
  each tool's own per-request records: the sum of request end - start over the span from the
  first start to the last end, profiling phase only), TTFT, each tool's CPU seconds and peak
  memory (summed over its processes), and kneepoint's ratio to AIPerf's best.
* fidelity: the `fixed` simulator (TTFT 50 ms, a token every --itl-ms) at concurrency 1024; the
  simulator records when it actually wrote each first token (GET /truth), and each tool's TTFT
  of the same request (joined on X-Request-ID) minus that truth is the time the tool added.
"""

import argparse
import json
import os
import re
import resource
import shutil
import subprocess
import sys
import threading
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
WORK = ROOT / "target" / "peers"
VENV = WORK / "aiperf-venv"
KNEEPOINT = ROOT / "target" / "release" / "kneepoint"


def log(msg):
    print(msg, flush=True)


def build_kneepoint():
    log("building kneepoint (release)...")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "kneepoint-cli"], cwd=ROOT, check=True)


O200K_URL = "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken"
O200K_SHA256 = "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d"


def seed_tiktoken_cache():
    """A TIKTOKEN_CACHE_DIR holding o200k_base, from the tiktoken-rs crate's copy."""
    import glob
    import hashlib
    cargo_home = Path(os.environ.get("CARGO_HOME", Path.home() / ".cargo"))
    pattern = str(cargo_home / "registry" / "src" / "*" / "tiktoken-rs-*" / "assets" / "o200k_base.tiktoken")
    for candidate in sorted(glob.glob(pattern), reverse=True):
        data = Path(candidate).read_bytes()
        if hashlib.sha256(data).hexdigest() == O200K_SHA256:
            cache = WORK / "tiktoken-cache"
            cache.mkdir(parents=True, exist_ok=True)
            (cache / hashlib.sha1(O200K_URL.encode()).hexdigest()).write_bytes(data)
            return cache
    sys.exit(f"no o200k_base.tiktoken with the expected hash under {pattern}")


def install_aiperf(version):
    aiperf = VENV / "bin" / "aiperf"
    pip = VENV / "bin" / "pip"
    if not aiperf.exists():
        log(f"installing aiperf=={version} into {VENV} (from PyPI; takes a few minutes)...")
        subprocess.run([sys.executable, "-m", "venv", str(VENV)], check=True)
        subprocess.run([str(pip), "install", "-q", f"aiperf=={version}"], check=True)
    got = subprocess.run([str(pip), "show", "aiperf"], capture_output=True, text=True).stdout
    m = re.search(r"^Version: (\S+)", got, re.M)
    return aiperf, "builtin", m.group(1) if m else "?"


MOCK_DIR = ROOT / "benches" / "peers" / "mock-openai"
MOCK = WORK / "mock-target" / "release" / "mock-openai"


def build_mock():
    log("building benches/peers/mock-openai (release)...")
    env = {**os.environ, "CARGO_TARGET_DIR": str(WORK / "mock-target")}
    subprocess.run(["cargo", "build", "--release", "-q", "--manifest-path", str(MOCK_DIR / "Cargo.toml")],
                   cwd=ROOT, check=True, env=env)


class Simulator:
    """`kneepoint sim serve` in its own process; or, with `command`, another server that prints
    `listening on URL` once bound (the mock)."""

    def __init__(self, *args, command=None):
        self.proc = subprocess.Popen(
            command or [str(KNEEPOINT), "sim", "serve", "--port", "0", *args],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        self.url = None
        for line in self.proc.stdout:
            m = re.search(r"listening on (\S+)", line)
            if m:
                self.url = m.group(1)
                break
        if not self.url:
            sys.exit("the simulator did not start")
        # Keep draining its stdout so it never blocks on a full pipe.
        threading.Thread(target=lambda: [None for _ in self.proc.stdout], daemon=True).start()

    def truth(self):
        with urllib.request.urlopen(self.url + "/truth") as r:
            lines = r.read().decode().splitlines()
        return {t["client_request_id"]: t for t in map(json.loads, filter(None, lines))
                if t.get("client_request_id")}

    def clear_truth(self):
        urllib.request.urlopen(urllib.request.Request(self.url + "/truth", method="DELETE")).read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait()


def tree_sum(root_pid, value):
    """value(stat fields after the command name) summed over a process and all its live
    descendants (from /proc)."""
    children, vals = {}, {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue
        fields = text[text.rfind(")") + 2:].split()
        pid = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(pid)
        vals[pid] = value(fields)
    total, todo = 0, [root_pid]
    while todo:
        pid = todo.pop()
        total += vals.get(pid, 0)
        todo.extend(children.get(pid, []))
    return total


def tree_rss_mb(root_pid):
    """Resident memory of a process and all its descendants, MB (from /proc)."""
    page_kb = os.sysconf("SC_PAGE_SIZE") // 1024
    return tree_sum(root_pid, lambda f: int(f[21]) * page_kb) / 1024


def run_measured(cmd, env=None):
    """Runs a tool; returns (CPU seconds of it and its descendants, peak summed RSS MB, wall s)."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    peak = [0.0]
    out = []
    reader = threading.Thread(target=lambda: out.extend(proc.stdout), daemon=True)
    reader.start()
    while proc.poll() is None:
        peak[0] = max(peak[0], tree_rss_mb(proc.pid))
        time.sleep(0.2)
    reader.join()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    if proc.returncode != 0:
        log("".join(out[-40:]))
        sys.exit(f"{cmd[0]} failed with exit code {proc.returncode}")
    return cpu, peak[0], time.monotonic() - t0


def metric(doc, name, stat="avg"):
    block = doc.get(name) or doc.get("records", {}).get(name) or {}
    v = block.get(stat)
    return float(v) if v is not None else float("nan")


def run_aiperf(aiperf, tokenizer, url, model, args, workers, artifact):
    shutil.rmtree(artifact, ignore_errors=True)
    cmd = [str(aiperf), "profile", "--model", model, "--url", url, "--endpoint-type", "chat",
           "--streaming", "--synthetic-input-tokens-mean", str(args["isl"]),
           "--synthetic-input-tokens-stddev", "0", "--output-tokens-mean", str(args["osl"]),
           "--output-tokens-stddev", "0", "--extra-inputs", "ignore_eos:true",
           "--concurrency", str(args["concurrency"]), "--request-count", str(args["requests"]),
           "--warmup-request-count", str(args["warmup"]), "--tokenizer", str(tokenizer),
           "--artifact-dir", str(artifact), "--ui-type", "none", "--random-seed", "1"]
    if args.get("ramp_s"):
        cmd += ["--concurrency-ramp-duration", str(args["ramp_s"]),
                "--warmup-concurrency-ramp-duration", str(args["ramp_s"])]
    if workers:
        cmd += ["--workers-max", str(workers)]
    env = dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1",
               TOKENIZERS_PARALLELISM="false", TIKTOKEN_CACHE_DIR=str(seed_tiktoken_cache()))
    cpu, rss, wall = run_measured(cmd, env)
    summary = next(artifact.rglob("profile_export_aiperf.json"))
    per_request = next(artifact.rglob("profile_export.jsonl"), None)
    return summarise(json.loads(summary.read_text()), per_request, cpu, rss, wall)


def run_kneepoint(url, model, args, artifact):
    shutil.rmtree(artifact, ignore_errors=True)
    cmd = [str(KNEEPOINT), "sweep", "--quiet", "--url", url, "--model", model,
           "--endpoint-type", "chat", "--streaming", "--isl", str(args["isl"]), "--isl-stddev", "0",
           "--osl", str(args["osl"]), "--osl-stddev", "0", "--concurrency", str(args["concurrency"]),
           "--request-count", str(args["requests"]), "--warmup-requests", str(args["warmup"]),
           "--artifact-dir", str(artifact)]
    if args.get("ramp_s"):
        cmd += ["--ramp-up-s", str(args["ramp_s"])]
    cpu, rss, wall = run_measured(cmd)
    level = artifact / f"concurrency_{args['concurrency']}"
    summary = json.loads((level / "profile_export_aiperf.json").read_text())
    return summarise(summary, level / "profile_export.jsonl", cpu, rss, wall)


def profiling_records(jsonl):
    """The metadata and metrics of the profiling-phase records of a profile_export.jsonl (AIPerf's
    layout, which kneepoint's file follows)."""
    for line in Path(jsonl).read_text().splitlines():
        if not line.strip():
            continue
        rec = json.loads(line)
        if rec.get("metadata", {}).get("benchmark_phase", "profiling") == "profiling":
            yield rec


def in_flight(jsonl):
    """Requests the tool held open on average: the sum of (request end - request start) over
    the span from the first start to the last end. Both tools write these stamps; a request
    latency measured to the last token's arrival would miss the time a busy client takes to
    finish reading a response, which is still a request it holds."""
    if jsonl is None:
        return float("nan")
    spans = [(r["metadata"]["request_start_ns"], r["metadata"]["request_end_ns"])
             for r in profiling_records(jsonl)
             if r["metadata"].get("request_start_ns") and r["metadata"].get("request_end_ns")]
    if not spans:
        return float("nan")
    window = max(e for _, e in spans) - min(s for s, _ in spans)
    return sum(e - s for s, e in spans) / window if window > 0 else float("nan")


def summarise(doc, per_request, cpu, rss, wall):
    rps = metric(doc, "request_throughput")
    return {
        "rps": rps,
        "tok_s": metric(doc, "output_token_throughput"),
        "in_flight": in_flight(per_request),
        "ttft_p50": metric(doc, "time_to_first_token", "p50"),
        "ttft_p99": metric(doc, "time_to_first_token", "p99"),
        "cpu_s": cpu,
        "rss_mb": rss,
        "wall_s": wall,
        "per_request": per_request,
    }


def ttfts_by_request_id(jsonl):
    """TTFT (ms) by X-Request-ID from a profile_export.jsonl (AIPerf's layout, which kneepoint's
    file follows)."""
    out = {}
    for rec in profiling_records(jsonl):
        rid = rec.get("metadata", {}).get("x_request_id")
        ttft = rec.get("metrics", {}).get("time_to_first_token")
        if isinstance(ttft, dict):
            ttft = ttft.get("value")
        if rid and ttft is not None:
            out[str(rid)] = float(ttft)
    return out


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, max(0, round(q * (len(v) - 1))))]


def capacity(aiperf, tokenizer, opts):
    if opts.server == "mock":
        build_mock()
        sim = Simulator(command=[str(MOCK), "0", "256"])
        model, server_name = "mock", "benches/peers/mock-openai (no kneepoint code)"
    else:
        sim = Simulator("--profile", "instant")
        model, server_name = "kneepoint-sim/instant", "`kneepoint sim serve --profile instant`"
    base = {"isl": 1024, "osl": 256, "concurrency": opts.concurrency, "warmup": opts.concurrency}
    rows = []
    try:
        for workers in [None, *opts.workers_max]:
            label = f"AIPerf --workers-max {workers}" if workers else "AIPerf (default workers)"
            log(f"running {label} ({opts.aiperf_requests} requests)...")
            r = run_aiperf(aiperf, tokenizer, sim.url, model, {**base, "requests": opts.aiperf_requests},
                           workers, WORK / f"aiperf_w{workers or 'default'}")
            rows.append((label, r))
        log(f"running kneepoint ({opts.kneepoint_requests} requests)...")
        k = run_kneepoint(sim.url, model, {**base, "requests": opts.kneepoint_requests}, WORK / "kneepoint_capacity")
        rows.append(("kneepoint", k))
    finally:
        sim.stop()
    print(f"\ncapacity: ISL 1024 / OSL 256, streaming chat, concurrency {opts.concurrency}, "
          f"{server_name} in its own process, {os.cpu_count()} cores shared")
    print(f"{'tool':<28} {'req/s':>9} {'out tok/s':>11} {'in flight':>9} {'TTFT p50 ms':>11} "
          f"{'TTFT p99 ms':>11} {'CPU s':>7} {'peak RSS MB':>11}")
    for label, r in rows:
        print(f"{label:<28} {r['rps']:>9.1f} {r['tok_s']:>11.0f} {r['in_flight']:>9.1f} "
              f"{r['ttft_p50']:>11.2f} {r['ttft_p99']:>11.2f} {r['cpu_s']:>7.1f} {r['rss_mb']:>11.0f}")
    best_label, best = max(rows[:-1], key=lambda lr: lr[1]["rps"])
    ratio = k["rps"] / best["rps"]
    print(f"kneepoint / best AIPerf ({best_label}): {ratio:.1f}x requests/s, "
          f"{k['tok_s'] / best['tok_s']:.1f}x output tokens/s; "
          f"in flight {k['in_flight']:.1f} vs {best['in_flight']:.1f} of {opts.concurrency} requested "
          f"-> {'meets' if ratio >= 10 else 'does NOT meet'} the 10x target")
    return best_label


def fidelity(aiperf, tokenizer, opts):
    sim = Simulator("--profile", "fixed", "--ttft-ms", "50", "--itl-ms", str(opts.itl_ms))
    model = "kneepoint-sim/fixed"
    c = opts.fidelity_concurrency
    cycle_s = (50 + opts.itl_ms * (opts.fidelity_osl - 1)) / 1000.0
    base = {"isl": 1024, "osl": opts.fidelity_osl, "concurrency": c, "warmup": c,
            "requests": 3 * c, "ramp_s": round(cycle_s, 3) if opts.ramp else None}
    rows = []
    try:
        for label, run in [
            (f"AIPerf --workers-max {opts.fidelity_workers}",
             lambda: run_aiperf(aiperf, tokenizer, sim.url, model, base, opts.fidelity_workers,
                                WORK / "aiperf_fidelity")),
            ("kneepoint", lambda: run_kneepoint(sim.url, model, base, WORK / "kneepoint_fidelity")),
        ]:
            log(f"running {label} at concurrency {c} against the fixed simulator...")
            sim.clear_truth()
            r = run()
            truth = sim.truth()
            measured = ttfts_by_request_id(r["per_request"])
            added = [measured[k] - t["ttft_ms"] for k, t in truth.items() if k in measured]
            rows.append((label, r, added, [t["ttft_ms"] for t in truth.values()]))
    finally:
        sim.stop()
    print(f"\nfidelity: concurrency {c}, simulator TTFT 50 ms then a token every {opts.itl_ms} ms, "
          f"ISL 1024 / OSL {opts.fidelity_osl}, streaming; "
          f"{'first wave ramped over %.2f s (both tools)' % cycle_s if opts.ramp else 'no ramp'}")
    print(f"{'tool':<24} {'matched':>7} {'tool TTFT p50':>13} {'p99':>8} {'truth p50':>9} {'p99':>8} "
          f"{'added p50':>9} {'added p99':>9} {'in flight':>9}")
    for label, r, added, truth in rows:
        print(f"{label:<24} {len(added):>7} {r['ttft_p50']:>13.2f} {r['ttft_p99']:>8.2f} "
              f"{pct(truth, 0.5):>9.2f} {pct(truth, 0.99):>8.2f} {pct(added, 0.5):>9.3f} "
              f"{pct(added, 0.99):>9.3f} {r['in_flight']:>9.1f}")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--part", choices=["all", "capacity", "fidelity"], default="all")
    p.add_argument("--aiperf-version", default="0.13.0")
    p.add_argument("--concurrency", type=int, default=256)
    p.add_argument("--server", choices=["sim", "mock"], default="sim",
                   help="the capacity part's server: kneepoint's `instant` simulator, or "
                        "benches/peers/mock-openai, a stand-in written apart from kneepoint")
    p.add_argument("--workers-max", type=int, nargs="*", default=[8, 16])
    p.add_argument("--aiperf-requests", type=int, default=4096)
    p.add_argument("--kneepoint-requests", type=int, default=16384)
    p.add_argument("--fidelity-concurrency", type=int, default=1024)
    p.add_argument("--fidelity-workers", type=int, default=16)
    p.add_argument("--fidelity-osl", type=int, default=256)
    p.add_argument("--itl-ms", type=float, default=50.0)
    p.add_argument("--no-ramp", dest="ramp", action="store_false",
                   help="start every slot at once in the fidelity part (default: both tools ramp "
                        "the first wave over one request's duration)")
    opts = p.parse_args()
    WORK.mkdir(parents=True, exist_ok=True)
    build_kneepoint()
    aiperf, tokenizer, version = install_aiperf(opts.aiperf_version)
    log(f"AIPerf {version}; tokenizer {tokenizer}")
    if opts.part in ("all", "capacity"):
        capacity(aiperf, tokenizer, opts)
    if opts.part in ("all", "fidelity"):
        fidelity(aiperf, tokenizer, opts)


if __name__ == "__main__":
    main()
