#!/usr/bin/env bash
# The flake hunt: runs ctest suites over and over with other load on the machine, the way CI
# meets them (a fresh 2-vCPU machine where each test runs once and one failure blocks all).
# A test that fails once here is a bug to fix, never one to retry.
#
#   tests/soak.sh [-b plain,tsan,...] [-n RUNS] [-l stress|build|none] [-L LABEL] [-R REGEX]
#
#   -b  builds, of: plain asan tsan condvar (default plain,tsan); each is configured as
#       tests/run.sh configures it, in build-soak-<name>/
#   -n  ctest runs per build (default 10); every run is the whole selection, once per test
#   -l  the load beside it: "stress" (stress-ng, one CPU-bound worker per CPU, the default),
#       "build" (a parallel rebuild of the library in a loop), "none"
#   -L, -R   ctest's label filter and name regex (default: every test)
#
# Prints one line per run ("run k/N: passed" or the failing tests) and a summary, keeps each
# failing run's log as build-soak-<name>/soak-<k>.log, and exits non-zero if any run failed.
# Examples:
#   tests/soak.sh -b plain,tsan -n 10                 # the whole suites, 10 times each
#   tests/soak.sh -b tsan -n 50 -R '^signal\.'        # the signal tests under TSan, 50 times
set -euo pipefail
cd "$(dirname "$0")/.."

builds="plain,tsan" runs=10 load="stress" label="" regex=""
while getopts "b:n:l:L:R:" opt; do
    case "$opt" in
    b) builds="$OPTARG" ;;
    n) runs="$OPTARG" ;;
    l) load="$OPTARG" ;;
    L) label="$OPTARG" ;;
    R) regex="$OPTARG" ;;
    *) sed -n '2,20p' "$0" >&2; exit 2 ;;
    esac
done
jobs=$(nproc)

options_of() { # build name -> its cmake options (tests/run.sh's)
    case "$1" in
    plain) echo "" ;;
    asan) echo "-DEVLOOP_SANITIZE=address" ;;
    tsan) echo "-DEVLOOP_SANITIZE=thread" ;;
    condvar) echo "-DEVLOOP_WAKE=condvar -DEVLOOP_MEMCHECK=OFF" ;;
    *) echo "soak.sh: unknown build '$1'" >&2; exit 2 ;;
    esac
}

load_pid=""
start_load() {
    case "$load" in
    stress)
        command -v stress-ng >/dev/null || { echo "soak.sh: stress-ng is not installed (apt-get install stress-ng)" >&2; exit 2; }
        stress-ng --cpu "$jobs" --timeout 0 >/dev/null 2>&1 &
        load_pid=$! ;;
    build)
        cmake -S . -B build-soak-load -G Ninja -DEVLOOP_BUILD_TESTS=OFF -DEVLOOP_BUILD_BENCH=OFF >/dev/null
        (while true; do cmake --build build-soak-load --target clean >/dev/null 2>&1
                        cmake --build build-soak-load -j "$jobs" >/dev/null 2>&1; done) &
        load_pid=$! ;;
    none) ;;
    *) echo "soak.sh: unknown load '$load'" >&2; exit 2 ;;
    esac
}
stop_load() {
    [ -n "$load_pid" ] && { pkill -P "$load_pid" 2>/dev/null || true; kill "$load_pid" 2>/dev/null || true; wait "$load_pid" 2>/dev/null || true; }
    load_pid=""
}
trap stop_load EXIT

failed_runs=0
summary=()
for b in ${builds//,/ }; do
    dir="build-soak-$b"
    # shellcheck disable=SC2046
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEVLOOP_WERROR=ON \
        -DEVLOOP_BUILD_TESTS=ON -DEVLOOP_BUILD_BENCH=OFF $(options_of "$b") >/dev/null
    cmake --build "$dir" -j "$jobs" >/dev/null
    start_load
    passed=0
    for k in $(seq 1 "$runs"); do
        log="$dir/soak-$k.log"
        if TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
            ctest --test-dir "$dir" --output-on-failure -j "$jobs" ${label:+-L "$label"} \
            ${regex:+-R "$regex"} >"$log" 2>&1; then
            passed=$((passed + 1))
            rm -f "$log"
            echo "$b run $k/$runs: passed"
        else
            failed_runs=$((failed_runs + 1))
            echo "$b run $k/$runs: FAILED ($log):"
            grep -E '^\s*[0-9]+ - .*\((Failed|Timeout|SEGFAULT|Subprocess aborted|Exception)' "$log" || true
        fi
    done
    stop_load
    summary+=("$b: $passed of $runs runs passed (load: $load)")
done
printf '%s\n' "=== soak summary" "${summary[@]}"
[ "$failed_runs" -eq 0 ]
