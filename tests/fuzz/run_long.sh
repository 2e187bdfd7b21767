#!/bin/sh
# The long fuzzing run of issues 6 and 11: every fuzzer for RUNS executions (default 1,000,000),
# one after the other, from the seed corpus; new inputs and any crash go to OUT.
#   tests/fuzz/run_long.sh BUILD_DIR [RUNS] [OUT]
# BUILD_DIR is a build configured with -DCMAKE_C_COMPILER=clang-14 -DEVLOOP_BUILD_FUZZ=ON.
# EVLOOP_FUZZ_MAX_SECONDS (default 0: none) caps each fuzzer's time: a slow harness then
# stops short of RUNS, and its line says how many executions it got.
# Prints each fuzzer's executions, and exits non-zero if one found a crash or a leak.
set -u
build=$1
runs=${2:-1000000}
out=${3:-$build/fuzz-long}
here=$(cd "$(dirname "$0")" && pwd)
bin=$build/tests/fuzz
status=0
run() { # name binary corpus [VAR=value ...]
    name=$1 exe=$2 corpus=$3
    shift 3
    mkdir -p "$out/$name"
    start=$(date +%s)
    env "$@" ASAN_OPTIONS=detect_leaks=1 "$bin/$exe" -runs="$runs" -max_len=4096 -timeout=20 \
        -max_total_time="${EVLOOP_FUZZ_MAX_SECONDS:-0}" \
        -rss_limit_mb=4096 -print_final_stats=1 -artifact_prefix="$out/$name-" \
        "$out/$name" "$here/corpus/$corpus" >"$out/$name.log" 2>&1
    rc=$?
    execs=$(sed -n "s/^stat::number_of_executed_units: *//p" "$out/$name.log")
    echo "$name: exit $rc, $execs executions, $(( $(date +%s) - start )) s ($out/$name.log)"
    [ $rc -eq 0 ] || status=1
}
run ingress_arena fuzz_ingress_arena fuzz_ingress
run ingress_chunk fuzz_ingress_chunk fuzz_ingress
run lanes_arena fuzz_lanes_arena fuzz_lanes
run lanes_chunk fuzz_lanes_chunk fuzz_lanes
run timers fuzz_timers fuzz_timers
for b in epoll io_uring; do
    run api_arena_$b fuzz_api_arena fuzz_api EVLOOP_BACKEND=$b
    run api_chunk_$b fuzz_api_chunk fuzz_api EVLOOP_BACKEND=$b
done
exit $status
