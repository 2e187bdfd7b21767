#!/bin/sh
# A/B two (or more) builds of bench/flood.c, interleaved so that the machine's drift hits
# every build alike; prints min, lower quartile and median ns/task per binary, and the median of
# the producers' CPU ns/task (where the binary prints it).
#
#   bench/ab.sh [-n PAIRS] "ARGS" FLOOD_A FLOOD_B ...     e.g. bench/ab.sh -n 10 "1 100000 9" \
#       /tmp/before/bench/flood build-bench/bench/flood
#
# Build FLOOD_A from the older revision in a git worktree (cmake -DEVLOOP_BUILD_BENCH=ON,
# target evloop_flood). On a shared 2-core machine quote the minimum and the quartile:
# other load only ever adds time.
set -eu
pairs=10
if [ "${1:-}" = "-n" ]; then
    pairs=$2
    shift 2
fi
args=$1
shift
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$pairs" ]; do
    for exe in "$@"; do
        # shellcheck disable=SC2086 # args are meant to split
        printf '%s %s\n' "$exe" "$("$exe" $args |
            sed 's/.*median \([0-9.]*\)[^(]*([^)]*)\( producer CPU \([0-9.]*\)\)\{0,1\}.*/\1 \3/')" >>"$out"
    done
    i=$((i + 1))
done
python3 - "$out" <<'PY'
import collections, statistics, sys
runs, cpu = collections.defaultdict(list), collections.defaultdict(list)
for line in open(sys.argv[1]):
    exe, v, *c = line.split()
    runs[exe].append(float(v))
    cpu[exe] += [float(x) for x in c]
for exe, v in runs.items():
    v.sort()
    producer = f", producer CPU {statistics.median(cpu[exe]):.1f}" if cpu[exe] else ""
    print(f"{exe}: min {v[0]:.1f} q1 {v[len(v) // 4]:.1f} median {statistics.median(v):.1f} "
          f"ns/task{producer} (n={len(v)})")
PY
