#!/bin/sh
# The evloop tournament in one command, on a fresh Debian 12 machine: installs what it
# needs (apt-get, through sudo when not root), builds Release with both ingress variants
# and the bench, then runs tournament/tournament.py (report and plots in tournament/results/).
#
#   tournament/run.sh                       short run: the headline families (PingPong,
#                                           BurstSubmit, MultiProducer, PingPongLatency,
#                                           ReadinessRoundTrip, Timers), 3 rounds, into
#                                           tournament/results/short (under 5 minutes on
#                                           2 cores, installing and building included)
#   tournament/run.sh --full                the full tournament: every family, 5 rounds,
#                                           the fixed-setting sweep, the tuned column,
#                                           then the network family, into
#                                           tournament/results/latest (about 21 minutes
#                                           on 2 quiet cores, 6 of them the network family)
#   EVLOOP_BENCH_QUICK=1 tournament/run.sh  smoke run of the full one (about two and a
#                                           half minutes), into tournament/results/quick
#
# Further arguments go to tournament.py (--rounds N, --min-time S, --filter RE, --out DIR,
# --sweep full|lite|none, --no-tuned, --net-options='--rounds 5 --duration 5').
# The full and quick runs end with the network family (tournament/net/run_net.py: HTTP
# servers under wrk). EVLOOP_BENCH_BUILD_DIR picks the build folder (default build-bench at
# the top).
set -eu

full=0
for arg in "$@"; do
    shift
    if [ "$arg" = "--full" ]; then
        full=1
    else
        set -- "$@" "$arg"
    fi
done
if [ -n "${EVLOOP_BENCH_QUICK:-}" ] && [ "${EVLOOP_BENCH_QUICK}" != 0 ]; then
    full=1 # the quick run is a smoke run of the whole pipeline
fi

ROOT=$(cd "$(dirname "$0")/.." && pwd)
if [ "$full" = 1 ] && [ -z "${EVLOOP_BENCH_QUICK:-}" ]; then
    EVLOOP_TOURNAMENT_COMMAND="$0 --full${*:+ $*}"
else
    EVLOOP_TOURNAMENT_COMMAND="$0${*:+ $*}"
fi
export EVLOOP_TOURNAMENT_COMMAND
BUILD=${EVLOOP_BENCH_BUILD_DIR:-$ROOT/build-bench}
# python3-matplotlib: every run draws its plots (plots/*.png beside report.md).
PACKAGES="build-essential cmake pkg-config binutils coreutils python3 python3-matplotlib
          libbenchmark-dev libev-dev libuv1-dev liburing-dev"
if [ "$full" = 1 ]; then
    PACKAGES="$PACKAGES wrk" # the network family's load generator
fi

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

MODE="--short"
NET_BUILD=""
if [ "$full" = 1 ]; then
    MODE=""
    # The calibration CLI for the tournament's tuned column; without it the tournament runs
    # on with a warning and no tuned column.
    cmake --build "$BUILD" -j"$(nproc)" --target evloop_autotune ||
        echo "run_tournament: evloop_autotune did not build; the report will have no tuned column"
    # The network family's servers (tournament/net, driven by wrk); without them the report
    # has no network section.
    NET_BUILD="--net-build=$BUILD"
    cmake --build "$BUILD" -j"$(nproc)" --target net_servers || {
        echo "run_tournament: tournament/net's servers did not build; the report will have no" \
             "network family"
        NET_BUILD=""
    }
fi

# Debian's python3-matplotlib belongs to the system interpreter; a python3 earlier in PATH
# (pyenv, a venv) may not see it.
PYTHON=python3
if [ -x /usr/bin/python3 ]; then
    PYTHON=/usr/bin/python3
fi
exec "$PYTHON" "$ROOT/tournament/tournament.py" --bench "$BUILD/bench/evloop_bench" $MODE \
    ${NET_BUILD:+"$NET_BUILD"} "$@"
