"""call_later / call_every and their handles."""

from __future__ import annotations

import math
import sys
import threading
import time

import pytest

import evloop
from conftest import DEADLINE, c_holds, wait_until


def test_call_later_fires_once_and_never_early(running):
    fired = []
    done = threading.Event()
    t0 = time.monotonic()

    def cb(x):
        fired.append((x, time.monotonic() - t0))
        done.set()

    h = running.loop.call_later(0.05, cb, "x")
    assert isinstance(h, evloop.TimerHandle)
    assert h.active and not h.periodic and h.interval == pytest.approx(0.05)
    assert done.wait(DEADLINE)
    assert wait_until(lambda: not h.active)
    assert len(fired) == 1
    assert fired[0][0] == "x"
    assert fired[0][1] >= 0.05
    assert h.cancel() is False
    assert h.cancelled() is False


def test_timers_fire_in_deadline_order(running):
    got = []
    done = threading.Event()
    running.loop.call_later(0.03, got.append, 3)
    running.loop.call_later(0.01, got.append, 1)
    running.loop.call_later(0.02, got.append, 2)
    running.loop.call_later(0.04, done.set)
    assert done.wait(DEADLINE)
    assert got == [1, 2, 3]


def test_cancelled_timer_never_runs(running):
    fired = []
    h = running.loop.call_later(0.05, fired.append, 1)
    assert h.cancel() is True
    assert h.cancelled() and not h.active
    assert h.cancel() is False
    done = threading.Event()
    running.loop.call_later(0.1, done.set)
    assert done.wait(DEADLINE)
    assert fired == []
    assert not c_holds(h)


def test_call_every_repeats_until_cancelled(running):
    ticks = []
    h = running.loop.call_every(0.005, lambda: ticks.append(time.monotonic()))
    assert h.periodic
    assert wait_until(lambda: len(ticks) >= 5)
    assert h.cancel() is True
    n = len(ticks)
    done = threading.Event()
    running.loop.call_later(0.05, done.set)
    assert done.wait(DEADLINE)
    assert len(ticks) <= n + 1  # at most one already taken by the loop when cancel ran
    assert not c_holds(h)


def test_call_every_cancelled_from_its_own_callback(running):
    count = [0]
    holder = []
    done = threading.Event()

    def cb():
        count[0] += 1
        if count[0] == 3:
            assert holder[0].cancel() is True
            running.loop.call_later(0.03, done.set)

    holder.append(running.loop.call_every(0.002, cb))
    assert done.wait(DEADLINE)
    assert count[0] == 3
    assert holder[0].cancelled()


def test_one_shot_cancel_from_its_own_callback_returns_false(running):
    holder = []
    res = []
    done = threading.Event()

    def cb():
        res.append(holder[0].cancel())
        done.set()

    holder.append(running.loop.call_later(0.001, cb))
    assert done.wait(DEADLINE)
    assert res == [False]


def test_cancel_from_many_threads_while_timers_fire(running):
    fired = []
    handles = [running.loop.call_later(0.0005 * (i % 20), fired.append, i) for i in range(2000)]
    cancelled = []

    def canceller(part):
        for h in part:
            if h.cancel():
                cancelled.append(h)

    ts = [threading.Thread(target=canceller, args=(handles[i::4],)) for i in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert wait_until(lambda: not any(c_holds(h) for h in handles))
    done = threading.Event()
    running.loop.submit(done.set)
    assert done.wait(DEADLINE)
    # every timer either fired or was cancelled, never both, never neither
    assert len(fired) + len(cancelled) == 2000
    assert not (set(fired) & {handles.index(h) for h in cancelled})
    for h in cancelled:
        assert h.cancelled()


def test_zero_and_negative_delays_fire_soon(running):
    done = threading.Event()
    got = []
    running.loop.call_later(0, got.append, 0)
    running.loop.call_later(-1, got.append, -1)
    running.loop.call_later(0.001, done.set)
    assert done.wait(DEADLINE)
    assert sorted(got) == [-1, 0]


def test_an_infinite_delay_never_fires_and_cancels(loop):
    h = loop.call_later(math.inf, print)
    assert h.active and h.cancel() is True


def test_bad_delays_raise(loop):
    with pytest.raises(ValueError):
        loop.call_later(math.nan, print)
    with pytest.raises(ValueError):
        loop.call_every(0, print)
    with pytest.raises(ValueError):
        loop.call_every(-1, print)


def test_timers_left_at_stop_are_released_and_read_as_cancelled(loop):
    def fn():
        pass

    arg = object()
    before = (sys.getrefcount(fn), sys.getrefcount(arg))
    hs = [loop.call_later(3600, fn, arg) for _ in range(100)]
    hs += [loop.call_every(3600, fn, arg) for _ in range(100)]
    assert all(c_holds(h) for h in hs)
    loop.submit(loop.stop)
    loop.run()
    assert not any(c_holds(h) for h in hs)
    assert all(h.cancelled() and not h.active for h in hs)
    assert all(h.cancel() is False for h in hs)
    assert (sys.getrefcount(fn), sys.getrefcount(arg)) == before


def test_timers_of_a_loop_closed_without_running_are_released(loop):
    def fn():
        pass

    before = sys.getrefcount(fn)
    hs = [loop.call_later(0, fn) for _ in range(50)]
    loop.close()
    assert sys.getrefcount(fn) == before
    assert all(h.cancel() is False for h in hs)


def test_timer_started_from_another_thread_shortens_the_sleep(running):
    # The loop sleeps with no deadline; a new timer must wake it.
    assert wait_until(lambda: running.loop.state == evloop.State.SLEEPING)
    done = threading.Event()
    t0 = time.monotonic()
    running.loop.call_later(0.01, done.set)
    assert done.wait(DEADLINE)
    assert time.monotonic() - t0 < DEADLINE
