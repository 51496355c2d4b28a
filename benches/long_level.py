#!/usr/bin/env python3
"""One long timed level in flat memory (issue 21): a closed-loop level of MINUTES minutes
against `kneepoint sim serve --profile instant` (a separate process, so the client's memory is
its own), with RSS of both processes sampled every minute, the bytes written per request, the
request rate, and how long the level's summary and report took after the level.

    cargo build --release --bin kneepoint
    python3 benches/long_level.py --minutes 60 [--concurrency 64] [--out target/long-level]

Prints a markdown table (docs/PERFORMANCE.md keeps the results) and writes it beside the
artifacts as long_level.md. Standard library only.
"""
import argparse
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def rss_mb(pid):
    try:
        for line in open(f"/proc/{pid}/status"):
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


def written_bytes(pid):
    try:
        for line in open(f"/proc/{pid}/io"):
            if line.startswith("write_bytes:"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def dir_bytes(path):
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def wait_for(port, timeout=30):
    end = time.time() + timeout
    while time.time() < end:
        try:
            with socket.create_connection(("127.0.0.1", port), 0.5):
                return
        except OSError:
            time.sleep(0.1)
    sys.exit(f"the simulator did not listen on {port}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=60)
    ap.add_argument("--concurrency", type=int, default=64)
    ap.add_argument("--isl", type=int, default=128)
    ap.add_argument("--osl", type=int, default=32)
    ap.add_argument("--sample-s", type=float, default=60)
    ap.add_argument("--out", default=str(ROOT / "target" / "long-level"))
    ap.add_argument("--plain", action="store_true", help="plain JSONL (default: --records-zstd)")
    ap.add_argument("--bin", default=str(ROOT / "target" / "release" / "kneepoint"))
    a = ap.parse_args()
    out = pathlib.Path(a.out)
    if out.exists():
        subprocess.run(["rm", "-rf", str(out)], check=True)
    port = free_port()
    sim = subprocess.Popen(
        [a.bin, "sim", "serve", "--profile", "instant", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_for(port)
        cmd = [
            a.bin, "sweep", "--url", f"http://127.0.0.1:{port}", "--concurrency",
            str(a.concurrency), "--duration-s", str(int(a.minutes * 60)), "--isl", str(a.isl),
            "--osl", str(a.osl), "--artifact-dir", str(out), "--quiet", "--seed", "1",
        ]
        if not a.plain:
            cmd.append("--records-zstd")
        t0 = time.time()
        client = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        level = out / f"concurrency_{a.concurrency}"
        rows = []
        next_sample = t0
        level_end = t0 + a.minutes * 60
        summary_started = None
        while client.poll() is None:
            now = time.time()
            if now >= next_sample:
                records = level / ("profile_export.jsonl" + ("" if a.plain else ".zst"))
                rows.append({
                    "t_min": (now - t0) / 60,
                    "client_rss_mb": rss_mb(client.pid),
                    "sim_rss_mb": rss_mb(sim.pid),
                    "client_write_mb": (written_bytes(client.pid) or 0) / 1e6,
                    "records_mb": records.stat().st_size / 1e6 if records.exists() else 0,
                })
                r = rows[-1]
                print(f"{r['t_min']:6.1f} min  client RSS {r['client_rss_mb']} MB  sim RSS "
                      f"{r['sim_rss_mb']} MB  written {r['client_write_mb']:.0f} MB", flush=True)
                next_sample += a.sample_s
            if summary_started is None and now >= level_end:
                summary_started = now
            time.sleep(0.5)
        finished = time.time()
        text = client.stdout.read()
        if client.returncode != 0:
            print(text)
            sys.exit(f"the sweep failed ({client.returncode})")
    finally:
        sim.send_signal(signal.SIGTERM)
        sim.wait(timeout=30)
    doc = json.load(open(level / "profile_export_aiperf.json"))
    n = int(doc["request_count"]["avg"])
    total = dir_bytes(out)
    files = {p.name: p.stat().st_size for p in level.iterdir() if p.is_file()}
    peak = max(r["client_rss_mb"] or 0 for r in rows)
    lines = [
        f"Long level: {a.minutes:g} min closed loop at {a.concurrency}, ISL {a.isl} / OSL {a.osl}, "
        f"`instant` simulator in its own process, records {'plain' if a.plain else 'zstd'}",
        "",
        f"- requests: {n:,} ({doc['request_throughput']['avg']:,.0f} requests/s, "
        f"{doc['output_token_throughput']['avg']:,.0f} output tokens/s)",
        f"- after the level: summary, files and report took {finished - (summary_started or finished):.0f} s",
        f"- client peak RSS {peak:.0f} MB; bytes written {total / 1e6:,.0f} MB in all, "
        f"{total / max(n, 1):.0f} bytes per request",
        "- files: " + ", ".join(f"{k} {v / 1e6:,.1f} MB" for k, v in sorted(files.items())),
        "",
        "| minute | client RSS MB | simulator RSS MB | client wrote MB | records file MB |",
        "|---:|---:|---:|---:|---:|",
    ]
    for r in rows:
        lines.append(
            f"| {r['t_min']:.1f} | {r['client_rss_mb'] or 0:.0f} | {r['sim_rss_mb'] or 0:.0f} "
            f"| {r['client_write_mb']:,.0f} | {r['records_mb']:,.0f} |"
        )
    report = "\n".join(lines) + "\n"
    (out / "long_level.md").write_text(report)
    print(report)


if __name__ == "__main__":
    main()
