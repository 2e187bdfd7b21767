#!/usr/bin/env bash
# Portability check: cross-builds evloop with -Werror for macOS 11+ (arm64, x86_64) and
# FreeBSD 14 (x86_64), through CMake with zig as the compiler (tests/cross/<target>.cmake),
# each with that system's own backend and wake: kqueue and ulock (__ulock_wait2; the SDK's
# os_sync_wait_on_address where it has one) on macOS, kqueue and condvar on FreeBSD.
# Nothing built here runs here.
#   - compiled and linked: the library (libevloop and both ingress variants), every example,
#     and the header checks (tests/header_c11.c, tests/header_cxx.cc);
#   - compiled, not linked: the test programs (tests/, tests/backend, tests/stress), against
#     Debian's cmocka.h, which is portable C: there is no cmocka library for these targets.
#     Those that use interfaces a target lacks are listed below (linux_only) and must fail
#     to compile there, so the list stays exact. tests/fuzz (libFuzzer) and tests/model
#     (Promela) are Linux tools and are not part of it.
# zig comes from PyPI (ziglang, pinned) into a virtual environment in the work folder: the
# first run downloads about 100 MB and builds zig's runtime pieces per target (about a
# minute each on two cores); later runs reuse both.
# Usage: tests/cross/run.sh [WORK_DIR]   (default build-ci-cross; EVLOOP_JOBS=n,
#        EVLOOP_CROSS_TARGETS="aarch64-macos x86_64-macos x86_64-freebsd")
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "${1:-$root/build-ci-cross}")
jobs=${EVLOOP_JOBS:-$(nproc)}
targets=${EVLOOP_CROSS_TARGETS:-aarch64-macos x86_64-macos x86_64-freebsd}
zig_version=0.17.1

fail() {
    echo "cross: FAIL: $*" >&2
    exit 1
}
for tool in python3 cmake ninja file "${CC:-cc}"; do
    command -v "$tool" >/dev/null || fail "$tool not found (bash .ci/install-deps installs it)"
done
# The host compiler says where cmocka.h is (Debian: /usr/include).
cmocka_h=$(echo '#include <cmocka.h>' | "${CC:-cc}" -E -H -x c - 2>&1 >/dev/null |
    sed -n 's/^\. //p' || true)
cmocka_h=${cmocka_h%%$'\n'*}
[ -f "$cmocka_h" ] || fail "cmocka.h not found (Debian: libcmocka-dev)"
mkdir -p "$work"
cd "$work"
start=$SECONDS

# ---- zig, from PyPI, in a virtual environment of its own -----------------------------------
venv=$work/venv
if ! grep -qx "$zig_version" <<<"$("$venv/bin/python" -m ziglang version 2>/dev/null)"; then
    echo "=== cross: installing ziglang==$zig_version into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: python3-venv)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$zig_version" ||
        fail "pip install ziglang==$zig_version failed (is PyPI reachable?)"
fi
# The compiler and archiver wrappers the toolchain files name: the zig binary the package
# holds (what `python -m ziglang` runs, without a Python start per compile); zig's cache
# stays in here.
zig=$("$venv/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
[ -x "$zig" ] || fail "no zig executable in the ziglang package ($zig)"
bin=$work/bin
mkdir -p "$bin"
for tool in cc c++ ar ranlib; do
    cat >"$bin/$tool" <<EOF
#!/bin/sh
export ZIG_GLOBAL_CACHE_DIR="$work/zig-cache" ZIG_LOCAL_CACHE_DIR="$work/zig-cache"
exec "$zig" $tool "\$@"
EOF
    chmod +x "$bin/$tool"
done
cc_version=$("$bin/cc" --version)
cc_version=${cc_version%%$'\n'*}
echo "=== cross: zig $zig_version (${cc_version%% (*})"

# cmocka.h alone, in a folder of its own: the host's /usr/include on the include path would
# bring glibc's headers in ahead of the target's.
mkdir -p cmocka-include
cp "$cmocka_h" cmocka-include/

# ---- what each target must be ----------------------------------------------------------------
# expect TARGET: the wake and backends its configure must report
expect() {
    case "$1" in
    *-macos) echo "wake ulock, backends kqueue," ;;
    *-freebsd) echo "wake condvar, backends kqueue," ;;
    *) fail "unknown target $1" ;;
    esac
}
# members TARGET: the platform members libevloop.a must hold
members() {
    case "$1" in
    *-macos) echo "kqueue.c.o wake_ulock.c.o" ;;
    *-freebsd) echo "kqueue.c.o wake_condvar.c.o" ;;
    esac
}
# executable_kind TARGET: file(1)'s words for its executables
executable_kind() {
    case "$1" in
    aarch64-macos) echo "Mach-O 64-bit arm64 executable" ;;
    x86_64-macos) echo "Mach-O 64-bit x86_64 executable" ;;
    x86_64-freebsd) echo "ELF 64-bit LSB .*x86-64.*FreeBSD" ;;
    esac
}
# linux_only TARGET: test sources (relative to tests/) that use what TARGET lacks, with why.
# They are tests of Linux runs; porting one means taking it off this list.
linux_only() {
    case "$1" in
    *-macos)
        cat <<'EOF'
test_embed.c          epoll (its outer loop around evloop_backend_fd is an epoll set)
test_io.c             pipe2 (macOS 27 and later only)
test_ops.c            accept4, SOCK_NONBLOCK, SOCK_CLOEXEC
test_spin.c           sched_setaffinity, cpu_set_t
test_submit.c         pthread barriers
stress/stress_eintr.c clock_nanosleep, TIMER_ABSTIME
stress/stress_fdreuse.c pipe2
stress/stress_fork.c  pipe2
stress/stress_ingress.c pthread barriers
stress/stress_lanes.c glibc's malloc.h (mallinfo2)
stress/stress_ops.c   pipe2, SOCK_NONBLOCK, SOCK_CLOEXEC
stress/stress_shutdown.c pthread barriers
EOF
        ;;
    *-freebsd)
        cat <<'EOF'
test_embed.c          epoll (its outer loop around evloop_backend_fd is an epoll set)
stress/stress_lanes.c glibc's mallinfo2
EOF
        ;;
    esac
}
# object_pattern SOURCE: an extended regex for the objects Ninja builds from tests/SOURCE
object_pattern() {
    local dir file
    dir=$(dirname "$1")
    file=$(basename "$1")
    [ "$dir" = . ] && dir="" || dir="$dir/"
    echo "^tests/${dir}CMakeFiles/[^/]*\.dir/${file//./\\.}\.o\$"
}

# ---- one build per target ----------------------------------------------------------------------
for target in $targets; do
    t0=$SECONDS
    b=$work/$target
    log=$work/$target.log
    [ -f "$root/tests/cross/$target.cmake" ] || fail "no toolchain tests/cross/$target.cmake"
    rm -rf "$b" "$log"
    if ! cmake -S "$root" -B "$b" -G Ninja -DCMAKE_TOOLCHAIN_FILE="$root/tests/cross/$target.cmake" \
        -DEVLOOP_ZIG_BIN="$bin" -DCMAKE_BUILD_TYPE=Release -DEVLOOP_WERROR=ON \
        -DEVLOOP_BUILD_TESTS=ON -DEVLOOP_BUILD_EXAMPLES=ON -DEVLOOP_BUILD_BENCH=OFF \
        -DEVLOOP_MEMCHECK=OFF -DEVLOOP_TESTS_COMPILE_ONLY=ON \
        -DEVLOOP_CMOCKA_INCLUDE_DIR="$work/cmocka-include" >"$log" 2>&1; then
        cat "$log" >&2
        fail "$target: configure failed (log: $log)"
    fi
    summary=$(grep -o 'evloop: ingress .*' "$log")
    echo "=== cross: $target: $summary"
    [[ "$summary" == *"$(expect "$target")"* ]] ||
        fail "$target: expected $(expect "$target") got: $summary"

    # Every compile step of the build (library, examples, tests), but the listed sources.
    mapfile -t all < <(ninja -C "$b" -t targets all |
        sed -n 's/^\(.*\): \(C\|CXX\)_COMPILER__.*/\1/p' | sort)
    skip_re=$(linux_only "$target" | while read -r src _; do object_pattern "$src"; done |
        paste -sd'|')
    skip_re=${skip_re:-^$}
    mapfile -t objects < <(printf '%s\n' "${all[@]}" | grep -Ev "$skip_re")
    mapfile -t skipped < <(printf '%s\n' "${all[@]}" | grep -E "$skip_re" || true)
    [ ${#objects[@]} -gt 0 ] || fail "$target: no compile steps found"
    commands=$(ninja -C "$b" -t commands "${objects[@]}" | grep -e ' -c ')
    total=$(grep -c . <<<"$commands")
    [ "$(grep -c -e ' -Werror' <<<"$commands")" -eq "$total" ] ||
        fail "$target: compile commands without -Werror: $(grep -v -e ' -Werror' <<<"$commands" | sed -n 1,3p)"
    echo "=== cross: $target: compile $total sources, every one with -Werror"
    if ! ninja -C "$b" -j "$jobs" "${objects[@]}" >>"$log" 2>&1; then
        grep -v '^\[' "$log" | tail -60 >&2
        fail "$target: compile failed (log: $log)"
    fi

    # The default build links the libraries, the examples and the header checks (the programs
    # that need cmocka are not in it).
    if ! cmake --build "$b" -j "$jobs" >>"$log" 2>&1; then
        grep -v '^\[' "$log" | tail -60 >&2
        fail "$target: link failed (log: $log)"
    fi
    kind=$(executable_kind "$target")
    linked=()
    while IFS= read -r exe; do
        grep -q "$kind" <<<"$(file -b "$exe")" || fail "$exe is not a $target executable: $(file -b "$exe")"
        linked+=("$(basename "$exe")")
    done < <(find "$b" -type f -perm -u+x ! -path '*/CMakeFiles/*' | sort)
    for lib in libevloop.a libevloop_arena.a libevloop_chunk.a; do
        [ -f "$b/$lib" ] || fail "$target: $lib was not built"
        have=$("$bin/ar" t "$b/$lib" | sort | paste -sd' ')
        for m in $(members "$target"); do
            [[ " $have " == *" $m "* ]] || fail "$target: $lib lacks $m (has: $have)"
        done
        [[ " $have " != *" epoll.c.o "* && " $have " != *" io_uring.c.o "* ]] ||
            fail "$target: $lib holds a Linux backend (has: $have)"
    done
    for prog in hello handoff_arena handoff_chunk test_header_c11 test_header_cxx; do
        [[ " ${linked[*]} " == *" $prog "* ]] || fail "$target: $prog was not linked"
    done
    echo "=== cross: $target: linked libevloop.a, libevloop_arena.a, libevloop_chunk.a" \
        "($(members "$target" | sed 's/\.c\.o//g; s/ / and /')) and ${#linked[@]} programs" \
        "(${linked[*]})"

    # The listed sources must still fail: one that compiles now comes off the list.
    if [ ${#skipped[@]} -gt 0 ]; then
        ninja -C "$b" -k 0 -j "$jobs" "${skipped[@]}" >"$log.linux-only" 2>&1 || true
        for o in "${skipped[@]}"; do
            [ ! -e "$b/$o" ] || fail "$target: $o compiles now: take its source off linux_only" \
                "in tests/cross/run.sh"
        done
        echo "=== cross: $target: not compiled (Linux interfaces):" \
            "$(linux_only "$target" | awk '{ print $1 }' | paste -sd' ')"
    fi
    echo "=== cross: $target: passed in $((SECONDS - t0)) s"
done
echo "=== cross: all passed ($targets) in $((SECONDS - start)) s; none of it was run"
