#!/usr/bin/env bash
# CI: kneepoint's image built without a registry (scripts/image/image.py), the k8s Job's
# default image name checked against its tag, and a short sweep run from the image against a
# simulator outside it, on loopback. KNEEPOINT_IMAGE_PROFILE=dev reuses the tests' debug build
# (stripped); the default is a release build.
set -euo pipefail
cd "$(dirname "$0")/../.."
profile=${KNEEPOINT_IMAGE_PROFILE:-release}
cargo build --locked -q --bin kneepoint --profile "$profile"
case "$profile" in dev) dir=debug ;; *) dir=$profile ;; esac
bin=target/$dir/kneepoint
mkdir -p target/image
cp "$bin" target/image/kneepoint
if command -v strip >/dev/null; then strip target/image/kneepoint; fi
python3 scripts/image/image.py build --binary target/image/kneepoint --out target/image

job=$("$bin" k8s job --shards 2 --pvc results -- --url http://model:8000 --concurrency 8)
grep -q '"image": "kneepoint:latest"\|image: kneepoint:latest' <<<"$job" \
  || { echo "the k8s Job's default image is not kneepoint:latest"; exit 1; }

log=$(mktemp)
"$bin" sim serve --port 0 --profile fast --time-scale 1 >"$log" 2>&1 &
sim=$!
trap 'kill $sim 2>/dev/null || true; rm -f "$log"' EXIT
for _ in $(seq 100); do grep -q "listening on" "$log" && break; sleep 0.1; done
url=$(sed -n 's/.*listening on \([^ ]*\).*/\1/p' "$log" | head -1)
test -n "$url" || { cat "$log"; echo "the simulator did not start"; exit 1; }

python3 scripts/image/image.py run target/image/kneepoint-oci.tar --rootfs target/image/rootfs \
  -- sweep --url "$url" --concurrency 1,4 --request-count 8 --isl 64 --osl 8 \
  --artifact-dir /home/kneepoint/out --quiet
out=target/image/rootfs/home/kneepoint/out
for f in sweep_summary.json report.html concurrency_1/profile_export_aiperf.json \
  concurrency_4/profile_export.jsonl; do
  test -s "$out/$f" || { echo "the sweep run from the image did not write $f"; exit 1; }
done
echo "image: $(du -h target/image/kneepoint-oci.tar | cut -f1) archive; a sweep run from it wrote $out"
