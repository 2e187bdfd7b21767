"""Injected and real faults under evloop's asyncio loop, compared with the stock loop: each
scenario of aio_fault_scenarios.py runs in a process of its own with faultshim.c preloaded
(LD_PRELOAD: a window of accept/recv/send/sendfile calls fails with a chosen errno on one fd;
the calls are counted), once on asyncio.SelectorEventLoop and once per evloop loop, and what
it saw must be the same (``compare``), and what the stock loop does (written out here, so
that a scenario that stops testing anything fails too). The faults, and the expected
outcome, the stock loop's:

- accept() with EMFILE/ENFILE/ENOBUFS/ENOMEM: each failure to the exception handler ("socket.
  accept() out of system resource"), the reader removed and added back after
  ACCEPT_RETRY_DELAY (rounds of failures separated by re-adds), the other connections served
  meanwhile, the waiting client served once it clears; and no busy loop: the loop's
  iterations over the fault stay few (counted, not timed);
- send() with ENOBUFS/ENOMEM/ECONNRESET/EPIPE under write() (at once: evloop's native path;
  from the buffer: the stdlib's _write_ready) and sock_sendall, recv() with ECONNRESET/
  ENOBUFS under the read callback (native) and sock_recv: fatal, connection_lost(exc), no
  exception handler call; the sock_* calls raise it;
- a real peer reset (SO_LINGER 0) or close while a large buffered write or a loop.sendfile()
  is pending: connection_lost / sendfile raising ConnectionResetError or BrokenPipeError;
- EINTR from accept, recv, send and sendfile: retried (PEP 475; evloop's native paths do the
  same), nothing lost, nothing reported;
- the loop closed, or dropped unclosed, with servers, transports (a buffered write), a pending
  task and call_soon_threadsafe callbacks pending while another thread keeps calling
  call_soon_threadsafe: the same warnings, log records and exceptions, nothing run, nothing
  kept alive, no crash, no hang; close() and run_forever() inside the running loop raise.

The shim needs a C compiler (cc): without one these tests skip, saying so."""

from __future__ import annotations

import asyncio
import errno
import functools
import inspect
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Tuple

import pytest

import evloop

HERE = Path(__file__).resolve().parent
SCENARIOS = HERE / "aio_fault_scenarios.py"
RUN_TIMEOUT = 180  # seconds per scenario process: its own waits are DEADLINE (20 s) each

# evloop's loops compared with the stock one: each backend here (the arena variant; the
# lifecycle scenarios, where call_soon_threadsafe's ingress matters, on both variants).
KINDS = [f"evloop-arena-{b}" for b in evloop.backends()]
ALL_KINDS = [f"evloop-{v}-{b}" for v in evloop.variants() for b in evloop.backends()]


@pytest.fixture(scope="session")
def shim(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """faultshim.so, compiled from faultshim.c for this session."""
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc") or \
        shutil.which("clang")
    if not cc:
        pytest.skip("no C compiler (cc) to build the LD_PRELOAD fault shim faultshim.c")
    out = tmp_path_factory.mktemp("faultshim") / "faultshim.so"
    r = subprocess.run([cc, "-shared", "-fPIC", "-O2", "-Wall", "-o", str(out),
                        str(HERE / "faultshim.c"), "-ldl"], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the fault shim did not compile with {cc}: {r.stderr.strip()[:500]}")
    return out


def run(shim: Path, scenario: str, kind: str, *args: str) -> Dict[str, Any]:
    """One scenario on one loop, in a process of its own with the shim preloaded."""
    env = dict(os.environ)
    env.pop("PYTHONASYNCIODEBUG", None)  # debug mode takes other paths
    env["LD_PRELOAD"] = " ".join(p for p in (str(shim), env.get("LD_PRELOAD", "")) if p)
    cmd = [sys.executable, str(SCENARIOS), scenario, kind, *args]
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=RUN_TIMEOUT)
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"{' '.join(cmd[1:])}: no result in {RUN_TIMEOUT} s (a hang)\n"
                             f"{e.stdout}\n{e.stderr}") from None
    lines = [ln for ln in r.stdout.splitlines() if ln.startswith("OUTCOME ")]
    if r.returncode != 0 or not lines:
        raise AssertionError(f"{' '.join(cmd[1:])}: exit {r.returncode}\n"
                             f"{r.stdout[-3000:]}\n{r.stderr[-6000:]}")
    return json.loads(lines[-1][len("OUTCOME "):])  # type: ignore[no-any-return]


@functools.lru_cache(maxsize=None)
def _stock(shim: Path, scenario: str, args: Tuple[str, ...]) -> Dict[str, Any]:
    return run(shim, scenario, "stock", *args)


def both(shim: Path, scenario: str, kind: str,
         *args: str) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    """The stock loop's outcome (once per scenario and arguments) and evloop's (kind's)."""
    return _stock(shim, scenario, args), run(shim, scenario, kind, *args)


def os_error(name: str, cls: str = "OSError") -> list:
    e = getattr(errno, name)
    return [cls, e, f"[Errno {e}] {os.strerror(e)}"]


# --------------------------------------------------------------------------------- accept

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("err", ["EMFILE", "ENFILE", "ENOBUFS", "ENOMEM"])
def test_accept_out_of_resources_backs_off_serves_the_others_and_then_the_waiting_client(
        shim: Path, err: str, kind: str) -> None:
    stock, ours = both(shim, "accept", kind, err)
    assert ours["compare"] == stock["compare"]
    assert stock["compare"] == {
        "contexts": [["socket.accept() out of system resource", os_error(err),
                      ["exception", "message", "socket"]]],
        "one_context_per_failure": True,
        "failures_per_round": [100],  # backlog's worth of tries per readiness (the stdlib's)
        "rounds_and_re_adds_alternate": True,
        "accepts_beyond_the_failures": 2,  # the waiting client's, then EAGAIN
        "echoes_during_the_fault": ["a1", "a2", "a3"],
        "connections_during_the_fault": 1,
        "waiting_client_echo": "b",
        "connections": 2,
    }
    for outcome in (stock, ours):
        # no busy loop: each round waits ACCEPT_RETRY_DELAY asleep (a few iterations a
        # round, a few more for the echoes); a loop spinning meanwhile makes thousands
        c = outcome["check"]
        assert c["rounds"] >= 2
        assert c["iterations"] <= 30 * c["rounds"] + 60, c


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("err", ["EMFILE", "ENFILE"])
def test_sock_accept_out_of_resources_raises_and_the_client_waits_for_the_next(
        shim: Path, err: str, kind: str) -> None:
    stock, ours = both(shim, "sock_accept", kind, err)
    assert ours["compare"] == stock["compare"]
    # the first try (nothing queued), the reader's (failed), the next sock_accept's
    assert stock["compare"] == {"first": os_error(err), "then": "q", "calls": 3,
                                "contexts": []}


# ------------------------------------------------------------------------ send and recv

WRITES = [("ENOBUFS", "at_once"), ("ENOMEM", "at_once"), ("ECONNRESET", "at_once"),
          ("EPIPE", "at_once"), ("ENOBUFS", "buffered"), ("ENOMEM", "buffered"),
          ("ENOBUFS", "sock_sendall"), ("EPIPE", "sock_sendall")]
_EXC = {"ECONNRESET": "ConnectionResetError", "EPIPE": "BrokenPipeError"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("err,how", WRITES, ids=[f"{e}-{h}" for e, h in WRITES])
def test_a_send_error_is_fatal_to_the_transport_as_in_the_stdlib(
        shim: Path, err: str, how: str, kind: str) -> None:
    stock, ours = both(shim, "write", kind, err, how)
    assert ours["compare"] == stock["compare"]
    exc = os_error(err, _EXC.get(err, "OSError"))
    if how == "sock_sendall":
        assert stock["compare"] == {"sock_sendall": exc, "failed": 1, "contexts": [],
                                    "peer": "eof"}
        return
    lost = "reset-or-pipe" if err in _EXC else "OSError"
    log = [["made"]] + ([["pause_writing"]] if how == "buffered" else []) + [["lost", lost]]
    assert stock["compare"] == {"log": log, "exc": exc, "buffered_before": int(how == "buffered"),
                                "failed": 1, "contexts": [], "closing": True, "left": 0,
                                "peer": "eof"}


READS = [("ECONNRESET", "transport"), ("ENOBUFS", "transport"), ("ECONNRESET", "sock_recv"),
         ("ENOBUFS", "sock_recv")]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("err,how", READS, ids=[f"{e}-{h}" for e, h in READS])
def test_a_recv_error_is_fatal_to_the_transport_as_in_the_stdlib(
        shim: Path, err: str, how: str, kind: str) -> None:
    stock, ours = both(shim, "read", kind, err, how)
    assert ours["compare"] == stock["compare"]
    exc = os_error(err, _EXC.get(err, "OSError"))
    if how == "sock_recv":
        # the reader's recv fails: sock_recv raises; the byte stays for the next sock_recv
        assert stock["compare"] == {"sock_recv": exc, "again": "x", "failed": 1,
                                    "contexts": []}
        return
    lost = "reset-or-pipe" if err in _EXC else "OSError"
    assert stock["compare"] == {"log": [["made"], ["lost", lost]], "exc": exc, "contexts": [],
                                "failed": 1, "closing": True, "peer": "reset-or-pipe"}


# ------------------------------------------------------------------ real: the peer goes

@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_peer_gone_during_a_large_buffered_write_loses_the_connection(
        shim: Path, how: str, kind: str) -> None:
    stock, ours = both(shim, "peer_mid_write", kind, how)
    assert ours["compare"] == stock["compare"]
    assert stock["compare"] == {
        "log": [["made"], ["pause_writing"], ["lost", "reset-or-pipe"]], "buffered_before": 1,
        "contexts": [], "closing": True, "left": 0}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("how", ["reset", "close"])
def test_a_peer_gone_during_sendfile_fails_it_and_the_transport_ends(
        shim: Path, how: str, kind: str) -> None:
    stock, ours = both(shim, "peer_mid_sendfile", kind, how)
    assert ours["compare"] == stock["compare"]
    c = stock["compare"]
    assert c["sendfile"] == "reset-or-pipe" and c["file_position_moved"] and c["closing"]
    assert c["contexts"] == [] and c["log"][0] == ["made"] and c["log"][-1][0] == "lost"


# ------------------------------------------------------------------------------- EINTR

@pytest.mark.parametrize("kind", KINDS)
def test_eintr_from_accept_recv_send_and_sendfile_is_retried_and_loses_nothing(
        shim: Path, kind: str) -> None:
    stock, ours = both(shim, "eintr", kind)
    assert ours["compare"] == stock["compare"]
    assert stock["compare"] == {
        "echo": True, "sock": True, "sendfile": True, "accept_eintrs": 3, "contexts": [],
        "injected": {"accept": True, "recv": True, "send": True, "sendfile": True}}


SIGNALLED = [(p, e) for p in ("write", "read", "sock_recv", "sock_sendall")
             for e in ("ValueError", "KeyboardInterrupt")]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("path,exc", SIGNALLED, ids=[f"{p}-{e}" for p, e in SIGNALLED])
def test_eintr_whose_signal_handler_raises_raises_that_as_the_stdlib(
        shim: Path, path: str, exc: str, kind: str) -> None:
    stock, ours = both(shim, "eintr_signal", kind, path, exc)
    assert ours["compare"] == stock["compare"]
    c = stock["compare"]
    assert c["failed"] == 1
    raised_exc = [exc, "from the handler"]
    if path in ("sock_recv", "sock_sendall"):  # out of the sock_* call
        assert c["propagated"] == raised_exc and c["contexts"] == []
    elif exc == "ValueError":  # a fatal transport error, reported
        assert c["propagated"] is None and c["closing"]
        assert c["log"] == [["made"], ["lost", "ValueError"]]
        assert c["contexts"][0][0] == f"Fatal {path} error on socket transport"
    else:  # KeyboardInterrupt goes up; the transport goes on
        assert (c["write"] if path == "write" else c["propagated"]) == raised_exc
        assert not c["closing"] and c["contexts"] == [] and c["peer"] == ["+more", "eof"]


# ---------------------------------------------------------- closing with work pending

@pytest.mark.parametrize("kind", ALL_KINDS)
@pytest.mark.parametrize("how", ["close", "drop"])
def test_the_loop_closed_or_dropped_with_work_pending_warns_and_raises_as_the_stock_loop(
        shim: Path, how: str, kind: str) -> None:
    stock, ours = both(shim, "close_pending", kind, how)
    assert ours["compare"] == stock["compare"]
    c = stock["compare"]
    assert c["ran"] == [] and c["callbacks_alive"] == 0 and c["buffered"]
    assert not c["hammer_alive"] and c["unraisable"] == []
    assert "ResourceWarning: unclosed transport <TRANSPORT>" in c["warnings"]
    assert c["log"] == ["ERROR: Task was destroyed but it is pending!\ntask: <Task>"]
    if how == "close":
        assert c["hammer_stopped_by"] == ["RuntimeError", "Event loop is closed"]
        assert c["after"]["call_soon_threadsafe"] == ["RuntimeError", "Event loop is closed"]
    else:
        assert "ResourceWarning: unclosed event loop <LOOP>" in c["warnings"]


# Whether BaseEventLoop.run_forever calls _run_forever_cleanup when _run_forever_setup raised
# (its setup inside the try: CPython 3.13.0).
_CLEANUP_AFTER_FAILED_SETUP = (
    "try:\n            self._run_forever_setup()"
    in inspect.getsource(asyncio.base_events.BaseEventLoop.run_forever))


@pytest.mark.parametrize("kind", KINDS)
def test_close_and_run_inside_the_running_loop_raise_as_the_stock_loop(
        shim: Path, kind: str) -> None:
    stock, ours = both(shim, "close_running", kind)
    assert ours["compare"] == stock["compare"]
    expected = {
        "close": ["RuntimeError", "Cannot close a running event loop"],
        "run_forever": ["RuntimeError", "This event loop is already running"],
        "run_until_complete": ["RuntimeError", "This event loop is already running"],
        "still_open": True, "warnings": ["RuntimeWarning: coroutine 'sleep' was never awaited"]}
    if _CLEANUP_AFTER_FAILED_SETUP:
        # CPython 3.13.0: run_forever's cleanup runs when its setup raised, so the running
        # loop counts itself stopped and the nested run_until_complete runs (both loops)
        expected.update(run_until_complete=None, warnings=[])
    assert stock["compare"] == expected
