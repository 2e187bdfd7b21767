"""Exceptions raised in callbacks, the exception handler, and errors as OSError."""

from __future__ import annotations

import errno
import os
import sys
import threading

import pytest

import evloop
from conftest import DEADLINE


def boom():
    raise ValueError("boom")


def test_default_handler_prints_the_traceback_and_the_loop_keeps_running(running, capfd):
    done = threading.Event()
    running.loop.submit(boom)
    running.loop.submit(done.set)
    assert done.wait(DEADLINE)
    err = capfd.readouterr().err
    assert "exception in callback" in err
    assert "ValueError: boom" in err
    assert "in boom" in err  # the traceback, not just the message


def test_custom_handler_gets_the_exception_and_the_callback(running):
    got = []
    done = threading.Event()
    running.loop.set_exception_handler(lambda exc, cb: (got.append((exc, cb)), done.set()))
    running.loop.submit(boom)
    assert done.wait(DEADLINE)
    exc, cb = got[0]
    assert isinstance(exc, ValueError) and str(exc) == "boom"
    assert exc.__traceback__ is not None
    assert cb is boom
    assert running.loop.get_exception_handler() is not None
    running.loop.set_exception_handler(None)
    assert running.loop.get_exception_handler() is None


def test_exceptions_from_timers_fds_and_microtasks_reach_the_handler(running):
    kinds = []
    done = threading.Event()

    def handler(exc, cb):
        kinds.append(str(exc))
        if len(kinds) == 3:
            done.set()

    def raiser(kind):
        raise RuntimeError(kind)

    running.loop.set_exception_handler(handler)
    r, w = os.pipe()
    try:
        running.loop.call_later(0.001, raiser, "timer")
        running.loop.queue_microtask(raiser, "microtask")

        def on_readable():
            running.loop.remove_reader(r)
            raiser("fd")

        running.loop.add_reader(r, on_readable)
        os.write(w, b"x")
        assert done.wait(DEADLINE)
    finally:
        os.close(r)
        os.close(w)
    assert sorted(kinds) == ["fd", "microtask", "timer"]


def test_a_handler_that_raises_goes_to_unraisablehook(running, monkeypatch):
    seen = []
    monkeypatch.setattr(sys, "unraisablehook", lambda u: seen.append(u))

    def bad_handler(exc, cb):
        raise KeyError("handler broke")

    done = threading.Event()
    running.loop.set_exception_handler(bad_handler)
    running.loop.submit(boom)
    running.loop.submit(done.set)
    assert done.wait(DEADLINE)
    assert len(seen) == 1
    assert isinstance(seen[0].exc_value, KeyError)


def test_set_exception_handler_rejects_non_callables(loop):
    with pytest.raises(TypeError):
        loop.set_exception_handler(3)


@pytest.mark.parametrize("exc_type", [KeyboardInterrupt, SystemExit])
def test_keyboard_interrupt_and_system_exit_stop_the_loop_and_leave_run(loop, exc_type):
    after = []

    def fatal():
        raise exc_type()

    loop.submit(fatal)
    loop.submit(after.append, "accepted before the stop still runs")
    with pytest.raises(exc_type):
        loop.run()
    assert loop.state == evloop.State.TERMINATED
    assert after == ["accepted before the stop still runs"]


def test_keyboard_interrupt_on_a_loop_thread_is_raised_there(running):
    running.loop.submit(lambda: (_ for _ in ()).throw(KeyboardInterrupt()))
    running.thread.join(DEADLINE)
    assert not running.thread.is_alive()
    assert isinstance(running.error, KeyboardInterrupt)
    running.error = None


def test_keyboard_interrupt_while_closing_is_raised_from_close(loop):
    def fatal():
        raise KeyboardInterrupt

    loop.submit(fatal)
    with pytest.raises(KeyboardInterrupt):
        loop.close()
    assert loop.closed


def test_errors_are_oserror_subclasses_with_errno():
    assert issubclass(evloop.Error, OSError)
    assert issubclass(evloop.LoopClosedError, evloop.Error)
    e = evloop.LoopClosedError(errno.ESHUTDOWN, "closed")
    assert e.errno == errno.ESHUTDOWN


def test_closed_error_carries_eshutdown_and_a_message(loop):
    loop.close()
    with pytest.raises(evloop.LoopClosedError) as ei:
        loop.submit(print)
    assert ei.value.errno == errno.ESHUTDOWN
    assert ei.value.strerror
