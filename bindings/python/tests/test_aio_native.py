"""The native hot paths of evloop's asyncio loop (src/aio/core.cpp, handles.cpp, queues.cpp:
the ready queue, the timer heap and the iteration in C): each behaviour the stdlib's loop has
there, checked against the stock loop doing the same where the stdlib defines it, on every
backend and variant; and what the native part adds (handles untracked by the collector while
queued, reused handles, the lane-submit wake) checked for what it must never change."""

from __future__ import annotations

import asyncio
import contextvars
import gc
import logging
import signal
import sys
import threading
import time
import warnings
import weakref

import pytest

import evloop

from conftest import AIO_LOOPS as LOOPS, child as _child, on_both_loops as _both, raised as _raised


@pytest.fixture(params=["stock", "evloop"])
def either(request):
    """The stock loop and evloop's, for behaviours both must show alike."""
    loop = LOOPS[request.param]()
    try:
        yield loop
    finally:
        if not loop.is_closed():
            loop.close()


def _stop_after(loop, seconds=5.0):
    return loop.call_later(seconds, loop.stop)


# ------------------------------------------------------------------ handles and order


def test_handles_are_the_stdlibs_handle_and_timerhandle(aloop):
    h = aloop.call_soon(print, "x")
    t = aloop.call_later(10, print, "y")
    a = aloop.call_at(aloop.time() + 10, print)
    assert type(h) is asyncio.Handle and type(t) is asyncio.TimerHandle
    assert type(a) is asyncio.TimerHandle
    stock = asyncio.SelectorEventLoop()
    try:
        sh, st = stock.call_soon(print, "x"), stock.call_later(10, print, "y")
        assert repr(h) == repr(sh)
        assert repr(t).split(" ", 2)[2] == repr(st).split(" ", 2)[2]  # after when=...
        st.cancel()
    finally:
        stock.close()
    assert repr(t).startswith("<TimerHandle when=")
    assert not h.cancelled() and t.when() > aloop.time() + 9
    h.cancel()
    assert h.cancelled() and repr(h) == "<Handle cancelled>"
    t.cancel()
    a.cancel()


def test_call_soon_runs_in_order_with_threadsafe_calls_from_the_loop_thread(aloop):
    seen = []
    for i in range(5):
        aloop.call_soon(seen.append, ("soon", i))
        aloop.call_soon_threadsafe(seen.append, ("safe", i))
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    assert seen == [(k, i) for i in range(5) for k in ("soon", "safe")]


def test_callbacks_scheduled_by_callbacks_run_in_the_next_iteration(either):
    loop = either
    seen = []

    def first():
        seen.append(("first", loop._run_once_no))
        loop.call_soon(second)

    def second():
        seen.append(("second", loop._run_once_no))
        loop.stop()

    loop._run_once_no = 0
    orig = loop._run_once

    def counting():
        loop._run_once_no += 1
        orig()

    loop._run_once = counting
    loop.call_soon(first)
    loop.run_forever()
    assert seen[1][1] == seen[0][1] + 1


def test_timers_fire_in_time_order_and_never_early(aloop):
    seen = []
    t0 = aloop.time()  # one base: on a loaded machine call_later's own clock reads can differ
    for d in (0.03, 0.01, 0.02, 0.0, 0.01):
        aloop.call_at(t0 + d, lambda d=d: seen.append((d, aloop.time() - t0)))
    aloop.call_at(t0 + 0.05, aloop.stop)
    aloop.run_forever()
    assert [d for d, _ in seen] == [0.0, 0.01, 0.01, 0.02, 0.03]
    assert all(at >= d for d, at in seen)


def test_timers_due_at_the_same_time_fire_in_the_order_they_were_scheduled(aloop):
    seen = []
    when = aloop.time() + 0.01
    for i in range(50):
        aloop.call_at(when, seen.append, i)
    aloop.call_at(when, aloop.stop)
    aloop.run_forever()
    assert seen == list(range(50))


def test_call_later_and_call_at_take_ints_and_keep_when_as_given(either):
    loop = either
    t = loop.call_at(10**9, print)
    assert t.when() == 10**9 and type(t.when()) is int
    t.cancel()
    t = loop.call_later(1, print)
    assert isinstance(t.when(), float)
    t.cancel()


def test_a_subclass_time_is_used_by_call_later_and_the_iteration():
    class Shifted(evloop.EventLoop):
        def time(self):
            return super().time() + 1000.0

    loop = Shifted()
    try:
        t = loop.call_later(0.01, loop.stop)
        assert t.when() > time.monotonic() + 999
        loop.run_forever()  # would wait 1000 s on the real clock
    finally:
        loop.close()


def test_context_is_a_copy_and_context_kwarg_is_used(aloop):
    var = contextvars.ContextVar("var", default="unset")
    seen = []

    def cb(tag):
        seen.append((tag, var.get()))
        var.set("changed by " + tag)

    var.set("caller")
    aloop.call_soon(cb, "a")
    aloop.call_soon(cb, "b")
    ctx = contextvars.Context()
    ctx.run(var.set, "given")
    aloop.call_soon(cb, "c", context=ctx)
    aloop.call_later(0, cb, "d")
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    assert seen == [("a", "caller"), ("b", "caller"), ("c", "given"), ("d", "caller")]
    assert var.get() == "caller" and ctx[var] == "changed by c"


# ------------------------------------------------------------------ cancellation and _scheduled


def test_cancelled_handles_and_timers_never_run(aloop):
    seen = []
    h = aloop.call_soon(seen.append, "h")
    t = aloop.call_later(0, seen.append, "t")
    s = aloop.call_soon_threadsafe(seen.append, "s")
    for x in (h, t, s):
        x.cancel()
    aloop.call_later(0.01, aloop.stop)
    aloop.run_forever()
    assert seen == []


def test_a_handle_cancelled_by_an_earlier_callback_of_the_same_iteration_is_skipped(either):
    loop = either
    seen = []
    later = []
    loop.call_soon(lambda: later[0].cancel())
    later.append(loop.call_soon(seen.append, "cancelled"))
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == []


def test_scheduled_bookkeeping_as_the_stdlib(either):
    """_scheduled, _timer_cancelled_count and the clean-up of cancelled timers: the head of
    the heap only, then all of them once more than 100 are scheduled and more than half are
    cancelled, each leaving with _scheduled False."""
    loop = either

    def step():
        loop.call_soon(loop.stop)
        loop.run_forever()

    far = loop.time() + 3600
    ts = [loop.call_at(far + i, print) for i in range(10)]
    assert len(loop._scheduled) == 10 and all(t._scheduled for t in ts)
    assert loop._scheduled[0] is ts[0]
    ts[0].cancel()
    ts[5].cancel()
    ts[5].cancel()  # twice counts once
    assert loop._timer_cancelled_count == 2
    step()
    # the head went, the inner one stays until the bulk clean-up
    assert not ts[0]._scheduled and ts[5]._scheduled
    assert len(loop._scheduled) == 9 and loop._timer_cancelled_count == 1
    more = [loop.call_at(far + 100 + i, print) for i in range(100)]
    for t in more[:60]:
        t.cancel()
    step()
    assert loop._timer_cancelled_count == 0
    assert len(loop._scheduled) == 9 - 1 + 40
    assert not ts[5]._scheduled and not any(t._scheduled for t in more[:60])
    assert all(t._scheduled for t in more[60:])
    fired = loop.call_later(0, print)
    loop.call_later(0.001, loop.stop)
    loop.run_forever()
    assert not fired._scheduled
    loop._scheduled.clear()
    assert len(loop._scheduled) == 0


def test_scheduled_bookkeeping_is_the_same_on_both_loops():
    def scenario(loop):
        out = []
        far = loop.time() + 3600
        ts = [loop.call_at(far + i % 7, print) for i in range(150)]
        for t in ts[::3]:
            t.cancel()
        out.append((len(loop._scheduled), loop._timer_cancelled_count))
        loop.call_soon(loop.stop)
        loop.run_forever()
        out.append((len(loop._scheduled), loop._timer_cancelled_count,
                    sorted(i for i, t in enumerate(ts) if t._scheduled)))
        for t in ts[1::3]:
            t.cancel()
        loop.call_soon(loop.stop)
        loop.run_forever()
        out.append((len(loop._scheduled), loop._timer_cancelled_count,
                    sorted(i for i, t in enumerate(ts) if t._scheduled)))
        return out

    stock, ours = _both(scenario)
    assert ours == stock


def test_ready_view_answers_as_the_deque(aloop):
    assert not aloop._ready and len(aloop._ready) == 0
    hs = [aloop.call_soon(print, i) for i in range(3)]
    assert len(aloop._ready) == 3 and list(aloop._ready) == hs and aloop._ready[0] is hs[0]
    assert aloop._ready.popleft() is hs[0]
    aloop._ready.clear()
    assert not aloop._ready
    with pytest.raises(IndexError):
        aloop._ready.popleft()


# ------------------------------------------------------------------ failures


def test_a_callback_that_raises_reaches_the_handler_with_the_stdlibs_context():
    def scenario(loop):
        seen = []
        loop.set_exception_handler(lambda lp, ctx: seen.append(ctx))

        def boom(x):
            raise ValueError(x)

        h = loop.call_soon(boom, 1)
        t = loop.call_later(0, boom, 2)
        loop.call_soon(int, "not a number")
        loop.call_soon(3)  # not callable: the stdlib finds out when it runs
        loop.call_later(0.001, loop.stop)
        loop.run_forever()
        assert seen[0]["handle"] is h and seen[-1]["handle"] is t
        return [(sorted(c), c["message"].replace("evloop", "stock"), type(c["exception"]),
                 str(c["exception"]), c["exception"].__traceback__ is not None) for c in seen]

    stock, ours = _both(scenario)
    assert ours == stock
    assert [m for _, m, *_ in ours][:1] == ["Exception in callback " +
                                            ours[0][1].split("Exception in callback ")[1]]


def test_the_exception_is_being_handled_inside_the_handler(aloop):
    seen = []

    def handler(loop, ctx):
        seen.append(sys.exc_info()[1] is ctx["exception"])

    aloop.set_exception_handler(handler)
    aloop.call_soon(lambda: 1 / 0)
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    assert seen == [True]
    assert sys.exc_info() == (None, None, None)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_keyboardinterrupt_and_systemexit_go_up_and_the_rest_runs_next_time(either, exc):
    loop = either
    seen = []

    def boom():
        raise exc

    loop.call_soon(seen.append, 1)
    loop.call_soon(boom)
    loop.call_soon(seen.append, 2)
    with pytest.raises(exc):
        loop.run_forever()
    assert seen == [1]
    loop.call_soon(loop.stop)
    loop.run_forever()
    assert seen == [1, 2]


def test_a_handler_that_raises_is_logged_and_the_loop_goes_on(either, caplog):
    loop = either

    def bad_handler(lp, ctx):
        raise RuntimeError("handler broke")

    loop.set_exception_handler(bad_handler)
    seen = []
    loop.call_soon(lambda: 1 / 0)
    loop.call_soon(seen.append, "after")
    loop.call_soon(loop.stop)
    with caplog.at_level(logging.ERROR, logger="asyncio"):
        loop.run_forever()
    assert seen == ["after"]
    assert any("Unhandled error in exception handler" in r.getMessage() for r in caplog.records)


def test_bad_arguments_raise_as_the_stdlib_does():
    def scenario(loop):
        out = [_raised(lambda: loop.call_later(None, print)),
               _raised(lambda: loop.call_at(None, print)),
               _raised(lambda: loop.call_later("1", print)),
               _raised(lambda: loop.call_soon(print, context=None) and None),
               _raised(lambda: loop.call_soon(print, bogus=1))]
        loop.close()
        out += [_raised(lambda: loop.call_soon(print)),
                _raised(lambda: loop.call_soon_threadsafe(print)),
                _raised(lambda: loop.call_later(1, print)),
                _raised(lambda: loop.call_at(1, print)),
                _raised(lambda: loop.call_later(None, print)),
                _raised(lambda: loop.call_at(None, print))]
        return out

    stock, ours = _both(scenario)
    assert ours == stock


def test_arguments_given_by_keyword_are_taken_as_the_stdlib_takes_them():
    # Regression (issue 39): callback, delay and when given by keyword raised TypeError.
    def scenario(loop):
        ran = []

        def f():
            ran.append(1)

        out = [type(loop.call_soon(callback=f)).__name__,
               type(loop.call_soon_threadsafe(callback=f, context=None)).__name__,
               type(loop.call_later(delay=0, callback=f)).__name__,
               type(loop.call_later(0, callback=f)).__name__,
               type(loop.call_at(when=loop.time(), callback=f)).__name__]
        for name, a, k in [("call_soon", (), {}), ("call_soon", (f,), {"callback": f}),
                           ("call_soon", (1,), {"callback": f}),
                           ("call_soon", (), {"callback": f, "x": 1}),
                           ("call_soon", (), {"callback": f, "context": None, "x": 1, "y": 2}),
                           ("call_soon_threadsafe", (), {"context": None}),
                           ("call_later", (), {}), ("call_later", (), {"delay": 1}),
                           ("call_later", (1,), {}), ("call_later", (1, f), {"delay": 2}),
                           ("call_later", (), {"callback": f, "when": 1}),
                           ("call_at", (), {"callback": f}), ("call_at", (), {"when": 1}),
                           ("call_at", (1, f, 2), {"callback": f, "when": 1})]:
            out.append(_raised(lambda: getattr(loop, name)(*a, **k)))
        loop.call_later(0.001, loop.stop)
        loop.run_forever()
        return out, len(ran)

    stock, ours = _both(scenario)
    assert ours == stock
    assert stock[1] == 5


@pytest.mark.parametrize("debug", [False, True], ids=["", "debug"])
def test_a_failed_task_nobody_awaits_is_reported_at_once(either, debug):
    """Regression (test_futures2.test_task_exc_handler_correct_context, Python 3.12, which
    runs in debug mode): the task is freed when it is done, so its "exception was never
    retrieved" reaches the handler before the next step of the code that made it. evloop's
    debug-mode helper had kept the handle in its frame, which a traceback kept alive."""
    loop = either
    loop.set_debug(debug)
    seen = []
    loop.set_exception_handler(lambda lp, ctx: seen.append(ctx["message"]))

    async def fail():
        1 / 0

    async def main():
        asyncio.ensure_future(fail())
        await asyncio.sleep(0)
        return list(seen)

    gc.disable()
    try:
        assert loop.run_until_complete(main()) == ["Task exception was never retrieved"]
    finally:
        gc.enable()


# ------------------------------------------------------------------ debug mode


def test_debug_mode_checks_callbacks_as_the_stdlib_does():
    async def coro():
        pass

    def scenario(loop):
        loop.set_debug(True)
        c = coro()
        try:
            return [_raised(lambda: loop.call_soon(coro)),
                    _raised(lambda: loop.call_soon(c)),
                    _raised(lambda: loop.call_soon(1)),
                    _raised(lambda: loop.call_soon_threadsafe(1)),
                    _raised(lambda: loop.call_later(1, coro)),
                    _raised(lambda: loop.call_at(1, 2))]
        finally:
            c.close()

    stock, ours = _both(scenario)
    assert ours == stock and all(ours)


def test_debug_mode_records_where_a_handle_was_made(either):
    loop = either
    loop.set_debug(True)
    h = loop.call_soon(print)  # this line
    t = loop.call_later(1, print)
    here = sys._getframe().f_code.co_filename
    for x in (h, t):
        frame = x._source_traceback[-1]
        assert frame[0] == here and frame[2] == "test_debug_mode_records_where_a_handle_was_made"
    t.cancel()


def test_debug_mode_logs_a_slow_callback_and_sets_the_current_handle(caplog):
    def scenario(loop):
        loop.set_debug(True)
        loop.slow_callback_duration = 0.01
        seen = []

        def slow():
            seen.append(loop._current_handle)
            time.sleep(0.02)

        h = loop.call_soon(slow)
        loop.call_soon(loop.stop)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            loop.run_forever()
        assert seen == [h] and loop._current_handle is None
        return [r.getMessage().split(" took ")[0] for r in caplog.records
                if "Executing" in r.getMessage()]

    stock, ours = _both(scenario)
    assert len(ours) == 1 and ours[0].startswith("Executing <Handle")
    assert [m.split(" created at ")[0] for m in ours] == [m.split(" created at ")[0] for m in stock]


def test_turning_debug_on_and_off_between_iterations(aloop):
    seen = []
    aloop.call_soon(seen.append, 1)
    aloop.set_debug(True)
    aloop.call_soon(seen.append, 2)
    aloop.set_debug(False)
    aloop.call_soon(seen.append, 3)
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    assert seen == [1, 2, 3]


# ------------------------------------------------------------------ threads and the wake


def test_threadsafe_calls_from_another_thread_make_one_wake_until_the_loop_looks():
    """While the loop does not look at its queue, any number of call_soon_threadsafe calls
    from other threads make one wake (one lane submit) and no wake syscall; the loop thread's
    own calls make none."""
    loop = evloop.new_event_loop()
    try:
        loop.call_soon(loop.stop)
        loop.run_forever()  # makes the C loop's first tick; nothing pending
        before = loop.evloop_stats()
        for _ in range(100):
            loop.call_soon_threadsafe(print)  # this thread: not the loop's (not running)
        t = threading.Thread(target=lambda: [loop.call_soon_threadsafe(print) for _ in range(100)])
        t.start()
        t.join()
        for h in list(loop._ready):
            h.cancel()
        loop.call_soon(loop.stop)
        loop.run_forever()
        after = loop.evloop_stats()
        assert after.tasks_run - before.tasks_run == 1
        assert after.poller_wakes == before.poller_wakes
        assert after.futex_wakes == before.futex_wakes

        def on_loop():
            for _ in range(100):
                loop.call_soon_threadsafe(print).cancel()
            loop.stop()

        before = loop.evloop_stats()
        loop.call_soon(on_loop)
        loop.run_forever()
        assert loop.evloop_stats().tasks_run == before.tasks_run
    finally:
        loop.close()


def test_threadsafe_calls_reach_a_loop_asleep_on_a_far_timer(aloop):
    got = []

    async def main():
        aloop.call_later(3600, print)
        for _ in range(20):
            fut = aloop.create_future()
            t = threading.Thread(target=lambda: (time.sleep(0.002),
                                                 aloop.call_soon_threadsafe(fut.set_result, 1)))
            t.start()
            got.append(await asyncio.wait_for(fut, 30))
            t.join()

    aloop.run_until_complete(main())
    assert got == [1] * 20


def test_call_soon_from_another_thread_is_queued_and_runs(aloop):
    """Not thread-safe in the stdlib either, but it works there when the loop wakes for
    another reason: here too."""
    seen = []

    async def main():
        t = threading.Thread(target=aloop.call_soon, args=(seen.append, 1))
        t.start()
        t.join()
        await asyncio.sleep(0.01)

    aloop.run_until_complete(main())
    assert seen == [1]


_who = contextvars.ContextVar("who", default=None)


def test_bursts_of_threadsafe_calls_from_threads_run_each_in_its_own_context_copy(aloop):
    """Bursts from four threads, each far past what a loop of one idle process keeps of its
    handles (the second burst is made of handles the first left): each callback runs in a
    copy of its thread's context taken at the call, a copy of its own (a callback's set is
    not seen by the next), a handle cancelled before it runs never runs, and a handle made
    from a thread answers repr() and cancel() as any other."""
    per, threads = 3000, 4
    seen = []

    def cb(tag, i):
        seen.append((tag, i, _who.get()))
        _who.set(("leaked", tag, i))  # into this handle's copy only

    def producer(tag, out):
        _who.set(tag)
        for i in range(per):
            h = aloop.call_soon_threadsafe(cb, tag, i)
            if i % 7 == 3:
                h.cancel()
            if i == 5:
                out.append(h)
        _who.set("changed after the calls")

    for burst in range(2):
        del seen[:]
        made = []
        ts = [threading.Thread(target=producer, args=((burst, t), made)) for t in range(threads)]
        for t in ts:
            t.start()
        for t in ts:
            t.join()
        aloop.call_soon(aloop.stop)
        aloop.run_forever()
        want = sorted(((burst, t), i, (burst, t)) for t in range(threads) for i in range(per)
                      if i % 7 != 3)
        assert sorted(seen) == want
        assert all(isinstance(h, asyncio.Handle) and "cb" in repr(h) for h in made)
    assert _who.get() is None


_GIVEN_BACK = """
import asyncio, gc, sys, threading, evloop
loop = evloop.new_event_loop()
def calls(n):
    t = threading.Thread(target=lambda: [loop.call_soon_threadsafe(int) for _ in range(n)])
    t.start()
    t.join()
async def burst_then_wait(n):
    calls(n)
    await asyncio.sleep(0)  # they run
    await asyncio.sleep(0.001)  # an iteration that waits, the loop still running
    gc.collect()
    return sys.getallocatedblocks()
def burst_then_stop(n):
    calls(n)
    loop.call_soon(loop.stop)
    loop.run_forever()  # they run, then the loop stops
    gc.collect()
    return sys.getallocatedblocks()
if sys.argv[1] == "wait":
    loop.run_until_complete(burst_then_wait(100))
    before = loop.run_until_complete(burst_then_wait(100))
    print(loop.run_until_complete(burst_then_wait(20_000)) - before)
else:
    before = burst_then_stop(100)
    print(burst_then_stop(20_000) - before)
loop.close()
"""


@pytest.mark.parametrize("then", ["wait", "stop"])
def test_a_burst_of_handles_is_given_back_once_the_loop_waits_or_stops(then):
    """The handles a burst leaves are kept for the next burst only while the loop is busy:
    after an iteration that waits, or once the loop stops, the process holds no more of them
    than before the burst (in a fresh process, where nothing kept any before)."""
    rc, out, err = _child(_GIVEN_BACK, then)
    assert rc == 0, err
    assert int(out) < 2_000, out


def test_threadsafe_calls_racing_close_are_refused_once_closed(aloop):
    """A thread calling call_soon_threadsafe while the loop runs, stops and closes: every
    call before the close is queued, every one after it raises the stdlib's RuntimeError."""
    errors = []
    calls = [0]
    started = threading.Event()

    def producer():
        while True:
            try:
                aloop.call_soon_threadsafe(int)
            except RuntimeError as e:
                errors.append(str(e))
                return
            calls[0] += 1
            started.set()

    t = threading.Thread(target=producer)
    t.start()
    started.wait(30)
    aloop.call_later(0.01, aloop.stop)
    aloop.run_forever()
    aloop.close()
    t.join(30)
    assert not t.is_alive()
    assert errors == ["Event loop is closed"] and calls[0] > 0
    with pytest.raises(RuntimeError, match="Event loop is closed"):
        aloop.call_soon_threadsafe(int)


# ------------------------------------------------------------------ the collector


class _Obj:
    pass


def test_what_only_queued_handles_hold_survives_a_collection(aloop):
    seen = []
    refs = []
    for i in range(1000):
        o = _Obj()
        o.me = o  # a cycle, so only the collector could free it
        o.i = i
        refs.append(weakref.ref(o))
        aloop.call_soon(lambda o=o: seen.append(o.i))
        aloop.call_soon(seen.append, (o,))
    del o
    gc.collect()
    assert all(r() is not None for r in refs)
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    assert len(seen) == 2000
    del seen[:]
    gc.collect()
    assert all(r() is None for r in refs)


def test_an_abandoned_loop_with_queued_handles_is_collected_and_warns():
    """Its queued handles (untracked by the collector while queued) refer to the loop and to
    cycles: the collector still finds the whole cycle."""
    gc.collect()
    loop = evloop.new_event_loop()
    wl = weakref.ref(loop)
    o = _Obj()
    o.loop = loop
    wo = weakref.ref(o)
    for _ in range(100):
        loop.call_soon(print, o)
        loop.call_soon(lambda lp=loop: lp)
    loop.call_later(3600, print, o)
    del loop, o
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        gc.collect()
    assert wl() is None and wo() is None
    assert any("unclosed event loop" in str(x.message) for x in w)


def test_a_kept_handle_is_never_reused_and_keeps_its_state(aloop):
    def cb():
        pass

    kept = [aloop.call_soon(cb) for _ in range(10)]
    ids = {id(h) for h in kept}
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    for _ in range(3):
        new = [aloop.call_soon(cb) for _ in range(100)]
        assert not ids & {id(h) for h in new}
        del new
        aloop.call_soon(aloop.stop)
        aloop.run_forever()
    assert all(h._callback is cb and not h.cancelled() and h._loop is aloop for h in kept)
    assert all(gc.is_tracked(h) for h in kept)


def test_a_weakly_referenced_handle_is_freed_never_reused(aloop):
    """A handle (or timer) with a weak reference is never put on the free list: once run,
    it is freed and the reference dies (3.11 keeps the list head in a slot, 3.12 and 3.13
    before the object: release_handle must read the right one)."""
    def cb():
        pass

    refs = [weakref.ref(aloop.call_soon(cb)) for _ in range(20)]
    refs += [weakref.ref(aloop.call_later(0, cb)) for _ in range(20)]
    for _ in range(3):
        aloop.call_later(0.001, aloop.stop)
        aloop.run_forever()
        for _ in range(100):  # what the free list would hand out again
            aloop.call_soon(cb)
            aloop.call_later(0, cb)
    assert all(r() is None for r in refs)


def test_no_empty_handle_is_ever_visible_to_the_collector(aloop):
    for _ in range(3):
        for _ in range(2000):
            aloop.call_soon(int)
        aloop.call_soon(aloop.stop)
        aloop.run_forever()
    for o in gc.get_objects():
        if isinstance(o, asyncio.Handle):
            repr(o)  # an emptied handle would raise AttributeError here


def test_many_call_soon_and_timers_leak_nothing(aloop):
    import tracemalloc

    def round_():
        for i in range(5000):
            aloop.call_soon(int)
            aloop.call_soon_threadsafe(str)
            aloop.call_later(0, float).cancel() if i % 2 else aloop.call_later(0, float)
        aloop.call_later(0.001, aloop.stop)
        aloop.run_forever()

    round_()
    gc.collect()
    tracemalloc.start()
    try:
        round_()
        gc.collect()
        base = tracemalloc.get_traced_memory()[0]
        n = len(gc.get_objects())
        for _ in range(5):
            round_()
        gc.collect()
        grown = tracemalloc.get_traced_memory()[0] - base
    finally:
        tracemalloc.stop()
    assert len(gc.get_objects()) <= n + 50
    assert grown < 200_000, grown


# ------------------------------------------------------------------ run_forever's loop in C


def _count_run_once(loop):
    """Wraps the loop's _run_once on the instance: the number of calls run_forever made."""
    calls = [0]
    native = loop._run_once

    def counted():
        calls[0] += 1
        native()

    loop._run_once = counted
    return calls


def test_run_forever_calls_a_run_once_set_on_the_instance_each_iteration(either):
    calls = _count_run_once(either)
    left = [50]

    def cb():
        left[0] -= 1
        if left[0]:
            either.call_soon(cb)
        else:
            either.stop()

    either.call_soon(cb)
    either.run_forever()
    assert calls[0] == 50
    del either._run_once
    left[0] = 50
    either.call_soon(cb)
    either.run_forever()  # the native loop again: same outcome
    assert left[0] == 0


def test_a_run_once_set_while_running_is_called_from_the_next_iteration(either):
    seen = []

    def patch():
        calls = _count_run_once(either)
        seen.append(calls)
        either.call_soon(either.call_soon, either.stop)

    either.call_soon(either.call_soon, patch)
    either.run_forever()
    assert seen[0][0] == 2  # the iteration running patch's call_soon, then the stop's


def test_a_subclass_run_once_is_called_each_iteration():
    for base in (asyncio.SelectorEventLoop, evloop.EventLoop):
        class Counting(base):
            calls = 0

            def _run_once(self):
                Counting.calls += 1
                super()._run_once()

        loop = Counting()
        try:
            for _ in range(3):
                loop.call_soon(loop.call_soon, loop.call_soon, loop.stop)
                loop.run_forever()
        finally:
            loop.close()
        assert Counting.calls == 9, base


def test_stop_ends_run_forever_after_the_iteration_that_called_it(either):
    ran = []
    either.call_soon(ran.append, 1)
    either.call_soon(either.stop)
    either.call_soon(ran.append, 2)
    either.call_soon(lambda: either.call_soon(ran.append, 3))
    either.run_forever()
    assert ran == [1, 2] and len(either._ready) == 1
    either.call_soon(either.stop)
    either.run_forever()
    assert ran == [1, 2, 3]


def test_a_loop_running_only_c_callbacks_lets_other_threads_run(aloop):
    """A chain of callbacks with no Python frame (a partial of call_soon scheduling itself)
    never reaches the eval loop's periodic check: the loop hands the GIL over itself."""
    import functools

    p = functools.partial(aloop.call_soon)
    p.__setstate__((aloop.call_soon, (p,), None, None))
    done = threading.Event()

    def other():
        time.sleep(0.05)  # the GIL is the loop's again: taking it back needs a hand-over
        aloop.call_soon_threadsafe(aloop.stop)
        done.set()

    def too_long(signum, frame):  # runs from the iteration's signal check: a failure, no hang
        aloop.stop()

    aloop.call_soon(p)
    t = threading.Thread(target=other)
    aloop.call_soon(t.start)
    old = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        aloop.run_forever()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        p.__setstate__((int, (), None, None))  # break the cycle
    t.join(10)
    assert done.is_set()


# ------------------------------------------------------------------ polls left out while handles are ready


def test_a_run_once_called_on_its_own_polls_every_time(either):
    """Only run_forever's C loop may leave a zero-timeout poll out: a _run_once() called on
    its own sees an fd that became ready before it, even with a handle queued, as the stdlib
    does (the reader runs in that very iteration, after the handle)."""
    import socket

    a, b = socket.socketpair()
    a.setblocking(False)
    seen = []
    try:
        either.add_reader(a, lambda: seen.append(("reader", a.recv(10))))
        for i in range(200):
            either.call_soon(seen.append, ("cb", i))
            b.send(b"x")
            either._run_once()
            assert seen == [("cb", i), ("reader", b"x")], (i, seen)
            seen.clear()
        either.remove_reader(a)
    finally:
        a.close()
        b.close()


def test_io_is_seen_while_handles_are_always_ready(either):
    """A chain of callbacks that keeps the ready queue full never starves an fd: its reader
    runs (evloop's C loop polls at least every 20 us of such iterations)."""
    import socket

    a, b = socket.socketpair()
    a.setblocking(False)
    spins = [0]
    got = []

    def spin():
        spins[0] += 1
        if spins[0] == 1000:
            b.send(b"!")  # from inside the chain: no iteration waits after it
        if not got:
            either.call_soon(spin)

    def reader():
        got.append(a.recv(10))
        either.stop()

    def too_long(signum, frame):
        either.stop()

    old = signal.signal(signal.SIGALRM, too_long)
    signal.setitimer(signal.ITIMER_REAL, 10)
    try:
        either.add_reader(a, reader)
        either.call_soon(spin)
        either.run_forever()
        either.remove_reader(a)
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
        a.close()
        b.close()
    assert got == [b"!"] and spins[0] >= 1000


# ------------------------------------------------------------------ timers untracked while only the heap holds them


def test_what_only_pending_timers_hold_survives_a_collection(aloop):
    seen = []
    refs = []
    for i in range(1000):
        o = _Obj()
        o.me = o  # a cycle, so only the collector could free it
        o.i = i
        refs.append(weakref.ref(o))
        aloop.call_later(0.001 * (i % 7), lambda o=o: seen.append(o.i))
        aloop.call_at(aloop.time() + 0.002, seen.append, (o,))
    del o
    gc.collect()
    assert all(r() is not None for r in refs)
    aloop.call_later(0.05, aloop.stop)
    aloop.run_forever()
    assert len(seen) == 2000
    del seen[:]
    gc.collect()
    assert all(r() is None for r in refs)


def test_a_pending_timer_only_the_heap_holds_is_untracked_until_it_leaves(aloop):
    def cb():
        pass

    kept = aloop.call_later(3600, cb)
    aloop.call_later(3600, cb)
    aloop.call_later(3600, cb).cancel()
    aloop.call_soon(aloop.stop)
    aloop.run_forever()  # the iteration settles what call_later made last
    tracked = [o for o in gc.get_objects()
               if isinstance(o, asyncio.TimerHandle) and o._loop is aloop]
    # The other two are held by the heap only: untracked where the core recycles handles
    # (it can tell they have no weak reference: 3.11's weakref slot, 3.12's and 3.13's
    # managed one).
    if sys.version_info[:2] <= (3, 13):
        assert tracked == [kept]
    else:
        assert len(tracked) in (1, 3) and kept in tracked
    timers = list(aloop._scheduled)  # the view hands them out tracked again
    assert len(timers) == 3 and all(gc.is_tracked(t) for t in timers)
    assert all(gc.is_tracked(t._context) for t in timers)
    del timers
    for t in aloop._scheduled:
        t.cancel()


def test_an_abandoned_loop_with_pending_timers_is_collected():
    gc.collect()
    loop = evloop.new_event_loop()
    wl = weakref.ref(loop)
    o = _Obj()
    o.loop = loop
    wo = weakref.ref(o)
    for i in range(100):
        loop.call_later(3600 + i, print, o)
        loop.call_at(loop.time() + 10, lambda lp=loop: lp)
    loop.call_soon(int)  # settles the last timer
    del loop, o
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        gc.collect()
    assert wl() is None and wo() is None


def test_cancelled_pending_timers_are_dropped_tracked_and_freed(aloop):
    refs = []
    for i in range(300):  # over 100 timers, over half cancelled: the all-at-once clean-up
        o = _Obj()
        refs.append(weakref.ref(o))
        h = aloop.call_later(3600, print, o)
        if i % 3:
            h.cancel()
        del h, o
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    gc.collect()
    assert sum(r() is None for r in refs) == 200
    assert len(aloop._scheduled) == 100
    for t in aloop._scheduled:
        assert gc.is_tracked(t) and not t.cancelled()
        t.cancel()
    aloop.call_soon(aloop.stop)
    aloop.run_forever()
    assert len(aloop._scheduled) == 0


# A child that runs timers at odd times on the loop named by argv[1] and prints what ran; a loop
# that stalls on one of them is killed by the test's deadline.
_ODD_TIMES = r"""
import asyncio, sys
import evloop
make = asyncio.SelectorEventLoop if sys.argv[1] == "stock" else evloop.new_event_loop
class F(float): pass
out = []
for when in (float("nan"), F("nan"), float("inf"), float("-inf"), 1e308, -1e308):
    loop = make()
    ran = []
    loop.call_at(when, ran.append, "at")
    loop.call_later(0.001, ran.append, "later")
    loop.call_later(0.02, loop.stop)
    loop.run_forever()
    out.append((repr(when), ran, len(loop._scheduled)))
    loop.close()
for delay in (float("nan"), float("inf"), float("-inf"), 1e308, -1e308):
    loop = make()
    ran = []
    loop.call_later(delay, ran.append, "delay")
    loop.call_later(0.001, ran.append, "later")
    loop.call_later(0.02, loop.stop)
    loop.run_forever()
    out.append((repr(delay), ran, len(loop._scheduled)))
    loop.close()
loop = make()
loop.time = lambda: float("nan")
try:
    loop.run_until_complete(asyncio.wait_for(loop.create_future(), 1))
except BaseException as e:
    out.append(type(e).__name__)
loop.close()
print(out)
"""


def test_timers_at_nan_and_infinite_times_never_stall_the_loop():
    # Regression (issue 39): a timer at NaN stalled the iteration (every timer behind it with
    # it) at 100 % CPU, and so did a loop.time() returning NaN; the stock loop runs a NaN
    # timer that reaches the head of its heap at once, and every timer when time() is NaN.
    runs = [_child(_ODD_TIMES, name) for name in ("stock", "evloop")]
    assert runs[0][0] == 0, runs[0][2]
    assert runs[1] == runs[0]


# Timers at NaN among others, in any order: each NaN timer runs (evloop takes it as due at
# once; the stock loop's heapq, all of whose comparisons with NaN are false, runs it when its
# sifts happen to bring it to the head), the others at their times, and the loop stops.
_NAN_MIX = r"""
import random
import evloop
rng = random.Random(39)
for _ in range(50):
    loop = evloop.new_event_loop()
    ran, want = [], []
    for i in range(rng.randrange(1, 12)):
        when = rng.choice([float("nan"), float("-inf"), float("inf"), 0.0, 0.002])
        if when != float("inf"):
            want.append(i)
        loop.call_at(loop.time() + when, ran.append, i)
    loop.call_later(0.02, loop.stop)
    loop.run_forever()
    assert sorted(ran) == want, (ran, want)
    loop.close()
print("ok")
"""


def test_nan_timers_among_others_all_run_and_the_loop_stops():
    rc, out, err = _child(_NAN_MIX)
    assert (rc, out) == (0, "ok\n"), err
