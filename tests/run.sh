#!/usr/bin/env bash
# The project's test command: installs what is missing, then builds and runs every ctest
# suite (both ingress variants x every backend available) in four builds: plain with
# -Werror, ASan+UBSan, TSan, and the condvar fast-wake fallback.
set -euo pipefail
cd "$(dirname "$0")/.."
bash .ci/install-deps
jobs=$(nproc)

run_build() { # name, cmake options...
    local dir="build-ci-$1"
    shift
    echo "=== build $dir: $*"
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEVLOOP_WERROR=ON \
        -DEVLOOP_BUILD_TESTS=ON "$@" >/dev/null
    cmake --build "$dir" -j "$jobs"
    ctest --test-dir "$dir" --output-on-failure -j "$jobs"
}

run_build plain
run_build asan -DEVLOOP_SANITIZE=address
TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" run_build tsan -DEVLOOP_SANITIZE=thread
run_build condvar -DEVLOOP_WAKE=condvar
