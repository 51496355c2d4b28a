"""The sweep article as a notebook would run it, against the built-in simulator:

1. sweep concurrency 64, 256, 1024 (the article's levels) and find the knee;
2. search the highest concurrency that meets two SLAs (p95 TTFT and p95 time per output token);
3. plot throughput against p99 latency, with the knee and the search's answer marked.

Run it as a script (`python sweep_then_search.py [OUT_DIR]`) or cell by cell. Point it at a
real endpoint with `url="http://host:8000"` (and `model=...`) in both calls.
`KNEEPOINT_EXAMPLE_QUICK=1` runs a smaller version (fewer, shorter requests) for tests.
"""

import os
import sys
from pathlib import Path

import kneepoint

QUICK = os.environ.get("KNEEPOINT_EXAMPLE_QUICK") == "1"
WORKLOAD = dict(isl=256, osl=32, request_count=128) if QUICK else dict(isl=1024, osl=256)
TTFT_SLA_MS, TPOT_SLA_MS = (60, 6) if QUICK else (500, 6)


def main(out: Path) -> dict:
    # 1. The sweep: one level after another, each with its own folder of AIPerf-style files.
    levels = [8, 32, 128] if QUICK else [64, 256, 1024]
    sweep = kneepoint.sweep(out / "sweep", concurrency=levels, **WORKLOAD)
    print(f"knee: {sweep.knee}")
    for row in sweep.rows:
        print(
            f"  {row['concurrency']:>5} concurrent: {row['request_throughput']:.1f} req/s, "
            f"{row['output_token_throughput']:.0f} tok/s, TTFT p95 {row['ttft_p95_ms']:.1f} ms, "
            f"e2e p99 {row['e2e_p99_ms']:.0f} ms"
        )

    # 2. The search: the highest concurrency whose p95 TTFT and p95 ITL stay under the SLAs.
    search = kneepoint.search(
        out / "search",
        ttft_sla_ms=TTFT_SLA_MS,
        tpot_sla_ms=TPOT_SLA_MS,
        concurrency_min=levels[0],
        concurrency_max=levels[-1],
        search_max_iterations=4 if QUICK else 8,
        # Noisy readings may earn up to this many probes beyond the iterations above;
        # 0 makes search_max_iterations a hard cap (the quick run keeps to 4 probes).
        search_noise_iterations=0 if QUICK else 4,
        **WORKLOAD,
    )
    print(f"max concurrency under the SLAs: {search.answer} ({search.boundary.get('confidence')})")

    # 3. The plot (matplotlib, when installed).
    plot = None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("matplotlib is not installed: no plot (the run's report.html has the same plots)")
    else:
        xs = [r["request_throughput"] for r in sweep.rows]
        ys = [r["e2e_p99_ms"] for r in sweep.rows]
        fig, ax = plt.subplots(figsize=(6, 4))
        ax.plot(xs, ys, marker="o")
        for r, x, y in zip(sweep.rows, xs, ys):
            label = f"{r['concurrency']}" + (" (knee)" if r["concurrency"] == sweep.knee else "")
            ax.annotate(label, (x, y), textcoords="offset points", xytext=(4, 4))
        ax.set_xlabel("requests/s")
        ax.set_ylabel("e2e latency p99, ms")
        ax.set_title(f"max concurrency under the SLAs: {search.answer}")
        plot = out / "throughput_vs_latency.png"
        fig.savefig(plot, dpi=100)
    return {"sweep": sweep, "search": search, "plot": plot}


if __name__ == "__main__":
    main(Path(sys.argv[1] if len(sys.argv) > 1 else "artifacts/notebook"))
