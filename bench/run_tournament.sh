#!/bin/sh
# The evloop tournament in one command, on a fresh Debian 12 machine: installs what it
# needs (apt-get, through sudo when not root), builds Release with both ingress variants
# and the bench, then runs bench/tournament.py (>= 3 rounds, report in bench/results/).
#
#   bench/run_tournament.sh                       full run (about 21 minutes on 2 quiet cores,
#                                                 6 of them the network family)
#   EVLOOP_BENCH_QUICK=1 bench/run_tournament.sh  smoke run (about two and a half minutes)
#
# Further arguments go to tournament.py (--rounds N, --min-time S, --filter RE, --out DIR,
# --sweep full|lite|none, --no-tuned, --net-options='--rounds 5 --duration 5').
# After the rounds it runs the network family (bench/net/run_net.py: HTTP servers under wrk).
# EVLOOP_BENCH_BUILD_DIR picks the build folder (default build-bench at the top).
set -eu

ROOT=$(cd "$(dirname "$0")/.." && pwd)
EVLOOP_TOURNAMENT_COMMAND="$0${*:+ $*}"
export EVLOOP_TOURNAMENT_COMMAND
BUILD=${EVLOOP_BENCH_BUILD_DIR:-$ROOT/build-bench}
PACKAGES="build-essential cmake pkg-config binutils coreutils python3 python3-matplotlib
          libbenchmark-dev libev-dev libuv1-dev liburing-dev wrk"

missing=""
for p in $PACKAGES; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
        missing="$missing $p"
done
if [ -n "$missing" ]; then
    SUDO=""
    if [ "$(id -u)" -ne 0 ]; then
        SUDO="sudo"
    fi
    echo "run_tournament: installing$missing"
    $SUDO apt-get update
    # shellcheck disable=SC2086 # the package list is meant to split
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends $missing
fi

cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DEVLOOP_BUILD_BENCH=ON \
      -DEVLOOP_BUILD_TESTS=OFF
cmake --build "$BUILD" -j"$(nproc)" --target evloop_bench
# The calibration CLI for the tournament's tuned column; without it the tournament runs
# on with a warning and no tuned column.
cmake --build "$BUILD" -j"$(nproc)" --target evloop_autotune ||
    echo "run_tournament: evloop_autotune did not build; the report will have no tuned column"

# The network family's servers (bench/net, driven by wrk); without them the report has no
# network section.
NET_BUILD="--net-build=$BUILD"
cmake --build "$BUILD" -j"$(nproc)" --target net_servers || {
    echo "run_tournament: bench/net's servers did not build; the report will have no network family"
    NET_BUILD=""
}

# Debian's python3-matplotlib belongs to the system interpreter; a python3 earlier in PATH
# (pyenv, a venv) may not see it.
PYTHON=python3
if [ -x /usr/bin/python3 ]; then
    PYTHON=/usr/bin/python3
fi
exec "$PYTHON" "$ROOT/bench/tournament.py" --bench "$BUILD/bench/evloop_bench" ${NET_BUILD:+"$NET_BUILD"} "$@"
