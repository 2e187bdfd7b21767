#!/usr/bin/env bash
# The project's test command: installs what is missing, then builds and runs every ctest
# suite (both ingress variants x every backend available) in five builds: plain with
# -Werror (plus valgrind memcheck and the spin models), ASan+UBSan, TSan, the condvar
# fast-wake fallback, and clang with the libFuzzer fuzzers (short runs; see
# tests/stress/README.md for EVLOOP_LONG=1 and the long fuzz runs); then a bench smoke run,
# the install consumers, and the macOS and FreeBSD cross-builds (compiled, never run here).
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
bash tests/lint_pipes.sh
jobs=$(nproc)

run_build() { # name, ctest label filter (or ""), cmake options...
    local dir="build-ci-$1" labels="$2"
    shift 2
    echo "=== build $dir: $*"
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEVLOOP_WERROR=ON \
        -DEVLOOP_BUILD_TESTS=ON -DEVLOOP_BUILD_BENCH=OFF "$@" >/dev/null
    cmake --build "$dir" -j "$jobs"
    ctest --test-dir "$dir" --output-on-failure -j "$jobs" ${labels:+-L "$labels"}
}

run_build plain ""
run_build asan "" -DEVLOOP_SANITIZE=address
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" \
    run_build tsan "" -DEVLOOP_SANITIZE=thread
run_build condvar "" -DEVLOOP_WAKE=condvar -DEVLOOP_MEMCHECK=OFF
run_build fuzz fuzz -DCMAKE_C_COMPILER=clang-14 -DCMAKE_CXX_COMPILER=clang++-14 \
    -DEVLOOP_BUILD_FUZZ=ON -DEVLOOP_MEMCHECK=OFF

# The benchmark suite builds and every benchmark runs without an error (a smoke run: the
# figures come from tournament/run.sh). evloop_bench exits 1 if any benchmark failed.
echo "=== bench smoke"
cmake -S . -B build-ci-bench -G Ninja -DCMAKE_BUILD_TYPE=Release -DEVLOOP_WERROR=ON \
    -DEVLOOP_BUILD_TESTS=OFF -DEVLOOP_BUILD_BENCH=ON >/dev/null
cmake --build build-ci-bench -j "$jobs"
./build-ci-bench/bench/evloop_bench --benchmark_min_time=0.001 >build-ci-bench/smoke.txt
echo "bench smoke: $(grep -c manual_time build-ci-bench/smoke.txt) benchmarks ran"
# Each variant's push and drain on one thread (exits 1 if a drain misses a push).
./build-ci-bench/bench/ingress_cost_arena 200 >/dev/null
./build-ci-bench/bench/ingress_cost_chunk 200 >/dev/null
bash tests/consumers/run.sh build-ci-consumers # install, then find_package/pkg-config/add_subdirectory/FetchContent consumers, with and without liburing
# macOS (arm64, x86_64) and FreeBSD cross-builds with zig and -Werror: the library, examples
# and header checks compiled and linked, the test programs compiled; nothing of it runs here.
bash tests/cross/run.sh build-ci-cross
