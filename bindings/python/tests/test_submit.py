"""submit, submit_internal and queue_microtask: from the loop thread and from many Python
threads, exactly once, in order, and refused cleanly after stop."""

from __future__ import annotations

import collections
import errno
import sys
import threading

import pytest

import evloop
from conftest import DEADLINE, LoopThread, wait_until


def test_submit_passes_positional_args(running):
    got = []
    done = threading.Event()
    running.loop.submit(lambda *a: (got.append(a), done.set()), 1, "two", None)
    assert done.wait(DEADLINE)
    assert got == [(1, "two", None)]


def test_submit_rejects_a_non_callable(loop):
    with pytest.raises(TypeError):
        loop.submit(42)
    with pytest.raises(TypeError):
        loop.call_later(0, "x")
    with pytest.raises(TypeError):
        loop.add_reader(0, None)


def test_tasks_from_one_thread_run_in_order(running):
    got = []
    n = 20000
    done = threading.Event()
    for i in range(n):
        running.loop.submit(got.append, i)
    running.loop.submit(done.set)
    assert done.wait(DEADLINE)
    assert got == list(range(n))


def test_many_python_threads_each_task_runs_exactly_once(loop, lazy_gil):
    lt = LoopThread(loop).start()
    threads, per = 8, 5000
    seen = collections.Counter()
    last = {}
    out_of_order = []

    def task(tid, i):
        seen[(tid, i)] += 1
        if last.get(tid, -1) >= i:
            out_of_order.append((tid, i))
        last[tid] = i

    barrier = threading.Barrier(threads)

    def producer(tid):
        barrier.wait()
        for i in range(per):
            loop.submit(task, tid, i)

    ts = [threading.Thread(target=producer, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lt.join()  # stop: everything accepted runs first
    assert len(seen) == threads * per
    assert set(seen.values()) == {1}
    assert out_of_order == []
    assert loop.stats().tasks_run == threads * per


def test_submits_racing_stop_either_run_or_are_refused_never_both(loop):
    lt = LoopThread(loop).start()
    ran = collections.Counter()
    accepted = collections.Counter()
    refused = collections.Counter()
    go = threading.Event()

    def producer(tid):
        go.wait()
        for i in range(20000):
            try:
                loop.submit(ran.update, [(tid, i)])
            except evloop.LoopClosedError as e:
                assert e.errno == errno.ESHUTDOWN
                refused[tid] += 1
            else:
                accepted[tid] += 1

    ts = [threading.Thread(target=producer, args=(t,)) for t in range(4)]
    for t in ts:
        t.start()
    go.set()
    wait_until(lambda: sum(accepted.values()) > 1000)
    loop.stop()
    for t in ts:
        t.join()
    lt.join()
    assert sum(ran.values()) == sum(accepted.values())
    assert set(ran.values()) <= {1}
    assert sum(accepted.values()) + sum(refused.values()) == 4 * 20000


def test_a_task_submitted_from_a_callback_runs_after_it_not_nested(running):
    got = []
    done = threading.Event()

    def outer():
        got.append("outer-start")
        running.loop.submit(inner)
        got.append("outer-end")

    def inner():
        got.append("inner")
        done.set()

    running.loop.submit(outer)
    assert done.wait(DEADLINE)
    assert got == ["outer-start", "outer-end", "inner"]


def test_submit_internal_runs_before_external_tasks_waiting(loop):
    got = []
    for i in range(5):
        loop.submit(got.append, i)
    loop.submit_internal(got.append, "internal")
    loop.submit(loop.stop)
    loop.run()
    assert got == ["internal", 0, 1, 2, 3, 4]


def test_microtask_runs_right_after_the_callback_that_queued_it(running):
    got = []
    done = threading.Event()

    def first():
        got.append("first")
        running.loop.submit(second)
        running.loop.queue_microtask(got.append, "micro")
        running.loop.queue_microtask(lambda: running.loop.queue_microtask(got.append, "micro2"))

    def second():
        got.append("second")
        done.set()

    running.loop.submit(first)
    assert done.wait(DEADLINE)
    assert got == ["first", "micro", "micro2", "second"]


def test_microtask_from_another_thread_runs(running):
    done = threading.Event()
    running.loop.queue_microtask(done.set)
    assert done.wait(DEADLINE)
    assert running.loop.stats().microtasks_run >= 1


def test_refused_task_is_released_and_raises(loop):
    def fn():
        pass

    arg = object()
    loop.stop()
    before = (sys.getrefcount(fn), sys.getrefcount(arg))
    for _ in range(1000):
        with pytest.raises(evloop.LoopClosedError):
            loop.submit(fn, arg)
        with pytest.raises(evloop.LoopClosedError):
            loop.submit_internal(fn, arg)
        with pytest.raises(evloop.LoopClosedError):
            loop.queue_microtask(fn)
    assert (sys.getrefcount(fn), sys.getrefcount(arg)) == before


def test_submit_from_the_loop_thread_while_stopping_is_refused(loop):
    results = []

    def at_stop():
        try:
            loop.submit(print)
        except evloop.LoopClosedError:
            results.append("refused")
        # microtasks spawned by accepted work still run during shutdown
        loop.queue_microtask(results.append, "micro")

    loop.submit(loop.stop)
    loop.submit(at_stop)
    loop.run()
    assert results == ["refused", "micro"]


def test_flood_from_a_thread_while_loop_runs_callbacks(running):
    n = 100000
    count = [0]
    done = threading.Event()

    def task():
        count[0] += 1
        if count[0] == n:
            done.set()

    for _ in range(n):
        running.loop.submit(task)
    assert done.wait(DEADLINE)


def test_submit_batch_runs_callables_and_tuples_in_order(running):
    got = []
    done = threading.Event()
    running.loop.submit_batch([(got.append, 0), lambda: got.append(1), (got.append, 2),
                               (lambda a, b: got.append(a + b), 1, 2), done.set])
    assert done.wait(DEADLINE)
    assert got == [0, 1, 2, 3]
    running.loop.submit_batch([])  # a no-op
    running.loop.submit_batch(())


def test_batches_from_many_python_threads_each_task_runs_exactly_once(loop, lazy_gil):
    lt = LoopThread(loop).start()
    threads, batches, size = 8, 200, 50
    seen = collections.Counter()
    last = {}
    out_of_order = []

    def task(tid, i):
        seen[(tid, i)] += 1
        if last.get(tid, -1) >= i:
            out_of_order.append((tid, i))
        last[tid] = i

    def producer(tid):
        for b in range(batches):
            loop.submit_batch([(task, tid, b * size + j) for j in range(size)])

    ts = [threading.Thread(target=producer, args=(t,)) for t in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    lt.join()
    assert len(seen) == threads * batches * size
    assert set(seen.values()) == {1}
    assert out_of_order == []


def test_a_batch_with_a_bad_item_or_to_a_stopped_loop_accepts_nothing(loop):
    ran = []

    def fn(x):
        ran.append(x)

    arg = object()
    before = (sys.getrefcount(fn), sys.getrefcount(arg))
    with pytest.raises(TypeError):
        loop.submit_batch([(fn, arg), (fn, arg), 42, (fn, arg)])
    with pytest.raises(TypeError):
        loop.submit_batch([(fn, arg), ("not callable", arg)])
    with pytest.raises(TypeError):
        loop.submit_batch(fn)  # not a sequence
    assert (sys.getrefcount(fn), sys.getrefcount(arg)) == before
    loop.stop()
    with pytest.raises(evloop.LoopClosedError) as ei:
        loop.submit_batch([(fn, arg)] * 100)
    assert ei.value.errno == errno.ESHUTDOWN
    assert (sys.getrefcount(fn), sys.getrefcount(arg)) == before
    loop.run()
    assert ran == []
