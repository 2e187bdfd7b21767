"""CPython's own asyncio tests against evloop's asyncio loop (asyncio_conformance.py): every
test that passes on the stock loop here must pass on evloop.new_event_loop, or be named in
EXCEPTIONS with the reason.

Each test runs in its own forked process with a timeout (asyncio_conformance.py), once. A
test that fails on evloop is then run on the stock loop: it counts as a regression unless
the stock loop fails it too (then it is this machine's, not evloop's: no network, say).
Nothing is retried on evloop: a failure there is a failure. Both suites take about 10 s
(mixins) and 30 s (library) on a 2-vCPU machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Dict, List

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "asyncio_conformance.py")

# Tests of stdlib internals that evloop's loop cannot pass by design, each with the reason.
# None at present: every test the stock loop passes here passes on evloop (3.11, 3.12, 3.13).
EXCEPTIONS: Dict[str, str] = {}

try:
    import test.test_asyncio  # noqa: F401
    from test.test_asyncio import utils as _utils  # noqa: F401
    HAVE_TESTS = True
    WHY = ""
except ImportError as e:  # Debian's python3 ships the test package separately
    HAVE_TESTS = False
    WHY = f"this Python has no test.test_asyncio ({e}): install its test package"

pytestmark = [pytest.mark.skipif(not HAVE_TESTS, reason=WHY),
              pytest.mark.skipif(not sys.platform.startswith("linux"), reason="Linux only")]


def harness(tmp_path, loop: str, suite: str, tests: List[str] = (), tag: str = "") -> dict:
    out = tmp_path / f"{loop}-{suite}{tag}.json"
    cmd = [sys.executable, HARNESS, "--loop", loop, "--suite", suite, "--jobs", "2",
           "--timeout", "90", "--json", str(out)]
    if tests:
        listing = tmp_path / f"{loop}-{suite}{tag}.txt"
        listing.write_text("\n".join(tests) + "\n")
        cmd += ["--tests", str(listing)]
    proc = subprocess.run(cmd, cwd=str(tmp_path), capture_output=True, text=True, timeout=1200)
    sys.stdout.write(proc.stdout[-3000:])
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(out.read_text())


def failing(report: dict) -> List[str]:
    return sorted(t for t, r in report["results"].items() if r["status"] not in ("pass", "skip"))


def check_suite(tmp_path, suite: str, minimum: int) -> None:
    ev = harness(tmp_path, "evloop", suite)
    assert len(ev["results"]) >= minimum, f"only {len(ev['results'])} tests collected"
    bad = failing(ev)
    regressions = {}
    if bad:
        stock = harness(tmp_path, "stock", suite, bad, "-stock")
        for t in bad:
            if t in EXCEPTIONS:
                continue
            if stock["results"].get(t, {}).get("status") in ("pass", "skip"):
                r = ev["results"][t]
                regressions[t] = f"{r['status']}: {r.get('detail', '')[-1500:]}\n" \
                                 f"{r.get('output', '')[-1500:]}"
    assert not regressions, "fail on evloop, pass on the stock loop:\n" + "\n\n".join(
        f"{t}\n{why}" for t, why in regressions.items())
    if suite == "mixins":  # every mixin test made an evloop loop (else "noloop", a failure)
        made = [r.get("loops") for r in ev["results"].values() if r["status"] == "pass"]
        assert made and all(made), "a mixin test passed without making an evloop loop"


def test_loop_implementation_mixins_pass_on_evloop(tmp_path):
    check_suite(tmp_path, "mixins", minimum=100)


def test_library_modules_pass_with_evloop_as_the_default_loop(tmp_path):
    check_suite(tmp_path, "library", minimum=500)


def test_the_harness_catches_a_broken_loop(tmp_path):
    """A loop whose selector never reports an fd writable must fail the harness: the checks
    above cannot pass whatever the loop does."""
    script = tmp_path / "broken.py"
    script.write_text(
        "import sys, evloop._aio as a\n"
        f"sys.path.insert(0, {HERE!r})\n"
        "import asyncio_conformance as c\n"
        "a._C_ANY_WRITE = 0\n"
        "sys.exit(c.main(sys.argv[1:]))\n")
    out = tmp_path / "broken.json"
    subprocess.run([sys.executable, str(script), "--loop", "evloop", "--filter",
                    r"test_events\..*test_writer_callback$|test_sock_lowlevel\..*test_sock_client_ops$",
                    "--timeout", "10", "--json", str(out)],
                   cwd=str(tmp_path), capture_output=True, timeout=300, check=True)
    report = json.loads(out.read_text())
    assert len(report["results"]) == 2
    assert all(r["status"] in ("fail", "error", "hang") for r in report["results"].values()), report
