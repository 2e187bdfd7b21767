#!/usr/bin/env bash
# Interleaved rounds of bench/work_pool.c (the work pool against libuv's uv_queue_work):
# each round runs both systems on both modes, the order flipped every round, then the
# medians with their spread (min-max) and the ratios. Usage, from the repository root:
#   bench/work_pool.sh [BUILD_DIR] [ROUNDS] [work_pool options, e.g. -t 2]
# MODES (default "rtt tput cpu") picks the modes, e.g. MODES=cpu bench/work_pool.sh.
# BUILD_DIR: a Release build with -DEVLOOP_BUILD_BENCH=ON (default build-bench; built here).
set -euo pipefail
dir=${1:-build-bench}
rounds=${2:-7}
shift $(($# < 2 ? $# : 2))
cmake --build "$dir" --target work_pool >/dev/null
bin="$dir/bench/work_pool"
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for ((r = 0; r < rounds; r++)); do
    if ((r % 2 == 0)); then order="evloop libuv"; else order="libuv evloop"; fi
    for mode in ${MODES:-rtt tput cpu}; do
        for sys in $order; do
            "$bin" "$@" "$sys" "$mode" >>"$out"
        done
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
runs = [json.loads(l) for l in open(sys.argv[1])]
def col(sys_, mode, key):
    return [r[key] for r in runs if r["system"] == sys_ and r["mode"] == mode]
def line(label, key, mode, unit, scale):
    if not col("evloop", mode, key):
        return
    med = {}
    for s in ("evloop", "libuv"):
        v = col(s, mode, key)
        med[s] = statistics.median(v)
        thr = [r["threads"] for r in runs if r["system"] == s][0]
        print(f"{label:18} {s:6} ({thr} threads): median {med[s] / scale:9.2f} {unit}"
              f"  (min {min(v) / scale:.2f}, max {max(v) / scale:.2f}, n={len(v)})")
    print(f"{label:18} evloop / libuv: {med['evloop'] / med['libuv']:.2f}x")
print(f"rounds: {sys.argv[2]}, interleaved")
line("round trip p50", "p50_ns", "rtt", "us", 1e3)
line("round trip p99", "p99_ns", "rtt", "us", 1e3)
line("throughput", "items_per_s", "tput", "M items/s", 1e6)
line("cpu items: wall", "ns", "cpu", "ms", 1e6)
line("cpu items: CPU", "cpu_per_item_ns", "cpu", "us/item", 1e3)
line("cpu items: own", "item_cpu_ns", "cpu", "us/item", 1e3)
line("cpu items: loop", "loop_cpu_per_item_ns", "cpu", "us/item", 1e3)
line("cpu items: done p50", "done_p50_ns", "cpu", "us", 1e3)
line("cpu items: done p99", "done_p99_ns", "cpu", "us", 1e3)
PY
