#!/usr/bin/env bash
# The soaks (tests/soak/README.md): the asyncio soak (aio_soak.py) on evloop's asyncio loop,
# the stock loop or uvloop, and the C soak (c_soak) on a plain and an ASan+UBSan build, one
# after the other, each for --duration seconds of client load. Not tests/soak.sh (the ctest
# flake hunt).
#
#   tests/soak/run.sh [--duration S] [--only LIST] [--python PY] [--backend B]
#                     [--warmup S] [--load none|stress] [--logs DIR]
#
#   --duration  s of client load per soak (default $SOAK_DURATION, else 110: the CI size,
#               about 6 minutes for the default three); rows every 10 s up to 5 minutes,
#               every 30 s up to 15, else every minute
#   --only      which soaks, of: evloop asyncio uvloop (the asyncio soak on that loop), c,
#               c-asan (default evloop,c,c-asan)
#   --python    the Python that has evloop (and uvloop for `uvloop`) installed (default
#               $SOAK_PYTHON, else python3)
#   --backend   the C soak's evloop backend: auto (default), epoll, io_uring
#   --warmup    s of load before RSS growth is judged (default a third of the duration)
#   --load      stress: stress-ng with one CPU-bound worker per CPU beside the soaks
#   --logs      where each soak's output goes, as <soak>.log (default build-soak-logs)
#
# The C builds are build-soak-c (RelWithDebInfo) and build-soak-asan
# (-DEVLOOP_SANITIZE=address), configured as tests/run.sh configures its builds; only the
# c_soak target is built. Exits 1 if any soak failed.
set -euo pipefail
cd "$(dirname "$0")/../.."

duration=${SOAK_DURATION:-110} only="evloop,c,c-asan" python=${SOAK_PYTHON:-python3}
backend="auto" load="none" logs="build-soak-logs" warmup=""
while [ $# -gt 0 ]; do
    case "$1" in
    --duration) duration="$2"; shift 2 ;;
    --only) only="$2"; shift 2 ;;
    --python) python="$2"; shift 2 ;;
    --backend) backend="$2"; shift 2 ;;
    --warmup) warmup="$2"; shift 2 ;;
    --load) load="$2"; shift 2 ;;
    --logs) logs="$2"; shift 2 ;;
    *) sed -n '2,27p' "$0" >&2; exit 2 ;;
    esac
done
mkdir -p "$logs"

build_c() { # dir, extra cmake options...
    local dir="$1"
    shift
    cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DEVLOOP_WERROR=ON \
        -DEVLOOP_BUILD_TESTS=ON -DEVLOOP_BUILD_BENCH=OFF "$@" >/dev/null
    cmake --build "$dir" --target c_soak >/dev/null
}

load_pid=""
stop_load() {
    if [ -n "$load_pid" ]; then
        kill "$load_pid" 2>/dev/null || true
        wait "$load_pid" 2>/dev/null || true
    fi
    load_pid=""
}
trap stop_load EXIT

# Build first, so the load and the soaks do not meet a compiler.
for s in ${only//,/ }; do
    case "$s" in
    c) build_c build-soak-c ;;
    c-asan) build_c build-soak-asan -DEVLOOP_SANITIZE=address ;;
    evloop | asyncio | uvloop) ;;
    *) echo "run.sh: unknown soak '$s'" >&2; exit 2 ;;
    esac
done
if [ "$load" = stress ]; then
    if ! command -v stress-ng >/dev/null; then
        echo "run.sh: stress-ng is not installed (apt-get install stress-ng)" >&2
        exit 2
    fi
    stress-ng --cpu "$(nproc)" --timeout 0 >/dev/null 2>&1 &
    load_pid=$!
elif [ "$load" != none ]; then
    echo "run.sh: unknown load '$load'" >&2; exit 2
fi

c_backend=() common=()
[ "$backend" = auto ] || c_backend=(--backend "$backend")
[ -z "$warmup" ] || common=(--warmup "$warmup")
failed=()
summary=()
for s in ${only//,/ }; do
    log="$logs/$s.log"
    echo "=== soak $s: $duration s of load (log: $log)"
    start=$SECONDS
    case "$s" in
    c) cmd=(build-soak-c/tests/soak/c_soak --duration "$duration" "${c_backend[@]}"
            "${common[@]}") ;;
    # ASan's quarantine (256 MiB) swings RSS by several MiB: a larger floor for its growth.
    c-asan) cmd=(build-soak-asan/tests/soak/c_soak --duration "$duration" --rss-floor 16
                 "${c_backend[@]}" "${common[@]}") ;;
    *) cmd=("$python" tests/soak/aio_soak.py --loop "$s" --duration "$duration" "${common[@]}") ;;
    esac
    # ASan: leaks are checked when each process (server and clients) exits, and fail it.
    if ASAN_OPTIONS="detect_leaks=1:halt_on_error=1" \
        UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1" "${cmd[@]}" 2>&1 | tee "$log"; then
        summary+=("$s: passed in $((SECONDS - start)) s")
    else
        summary+=("$s: FAILED in $((SECONDS - start)) s (log: $log)")
        failed+=("$s")
    fi
done
stop_load
echo "=== soaks (load: $load)"
printf '  %s\n' "${summary[@]}"
[ ${#failed[@]} -eq 0 ]
