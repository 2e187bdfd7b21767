"""The embedding API from Python: run_once, fileno/backend_timeout (a loop driven from
another loop), add_signal_handler/remove_signal_handler, TimerHandle.restart, and the release
of what the loop drops at its end."""

from __future__ import annotations

import errno
import os
import select
import signal
import subprocess
import sys
import textwrap
import threading
import time

import pytest

import evloop
from conftest import DEADLINE, LoopThread, c_holds, wait_until


def test_run_once_runs_what_is_ready_and_returns_the_count(loop):
    got = []
    for i in range(3):
        loop.submit(got.append, i)
    assert loop.run_once(0) == 3
    assert got == [0, 1, 2]
    assert loop.run_once(0) == 0
    assert loop.state == evloop.State.AWAKE  # between iterations nobody runs it


def test_run_once_waits_for_a_timer(loop):
    fired = []
    loop.call_later(0.05, fired.append, 1)
    t0 = time.monotonic()
    n = 0
    while not fired and time.monotonic() - t0 < DEADLINE:
        n += loop.run_once(1.0)
    assert fired == [1] and n >= 1
    assert time.monotonic() - t0 >= 0.05


def test_run_once_after_stop_runs_what_was_accepted_then_terminates(loop):
    got = []
    loop.submit(got.append, 1)
    loop.stop()
    while loop.state != evloop.State.TERMINATED:
        loop.run_once(None)
    assert got == [1]
    with pytest.raises(evloop.LoopClosedError):
        loop.run_once(0)


def test_run_once_0_on_a_stopped_loop_runs_what_was_accepted_then_terminates(loop):
    # run_once(0) keeps the GIL (its poll cannot wait); a terminating loop's callbacks each
    # release it after they ran, and the call takes it back before it returns.
    got = []
    for i in range(3):
        loop.submit(got.append, i)
    loop.stop()
    for _ in range(100):
        if loop.state == evloop.State.TERMINATED:
            break
        loop.run_once(0)
    assert got == [0, 1, 2]
    assert loop.state == evloop.State.TERMINATED


def test_a_run_once_that_waits_lets_the_thread_that_ends_the_wait_run(loop):
    # Only run_once(0) keeps the GIL: a call that waits must let another Python thread run,
    # here the one whose submit ends the wait (else it waits out its 5 s, and the submit
    # comes after the last call). Called again only if a wait ends early with nothing run.
    got = []

    def later():
        time.sleep(0.05)
        loop.submit(got.append, 1)

    t = threading.Thread(target=later)
    t0 = time.monotonic()
    t.start()
    while not got and time.monotonic() - t0 < 4.0:
        loop.run_once(5.0)
    waited = time.monotonic() - t0
    t.join()
    assert got == [1]
    assert waited < 4.0


def test_run_once_refuses_a_bad_timeout_and_a_nested_call(loop):
    with pytest.raises(ValueError):
        loop.run_once(float("nan"))
    errors = []

    def nested():
        try:
            loop.run_once(0)
        except evloop.Error as e:
            errors.append(e.errno)

    loop.submit(nested)
    loop.run_once(0)
    assert errors and errors[0] != 0


def test_a_loop_driven_from_an_outer_select_loop(loop):
    try:
        fd = loop.fileno()
    except evloop.Error as e:
        if e.errno == errno.ENOTSUP:
            pytest.skip(f"no pollable backend fd here ({loop.backend})")
        raise
    assert fd == loop.fileno() and fd >= 0
    assert loop.run_once(0) == 0
    assert loop.backend_timeout() is None  # idle, no timer: wait for the fd
    h = loop.call_later(30, print)
    assert loop.backend_timeout() == 0  # not parked by a run_once since: call it now
    loop.run_once(0)
    assert 0 < loop.backend_timeout() <= 30
    h.cancel()
    got = []
    n = 2000

    def producer():
        for i in range(n):
            loop.submit(got.append, i)
            if i % 100 == 0:
                time.sleep(0.001)

    p = threading.Thread(target=producer)
    p.start()
    end = time.monotonic() + DEADLINE
    while len(got) < n and time.monotonic() < end:
        t = loop.backend_timeout()
        select.select([fd], [], [], 0.5 if t is None else min(t, 0.5))
        loop.run_once(0)
    p.join()
    assert got == list(range(n))


def test_a_signal_handler_runs_on_the_loop_thread(running):
    loop = running.loop
    where = []
    done = threading.Event()
    previous = signal.signal(signal.SIGUSR1, lambda s, f: where.append("python"))
    try:
        loop.add_signal_handler(signal.SIGUSR1, lambda tag: (where.append(
            (tag, threading.get_ident())), done.set()), "evloop")
        os.kill(os.getpid(), signal.SIGUSR1)
        assert done.wait(DEADLINE)
        assert where == [("evloop", running.thread.ident)]
        assert loop.remove_signal_handler(signal.SIGUSR1) is True
        assert loop.remove_signal_handler(signal.SIGUSR1) is False
        # the previous disposition is back once the loop thread has stopped the watch (from
        # this thread, a moment later: a signal sent before that is swallowed)
        assert wait_until(lambda: os.kill(os.getpid(), signal.SIGUSR1) or "python" in where,
                          step=0.01)
        assert where.count(("evloop", running.thread.ident)) == 1
    finally:
        signal.signal(signal.SIGUSR1, previous)


def test_signal_handlers_are_refused_for_sigkill_and_a_second_loop(running):
    with pytest.raises(evloop.Error):
        running.loop.add_signal_handler(signal.SIGKILL, print)
    with pytest.raises(ValueError):
        running.loop.add_signal_handler(12345, print)
    with pytest.raises(TypeError):
        running.loop.add_signal_handler(signal.SIGUSR2, None)
    running.loop.add_signal_handler(signal.SIGUSR2, print)
    other = evloop.Loop(variant=running.loop.variant)  # each variant is a library of its own
    try:
        with pytest.raises(evloop.Error):
            other.add_signal_handler(signal.SIGUSR2, print)
    finally:
        other.close()
        assert running.loop.remove_signal_handler(signal.SIGUSR2)


def test_signal_handlers_left_at_the_end_are_released(loop):
    def fn():
        pass

    before = sys.getrefcount(fn)
    loop.add_signal_handler(signal.SIGUSR2, fn)
    loop.submit(loop.stop)
    loop.run()
    assert sys.getrefcount(fn) == before
    assert loop.remove_signal_handler(signal.SIGUSR2) is False
    assert signal.getsignal(signal.SIGUSR2) == signal.SIG_DFL


def test_restart_moves_a_timer(running):
    fired = threading.Event()
    t0 = time.monotonic()
    h = running.loop.call_later(3600, fired.set)
    assert h.restart(0.02) is True
    assert fired.wait(DEADLINE)
    assert time.monotonic() - t0 >= 0.02
    assert wait_until(lambda: not h.active)
    assert h.restart(1) is False  # a one-shot that fired is no longer armed
    ticks = []
    e = running.loop.call_every(3600, ticks.append, 1)
    assert e.restart(0.01)
    assert wait_until(lambda: ticks == [1])
    assert e.cancel() and e.restart() is False


def test_timers_and_fds_left_at_the_end_are_released(loop):
    r, w = os.pipe()

    def fn():
        pass

    before = sys.getrefcount(fn)
    hs = [loop.call_later(3600, fn), loop.call_every(3600, fn)]
    loop.add_reader(r, fn)
    loop.add_writer(w, fn)
    assert all(c_holds(h) for h in hs)
    loop.close()  # never run: evloop_free stops it; the release notification drops each
    os.close(r)
    os.close(w)
    assert sys.getrefcount(fn) == before
    assert not any(c_holds(h) for h in hs) and all(h.cancelled() for h in hs)


def test_the_gil_is_released_before_the_loop_waits(loop):
    # The loop keeps the GIL across a batch of callbacks; its PREPARE hook must give it
    # back before the loop sleeps, or this thread could not run meanwhile.
    lt = LoopThread(loop).start()
    done = threading.Event()
    loop.submit_batch([lambda: None] * 100 + [done.set])
    assert done.wait(DEADLINE)
    assert wait_until(lambda: loop.state == evloop.State.SLEEPING)
    x = sum(range(100000))  # needs the GIL
    assert x and loop.stats().tasks_run == 101
    lt.join()


def test_ctrl_c_interrupts_run_once_on_the_main_thread():
    child = textwrap.dedent(
        """
        import signal, evloop
        signal.signal(signal.SIGINT, signal.default_int_handler)
        loop = evloop.Loop()
        got = []
        loop.submit(got.append, 1)
        print("ready", flush=True)
        try:
            while True:
                loop.run_once(None)
        except KeyboardInterrupt:
            print("KeyboardInterrupt", got, loop.state, flush=True)
        """
    )
    p = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        time.sleep(0.3)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=DEADLINE)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert p.returncode == 0, err
    assert "KeyboardInterrupt [1] terminating" in out or "KeyboardInterrupt [1] terminated" in out
