# Sourced by the benches that run in a network namespace of their own (root, iproute2):
#   netns_up PREFIX   creates namespace "$ns" (PREFIX-PID) with loopback up and SYN queues large
#                     enough for a burst of connects, raises the descriptor limit to the hard
#                     one, and deletes the namespace (killing what runs in it) and, unless KEEP
#                     is set, the folder "$out" on exit;
#   run CMD...        runs CMD inside the namespace.
run() { ip netns exec "$ns" "$@"; }

netns_cleanup() {
  ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
  ip netns del "$ns" 2>/dev/null || true
  [ -n "${KEEP:-}" ] || [ -z "${out:-}" ] || rm -rf "$out"
}

netns_up() {
  ns="$1-$$"
  trap netns_cleanup EXIT
  ip netns add "$ns"
  run ip link set lo up
  run sh -c "echo 65535 > /proc/sys/net/core/somaxconn"
  # A burst of connects overflows the default SYN queue, and a dropped SYN is retried after 1 s.
  run sh -c "echo 65535 > /proc/sys/net/ipv4/tcp_max_syn_backlog"
  ulimit -n "$(ulimit -Hn)"
}
