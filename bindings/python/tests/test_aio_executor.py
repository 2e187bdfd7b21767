"""The asyncio loop's default executor on evloop's work pool (evloop/_executor.py,
src/aio/executor.cpp): run_in_executor(None, ...) keeps the stdlib's semantics (results,
exceptions, cancel, contextvars, shutdown_default_executor, close), an executor of the caller's
is used as the stdlib uses it, and submit() works from any thread. Outcomes that both loops
define are checked against the stock loop doing the same."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import functools
import gc
import os
import threading
import time

import pytest

import evloop
from evloop._executor import _PoolExecutor

from conftest import DEADLINE, child as _child, on_both_loops as _both, raised as _raised

# More blocked calls than the pool has threads by default (at most 64): the next one queues.
_POOL_MAX = 64


def _run(loop, coro):
    return loop.run_until_complete(asyncio.wait_for(coro, DEADLINE))


def _os_threads():
    return len(os.listdir("/proc/self/task"))


def test_default_executor_is_the_pool_and_returns_results(aloop):
    async def main():
        loop = asyncio.get_running_loop()
        r = await loop.run_in_executor(None, sum, [1, 2, 3])
        fut = loop.run_in_executor(None, functools.partial(divmod, 7), 2)
        assert isinstance(fut, asyncio.Future) and fut.get_loop() is loop
        return r, await fut, type(loop._default_executor)

    assert _run(aloop, main()) == (6, (3, 1), _PoolExecutor)


def test_results_and_exceptions_match_the_stock_loop():
    cv = contextvars.ContextVar("cv", default="unset")

    def scenario(loop):
        async def main():
            out = [await loop.run_in_executor(None, pow, 2, 5)]
            for fn, args in ((int, ("x",)), (lambda: 1 / 0, ()), (None, ()),
                             (lambda: (_ for _ in ()).throw(KeyError("k")), ())):
                try:
                    out.append(await loop.run_in_executor(None, fn, *args))
                except Exception as e:  # noqa: BLE001
                    out.append((type(e), str(e)))
            cv.set("caller")  # not copied into the pool's thread, as the stdlib does not
            out.append(await loop.run_in_executor(None, cv.get))
            out.append(await loop.run_in_executor(None, lambda: threading.get_ident())
                       != threading.get_ident())
            return out

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[-2:] == ["unset", True]


def test_concurrent_cancelled_error_becomes_asyncio_s():
    def raise_cf_cancelled():
        raise concurrent.futures.CancelledError("from fn")

    def scenario(loop):
        async def main():
            try:
                await loop.run_in_executor(None, raise_cf_cancelled)
            except BaseException as e:  # noqa: BLE001
                return type(e), e.args
        return _run(loop, main())

    stock, ours = _both(scenario)
    assert stock == ours


def test_a_cancelled_call_that_has_not_started_never_runs(aloop):
    release = threading.Event()
    ran = []

    async def main():
        loop = asyncio.get_running_loop()
        blockers = [loop.run_in_executor(None, release.wait, DEADLINE) for _ in range(_POOL_MAX)]
        fut = loop.run_in_executor(None, ran.append, 1)
        fut.cancel()
        await asyncio.sleep(0.05)  # the cancel callback runs
        release.set()
        assert all(await asyncio.gather(*blockers))
        await loop.run_in_executor(None, int)  # queued after the cancelled one
        with pytest.raises(asyncio.CancelledError):
            await fut

    _run(aloop, main())
    assert ran == []


def test_a_call_cancelled_while_running_finishes_and_its_result_is_dropped(aloop):
    started, release, done = threading.Event(), threading.Event(), []

    def work():
        started.set()
        release.wait(DEADLINE)
        done.append(1)
        return "dropped"

    async def main():
        loop = asyncio.get_running_loop()
        fut = loop.run_in_executor(None, work)
        assert await loop.run_in_executor(None, started.wait, DEADLINE)
        fut.cancel()
        release.set()
        await loop.shutdown_default_executor()
        return fut.cancelled()

    assert _run(aloop, main()) is True
    assert done == [1]


def test_shutdown_default_executor_waits_and_then_refuses():
    def scenario(loop):
        done = []

        def slow(i):
            time.sleep(0.02)
            done.append(i)

        async def main():
            for i in range(8):
                loop.run_in_executor(None, slow, i)
            await loop.shutdown_default_executor()
            n = len(done)
            return n, _raised(lambda: loop.run_in_executor(None, int))

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert stock == ours == (8, (RuntimeError, "Executor shutdown has been called"))


def test_an_executor_of_the_callers_own_is_used():
    def scenario(loop):
        async def main():
            mine = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="mine")
            try:
                name = await loop.run_in_executor(
                    mine, lambda: threading.current_thread().name)
                loop.set_default_executor(mine)
                default = await loop.run_in_executor(
                    None, lambda: threading.current_thread().name)
                return name.startswith("mine"), default.startswith("mine")
            finally:
                mine.shutdown()
        return _run(loop, main())

    assert _both(scenario) == [(True, True), (True, True)]


def test_as_many_calls_run_at_once_as_on_the_stock_loop():
    """The pool has ThreadPoolExecutor's default size: that many calls blocking on each other
    all run at once (a smaller pool would leave the barrier broken)."""
    n = min(32, (getattr(os, "process_cpu_count", os.cpu_count)() or 1) + 4)

    def scenario(loop):
        barrier = threading.Barrier(n, timeout=DEADLINE)

        async def main():
            return sorted(await asyncio.gather(*[loop.run_in_executor(None, barrier.wait)
                                                 for _ in range(n)]))
        return _run(loop, main())

    stock, ours = _both(scenario)
    assert stock == ours == list(range(n))


def test_submit_from_any_thread_gives_concurrent_futures(aloop):
    async def main():
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, int)
        ex = loop._default_executor
        here = ex.submit(pow, 3, 3)  # on the loop thread
        # from another thread while the loop runs: handed to the loop thread
        there = await asyncio.to_thread(lambda: ex.submit(pow, 2, 10).result(DEADLINE))
        kw = await loop.run_in_executor(None, lambda: ex.submit(
            int, "ff", base=16).result(DEADLINE))
        failing = ex.submit(int, "x")
        await asyncio.wrap_future(here)
        with pytest.raises(ValueError):
            await asyncio.wrap_future(failing)
        return here.result(), there, kw

    assert _run(aloop, main()) == (27, 1024, 255)


def test_submit_after_shutdown_raises_as_thread_pool_executor(aloop):
    async def main():
        loop = asyncio.get_running_loop()
        await loop.run_in_executor(None, int)
        ex = loop._default_executor
        ex.shutdown(wait=True)
        return _raised(lambda: ex.submit(int))

    ours = _run(aloop, main())
    tp = concurrent.futures.ThreadPoolExecutor()
    tp.shutdown()
    assert ours == _raised(lambda: tp.submit(int))


def test_close_runs_every_accepted_call(aloop):
    """close() on a loop with calls queued and running: every one runs (the stdlib's close
    leaves its threads to run them); the pool's threads end with the loop."""
    before = _os_threads()
    done = []

    async def main():
        loop = asyncio.get_running_loop()
        for i in range(100):
            loop.run_in_executor(None, lambda i=i: (time.sleep(0.001), done.append(i)))

    aloop.run_until_complete(main())
    aloop.close()
    assert sorted(done) == list(range(100))
    assert _os_threads() <= before


def test_calls_made_before_the_loop_runs_run(aloop):
    fut = aloop.run_in_executor(None, sum, [4, 5])
    assert _run(aloop, fut) == 9


def test_bad_input_answers_as_the_stock_loop():
    async def coro_fn():
        pass

    def scenario(loop):
        missing = _raised(lambda: loop.run_in_executor(None))  # names the class: type only
        out = [missing[0]]
        loop.set_debug(True)
        out.append(_raised(lambda: loop.run_in_executor(None, coro_fn)))
        loop.set_debug(False)
        loop.close()
        out.append(_raised(lambda: loop.run_in_executor(None, int)))
        return out

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[-1] == (RuntimeError, "Event loop is closed")


def test_a_burst_of_ten_thousand_calls_all_return(aloop):
    async def main():
        loop = asyncio.get_running_loop()
        return await asyncio.gather(*[loop.run_in_executor(None, abs, -i)
                                      for i in range(10_000)])

    assert _run(aloop, main()) == list(range(10_000))


def test_many_loops_leave_no_thread_and_no_item_behind():
    """Each loop's pool threads end at close; their thread states are given back and the
    items are freed (no reference cycle left to the collector)."""
    async def main():
        loop = asyncio.get_running_loop()
        await asyncio.gather(*[loop.run_in_executor(None, int) for _ in range(20)])

    evloop.run(main())  # the first loop's one-time costs
    gc.collect()
    threads = _os_threads()
    for _ in range(30):
        evloop.run(main())
    gc.collect()
    assert _os_threads() <= threads
    assert not [o for o in gc.get_objects() if type(o).__name__ == "_WorkItem"]


def test_a_call_the_pool_refuses_raises_and_leaves_no_item_behind():
    """The C loop under the asyncio loop stopped (the pool refuses with -ESHUTDOWN): the call
    raises RuntimeError, and the refused item, which its future holds as a done callback
    while it holds the future, is collected."""
    loop = evloop.new_event_loop()
    try:
        loop._evloop_raw.stop()
        with pytest.raises(RuntimeError):
            loop.run_in_executor(None, int)
        gc.collect()
        assert not [o for o in gc.get_objects()
                    if isinstance(o, asyncio.Future) and o.get_loop() is loop]
    finally:
        loop.close()


def test_a_call_that_blocks_for_long_costs_few_spins_and_the_loop_serves_meanwhile(aloop):
    # The loop spins a while for the pool before it waits (executor.cpp's work_spin); a call
    # that blocks stops it: after each spin that finds nothing the next ones wait twice as
    # many waits, so 2,000 waits cost at most about a dozen spins, not one per wait. Timers
    # and another thread's call_soon_threadsafe are served meanwhile.
    gate = threading.Event()
    got = []

    async def main():
        blocked = aloop.run_in_executor(None, gate.wait, DEADLINE)
        await asyncio.sleep(0.01)
        before = aloop._evloop_work_spins()
        for i in range(2000):
            await asyncio.sleep(0)
            await asyncio.sleep(0.00001)  # a wait, with the call in flight
        spins = aloop._evloop_work_spins()[0] - before[0]
        fut = aloop.create_future()
        threading.Thread(target=aloop.call_soon_threadsafe, args=(fut.set_result, 7)).start()
        got.append(await asyncio.wait_for(fut, DEADLINE))
        gate.set()
        got.append(await blocked)
        return spins

    spins = aloop.run_until_complete(main())
    assert got == [7, True]
    assert spins <= (12 if (os.cpu_count() or 1) > 1 else 0), spins


def test_sequential_short_calls_return_in_order_with_the_spin(aloop):
    async def main():
        return [await aloop.run_in_executor(None, pow, 2, i) for i in range(300)]

    assert aloop.run_until_complete(main()) == [2 ** i for i in range(300)]
    spins, hits = aloop._evloop_work_spins()
    assert hits <= spins


# Children for what hangs or aborts a process when it goes wrong; argv[1] names the loop.
_MAKE = """
import asyncio, sys, threading, time
import evloop
make = asyncio.SelectorEventLoop if sys.argv[1:] == ["stock"] else evloop.new_event_loop
"""

_THREAD_LOCAL = _MAKE + """
tl = threading.local()

def job():
    tl.x = [1]
    return 1

loop = make()
print(loop.run_until_complete(loop.run_in_executor(None, job)))
loop.close()
print("closed")
"""


@pytest.mark.parametrize("flags,env", [(("-X", "dev"), {}), ((), {"PYTHONMALLOC": "debug"})],
                         ids=["dev", "pymalloc-debug"])
def test_a_pool_thread_that_used_a_thread_local_ends_cleanly(flags, env):
    # Regression (issue 39): the pool thread's end cleared its thread state from a pthread key
    # destructor, after CPython's own key was gone: under the debug allocator, "Python memory
    # allocator called without holding the GIL" and SIGABRT.
    assert _child(_THREAD_LOCAL, flags=flags, env=env) == (0, "1\nclosed\n", "")


_CLOSE_FROM_POOL = _MAKE + """
loop = make()
loop.run_in_executor(None, time.sleep, 0.05)
loop.run_in_executor(None, loop.close)
end = time.monotonic() + 10
while not loop.is_closed() and time.monotonic() < end:
    time.sleep(0.001)
coro = asyncio.sleep(0)
try:
    loop.run_until_complete(coro)
except RuntimeError as e:
    print(repr(e))
coro.close()
print(loop.is_closed())
"""


def test_a_call_that_closes_its_idle_loop_closes_it_as_on_the_stock_loop():
    # Regression (issue 39): close() on a pool thread waited for every pool call, its own too.
    runs = [_child(_CLOSE_FROM_POOL, name) for name in ("stock", "evloop")]
    assert runs[0] == (0, "RuntimeError('Event loop is closed')\nTrue\n", "")
    assert runs[1] == runs[0]


_TWO_SHUTDOWNS = _MAKE + """
loop = make()

async def main():
    fut = loop.run_in_executor(None, time.sleep, 0.2)
    a = asyncio.ensure_future(loop.shutdown_default_executor())
    b = asyncio.ensure_future(loop.shutdown_default_executor())
    await asyncio.wait_for(asyncio.gather(a, b), 10)
    return await fut, a.done(), b.done()

print(loop.run_until_complete(main()))
loop.close()
"""


def test_overlapping_shutdown_default_executor_calls_all_complete():
    # Regression (issue 39): the loop kept one waiter, and the first call never completed.
    runs = [_child(_TWO_SHUTDOWNS, name) for name in ("stock", "evloop")]
    assert runs[0] == (0, "(None, True, True)\n", "")
    assert runs[1] == runs[0]


def test_run_in_executor_from_another_thread_as_the_loop_starts_is_taken():
    # Regression (issue 39): the check that this thread may submit to the pool came before
    # Python code (create_future; in debug mode its stack capture) during which the loop could
    # start on its own thread, and the pool then refused the call with EBUSY.
    def scenario(loop):
        t = threading.Thread(target=loop.run_forever)
        real = loop.create_future

        def create_future():
            if not t.is_alive() and threading.current_thread() is threading.main_thread():
                t.start()
                looked = threading.Event()
                loop.call_soon_threadsafe(looked.set)
                assert looked.wait(DEADLINE)
                time.sleep(0.01)  # and the loop waits in its poll again
            return real()

        loop.create_future = create_future
        try:
            fut = loop.run_in_executor(None, sum, [1, 2])

            async def result():
                return await fut

            return asyncio.run_coroutine_threadsafe(result(), loop).result(DEADLINE)
        finally:
            loop.call_soon_threadsafe(loop.stop)
            t.join(DEADLINE)

    assert _both(scenario) == [3, 3]
