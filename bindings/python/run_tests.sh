#!/usr/bin/env bash
# The Python bindings' test command: installs what is missing (Debian 12), builds and
# installs the evloop package into a fresh virtualenv with pip (as a user would), and
# runs the pytest suite under bindings/python/tests. Exits non-zero when anything fails,
# and also when pytest collects no test.
#
#   bash bindings/python/run_tests.sh [pytest args...]
#
# Environment: PYTHON (default python3) picks the interpreter; EVLOOP_PY_OUT (default
# build-python under the repository) holds the venv and the CMake build; EVLOOP_PY_BUILD_DIR
# (default $EVLOOP_PY_OUT/cmake) keeps the CMake build between runs, EVLOOP_PY_CLEAN=1
# starts it afresh.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
# pytest runs from bindings/python/tests, where a test file is named as it is there
# (test_bench.py); a path that names a file or folder from where this was started (such as
# bindings/python/tests/test_bench.py from the repository root) is made absolute instead.
args=()
for a in "$@"; do
    p="${a%%::*}"
    if [[ "$a" != -* && -d "$p" && ! -e "$root/bindings/python/tests/$p" ]]; then
        a="$(cd "$p" && pwd)"
    elif [[ "$a" != -* && -f "$p" && ! -e "$root/bindings/python/tests/$p" ]]; then
        a="$(cd "$(dirname "$p")" && pwd)/${a##*/}"
    fi
    args+=("$a")
done
cd "$root"

if [ -f .ci/install-deps ]; then
    bash .ci/install-deps
fi

py="${PYTHON:-python3}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
apt_install() {
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$@"
}
# Python.h for the extension (Debian's python3 has it only with python3-dev), and venv.
if ! "$py" -c 'import os, sys, sysconfig
sys.exit(0 if os.path.exists(os.path.join(sysconfig.get_paths()["include"], "Python.h")) else 1)'
then
    apt_install python3-dev
fi
if ! "$py" -c 'import venv, ensurepip' 2>/dev/null; then
    apt_install python3-venv
fi
# CPython's own asyncio tests, for the conformance harness (tests/asyncio_conformance.py):
# Debian ships them apart, as libpython3.X-testsuite. Best effort: without them that test
# module skips with the reason.
if ! "$py" -c 'import test.test_asyncio.utils' 2>/dev/null; then
    ver="$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')"
    if [ "$("$py" -c 'import sys; print(sys.prefix)')" = "/usr" ]; then
        apt_install "libpython${ver}-testsuite" || echo "run_tests.sh: libpython${ver}-testsuite not installed: the asyncio conformance tests will skip" >&2
    fi
fi

out="$(realpath -m "${EVLOOP_PY_OUT:-$root/build-python}")" # relative: to the repository
venv="$out/venv"
build_dir="$(realpath -m "${EVLOOP_PY_BUILD_DIR:-$out/cmake}")"
[ "${EVLOOP_PY_CLEAN:-0}" = "1" ] && rm -rf "$build_dir"
rm -rf "$venv"
mkdir -p "$out"
echo "=== venv $venv ($("$py" --version))"
"$py" -m venv "$venv"
vpy="$venv/bin/python"
"$vpy" -m pip install -q --upgrade pip
echo "=== pip install . (build dir $build_dir)"
"$vpy" -m pip install -q -Cbuild-dir="$build_dir" ".[test]"

# Run from the tests folder so that `import evloop` is the installed package, never the
# sources under bindings/python/evloop.
cd "$root/bindings/python/tests"
"$vpy" -c 'import evloop, sys; print("=== evloop", evloop.__version__, "from", evloop.__file__,
      "backends", evloop.backends()); sys.exit(0 if "site-packages" in evloop.__file__ else 1)'
set +e
timeout 1800 "$vpy" -m pytest -p no:cacheprovider -q -rs ${args[@]+"${args[@]}"}
rc=$?
set -e
if [ "$rc" -eq 5 ]; then
    echo "run_tests.sh: pytest collected no tests: failing" >&2
    exit 1
fi
exit "$rc"
