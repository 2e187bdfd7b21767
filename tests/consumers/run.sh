#!/usr/bin/env bash
# Out-of-tree consumers of evloop (issue 13): builds evloop the way a user would, installs it
# with `cmake --install --prefix` into a non-default prefix (then moves that prefix, so only
# relocatable files work), and builds the program in common/consumer.c as C11 and as C++17
# against it in every documented way:
#   - CMake find_package(evloop), static and shared (BUILD_SHARED_LIBS) installs;
#   - pkg-config, with and without --static, static and shared installs;
#   - add_subdirectory(evloop) and FetchContent from a source tarball of this tree;
#   - on a machine where liburing cannot be found: pkg-config and find_package with
#     liburing's header, library and .pc hidden, FetchContent building evloop itself
#     without liburing, and the programs run with liburing.so.2 made unloadable (a mount
#     namespace, when unshare is allowed; the ELF NEEDED entries are checked always);
#   - the installed tool (bin/evloop_autotune) runs from the moved prefix, without liburing;
#   - a libevloop built with EVLOOP_BUNDLE_LIBURING=OFF: it links with liburing, and
#     find_package(evloop QUIET) without liburing reports "not found" instead of failing.
# Each program creates a loop, submits a task, runs it, checks it ran, and exits 0.
# Usage: tests/consumers/run.sh [WORK_DIR]   (default build-ci-consumers; EVLOOP_JOBS=n)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/consumers
work=$(realpath -m "${1:-$root/build-ci-consumers}")
jobs=${EVLOOP_JOBS:-$(nproc)}
cc=${CC:-cc}
cxx=${CXX:-c++}
warn=(-Wall -Wextra -pedantic -Werror)
rm -rf "$work"
mkdir -p "$work"
cd "$work"

fail() {
    echo "consumers: FAIL: $*" >&2
    exit 1
}
# quietly LOG CMD...: runs CMD with its output in LOG, shown only if CMD fails.
quietly() {
    local log=$1
    shift
    if ! "$@" >>"$log" 2>&1; then
        cat "$log" >&2
        fail "$* (log: $log)"
    fi
}

# ---- liburing: where it is, how to hide it ------------------------------------------------
# Under pipefail no reader in a pipeline may stop before its writer is done (awk's `exit`,
# `head`, `grep -q`): the writer dies of SIGPIPE, and the script with it when the output is
# long enough. Outputs are read whole, or matched from a variable.
uring_so=$(ldconfig -p | awk '$1 == "liburing.so.2" && !found { print $NF; found = 1 }')
[ -n "$uring_so" ] && uring_so=$(readlink -f "$uring_so")
uring_inc=$(pkg-config --variable=includedir liburing 2>/dev/null || true)
uring_lib=$(pkg-config --variable=libdir liburing 2>/dev/null || true)
mkdir -p empty-pkgconfig
# find_* ignore these folders (and their /lib twins on a merged-/usr system); pkg-config
# looks only in an empty folder.
ignore="/usr/include;/usr/local/include;/usr/lib;/usr/local/lib;/lib"
for d in "$uring_inc" "$uring_lib" /usr/lib/"$(gcc -print-multiarch 2>/dev/null || true)"; do
    [ -n "$d" ] && ignore="$ignore;$d;${d/#\/usr\//\/}"
done
no_uring_env=(env PKG_CONFIG_LIBDIR="$work/empty-pkgconfig" PKG_CONFIG_PATH=)
no_uring_cmake=(-DCMAKE_IGNORE_PATH="$ignore" -DEXPECT_NO_LIBURING=ON)

# A mount namespace where liburing.so.2 is an empty file: a program that needs it cannot
# start there. A control program linked with -luring must fail in it, else it proves nothing.
can_hide_so=no
if [ -n "$uring_so" ] && [ "$(id -u)" -eq 0 ] && command -v unshare >/dev/null &&
    command -v mount >/dev/null && unshare -m true 2>/dev/null; then
    : >empty.so
    printf 'int main(void) { return 0; }\n' >control.c
    "$cc" control.c -o control -Wl,--no-as-needed -luring
    ./control || fail "the control program does not start even with liburing"
    if unshare -m sh -c 'mount --bind "$1" "$2" && exec ./control' sh "$work/empty.so" \
        "$uring_so" 2>control.err; then
        fail "hiding $uring_so in a mount namespace did not stop a program that needs it"
    fi
    grep -q liburing control.err || fail "the control program failed for another reason: $(cat control.err)"
    can_hide_so=yes
fi
echo "=== consumers: liburing.so.2 at ${uring_so:-nowhere}; hidden at run time: $can_hide_so"

# run_without_liburing PROGRAM...: runs it where liburing.so.2 cannot be loaded.
run_without_liburing() {
    if [ "$can_hide_so" = yes ]; then
        unshare -m sh -c 'mount --bind "$1" "$2" && shift 2 && exec "$@"' sh "$work/empty.so" \
            "$uring_so" "$@"
    else
        "$@"
    fi
}

# needs_no_liburing FILE: its ELF NEEDED entries do not name liburing.
needs_no_liburing() {
    local needed
    needed=$(readelf -d "$1" | grep NEEDED || true)
    if grep -q liburing <<<"$needed"; then
        echo "$needed" >&2
        fail "$1 needs liburing to start"
    fi
}

# ---- installs ------------------------------------------------------------------------------
# install_evloop NAME CMAKE_OPTIONS...: evloop (library only) configured with the default
# prefix, installed with --prefix tmp-NAME, then moved to NAME.
install_evloop() {
    local name=$1
    shift
    echo "=== consumers: install $name ($*)"
    quietly "build-$name.log" cmake -S "$root" -B "build-$name" -G Ninja \
        -DCMAKE_BUILD_TYPE=Release -DEVLOOP_BUILD_TESTS=OFF \
        -DEVLOOP_BUILD_BENCH=OFF "$@"
    quietly "build-$name.log" cmake --build "build-$name" -j "$jobs"
    quietly "build-$name.log" cmake --install "build-$name" --prefix "$work/tmp-$name"
    mv "$work/tmp-$name" "$work/$name"
    [ -z "$(grep -rl "tmp-$name" "$work/$name" --include='*.pc' --include='*.cmake')" ] ||
        fail "$name: installed files name the install prefix (not relocatable)"
}

# The names declared EVLOOP_API in the header.
api_names() {
    grep -o 'EVLOOP_API[^(]*(' "$root/include/evloop.h" | sed -E 's/.*[ *](evloop_[a-z0-9_]+)\($/\1/' |
        sort -u
}

# check_exports PREFIX: the library defines (static) or exports (shared) nothing but
# evloop_* API names, and carries no liburing reference.
check_exports() {
    local lib
    lib=$(find "$1" \( -name 'libevloop.so.*.*.*' -o -name libevloop.a \) -print -quit)
    local defined
    if [[ $lib == *.a ]]; then
        defined=$(nm -g --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u)
        if grep -q io_uring <<<"$(nm -u "$lib")"; then
            fail "$lib leaves io_uring_* symbols undefined"
        fi
    else
        defined=$(nm -D --defined-only "$lib" | awk 'NF == 3 { print $3 }' | sort -u)
        needs_no_liburing "$lib"
    fi
    local extra
    extra=$(comm -23 <(echo "$defined") <(api_names))
    [ -z "$extra" ] || fail "$lib defines symbols outside the API: $(echo $extra)"
    grep -qx evloop_new <<<"$defined" || fail "$lib does not define evloop_new"
    echo "=== consumers: $lib: $(echo "$defined" | wc -l) symbols, all evloop_* API"
}

# ---- the consumers ---------------------------------------------------------------------------
# run_pair DIR LIBDIR: runs DIR/consumer_c and DIR/consumer_cxx (LIBDIR on the library path
# for a shared install), each must need no liburing and start without it.
run_pair() {
    local dir=$1 libdir=$2
    for p in "$dir/consumer_c" "$dir/consumer_cxx"; do
        needs_no_liburing "$p"
        LD_LIBRARY_PATH="$libdir" run_without_liburing "$p" || fail "$p failed"
    done
}

# find_package_consumer PREFIX LABEL [no-liburing]
find_package_consumer() {
    local prefix=$1 label=$2 b="fp-$2"
    local pre=() opts=()
    if [ "${3:-}" = no-liburing ]; then
        pre=("${no_uring_env[@]}")
        opts=("${no_uring_cmake[@]}")
    fi
    echo "=== consumers: find_package, $label"
    quietly "$b.log" "${pre[@]}" cmake -S "$here/find_package" -B "$b" -G Ninja \
        -DCMAKE_PREFIX_PATH="$prefix" "${opts[@]}"
    quietly "$b.log" cmake --build "$b" -j "$jobs"
    run_pair "$b" "$prefix/lib"
}

# pkg_config_consumer PREFIX LABEL [no-liburing]: both languages, with and without --static.
pkg_config_consumer() {
    local prefix=$1 label=$2 pcdir
    pcdir=$(dirname "$(find "$prefix" -name evloop.pc -print -quit)")
    local env_=(env PKG_CONFIG_PATH="$pcdir")
    if [ "${3:-}" = no-liburing ]; then
        # Only the install's own folder: liburing.pc is out of sight.
        env_=(env PKG_CONFIG_LIBDIR="$pcdir" PKG_CONFIG_PATH=)
        if "${env_[@]}" pkg-config --exists liburing; then
            fail "PKG_CONFIG_LIBDIR=$pcdir still finds liburing.pc"
        fi
    fi
    for static in "" --static; do
        local b="pc-$label${static:+-static}"
        mkdir -p "$b"
        echo "=== consumers: pkg-config $static, $label: $("${env_[@]}" pkg-config $static --cflags --libs evloop)"
        # shellcheck disable=SC2046 # the flags are words
        quietly "$b.log" "$cc" -std=c11 "${warn[@]}" "$here/common/consumer.c" -o "$b/consumer_c" \
            $("${env_[@]}" pkg-config $static --cflags --libs evloop)
        # shellcheck disable=SC2046
        quietly "$b.log" "$cxx" -std=c++17 "${warn[@]}" "$here/common/consumer.cpp" \
            -o "$b/consumer_cxx" $("${env_[@]}" pkg-config $static --cflags --libs evloop)
        run_pair "$b" "$prefix/lib"
    done
}

# check_tool PREFIX: the installed evloop_autotune runs from the moved prefix (a shared
# libevloop found through its $ORIGIN rpath), needs no liburing, and saves a profile.
check_tool() {
    local tool=$1/bin/evloop_autotune profile
    profile=$work/profile-$(basename "$1")
    [ -x "$tool" ] || fail "$tool was not installed"
    needs_no_liburing "$tool"
    run_without_liburing "$tool" --help >/dev/null || fail "$tool --help failed"
    run_without_liburing "$tool" --seconds 0.2 --out "$profile" >/dev/null ||
        fail "$tool --seconds 0.2 --out $profile failed"
    grep -q '^# evloop profile' "$profile" || fail "$tool saved no profile at $profile"
    echo "=== consumers: $tool runs and saves a profile"
}

install_evloop static
install_evloop shared -DBUILD_SHARED_LIBS=ON
for kind in static shared; do
    check_exports "$work/$kind"
    check_tool "$work/$kind"
    find_package_consumer "$work/$kind" "$kind"
    pkg_config_consumer "$work/$kind" "$kind"
    find_package_consumer "$work/$kind" "$kind-no-liburing" no-liburing
    pkg_config_consumer "$work/$kind" "$kind-no-liburing" no-liburing
done

echo "=== consumers: add_subdirectory"
quietly as.log cmake -S "$here/add_subdirectory" -B as -G Ninja -DCMAKE_BUILD_TYPE=Release \
    -DEVLOOP_SOURCE_DIR="$root"
quietly as.log cmake --build as -j "$jobs"
run_pair as ""

# FetchContent from a tarball of the files git knows in this tree (as they are now), built
# where liburing cannot be found: evloop then builds epoll only, and still configures.
echo "=== consumers: FetchContent (evloop built without liburing)"
if git -C "$root" rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    (cd "$root" && git ls-files -z --cached --others --exclude-standard) |
        (cd "$root" && while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done) |
        tar -C "$root" --null -T - --transform 's,^,evloop/,' -czf "$work/evloop-src.tar.gz"
else # not a git checkout (an unpacked source tree): everything but build folders
    tar -C "$root" --exclude='./build*' --transform 's,^\.,evloop,' -czf "$work/evloop-src.tar.gz" .
fi
quietly fc.log "${no_uring_env[@]}" cmake -S "$here/fetchcontent" -B fc -G Ninja \
    -DCMAKE_BUILD_TYPE=Release -DEVLOOP_URL="$work/evloop-src.tar.gz" "${no_uring_cmake[@]}"
grep -q "liburing none" fc.log || fail "FetchContent: evloop found liburing although it is hidden"
quietly fc.log cmake --build fc -j "$jobs"
run_pair fc ""

# Without bundling, liburing is a dependency that both files state.
install_evloop static-unbundled -DEVLOOP_BUNDLE_LIBURING=OFF
echo "=== consumers: static-unbundled: pkg-config --libs evloop: $(PKG_CONFIG_PATH="$work/static-unbundled/lib/pkgconfig" pkg-config --libs evloop)"
b=pc-unbundled
mkdir -p "$b"
# shellcheck disable=SC2046
quietly "$b.log" "$cc" -std=c11 "${warn[@]}" "$here/common/consumer.c" -o "$b/consumer_c" \
    $(PKG_CONFIG_PATH="$work/static-unbundled/lib/pkgconfig" pkg-config --cflags --libs evloop)
"$b/consumer_c" || fail "$b/consumer_c failed"
quietly fp-unbundled.log cmake -S "$here/find_package" -B fp-unbundled -G Ninja \
    -DCMAKE_PREFIX_PATH="$work/static-unbundled"
quietly fp-unbundled.log cmake --build fp-unbundled -j "$jobs"
fp-unbundled/consumer_cxx || fail "fp-unbundled/consumer_cxx failed"
quietly fp-quiet.log "${no_uring_env[@]}" cmake -S "$here/find_package" -B fp-quiet -G Ninja \
    -DCMAKE_PREFIX_PATH="$work/static-unbundled" -DEVLOOP_CONSUMER_QUIET=ON "${no_uring_cmake[@]}"
grep -q "evloop_FOUND=0\|evloop_FOUND=FALSE\|evloop_FOUND=$" fp-quiet.log ||
    fail "find_package(evloop QUIET) without liburing: $(grep evloop_FOUND fp-quiet.log)"
echo "=== consumers: static-unbundled without liburing: find_package(evloop QUIET) configures, evloop not found"

echo "=== consumers: all passed"
