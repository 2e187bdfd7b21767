#!/usr/bin/env bash
# Real applications' own test suites on the stock asyncio loop and on evloop's: tornado
# (its wheel's tornado.test.runtests) and anyio (its sdist's tests/, asyncio backend), each
# run twice in the given venv, once per loop, evloop installed as a user installs it
# (asyncio.set_event_loop_policy(evloop.EventLoopPolicy()), by tests/apps/hook/
# sitecustomize.py in every Python process of the run). The modules of the tests that fail
# on one loop only are run once more on both. Exits 1 when evloop passes fewer
# tests than the stock loop, when a test that passes on the stock loop does not pass on
# evloop, or when the loop counts do not show that each run used its loop.
# See tests/apps/README.md.
#
#   bash tests/apps/run.sh [PYTHON]
#
# PYTHON (or $EVLOOP_APPS_PY; default build-python/venv/bin/python, what
# bindings/python/run_tests.sh builds): the python of a venv with evloop installed; the
# pinned versions of tests/apps/requirements.txt are installed into it. $EVLOOP_APPS_OUT
# (default build-apps) holds the downloads, the wheels and the run (run/);
# $EVLOOP_APPS_SUITES (default "tornado anyio") picks suites; $EVLOOP_APPS_TIMEOUT (default
# 900) limits each suite run, in seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
here=$root/tests/apps
py=${1:-${EVLOOP_APPS_PY:-$root/build-python/venv/bin/python}}
out=$(realpath -m "${EVLOOP_APPS_OUT:-$root/build-apps}")
suites=${EVLOOP_APPS_SUITES:-tornado anyio}
limit=${EVLOOP_APPS_TIMEOUT:-900}
start=$SECONDS

fail() {
    echo "apps: FAIL: $*" >&2
    exit 1
}
[ -x "$py" ] || fail "no python at $py (give the venv's python as argument or EVLOOP_APPS_PY)"
py=$(realpath -s "$py")
mkdir -p "$out"
cd "$out" # never the repository root: `import evloop` must find the installed package
"$py" -c 'import evloop, sys
evloop.EventLoopPolicy
sys.exit(0 if "site-packages" in evloop.__file__ else 1)' ||
    fail "$py has no installed evloop (bindings/python/run_tests.sh installs it)"

# --- what the suites need, pinned; wheels are kept per interpreter, so a second run installs
# without the network.
req=$here/requirements.txt
tag=$("$py" -c 'import sys, sysconfig
print(sys.implementation.cache_tag + "-" + sysconfig.get_platform())')
wheels=$out/wheels/$tag
pip=("$py" -m pip --disable-pip-version-check)
if ! "${pip[@]}" install -q --no-index --find-links "$wheels" -r "$req" 2>/dev/null; then
    echo "=== apps: downloading and building the pinned wheels into $wheels"
    "${pip[@]}" wheel -q -w "$wheels" -r "$req"
    "${pip[@]}" install -q --no-index --find-links "$wheels" -r "$req"
fi
tornado_version=$(sed -n 's/^tornado==//p' "$req")
anyio_version=$(sed -n 's/^anyio==//p' "$req")
sdist=$out/dl/anyio-$anyio_version.tar.gz
if [ ! -f "$sdist" ]; then # anyio's tests are only in its sdist
    "${pip[@]}" download -q --no-binary :all: --no-deps -d "$out/dl" "anyio==$anyio_version"
fi

run=$out/run
rm -rf "$run"
mkdir -p "$run"
tar xzf "$sdist" -C "$run"
anyio_src=$run/anyio-$anyio_version
echo "=== apps: $("$py" --version), evloop $("$py" -c 'import evloop; print(evloop.__version__,
    evloop.backends()[0])'), tornado $tornado_version, anyio $anyio_version; run in $run"

export PYTHONPATH=$here/hook:$here${PYTHONPATH:+:$PYTHONPATH}
export PYTEST_DISABLE_PLUGIN_AUTOLOAD=1 # the plugins anyio's pyproject names, nothing else
# tornado's AsyncTestCase waits 5 s by default, which a loaded 2-vCPU machine can exceed on
# either loop (its tests of timeouts set their own); tornado reads this for slow machines.
export ASYNC_TEST_TIMEOUT=${ASYNC_TEST_TIMEOUT:-30}
unset EVLOOP_APPS_LOOP EVLOOP_APPS_COUNTS EVLOOP_APPS_RESULTS

# set_cmd SUITE: cmd=(the command that runs SUITE; test ids given after it select tests)
set_cmd() {
    case $1 in
    tornado) cmd=("$py" "$here/tornado_suite.py") ;;
    # -m "not network": anyio marks the tests that need the Internet; anyio_plugin
    # deselects the cases parametrised for trio and uvloop (other loops than asyncio's).
    anyio) cmd=("$py" -m pytest -p no:cacheprovider -p anyio_plugin -q -m "not network"
        --durations=10) ;;
    esac
}

# run_suite SUITE LOOP [SEL...]: runs SUITE (those modules or files only, if given) on LOOP in
# SUITE's folder, writing results.json (rerun.json with SEL) and the log under $run/SUITE/LOOP.
run_suite() {
    local suite=$1 loop=$2 dir=$run/$1/$2 t0=$SECONDS rc=0 name=results log=log cwd
    local counts=$dir/counts
    shift 2
    [ $# -gt 0 ] && name=rerun log=rerun.log counts=$dir/counts-rerun
    cwd=$dir
    [ "$suite" = anyio ] && cwd=$anyio_src
    mkdir -p "$counts"
    set_cmd "$suite"
    (cd "$cwd" && EVLOOP_APPS_LOOP=$loop EVLOOP_APPS_COUNTS=$counts \
        EVLOOP_APPS_RESULTS=$dir/$name.json timeout "$limit" "${cmd[@]}" "$@") \
        >"$dir/$log" 2>&1 || rc=$?
    echo "=== apps: $suite on $loop${1:+, again: $*}: exit $rc in" \
        "$((SECONDS - t0)) s (log: $dir/$log)"
}

for suite in $suites; do
    case $suite in
    tornado) version=$tornado_version ;;
    anyio) version=$anyio_version ;;
    *) fail "unknown suite $suite (tornado, anyio)" ;;
    esac
    mkdir -p "$run/$suite"
    echo "$version" >"$run/$suite/version"
    for loop in stock evloop; do
        run_suite "$suite" "$loop"
    done
    # The modules of what failed on one loop only, once more on both loops, back to back:
    # a test that fails twice on one loop and passes twice on the other is a difference.
    mapfile -t sel < <("$py" "$here/compare.py" rerun-plan "$run" "$suite")
    if [ "${#sel[@]}" -gt 0 ]; then
        for loop in stock evloop; do
            run_suite "$suite" "$loop" "${sel[@]}"
        done
    fi
done

rc=0
# shellcheck disable=SC2086 # the suite names are words
"$py" "$here/compare.py" report "$run" $suites || rc=$?
echo "=== apps: $((SECONDS - start)) s in all"
exit "$rc"
