#!/usr/bin/env python3
"""Soak test: kneepoint's client at high concurrency against the simulator with mixed faults.

Starts `kneepoint sim serve` (fast profile, injected faults) and, in a separate process,
`kneepoint sweep --url ... --concurrency C --request-count R --num-runs MANY`, samples the
client's resident memory and open file descriptors every few seconds, stops the client with
SIGINT after the set time, then checks:

  * memory stays flat: the peak RSS of the last two minutes is within 10 % of the peak RSS of
    the two minutes after warm-up (each run's records are held until its summary is written,
    so RSS is a sawtooth with one tooth per run; a leak lifts the teeth);
  * no file descriptors leak: the late peak is no higher than the early peak plus a margin;
  * every record is present: each completed run has exactly R records with distinct request
    ids, every record ends as ok, failed (with an error class) or cancelled, the pooled level
    file holds every run's records, and the interrupted run is marked partial.

Usage: python3 scripts/soak.py [--minutes 10] [--concurrency 2048] [--fault-rate 0.05]
                              [--run-requests 12000] [--out DIR]
Prints a JSON report (also written to DIR/soak_report.json) and exits 1 if a check fails.
"""
import argparse
import json
import os
import re
import resource
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def raise_fd_limit():
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


def rss_mb(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024.0
    return 0.0


def fd_count(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--concurrency", type=int, default=2048)
    ap.add_argument("--fault-rate", type=float, default=0.05)
    ap.add_argument("--run-requests", type=int, default=12000)
    ap.add_argument("--warmup-s", type=float, default=60.0)
    ap.add_argument("--window-s", type=float, default=120.0)
    ap.add_argument("--out", type=Path)
    a = ap.parse_args()
    out = a.out or Path(tempfile.mkdtemp(prefix="kneepoint-soak-"))
    out.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cargo", "build", "--release", "--locked", "-q", "-p", "kneepoint-cli"],
                   cwd=ROOT, check=True)
    exe = ROOT / "target/release/kneepoint"
    sim = subprocess.Popen(
        [str(exe), "sim", "serve", "--port", "0", "--profile", "fast", "--time-scale", "1",
         "--fault-rate", str(a.fault_rate), "--stall-ms", "2000"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, preexec_fn=raise_fd_limit)
    url = None
    for line in sim.stdout:
        m = re.search(r"listening on (http://\S+)", line)
        if m:
            url = m.group(1)
            break
    if url is None:
        sys.exit("the simulator did not start")
    level = out / f"concurrency_{a.concurrency}"
    client = subprocess.Popen(
        [str(exe), "sweep", "--url", url, "--concurrency",
         str(a.concurrency), "--request-count", str(a.run_requests), "--num-runs", "100000",
         "--isl", "64", "--osl", "16", "--idle-timeout-s", "5", "--artifact-dir", str(out),
         "--quiet"],
        stdout=(out / "client.log").open("w"), stderr=subprocess.STDOUT,
        preexec_fn=raise_fd_limit)
    samples = []
    t0 = time.monotonic()
    deadline = t0 + a.minutes * 60
    while time.monotonic() < deadline and client.poll() is None:
        try:
            samples.append({"t": round(time.monotonic() - t0, 1), "rss_mb": rss_mb(client.pid),
                            "fds": fd_count(client.pid)})
        except FileNotFoundError:
            break
        time.sleep(3)
    client.send_signal(signal.SIGINT)
    rc = client.wait(timeout=120)
    sim.send_signal(signal.SIGINT)
    try:
        sim.wait(timeout=10)
    except subprocess.TimeoutExpired:
        sim.kill()

    early = [s for s in samples if a.warmup_s <= s["t"] < a.warmup_s + a.window_s]
    late = [s for s in samples if s["t"] >= samples[-1]["t"] - a.window_s]
    early_peak = max(s["rss_mb"] for s in early)
    late_peak = max(s["rss_mb"] for s in late)
    early_fds = max(s["fds"] for s in early)
    late_fds = max(s["fds"] for s in late)

    runs = sorted((level / "profile_runs").iterdir())
    complete, partial_runs, total, bad = 0, [], 0, []
    classes = {}
    for run in runs:
        lines = (run / "profile_export.jsonl").read_text().splitlines()
        recs = [json.loads(l) for l in lines]
        total += len(recs)
        info = json.loads((run / "profile_export_aiperf.json").read_text())
        partial = info.get("kneepoint", {}).get("partial", False)
        ids = {r["metadata"]["x_request_id"] for r in recs}
        for r in recs:
            err = r.get("error")
            if r["metadata"].get("was_cancelled"):
                kind = "cancelled"
            else:
                kind = err["type"] if err else "ok"
            classes[kind] = classes.get(kind, 0) + 1
        if partial:
            partial_runs.append(run.name)
        else:
            complete += 1
            if len(recs) != a.run_requests or len(ids) != len(recs):
                bad.append(f"{run.name}: {len(recs)} records, {len(ids)} ids")
    pooled = len((level / "profile_export.jsonl").read_text().splitlines())
    report = {
        "minutes": a.minutes,
        "concurrency": a.concurrency,
        "fault_rate": a.fault_rate,
        "run_requests": a.run_requests,
        "client_exit": rc,
        "samples": len(samples),
        "rss_mb": {"after_warmup_peak": early_peak, "last_window_peak": late_peak,
                   "growth": late_peak / early_peak - 1.0,
                   "min": min(s["rss_mb"] for s in samples),
                   "max": max(s["rss_mb"] for s in samples)},
        "fds": {"after_warmup_peak": early_fds, "last_window_peak": late_fds},
        "runs_complete": complete,
        "runs_partial": partial_runs,
        "records": total,
        "pooled_records": pooled,
        "record_classes": classes,
        "problems": bad,
        "artifacts": str(out),
    }
    checks = {
        "memory_flat": report["rss_mb"]["growth"] <= 0.10,
        "no_fd_leak": late_fds <= early_fds + 16,
        "all_records_present": not bad and pooled == total and complete >= 1,
        "interrupted_run_marked_partial": len(partial_runs) <= 1,
        "exit_130_on_sigint": rc == 130,
    }
    report["checks"] = checks
    (out / "soak_report.json").write_text(json.dumps({**report, "series": samples}, indent=2))
    print(json.dumps(report, indent=2))
    sys.exit(0 if all(checks.values()) else 1)


if __name__ == "__main__":
    main()
