#!/usr/bin/env bash
# CI installs what users install: builds the sdist (python -m build --sdist) and the portable
# wheel (bindings/python/build_wheel.sh), installs each into a fresh venv outside the
# repository, and runs, against that installed package, a smoke run, the asyncio tests that
# need no extra package, and the examples (bindings/python/examples, through the tests that
# drive them), from copies outside the tree so that `import evloop` can only be the install.
#   - the sdist is installed as a user with only a compiler would: `env -i`, PATH holding the
#     venv and a folder of links to the compiler toolchain (gcc, g++, ld, as, ar, ...), and a
#     pkg-config that finds no .pc file; the build must then take CMake, Ninja and pybind11
#     from PyPI and say that it left io_uring out;
#   - the wheel must be manylinux_2_28 or older (build_wheel.sh checks it with auditwheel);
#     its venv also gets the servers of the test extra and runs tests/test_servers.py.
# Usage: tests/packaging/run.sh [WORK_DIR]   (default build-ci-packaging; the wheel's zig and
#        its cache stay in WORK_DIR/wheel between runs). PYTHON (default python3): the
#        interpreter for both, a pyenv or python.org build (see build_wheel.sh).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
work=$(realpath -m "${1:-$root/build-ci-packaging}")
py=${PYTHON:-python3}
start=$SECONDS

fail() {
    echo "packaging: FAIL: $*" >&2
    exit 1
}
py=$(command -v "$py") || fail "no $py"
# Debian's python3 keeps its headers beside the host's glibc, which the wheel's zig build must
# not see (build_wheel.sh): without PYTHON, take a pyenv Python then.
if [ -z "${PYTHON:-}" ] && [[ "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')" == /usr/* ]]; then
    for v in 3.11 3.12 3.13; do
        for cand in "${PYENV_ROOT:-$HOME/.pyenv}"/versions/"$v"*/bin/python3; do
            [ -x "$cand" ] && py=$cand && break 2
        done
    done
fi
echo "=== packaging: $py ($("$py" --version))"
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

# check VENV WHAT: a smoke run, then the tests, from outside the tree.
check() {
    local vpy=$1/bin/python what=$2
    (cd "$outside" && "$vpy" -c 'import asyncio, evloop, sys
assert "site-packages" in evloop.__file__, evloop.__file__
print("=== packaging:", sys.argv[1], "from", evloop.__file__)
print("=== packaging:", evloop.run(asyncio.sleep(0, "ok")), "backends", evloop.backends(),
      "left out", evloop.backends_left_out())' "$what") || fail "$what: the smoke run failed"
    local tests=(test_lifecycle.py test_aio_loop.py test_aio_transport.py test_aio_sock.py
        "test_bench.py::test_example_echo_server_and_client_run"
        "test_bench.py::test_example_worker_pool_runs"
        "test_bench.py::test_example_drive_from_asyncio_runs"
        "test_bench.py::test_example_experiment_runs")
    if [ "$what" = wheel ]; then
        tests+=(test_servers.py)
    fi
    (cd "$copy/bindings/python/tests" && timeout 600 "$vpy" -m pytest -q -p no:cacheprovider -rs "${tests[@]}") ||
        fail "$what: the tests failed against the installed package"
}

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
check "$outside/sdist" sdist

# ---- the wheel ----------------------------------------------------------------------------------
EVLOOP_WHEEL_PYTHONS=$py bash "$root/bindings/python/build_wheel.sh" "$work/wheel" ||
    fail "build_wheel.sh failed"
wheel=$(ls "$work"/wheel/wheelhouse/pyevloop-*manylinux*.whl)
"$py" -m venv "$outside/wheel"
# the wheel alone, with no index: nothing of it may need building
"$outside/wheel/bin/pip" install -q --disable-pip-version-check --no-index "$wheel" ||
    fail "pip install $wheel failed"
# shellcheck disable=SC2086 # the pins are words
"$outside/wheel/bin/pip" install -q --disable-pip-version-check $pins
check "$outside/wheel" wheel
echo "=== packaging: passed in $((SECONDS - start)) s (sdist $(basename "$sdist")," \
    "wheel $(basename "$wheel"))"
