"""Reference counts and leaks: every object handed to C is released exactly once, and
100k submits leave no growth (refcounts, gc-tracked objects, traced memory)."""

from __future__ import annotations

import gc
import os
import sys
import threading
import tracemalloc

import pytest

import evloop
from conftest import DEADLINE, LoopThread, c_holds

N = 100_000


def refs(*objs):
    return tuple(sys.getrefcount(o) for o in objs)


def total_refs():
    return getattr(sys, "gettotalrefcount", lambda: 0)()  # debug builds only


def test_100k_submits_from_another_thread_leave_no_growth(loop, lazy_gil):
    lt = LoopThread(loop).start()

    def fn(a, b):
        pass

    arg_a, arg_b = object(), [1, 2]
    done = threading.Event()

    def cycle(n):
        for _ in range(n):
            loop.submit(fn, arg_a, arg_b)
            loop.submit(fn, arg_a, arg_b)
        for _ in range(n // 10):
            loop.submit_internal(fn, arg_a, arg_b)
            loop.queue_microtask(fn, arg_a, arg_b)
        done.clear()
        loop.submit(done.set)
        assert done.wait(DEADLINE)

    cycle(1000)  # warm-up: caches, free lists, the adaptive knobs
    gc.collect()
    before_refs = refs(fn, arg_a, arg_b)
    before_total = total_refs()
    before_objs = len(gc.get_objects())
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    cycle(N // 2)
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    lt.join()
    assert refs(fn, arg_a, arg_b) == before_refs
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename")
                if "tracemalloc" not in s.traceback[0].filename)
    assert grown < 64 * 1024, f"traced memory grew by {grown} bytes over {N} submits"
    assert len(gc.get_objects()) - before_objs < 100
    if before_total:
        assert total_refs() - before_total < 100


def test_100k_submits_without_args_on_the_loop_thread(loop):
    def fn():
        pass

    before = refs(fn)
    count = [0]

    def seed():
        for _ in range(N):
            loop.submit(fn)
        loop.submit(loop.stop)

    loop.submit(seed)
    loop.run()
    assert refs(fn) == before
    assert loop.stats().tasks_run == N + 2


def test_tasks_still_queued_at_close_are_run_and_released(loop):
    def fn(x):
        pass

    arg = object()
    before = refs(fn, arg)
    for _ in range(10000):
        loop.submit(fn, arg)
        loop.queue_microtask(fn, arg)
    loop.close()  # never ran: evloop_free drains on this thread, with the GIL
    assert refs(fn, arg) == before


def test_tasks_left_by_a_loop_that_is_garbage_collected_are_released(combo):
    variant, backend = combo

    def fn(x):
        pass

    arg = object()
    before = refs(fn, arg)
    lp = evloop.Loop(backend=backend, variant=variant)
    for _ in range(1000):
        lp.submit(fn, arg)
    lp.call_later(3600, fn, arg)
    del lp
    gc.collect()
    assert refs(fn, arg) == before


def test_timer_handles_release_their_callback_when_done(loop):
    def fn(x):
        pass

    arg = object()
    before = refs(fn, arg)
    hs = []
    for i in range(5000):
        hs.append(loop.call_later(0, fn, arg))
        h = loop.call_later(3600, fn, arg)
        assert h.cancel()
        hs.append(h)
        hs.append(loop.call_every(0.001, fn, arg))
    for h in hs[2::3]:
        assert h.cancel()
    loop.call_later(0.005, loop.stop)
    loop.run()
    assert refs(fn, arg) == before  # released although the handles are still alive
    del hs
    gc.collect()
    assert refs(fn, arg) == before


def test_periodic_timers_cancelled_from_another_thread_while_running(loop, lazy_gil):
    lt = LoopThread(loop).start()

    def fn(x):
        pass

    arg = object()
    before = refs(fn, arg)
    for _ in range(200):
        hs = [loop.call_every(0.0001, fn, arg) for _ in range(20)]
        for h in hs:
            h.cancel()
    lt.join()
    gc.collect()
    assert not any(c_holds(h) for h in hs)
    assert refs(fn, arg) == before


def test_fd_records_removed_from_another_thread_while_running(loop):
    lt = LoopThread(loop).start()
    r, w = os.pipe()

    def fn(x):
        pass

    arg = object()
    before = refs(fn, arg)
    os.write(w, b"x")  # stays readable: the callback keeps being called
    try:
        for _ in range(2000):
            loop.add_reader(r, fn, arg)
            loop.remove_reader(r)
        lt.join()
    finally:
        os.close(r)
        os.close(w)
    gc.collect()
    assert loop._live_fds() == 0
    assert refs(fn, arg) == before


def test_exceptions_release_the_callback_and_the_exception(loop):
    class Boom(Exception):
        pass

    def fn(x):
        raise Boom()

    arg = object()
    loop.set_exception_handler(lambda e, cb: None)
    before = refs(fn, arg)
    for _ in range(10000):
        loop.submit(fn, arg)
    loop.submit(loop.stop)
    loop.run()
    gc.collect()
    assert refs(fn, arg) == before


def test_loops_created_and_dropped_do_not_leak(combo):
    variant, backend = combo
    gc.collect()
    tracemalloc.start()
    for _ in range(200):  # warm-up
        evloop.Loop(backend=backend, variant=variant).close()
    snap0 = tracemalloc.take_snapshot()
    for _ in range(2000):
        lp = evloop.Loop(backend=backend, variant=variant)
        lp.submit(len, "x")
        lp.call_later(1, len, "x")
        lp.close()
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename"))
    assert grown < 64 * 1024


def test_100k_tasks_in_batches_leave_no_growth(loop):
    lt = LoopThread(loop).start()

    def fn(a):
        pass

    arg = object()
    task = (fn, arg)
    batch = [task] * 100
    done = threading.Event()

    def cycle(n):
        for _ in range(n):
            loop.submit_batch(batch)
        done.clear()
        loop.submit(done.set)
        assert done.wait(DEADLINE)

    cycle(10)
    gc.collect()
    before = refs(fn, arg, task)
    tracemalloc.start()
    snap0 = tracemalloc.take_snapshot()
    cycle(N // len(batch))
    gc.collect()
    snap1 = tracemalloc.take_snapshot()
    tracemalloc.stop()
    lt.join()
    assert refs(fn, arg, task) == before
    grown = sum(s.size_diff for s in snap1.compare_to(snap0, "filename")
                if "tracemalloc" not in s.traceback[0].filename)
    assert grown < 64 * 1024


def test_timers_cancelled_from_another_thread_on_a_loop_never_run_are_released(loop):
    def fn():
        pass

    before = refs(fn)
    hs = []

    def other():
        for _ in range(100):
            hs.append(loop.call_every(3600, fn))
            assert hs[-1].cancel()

    t = threading.Thread(target=other)
    t.start()
    t.join()
    assert all(c_holds(h) for h in hs)  # the loop thread finishes the cancel: none yet
    loop.close()  # its drain does
    assert refs(fn) == before
    assert not any(c_holds(h) for h in hs) and all(h.cancelled() for h in hs)
