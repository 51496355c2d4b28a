#!/usr/bin/env bash
# More streams to one endpoint than one source address has ephemeral ports (issue 21): in a
# network namespace of its own (root, iproute2), the ephemeral port range is cut to PORTS ports,
# so that the limit that stops one address at ~28,000 streams on a default host stops it at
# PORTS here, within this machine's 20,000-descriptor hard limit. The fixed-latency simulator
# keeps every stream open for ~TTFT + OSL x ITL; the sweep then holds STREAMS of them at once,
# first from one source address, then from --source-addrs 127.0.0.2-127.0.0.9.
#   cargo build --release --bin kneepoint
#   sudo benches/source_addrs_netns.sh [STREAMS=4000] [PORTS=1000] [OSL=64] [TTFT_MS=2000] [RAMP_S=2]
# (the ramp spreads the first wave; every stream is still open at the end of it while
# RAMP_S < TTFT_MS / 1000)
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
bin="$root/target/release/kneepoint"
streams="${1:-4000}"
ports="${2:-1000}"
osl="${3:-64}"
ttft_ms="${4:-2000}"
ramp_s="${5:-2}"
out="$(mktemp -d)"
# shellcheck source=benches/netns.sh
. "$root/benches/netns.sh"
netns_up kneepoint-ports
run sh -c "echo '40000 $((40000 + ports - 1))' > /proc/sys/net/ipv4/ip_local_port_range"
run "$bin" sim serve --port 18300 --ttft-ms "$ttft_ms" --itl-ms 50 > "$out/sim.log" 2>&1 &
sleep 1
echo "namespace $ns: ephemeral ports $(run cat /proc/sys/net/ipv4/ip_local_port_range | tr '\t' '-'), $streams concurrent streams (TTFT $ttft_ms ms, $osl tokens at 50 ms, ramp $ramp_s s)"
for case in one eight; do
  extra=()
  [ "$case" = eight ] && extra=(--source-addrs 127.0.0.2-127.0.0.9)
  /usr/bin/time -f "%M KB peak RSS, %e s" -o "$out/$case.time" \
    ip netns exec "$ns" "$bin" sweep --url http://127.0.0.1:18300 --concurrency "$streams" \
    --request-count "$streams" --isl 64 --osl "$osl" --ramp-up-s "$ramp_s" --quiet \
    --artifact-dir "$out/$case" "${extra[@]}" > "$out/$case.log" 2>&1 || true
  # The simulator's truth: when it actually wrote each request's first token.
  # From an address of its own: the sweep's connections hold every port of the others.
  run curl -s --interface 127.0.0.10 http://127.0.0.1:18300/truth > "$out/$case.truth" || true
  run curl -s --interface 127.0.0.10 -X DELETE http://127.0.0.1:18300/truth > /dev/null || true
  python3 - "$out/$case" "$case" "$(cat "$out/$case.time")" "$out/$case.truth" <<'EOF'
import json, sys, glob
d, case, t, truth_file = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
truth = {}
for line in open(truth_file):
    if line.strip():
        e = json.loads(line)
        if e.get("client_request_id"):
            truth[e["client_request_id"]] = e["ttft_ms"]
added, server = [], []
j = json.load(open(glob.glob(d + "/concurrency_*/profile_export_aiperf.json")[0]))
n, err = int(j["request_count"]["avg"]), j.get("error_request_count", {}).get("avg", 0)
ttft = j.get("time_to_first_token", {})
kinds = {}
for line in open(glob.glob(d + "/concurrency_*/profile_export.jsonl")[0]):
    r = json.loads(line)
    if r.get("error"):
        m = r["error"]["message"][:60]
        kinds[m] = kinds.get(m, 0) + 1
        continue
    s = truth.get(r["metadata"]["x_request_id"])
    if s is not None:
        server.append(s)
        added.append(r["metrics"]["time_to_first_token"]["value"] - s)
def pct(v, q):
    v = sorted(v)
    return v[min(len(v) - 1, int(q * len(v)))] if v else float("nan")
print(f"{'one address' if case == 'one' else '8 addresses'}: {n} requests, {int(err)} failed, "
      f"TTFT p50 {ttft.get('p50', float('nan')):.1f} ms p99 {ttft.get('p99', float('nan')):.1f} ms "
      f"(the server's own in its truth:) server truth p50 {pct(server, .5):.1f} p99 {pct(server, .99):.1f} ms; "
      f"client-added p50 {pct(added, .5):.2f} p99 {pct(added, .99):.2f} ms ({len(added)} joined); {t}; "
      f"errors: {kinds or 'none'}")
EOF
done
