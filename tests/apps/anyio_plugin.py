"""pytest plugin for anyio's own test suite under tests/apps/run.sh (``-p anyio_plugin``).

It deselects the cases parametrised for another loop or library (anyio_backend "trio",
"asyncio+uvloop", "asyncio+winloop": those would not test the asyncio loop that the run
installed) and, where "localhost" has no IPv6 address, test_sockets.py's IPv6 cases (see
_NO_IPV6_PARAMS), and writes each remaining test's outcome to the JSON file named by
$EVLOOP_APPS_RESULTS: {nodeid: {"outcome": passed|failed|error|skipped|xfailed|xpassed,
"longrepr": text}}. The loop itself is installed by tests/apps/hook/sitecustomize.py, for
this process and every Python process it starts.
"""

from __future__ import annotations

import json
import os
import socket
from typing import Any, Dict, List

import pytest

_OTHER_BACKENDS = ("trio", "asyncio+uvloop", "asyncio+winloop")
_results: Dict[str, Dict[str, str]] = {}


def _backend_id(item: pytest.Item) -> str:
    """The id of the item's anyio_backend parameter ("asyncio", "trio", ...), or ""."""
    callspec = getattr(item, "callspec", None)
    if callspec is None or "anyio_backend" not in callspec.params:
        return ""
    # The parameter's own id is the first dash-separated part of the callspec id that
    # names a backend (ids look like "asyncio", "trio-ipv6", "asyncio+uvloop-path").
    value = callspec.params["anyio_backend"]
    if isinstance(value, str):
        return value
    for part in callspec.id.split("-"):
        if part.split("+")[0] in ("asyncio", "trio"):
            return part
    return "asyncio"


def _localhost_has_ipv6() -> bool:
    try:
        socket.getaddrinfo("localhost", 0, socket.AF_INET6, socket.SOCK_STREAM)
    except OSError:
        return False
    return True


# Where "localhost" has no IPv6 address (an /etc/hosts without "::1 localhost", as in some
# containers), test_sockets.py's cases parametrised for IPv6 fail on every loop: their
# fixture binds ("localhost", 0) as AF_INET6. That fixture also leaks the socket it made, and
# its ResourceWarning then fails whichever test runs when it is collected; they are
# deselected there, on both loops alike.
_NO_IPV6_PARAMS = {"ipv6", "dualstack", "multi"}
_no_ipv6 = not _localhost_has_ipv6()


def _needs_ipv6_localhost(item: pytest.Item) -> bool:
    callspec = getattr(item, "callspec", None)
    return (_no_ipv6 and callspec is not None and item.nodeid.startswith("tests/test_sockets.py")
            and bool(_NO_IPV6_PARAMS & set(callspec.id.split("-"))))


def pytest_report_header(config: pytest.Config) -> str:
    return "anyio_plugin: trio and uvloop cases deselected%s" % (
        "; localhost has no IPv6 address: test_sockets.py's IPv6 cases deselected"
        if _no_ipv6 else "")


def pytest_collection_modifyitems(config: pytest.Config, items: List[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        other = _backend_id(item) in _OTHER_BACKENDS
        (drop if other or _needs_ipv6_localhost(item) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def _record(nodeid: str, outcome: str, longrepr: Any) -> None:
    text = str(longrepr) if longrepr else ""
    prev = _results.get(nodeid)
    # A failure in setup or teardown of a test that passed is an error of that test;
    # the first bad outcome wins.
    if prev is not None and prev["outcome"] not in ("passed", "skipped"):
        return
    _results[nodeid] = {"outcome": outcome, "longrepr": text[-4000:]}


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    xfail = hasattr(report, "wasxfail")
    if report.when == "call":
        if report.passed:
            _record(report.nodeid, "xpassed" if xfail else "passed", None)
        elif report.failed:
            _record(report.nodeid, "failed", report.longrepr)
        else:
            _record(report.nodeid, "xfailed" if xfail else "skipped", report.longrepr)
    elif report.failed:  # setup or teardown
        _record(report.nodeid, "error", report.longrepr)
    elif report.skipped and report.when == "setup":
        _record(report.nodeid, "xfailed" if xfail else "skipped", report.longrepr)


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    path = os.environ.get("EVLOOP_APPS_RESULTS")
    if path:
        with open(path, "w") as f:
            json.dump(_results, f, indent=0, sort_keys=True)
