"""Creating, running, stopping and closing loops; the package-level API."""

from __future__ import annotations

import errno
import os
import re
import threading

import pytest

import evloop
from conftest import COMBOS, LoopThread, wait_until


def test_backends_lists_only_backends_that_start_here():
    bs = evloop.backends()
    assert bs, "no backend starts on this machine"
    for b in bs:
        with evloop.Loop(backend=b) as lp:
            assert lp.backend == b


def test_backends_left_out_name_what_the_build_lacks_with_a_reason():
    left = evloop.backends_left_out()
    built = evloop._arena.BACKENDS.split(",")
    for name, why in left.items():
        assert name not in built and name not in evloop.backends()
        assert why, f"{name} left out without a reason"
    # on Linux either io_uring is built in or the build said why not
    if "epoll" in built:
        assert ("io_uring" in built) != ("io_uring" in left)


def test_variants_are_arena_and_chunk():
    assert evloop.variants() == ["arena", "chunk"]
    assert evloop._arena.ingress() == "arena"
    assert evloop._chunk.ingress() == "chunk"


def test_loop_is_an_instance_of_evloop_loop_for_both_variants(combo):
    variant, backend = combo
    with evloop.Loop(backend=backend, variant=variant) as lp:
        assert isinstance(lp, evloop.Loop)
        assert lp.variant == variant
        assert lp.backend == backend
        assert lp.stats().ingress == variant
        assert f"variant={variant}" in repr(lp)


def test_default_variant_is_arena_and_env_can_change_it(monkeypatch):
    monkeypatch.delenv("EVLOOP_VARIANT", raising=False)
    with evloop.Loop() as lp:
        assert lp.variant == "arena"
    monkeypatch.setenv("EVLOOP_VARIANT", "chunk")
    with evloop.Loop() as lp:
        assert lp.variant == "chunk"


def test_bad_arguments_raise_before_anything_starts():
    with pytest.raises(ValueError):
        evloop.Loop(variant="nope")
    with pytest.raises(ValueError):
        evloop.Loop(spin_ns=-2)
    with pytest.raises(ValueError):
        evloop.Loop(batch_budget=-1)
    with pytest.raises(evloop.Error) as ei:
        evloop.Loop(backend="no-such-backend")
    assert ei.value.errno == errno.EINVAL
    assert isinstance(ei.value, OSError)


def test_a_backend_not_built_here_raises_enotsup():
    missing = [b for b in ("epoll", "io_uring", "kqueue") if b not in evloop.backends()]
    if not missing:
        pytest.skip("every backend starts here")
    with pytest.raises(evloop.Error) as ei:
        evloop.Loop(backend=missing[0])
    assert ei.value.errno == errno.ENOTSUP


def test_fixed_spin_and_budget_are_in_force(combo):
    variant, backend = combo
    with evloop.Loop(backend=backend, variant=variant, spin_ns=0, batch_budget=64) as lp:
        st = lp.stats()
        assert st.spin_ns == 0
        assert st.batch_budget == 64


def test_states_from_awake_to_terminated(loop):
    assert loop.state == evloop.State.AWAKE
    assert loop.state == "awake"
    lt = LoopThread(loop).start()
    assert wait_until(lambda: loop.state == evloop.State.SLEEPING)
    lt.join()
    assert loop.state is evloop.State.TERMINATED
    loop.close()
    assert loop.closed
    assert loop.state is evloop.State.TERMINATED


def test_stop_from_a_callback_returns_from_run(loop):
    ran = []
    loop.submit(ran.append, 1)
    loop.submit(loop.stop)
    loop.run()  # on this (main) thread
    assert ran == [1]
    assert loop.state == "terminated"


def test_stop_before_run_runs_what_was_accepted_and_returns(loop):
    ran = []
    for i in range(10):
        loop.submit(ran.append, i)
    loop.stop()
    with pytest.raises(evloop.LoopClosedError):
        loop.submit(ran.append, 99)
    loop.run()
    assert ran == list(range(10))


def test_a_terminated_loop_refuses_work_and_a_second_run(loop):
    loop.submit(loop.stop)
    loop.run()
    with pytest.raises(evloop.LoopClosedError) as ei:
        loop.submit(print)
    assert ei.value.errno == errno.ESHUTDOWN
    with pytest.raises(evloop.LoopClosedError):
        loop.call_later(0, print)
    with pytest.raises(evloop.LoopClosedError):
        loop.run()


def test_closed_loop_raises_loop_closed_error_everywhere(loop):
    loop.close()
    loop.close()  # idempotent
    loop.stop()  # a no-op
    for call in (lambda: loop.submit(print), lambda: loop.submit_internal(print),
                 lambda: loop.queue_microtask(print), lambda: loop.call_later(1, print),
                 lambda: loop.call_every(1, print), lambda: loop.add_reader(0, print),
                 lambda: loop.run(), lambda: loop.stats()):
        with pytest.raises(evloop.LoopClosedError):
            call()
    assert loop.remove_reader(0) is False


def test_close_runs_tasks_that_were_accepted_but_never_run(loop):
    ran = []
    for i in range(1000):
        loop.submit(ran.append, i)
    loop.submit_internal(ran.append, "internal")
    loop.close()
    assert ran[0] == "internal"
    assert ran[1:] == list(range(1000))


def test_close_while_running_raises_ebusy(running):
    with pytest.raises(evloop.Error) as ei:
        running.loop.close()
    assert ei.value.errno == errno.EBUSY


def test_run_while_running_raises_ebusy(running):
    with pytest.raises(evloop.Error) as ei:
        running.call(running.loop.run)
    assert ei.value.errno == errno.EBUSY


def test_context_manager_closes(combo):
    variant, backend = combo
    with evloop.Loop(backend=backend, variant=variant) as lp:
        lp.submit(lp.stop)
        lp.run()
    assert lp.closed


def test_gil_is_released_while_the_loop_waits(running):
    # The loop thread is inside run(); if it held the GIL this thread could not run.
    assert wait_until(lambda: running.loop.state == evloop.State.SLEEPING)
    x = 0
    for i in range(200000):
        x += i
    assert running.loop.state in (evloop.State.SLEEPING, evloop.State.RUNNING)


def test_two_loops_of_different_variants_in_one_process():
    b = evloop.backends()[0]
    a = LoopThread(evloop.Loop(backend=b, variant="arena")).start()
    c = LoopThread(evloop.Loop(backend=b, variant="chunk")).start()
    try:
        got = []
        ev = threading.Event()

        def on_chunk(x):
            got.append(("chunk", x))
            ev.set()

        a.loop.submit(lambda: c.loop.submit(on_chunk, 42))
        assert ev.wait(20)
        assert got == [("chunk", 42)]
    finally:
        a.join()
        c.join()
        a.loop.close()
        c.loop.close()


HEADER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "include", "evloop.h")


def c_stats_fields():
    """The field names of struct evloop_stats, read from the C header."""
    with open(HEADER) as f:
        text = f.read()
    body = re.search(r"struct evloop_stats \{(.*?)\n\};", text, re.S).group(1)
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    return [m.group(1) for m in re.finditer(r"(\w+)\s*;", body)]


def test_stats_has_every_field_of_the_c_struct_read_only(loop):
    st = loop.stats()
    fields = c_stats_fields()
    assert "spin_preemptions" in fields and len(fields) >= 19
    assert list(st._fields) == fields
    d = st.as_dict()
    assert list(d) == list(st._fields)
    for k in st._fields:
        assert getattr(st, k) == d[k] == st[k]
        with pytest.raises(AttributeError):
            setattr(st, k, 1)
    assert st.backend == loop.backend and st.ingress == loop.variant
    assert isinstance(st.profile_loaded, bool) and isinstance(st.tasks_run, int)
    with pytest.raises(KeyError):
        st["nope"]
    assert "tasks_run=0" in repr(st)


def test_stats_count_only_user_work(loop):
    for _ in range(100):
        loop.submit(lambda: None)
    loop.call_later(0, lambda: None)
    loop.call_later(0.002, loop.stop)
    loop.run()
    st = loop.stats()
    assert st.tasks_run == 100  # the binding queues no task of its own here
    assert st.timers_fired == 2


def test_state_enum_compares_as_str():
    assert evloop.State.RUNNING == "running"
    assert str(evloop.State.SLEEPING) == "sleeping"


@pytest.mark.parametrize("variant,backend", COMBOS)
def test_many_loops_created_and_closed(variant, backend):
    for _ in range(200):
        lp = evloop.Loop(backend=backend, variant=variant)
        lp.submit(lambda: None)
        lp.close()


def test_version_is_the_c_librarys():
    with open(HEADER) as f:
        text = f.read()
    parts = [re.search(rf"#define EVLOOP_VERSION_{k} (\d+)", text).group(1)
             for k in ("MAJOR", "MINOR", "PATCH")]
    assert evloop.__version__ == ".".join(parts)
    assert evloop._arena.VERSION_INFO == tuple(map(int, parts))
    assert evloop._chunk.version() == evloop.__version__
    with evloop.Loop() as lp:
        assert lp.version == evloop.__version__


def test_on_loop_thread_is_true_only_inside_the_loop(running):
    assert running.loop._c.on_loop_thread() is False
    assert running.call(running.loop._c.on_loop_thread) is True
