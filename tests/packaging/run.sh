#!/usr/bin/env bash
# CI installs what users install: builds the sdist (python -m build --sdist) and the portable
# wheels (bindings/python/build_wheel.sh), installs each into a fresh venv outside the
# repository, and runs, against that installed package, a smoke run and tests, from copies
# outside the tree so that `import evloop` can only be the install.
#   - the sdist is installed as a user with only a compiler would: `env -i`, PATH holding the
#     venv and a folder of links to the compiler toolchain (gcc, g++, ld, as, ar, ...), and a
#     pkg-config that finds no .pc file; the build must then take CMake, Ninja and pybind11
#     from PyPI and say that it left io_uring out;
#   - one wheel for each CPython 3.11, 3.12 and 3.13 that pyenv holds here (the newest patch
#     release of each; the run says which it found and which it did not), each manylinux_2_28
#     or older (build_wheel.sh checks it with auditwheel), each installed with no index into a
#     venv of its own Python.
# What runs where: the primary Python (PYTHON, or the first of pyenv's 3.11/3.12/3.13 found)
# gets the full set, for the sdist and for its wheel: the lifecycle tests, the asyncio tests
# that need no extra package (test_aio_loop.py, test_aio_transport.py, test_aio_sock.py), the
# examples (bindings/python/examples, through the tests that drive them) and, in the wheel's
# venv only, the servers of the test extra (test_servers.py). The other Pythons' wheels get
# the smoke run and the same set less the servers: the asyncio files are where the versions
# differ (the native transport and socket methods follow each version's stdlib asyncio), and
# the set costs little beside a build; the servers' pinned extra would add, for each Python,
# an install from PyPI of packages with native parts (aiohttp, httptools, ...) that tests
# their packaging more than ours. The time goes to the builds, one per Python (build_wheel.sh).
# Usage: tests/packaging/run.sh [WORK_DIR]   (default build-ci-packaging; the wheels' zig, its
#        cache and build folders stay in WORK_DIR/wheel between runs). PYTHON: the primary
#        interpreter instead of pyenv's first, a pyenv or python.org build (see
#        build_wheel.sh); it builds the sdist and replaces pyenv's Python of its version.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "${1:-$root/build-ci-packaging}")
start=$SECONDS

fail() {
    echo "packaging: FAIL: $*" >&2
    exit 1
}
# The wheels' Pythons: pyenv's CPython 3.11, 3.12 and 3.13, the newest patch release of each
# (Debian's python3 keeps its headers beside the host's glibc, which the wheel's zig build must
# not see: build_wheel.sh refuses it).
tag_of() { "$1" -c 'import sys; print("cp%d%d" % sys.version_info[:2])'; }
pythons=() found=() missing=()
for v in 3.11 3.12 3.13; do
    # releases only: not 3.13.0t (free-threaded, another ABI) nor 3.13-dev
    cand=$(ls -d "${PYENV_ROOT:-$HOME/.pyenv}/versions/$v".*/bin/python3 2>/dev/null |
        grep -E "/$v\.[0-9]+/bin/python3\$" | sort -V | tail -n 1 || true)
    if [ -n "$cand" ] && [ -x "$cand" ]; then
        pythons+=("$cand")
        found+=("$("$cand" -c 'import platform; print(platform.python_version())')")
    else
        missing+=("$v")
    fi
done
echo "=== packaging: pyenv's CPythons found: ${found[*]:-none}; not found: ${missing[*]:-none}"
if [ -n "${PYTHON:-}" ]; then
    py=$(command -v "$PYTHON") || fail "no $PYTHON"
    others=()
    for p in "${pythons[@]}"; do
        [ "$(tag_of "$p")" = "$(tag_of "$py")" ] || others+=("$p")
    done
    pythons=("$py" "${others[@]}")
elif [ ${#pythons[@]} -gt 0 ]; then
    py=${pythons[0]}
else
    # build_wheel.sh says why this one will not do if its headers sit beside the host's glibc
    py=$(command -v python3) || fail "no python3"
    pythons=("$py")
fi
echo "=== packaging: primary $py ($("$py" --version)); wheels for ${pythons[*]}"
mkdir -p "$work"
# The venvs and the copies of the tests live outside the repository, and go at the end.
outside=$(mktemp -d "${TMPDIR:-/tmp}/evloop-packaging.XXXXXX")
trap 'rm -rf "$outside"' EXIT
# The tests and examples where they sit in the repository, with the C header some tests read
# (include/evloop.h), and never the package's sources (bindings/python/evloop).
copy=$outside/copy
mkdir -p "$copy/bindings/python"
cp -r "$root/bindings/python/tests" "$root/bindings/python/examples" "$copy/bindings/python/"
cp -r "$root/include" "$copy/"
# pytest would take the repository's pyproject.toml as its config only from inside the tree;
# out here it needs the plugin switches that config holds.
printf '[pytest]\naddopts = -p no:asyncio -p no:anyio\n' >"$copy/bindings/python/tests/pytest.ini"
pins=$("$py" - "$root/pyproject.toml" <<'EOF'
import sys, tomllib
with open(sys.argv[1], "rb") as f:
    print(" ".join(tomllib.load(f)["project"]["optional-dependencies"]["test"]))
EOF
)

# check VENV WHAT TEST...: a smoke run, then the tests, from outside the tree.
check() {
    local vpy=$1/bin/python what=$2
    shift 2
    (cd "$outside" && "$vpy" -c 'import asyncio, evloop, sys
assert "site-packages" in evloop.__file__, evloop.__file__
print("=== packaging:", sys.argv[1], "from", evloop.__file__)
print("=== packaging:", evloop.run(asyncio.sleep(0, "ok")), "backends", evloop.backends(),
      "left out", evloop.backends_left_out())' "$what") || fail "$what: the smoke run failed"
    (cd "$copy/bindings/python/tests" && timeout 600 "$vpy" -m pytest -q -p no:cacheprovider -rs "$@") ||
        fail "$what: the tests failed against the installed package"
}
full_tests=(test_lifecycle.py test_aio_loop.py test_aio_transport.py test_aio_sock.py
    "test_bench.py::test_example_echo_server_and_client_run"
    "test_bench.py::test_example_worker_pool_runs"
    "test_bench.py::test_example_drive_from_asyncio_runs"
    "test_bench.py::test_example_experiment_runs")

# ---- the sdist, installed with only a compiler ------------------------------------------------
tools=$work/tools
if ! "$tools/bin/python" -c 'import build' 2>/dev/null; then
    rm -rf "$tools"
    "$py" -m venv "$tools"
    "$tools/bin/pip" install -q --disable-pip-version-check build
fi
rm -rf "$work/dist"
"$tools/bin/python" -m build --sdist --outdir "$work/dist" "$root" >"$work/sdist-build.log" 2>&1 ||
    { tail -20 "$work/sdist-build.log" >&2; fail "python -m build --sdist failed"; }
sdist=$(ls "$work"/dist/pyevloop-*.tar.gz)
echo "=== packaging: built $(basename "$sdist")"

cc_only=$outside/cc-only
mkdir -p "$cc_only" "$outside/no-pkgconfig" "$outside/home"
for t in cc c++ as ld ar; do
    command -v "$t" >/dev/null || fail "no $t: the sdist's one requirement is a C/C++ compiler"
done
for t in cc gcc c++ g++ cpp as ld ar ranlib nm objcopy strip; do
    if p=$(command -v "$t"); then
        ln -s "$(readlink -f "$p")" "$cc_only/$t"
    fi
done
"$py" -m venv "$outside/sdist"
log=$work/sdist-install.log
# CMake's find_program also looks in /usr/bin, whatever PATH says: an empty PKG_CONFIG_LIBDIR
# makes a pkg-config there find nothing, as on a machine without liburing-dev.
if ! env -i HOME="$outside/home" TMPDIR="${TMPDIR:-/tmp}" \
    PATH="$outside/sdist/bin:$cc_only" PKG_CONFIG_LIBDIR="$outside/no-pkgconfig" \
    "$outside/sdist/bin/python" -m pip install -v --no-cache-dir --disable-pip-version-check \
    "$sdist" >"$log" 2>&1; then
    tail -40 "$log" >&2
    fail "pip install of the sdist with only a compiler failed (log: $log)"
fi
grep -q 'evloop python: the io_uring backend is left out: ' "$log" ||
    fail "the sdist's build did not say that it left io_uring out (log: $log)"
grep -E 'Found pybind11: .*pip-build-env' "$log" >/dev/null ||
    fail "the sdist's build did not take pybind11 from PyPI (log: $log)"
echo "=== packaging: sdist installed with only a compiler;" \
    "$(grep -m1 -o 'the io_uring backend is left out: .*' "$log")"
"$outside/sdist/bin/pip" install -q --disable-pip-version-check pytest
check "$outside/sdist" sdist "${full_tests[@]}"

# ---- the wheels, one per Python ---------------------------------------------------------------
EVLOOP_WHEEL_PYTHONS="${pythons[*]}" bash "$root/bindings/python/build_wheel.sh" "$work/wheel" ||
    fail "build_wheel.sh failed"
tested=()
for p in "${pythons[@]}"; do
    tag=$(tag_of "$p")
    wheel=$(ls "$work"/wheel/wheelhouse/pyevloop-*-"$tag-$tag"-*manylinux*.whl) ||
        fail "no $tag wheel in $work/wheel/wheelhouse"
    venv=$outside/wheel-$tag
    "$p" -m venv "$venv"
    # the wheel alone, with no index: nothing of it may need building
    "$venv/bin/pip" install -q --disable-pip-version-check --no-index "$wheel" ||
        fail "pip install $wheel failed"
    if [ "$p" = "$py" ]; then
        # shellcheck disable=SC2086 # the pins are words
        "$venv/bin/pip" install -q --disable-pip-version-check $pins
        check "$venv" "wheel $tag" "${full_tests[@]}" test_servers.py
    else
        "$venv/bin/pip" install -q --disable-pip-version-check pytest
        check "$venv" "wheel $tag" "${full_tests[@]}"
    fi
    tested+=("$(basename "$wheel")")
done
echo "=== packaging: passed in $((SECONDS - start)) s (sdist $(basename "$sdist"); wheels" \
    "${tested[*]}; pyenv's CPythons not found: ${missing[*]:-none})"
