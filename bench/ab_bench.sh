#!/bin/sh
# Interleaved rounds of two or more builds of the google-benchmark binary (evloop_bench), so
# that the machine's drift hits every build alike; then one table: each benchmark's median
# time per build with the rounds' min-max, and evloop's per-round ratio to libuv and libev of
# the same build (median and range).
#
#   bench/ab_bench.sh [-n ROUNDS] FILTER OUT LABEL=BINARY LABEL=BINARY ...
#   e.g. bench/ab_bench.sh -n 5 '^(PingPong|ReadinessRoundTrip)/' /tmp/ab \
#            before=/tmp/before/build-bench/bench/evloop_bench now=build-bench/bench/evloop_bench
#
# The build order rotates each round. Extra google-benchmark flags: $BENCH_ARGS (say
# --benchmark_min_time=0.2). Writes OUT/LABEL-ROUND.json and prints the table (markdown).
set -eu
rounds=5
if [ "${1:-}" = "-n" ]; then
    rounds=$2
    shift 2
fi
filter=$1
out=$2
shift 2
mkdir -p "$out"
n=$#
r=1
while [ "$r" -le "$rounds" ]; do
    k=0
    while [ "$k" -lt "$n" ]; do
        i=$(((k + r) % n + 1))
        spec=$(eval "printf '%s' \"\${$i}\"")
        label=${spec%%=*}
        # shellcheck disable=SC2086 # BENCH_ARGS is meant to split
        "${spec#*=}" --benchmark_filter="$filter" ${BENCH_ARGS:-} --benchmark_out_format=json \
            --benchmark_out="$out/$label-$r.json" >/dev/null
        echo "round $r $label done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
        k=$((k + 1))
    done
    r=$((r + 1))
done
python3 - "$out" <<'PY'
import collections, glob, json, re, statistics, sys
vals = collections.defaultdict(list)
per_round = collections.defaultdict(dict)
for f in glob.glob(sys.argv[1] + "/*.json"):
    label, r = re.match(r".*/(.+)-(\d+)\.json$", f).groups()
    for b in json.load(open(f))["benchmarks"]:
        t = b["real_time"] * {"ns": 1, "us": 1e3, "ms": 1e6, "s": 1e9}[b["time_unit"]]
        vals[(label, b["name"])].append(t)
        per_round[(label, r)][b["name"]] = t


def baseline(name, system):
    parts = name.split("/")
    shape = [p for p in parts[2:] if p not in ("epoll", "io_uring", "kqueue", "manual_time")]
    return "/".join([parts[0], system] + shape + ["manual_time"])


def ratio(label, name, system):
    rs = [d[name] / d[baseline(name, system)] for (lb, _), d in per_round.items()
          if lb == label and name in d and baseline(name, system) in d]
    return f"{statistics.median(rs):.2f} ({min(rs):.2f}-{max(rs):.2f})" if rs else "-"


print("| benchmark | build | median ns | min-max | / libuv | / libev |")
print("|---|---|---|---|---|---|")
for name in sorted({n for _, n in vals}):
    for label in sorted({lb for lb, _ in vals}):
        v = vals.get((label, name))
        if not v:
            continue
        ev = "evloop" in name
        print(f"| {name} | {label} | {statistics.median(v):.0f} | {min(v):.0f}-{max(v):.0f} | "
              f"{ratio(label, name, 'libuv') if ev else '-'} | "
              f"{ratio(label, name, 'libev') if ev else '-'} |")
PY
