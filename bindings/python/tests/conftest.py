"""Shared fixtures: every loop-level test runs for both ingress variants x every backend
that starts on this machine (evloop.backends()), as separate test ids
(test_x[arena-epoll], test_x[chunk-io_uring], ...). Waits have deadlines, never bare
sleeps that a slow machine could outrun."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
import time
from typing import Callable, Iterator, Optional

import pytest

import evloop

# Under `python -X dev` every new asyncio loop starts in debug mode, a configuration of its
# own: the tests that check it set it (loop.set_debug(True)), the others check the default
# mode and would test something else. So new loops start with debug off here as in a plain
# run, and the rest of -X dev (the debug allocator's checks, faulthandler, ResourceWarnings)
# stays on for the whole suite. PYTHONASYNCIODEBUG set by hand is left to do what it says.
if sys.flags.dev_mode and not os.environ.get("PYTHONASYNCIODEBUG"):
    import asyncio.coroutines

    asyncio.coroutines._is_debug_mode = lambda: False

COMBOS = [(v, b) for v in evloop.variants() for b in evloop.backends()]
COMBO_IDS = [f"{v}-{b}" for v, b in COMBOS]

@pytest.fixture(params=COMBOS, ids=COMBO_IDS)
def aloop(request):
    """An evloop asyncio loop of each variant and backend, closed after the test."""
    variant, backend = request.param
    loop = evloop.new_event_loop(variant=variant, backend=backend)
    try:
        yield loop
    finally:
        if not loop.is_closed():
            loop.close()


# The asyncio loops the evloop loop is compared with, by name.
AIO_LOOPS = {"stock": asyncio.SelectorEventLoop, "evloop": evloop.new_event_loop}


def on_both_loops(scenario):
    """scenario(loop) on the stock loop and on evloop's: [stock's, evloop's] outcome."""
    out = []
    for make in (AIO_LOOPS["stock"], AIO_LOOPS["evloop"]):
        loop = make()
        try:
            out.append(scenario(loop))
        finally:
            if not loop.is_closed():
                loop.close()
    return out


def raised(fn):
    """(type, message) of what fn() raised, or None: a scenario's outcome to compare."""
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return type(e), str(e)
    return None


DEADLINE = 20.0  # seconds: generous for a loaded 2-core machine


def child(code: str, *argv: str, flags: tuple = (), env: Optional[dict] = None,
          timeout: float = DEADLINE) -> tuple:
    """(returncode, stdout, stderr) of `python [flags] -c code argv...` in a fresh process, for
    what could hang or abort the test's own: returncode "timeout" when it ran past timeout
    (the child is killed)."""
    full_env = dict(os.environ, **(env or {}))
    try:
        p = subprocess.run([sys.executable, *flags, "-c", code, *argv], capture_output=True,
                           text=True, env=full_env, timeout=timeout)
    except subprocess.TimeoutExpired as e:
        return "timeout", e.stdout or "", e.stderr or ""
    return p.returncode, p.stdout, p.stderr


def wait_until(pred: Callable[[], bool], timeout: float = DEADLINE, step: float = 0.001) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if pred():
            return True
        time.sleep(step)
    return pred()


def c_holds(handle: "evloop.TimerHandle") -> bool:
    """True while the C library holds its reference to the timer (the C arg): armed, or a
    cancel from another thread not yet done by the loop thread."""
    return sys.getrefcount(handle._t) > 2  # the handle's slot and getrefcount's argument


class LoopThread:
    """A loop running on its own thread; join() stops it and re-raises what run() raised."""

    def __init__(self, loop: evloop.Loop):
        self.loop = loop
        self.error: Optional[BaseException] = None
        self.thread = threading.Thread(target=self._main, daemon=True)

    def _main(self) -> None:
        try:
            self.loop.run()
        except BaseException as e:  # noqa: BLE001 - handed to the test
            self.error = e

    def start(self) -> "LoopThread":
        self.thread.start()
        assert wait_until(lambda: self.loop.state in (evloop.State.RUNNING, evloop.State.SLEEPING)
                          or not self.thread.is_alive())
        return self

    def join(self, timeout: float = DEADLINE) -> None:
        self.loop.stop()
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "run() did not return after stop()"
        if self.error is not None:
            raise self.error

    def call(self, fn: Callable[[], object], timeout: float = DEADLINE) -> object:
        """Runs fn on the loop thread and returns its result."""
        done = threading.Event()
        box: list = []

        def task() -> None:
            try:
                box.append((True, fn()))
            except BaseException as e:  # noqa: BLE001
                box.append((False, e))
            done.set()

        self.loop.submit(task)
        assert done.wait(timeout), "loop did not run the task"
        ok, val = box[0]
        if not ok:
            raise val
        return val


@pytest.fixture(params=COMBOS, ids=COMBO_IDS)
def combo(request: pytest.FixtureRequest) -> tuple:
    return request.param


@pytest.fixture
def loop(combo: tuple) -> Iterator[evloop.Loop]:
    variant, backend = combo
    lp = evloop.Loop(backend=backend, variant=variant)
    try:
        yield lp
    finally:
        lp.stop()
        try:
            lp.close()
        except evloop.Error:
            pass  # still running on a thread a failed test left behind


@pytest.fixture
def running(loop: evloop.Loop) -> Iterator[LoopThread]:
    lt = LoopThread(loop).start()
    try:
        yield lt
    finally:
        lt.join()


@pytest.fixture(params=[True, False], ids=["lazygil", "eagergil"])
def lazy_gil(request: pytest.FixtureRequest) -> Iterator[bool]:
    """Runs a test with the GIL kept across a batch of callbacks (default) and without."""
    from evloop import _arena, _chunk

    for m in (_arena, _chunk):
        m._set_lazy_gil(request.param)
    try:
        yield request.param
    finally:
        for m in (_arena, _chunk):
            m._set_lazy_gil(True)
