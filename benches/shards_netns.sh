#!/usr/bin/env bash
# 40,000 concurrent streams on one machine (issue 32, item 6): one process per shard
# (`--shard K/N`, started together with `--start-at`), each from source addresses of its own,
# against simulators that together serve STREAMS streams, then `kneepoint merge`.
#
# Why shards and several simulators: this machine's hard limit is 20,000 descriptors per
# process, and a stream costs one descriptor at each end. SHARDS clients hold STREAMS/SHARDS
# sockets each, and SIMS fixed-latency simulators (one port each, every shard spreading its
# requests over all of them with --url ... --route-by round-robin) hold STREAMS/SIMS each.
#
# Every stream is open at once: a stream lives TTFT_MS + OSL x ITL_MS, the ramp spreads the
# starts over RAMP_S < TTFT_MS / 1000, so the last start comes before the first end. The script
# reads the peak of streams in flight from the merged records (the largest overlap of their
# start..end spans on the merged clock), joins each record with the simulator's truth (when
# it wrote that request's first token) for the client-added TTFT, and reads each process's
# peak RSS.
#   cargo build --release --bin kneepoint
#   sudo benches/shards_netns.sh [STREAMS=40000] [SHARDS=4] [SIMS=3] [OSL=16] [TTFT_MS=8000] [ITL_MS=500] [RAMP_S=6]
# Runs in a network namespace of its own (root, iproute2), whose SYN queues are raised for
# the connect burst; nothing outside it is changed.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/release/kneepoint"
streams="${1:-40000}"
shards="${2:-4}"
sims="${3:-3}"
osl="${4:-16}"
ttft_ms="${5:-8000}"
itl_ms="${6:-500}"
ramp_s="${7:-6}"
out="$(mktemp -d)"
# shellcheck source=benches/netns.sh
. "$root/benches/netns.sh"
netns_up kneepoint-shards
urls=()
for s in $(seq 0 $((sims - 1))); do
  port=$((18400 + s))
  run "$bin" sim serve --port "$port" --ttft-ms "$ttft_ms" --itl-ms "$itl_ms" > "$out/sim$s.log" 2>&1 &
  urls+=(--url "http://127.0.0.1:$port")
done
sleep 1
model="$(run curl -s http://127.0.0.1:18400/v1/models | python3 -c 'import json,sys; print(json.load(sys.stdin)["data"][0]["id"])')"
start_at=$(( $(date +%s) + 15 ))
echo "namespace $ns: $streams streams over $shards shards and $sims simulators (model $model; TTFT $ttft_ms ms, $osl tokens at $itl_ms ms, ramp $ramp_s s), start at $start_at"
pids=()
for k in $(seq 0 $((shards - 1))); do
  # Shard k connects from 127.0.(k+1).1-8: addresses of its own, as on a host of its own.
  /usr/bin/time -f "%M KB peak RSS, %e s wall, %U s user, %S s system" -o "$out/shard$k.time" \
    ip netns exec "$ns" "$bin" sweep "${urls[@]}" --model "$model" --route-by round-robin \
    --concurrency "$streams" --request-count "$streams" --isl 64 --osl "$osl" \
    --ramp-up-s "$ramp_s" --shard "$k/$shards" --start-at "$start_at" \
    --source-addrs "127.0.$((k + 1)).1-127.0.$((k + 1)).8" --no-server-metrics --quiet \
    --artifact-dir "$out/shard$k" > "$out/shard$k.log" 2>&1 &
  pids+=($!)
done
for p in "${pids[@]}"; do wait "$p" || true; done
: > "$out/truth.jsonl"
for s in $(seq 0 $((sims - 1))); do
  # The simulators' peak RSS, then their truth (when each first token was written).
  sim_pid="$(pgrep -f "kneepoint sim serve --port $((18400 + s))" | head -1)"
  grep VmHWM "/proc/$sim_pid/status" | awk '{print $2}' > "$out/sim$s.rss"
  run curl -s "http://127.0.0.1:$((18400 + s))/truth" >> "$out/truth.jsonl"
done
dirs=()
for k in $(seq 0 $((shards - 1))); do dirs+=("$out/shard$k"); done
"$bin" merge --out "$out/merged" "${dirs[@]}" > "$out/merge.log" 2>&1 || { cat "$out/merge.log"; exit 1; }
python3 - "$out" "$streams" "$shards" "$sims" <<'EOF'
import glob, json, sys
out, streams, shards, sims = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
truth = {}
for line in open(out + "/truth.jsonl"):
    if line.strip():
        e = json.loads(line)
        if e.get("client_request_id"):
            truth[e["client_request_id"]] = e["ttft_ms"]
level = glob.glob(out + "/merged/concurrency_*/")[0]
j = json.load(open(level + "profile_export_aiperf.json"))
ttft = j.get("time_to_first_token", {})
ids, events, added, kinds = set(), [], [], {}
n = 0
for line in open(level + "profile_export.jsonl"):
    r = json.loads(line)
    n += 1
    ids.add(r["metadata"]["x_request_id"])
    m = r["metadata"]
    events.append((m["request_start_ns"], 1))
    events.append((m["request_end_ns"], -1))
    if r.get("error"):
        k = r["error"]["message"][:60]
        kinds[k] = kinds.get(k, 0) + 1
        continue
    s = truth.get(m["x_request_id"])
    if s is not None:
        added.append(r["metrics"]["time_to_first_token"]["value"] - s)
events.sort(key=lambda e: (e[0], e[1]))
live = peak = 0
for _, d in events:
    live += d
    peak = max(peak, live)
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
rss = [int(open(f).read().split()[0]) for f in sorted(glob.glob(out + "/shard*.time"))]
times = [open(f).read().strip() for f in sorted(glob.glob(out + "/shard*.time"))]
sim_rss = [int(open(f).read().strip() or 0) for f in sorted(glob.glob(out + "/sim*.rss"))]
merge = json.load(open(out + "/merged/merge_summary.json"))
lv = merge["levels"][0]
print(f"merged: {n} records ({len(ids)} distinct request ids) for {streams} requests sent; "
      f"{sum(kinds.values())} failed {kinds or ''}")
print(f"peak streams in flight at once (merged records): {peak}")
print(f"TTFT p50 {ttft.get('p50', float('nan')):.1f} ms, p99 {ttft.get('p99', float('nan')):.1f} ms; "
      f"client-added over the simulators' truth: p50 {pct(added, .5):.2f} ms, p99 {pct(added, .99):.2f} ms "
      f"({len(added)} joined)")
print(f"start skew {lv['start_skew_ms']:.1f} ms, common window {lv['common_window_s']:.2f} s")
for k, t in enumerate(times):
    print(f"shard {k}: {t}")
print(f"client memory: {sum(rss) / 1024:.0f} MB peak RSS over {shards} shards, "
      f"{sum(rss) * 1024 / streams / 1024:.1f} KiB per stream; simulators {sum(sim_rss) / 1024:.0f} MB over {sims}")
ok = n == streams and len(ids) == streams
print("every request recorded once" if ok else "RECORD COUNT MISMATCH")
sys.exit(0 if ok else 1)
EOF
