"""evloop's asyncio event loop (evloop/_aio.py): the entry points, every backend and variant,
call_soon_threadsafe from many threads, transports, and bad input answered with the stdlib's
own exceptions and messages (each checked against the stock loop doing the same)."""

from __future__ import annotations

import asyncio
import gc
import os
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import warnings

import pytest

import evloop

from conftest import AIO_LOOPS as LOOPS, on_both_loops as _both, raised as _raised


def _open_fds():
    return set(os.listdir("/proc/self/fd"))


@pytest.mark.skipif(not hasattr(asyncio, "Runner"), reason="asyncio.Runner is Python 3.11+")
def test_entry_points_make_evloop_loops():
    async def main():
        return type(asyncio.get_running_loop())

    assert evloop.run(main()) is evloop.EventLoop
    with asyncio.Runner(loop_factory=evloop.new_event_loop) as r:
        assert r.run(main()) is evloop.EventLoop
    old = asyncio.get_event_loop_policy()
    try:
        evloop.install()
        assert isinstance(asyncio.get_event_loop_policy(), evloop.EventLoopPolicy)
        assert asyncio.run(main()) is evloop.EventLoop
        loop = asyncio.new_event_loop()
        assert isinstance(loop, evloop.EventLoop)
        loop.close()
    finally:
        asyncio.set_event_loop_policy(old)
    assert isinstance(evloop.new_event_loop(), asyncio.AbstractEventLoop)


def test_run_passes_debug_and_returns_the_result():
    async def main():
        return asyncio.get_running_loop().get_debug(), 42

    assert evloop.run(main(), debug=True) == (True, 42)


def test_echo_over_streams_on_every_backend_and_variant(aloop):
    async def main():
        async def handle(r, w):
            w.write(await r.readexactly(5))
            await w.drain()
            w.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection("127.0.0.1", port)
        assert isinstance(w.transport, asyncio.Transport)
        sock = w.transport.get_extra_info("socket")  # as the stdlib's: a TransportSocket
        assert isinstance(sock, asyncio.trsock.TransportSocket)
        assert sock.getsockname() == w.transport.get_extra_info("sockname")
        w.write(b"hello")
        data = await r.read()
        w.close()
        await w.wait_closed()
        srv.close()
        await srv.wait_closed()
        return data

    assert aloop.run_until_complete(main()) == b"hello"
    assert aloop.evloop_backend in evloop.backends()


def test_one_asyncio_core_module_drives_a_raw_loop_of_either_variant():
    """The asyncio loop's C types are in evloop._asyncio_core alone; it drives the RawLoop of
    either variant through that module's _aio_ops capsule, and refuses any other object."""
    from evloop import _arena, _asyncio_core, _chunk

    for name in ("_AioCore", "_AioStreamBase", "_AioDatagramBase", "_aio_setup",
                 "_aio_transport_setup", "_aio_datagram_setup", "_aio_fds_setup",
                 "_aio_sock_setup"):
        assert hasattr(_asyncio_core, name)
        assert not hasattr(_arena, name) and not hasattr(_chunk, name)
    assert evloop.EventLoop.__mro__[1] is _asyncio_core._AioCore
    for variant, mod in (("arena", _arena), ("chunk", _chunk)):
        loop = evloop.new_event_loop(variant=variant)
        try:
            assert type(loop._evloop_raw) is mod.RawLoop
            assert loop.run_until_complete(asyncio.sleep(0.001, variant)) == variant
        finally:
            loop.close()

    class NotARawLoop:
        _aio_ops = _chunk.RawLoop._aio_ops

    core = _asyncio_core._AioCore()
    with pytest.raises(TypeError, match="not a RawLoop of this build"):
        core._evloop_attach(NotARawLoop(), None, {}, 0, 0, 0)


def test_datagram_transport_is_a_datagram_transport(aloop):
    async def main():
        got = aloop.create_future()

        class P(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                got.set_result(data)

        tr, _ = await aloop.create_datagram_endpoint(P, local_addr=("127.0.0.1", 0))
        assert isinstance(tr, asyncio.DatagramTransport)
        addr = tr.get_extra_info("sockname")
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        s.setblocking(False)
        await aloop.sock_sendto(s, b"dgram", addr)
        data = await asyncio.wait_for(got, 10)
        s.close()
        tr.close()
        return data

    assert aloop.run_until_complete(main()) == b"dgram"


def test_call_soon_threadsafe_from_8_threads_runs_each_once_in_per_thread_order(aloop):
    n, per = 8, 2000
    seen = {i: [] for i in range(n)}

    async def main():
        done = aloop.create_future()
        left = [n * per]

        def cb(i, k):
            seen[i].append(k)
            left[0] -= 1
            if left[0] == 0:
                done.set_result(None)

        def producer(i):
            for k in range(per):
                aloop.call_soon_threadsafe(cb, i, k)

        ts = [threading.Thread(target=producer, args=(i,)) for i in range(n)]
        for t in ts:
            t.start()
        await asyncio.wait_for(done, 60)
        for t in ts:
            t.join()

    aloop.run_until_complete(main())
    assert all(seen[i] == list(range(per)) for i in range(n))


def test_call_soon_threadsafe_wakes_a_sleeping_loop(aloop):
    async def main():
        fut = aloop.create_future()
        t = threading.Timer(0.05, aloop.call_soon_threadsafe, (fut.set_result, 7))
        t.start()
        # nothing else would wake the loop for an hour
        r = await asyncio.wait_for(fut, 3600)
        t.join()
        return r

    assert aloop.run_until_complete(main()) == 7


def test_a_callback_that_raises_reaches_the_handler_and_the_loop_goes_on(aloop):
    seen = []
    aloop.set_exception_handler(lambda loop, ctx: seen.append(ctx))

    def boom():
        raise ZeroDivisionError("boom")

    async def main():
        aloop.call_soon(boom)
        threading.Thread(target=aloop.call_soon_threadsafe, args=(boom,)).start()
        aloop.call_later(0.001, boom)
        for _ in range(100):
            if len(seen) == 3:
                break
            await asyncio.sleep(0.01)
        return "still running"

    assert aloop.run_until_complete(main()) == "still running"
    assert len(seen) == 3
    assert all(isinstance(c["exception"], ZeroDivisionError) for c in seen)
    assert all(c["message"].startswith("Exception in callback") for c in seen)


def _same(scenario):
    stock, ours = _both(scenario)
    assert stock is not None
    assert ours == stock


def test_closed_loop_raises_as_the_stdlib_does():
    def scenario(loop):
        loop.close()
        return [_raised(lambda: loop.call_soon(print)),
                _raised(lambda: loop.call_soon_threadsafe(print)),
                _raised(lambda: loop.call_later(1, print)),
                _raised(lambda: loop.run_forever()),
                _raised(lambda: loop.add_reader(0, print))]

    _same(scenario)


def test_non_callables_raise_as_the_stdlib_does():
    def scenario(loop):
        return [_raised(lambda: loop.call_soon(1)),
                _raised(lambda: loop.call_soon_threadsafe("x")),
                _raised(lambda: loop.call_later(0.1, None)),
                _raised(lambda: loop.call_at(1.0, 3)),
                _raised(lambda: loop.add_reader(0, 1)),
                _raised(lambda: loop.run_until_complete(1))]

    _same(scenario)


def test_wrong_thread_in_debug_mode_raises_as_the_stdlib_does():
    def scenario(loop):
        loop.set_debug(True)
        box = []

        async def main():
            t = threading.Thread(target=lambda: box.append(_raised(lambda: loop.call_soon(print))))
            t.start()
            t.join()

        loop.run_until_complete(main())
        return box

    _same(scenario)


def test_run_twice_nested_and_two_loops_on_one_thread_raise_as_the_stdlib_does():
    def scenario(loop):
        out = []

        async def inner():
            coro = asyncio.sleep(0)
            out.append(_raised(lambda: loop.run_until_complete(coro)))
            other = type(loop)() if not isinstance(loop, evloop.EventLoop) else evloop.new_event_loop()
            out.append(_raised(lambda: other.run_until_complete(asyncio.sleep(0))))
            other.close()
            c = asyncio.sleep(0)
            out.append(_raised(lambda: asyncio.run(c)))
            c = asyncio.sleep(0)
            out.append(_raised(lambda: evloop.run(c)))
            # last: on CPython 3.13.0 a refused nested run_forever runs the loop's clean-up
            # (its stdlib's own bug, the stock loop's too), so the loop no longer reads as
            # running afterwards
            out.append(_raised(lambda: loop.run_forever()))

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # the coroutines never awaited
            loop.run_until_complete(inner())
            gc.collect()
        return out

    stock, ours = _both(scenario)
    assert stock[:3] == ours[:3] and stock[4] == ours[4]
    assert ours[3] == ours[2]  # evloop.run answers as asyncio.run
    assert all(x is not None for x in ours)


def test_closed_fd_and_fd_of_a_transport_raise_as_the_stdlib_does():
    def scenario(loop):
        r, w = os.pipe()
        os.close(r)
        os.close(w)
        out = [_raised(lambda: loop.add_reader(r, print)), _raised(lambda: loop.add_writer(w, print))]

        async def main():
            a, b = socket.socketpair()
            tr, _ = await loop.connect_accepted_socket(asyncio.Protocol, a)
            out.append(_raised(lambda: loop.add_reader(a, print)))
            out.append(_raised(lambda: loop.remove_writer(a)))
            tr.close()
            b.close()
            await asyncio.sleep(0)

        loop.run_until_complete(main())
        return [(t, m.replace(f"{r}", "R").replace(f"{w}", "W")) if t else None for t, m in
                [x if x else (None, None) for x in out]]

    stock, ours = _both(scenario)
    # the transport's repr names the loop class: compare the message up to it
    assert [(t, m.split(" is used by transport")[0] if m else m) for t, m in stock] == \
           [(t, m.split(" is used by transport")[0] if m else m) for t, m in ours]
    assert stock[0][0] is not None and issubclass(stock[0][0], OSError)


def test_unclosed_loop_warns_and_leaks_no_fd():
    gc.collect()
    before = _open_fds()
    loop = evloop.new_event_loop()

    async def main():
        s = socket.socket()
        s.close()

    loop.run_until_complete(main())
    assert len(_open_fds()) > len(before)  # the self-pipe and the poller
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        del loop
        gc.collect()
    assert any(issubclass(x.category, ResourceWarning) and "unclosed event loop" in str(x.message)
               for x in w), [str(x.message) for x in w]
    assert _open_fds() == before


def test_closed_loop_leaks_no_fd_over_many_loops():
    gc.collect()
    before = _open_fds()
    for _ in range(200):
        loop = evloop.new_event_loop()
        loop.run_until_complete(asyncio.sleep(0))
        loop.close()
    gc.collect()
    assert _open_fds() == before


CTRL_C = textwrap.dedent("""
    import asyncio, sys, evloop
    async def main():
        print("ready", flush=True)
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            print("main task cancelled", flush=True)
            raise
    try:
        evloop.run(main())
    except KeyboardInterrupt:
        print("KeyboardInterrupt", flush=True)
        sys.exit(3)
""")


def test_ctrl_c_in_run_cancels_the_main_task():
    p = subprocess.Popen([sys.executable, "-c", CTRL_C], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        assert p.stdout.readline().strip() == "ready"
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
    assert out.split() == ["main", "task", "cancelled", "KeyboardInterrupt"], (out, err)
    assert p.returncode == 3, err


def test_signal_handler_and_subprocess(aloop):
    async def main():
        got = aloop.create_future()
        aloop.add_signal_handler(signal.SIGUSR1, got.set_result, "usr1")
        os.kill(os.getpid(), signal.SIGUSR1)
        r = await asyncio.wait_for(got, 10)
        aloop.remove_signal_handler(signal.SIGUSR1)
        p = await asyncio.create_subprocess_exec(sys.executable, "-c", "print(6*7)",
                                                 stdout=asyncio.subprocess.PIPE)
        out, _ = await p.communicate()
        return r, out.strip()

    assert aloop.run_until_complete(main()) == ("usr1", b"42")


def test_sock_sendfile_and_run_in_executor(aloop, tmp_path):
    data = os.urandom(300_000)
    path = tmp_path / "f"
    path.write_bytes(data)

    async def main():
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)

        async def reader():
            chunks = []
            while True:
                c = await aloop.sock_recv(b, 65536)
                if not c:
                    return b"".join(chunks)
                chunks.append(c)

        rt = aloop.create_task(reader())
        with open(path, "rb") as f:
            sent = await aloop.sock_sendfile(a, f)
        a.close()
        got = await rt
        b.close()
        total = await aloop.run_in_executor(None, sum, range(1000))
        return sent, got, total

    sent, got, total = aloop.run_until_complete(main())
    assert sent == len(data) and got == data and total == 499500


def test_selector_answers_as_the_stdlib_epoll_selector():
    import selectors

    def scenario(sel):
        a, b = socket.socketpair()
        out = [_raised(lambda: sel.register(a, 0)), _raised(lambda: sel.register(a, 8)),
               _raised(lambda: sel.register(-1, selectors.EVENT_READ)),
               _raised(lambda: sel.register(object(), selectors.EVENT_READ)),
               _raised(lambda: sel.unregister(a)), _raised(lambda: sel.modify(a, 1))]
        key = sel.register(a, selectors.EVENT_READ, "d")
        out.append((key.fd == a.fileno(), key.events, key.data))
        out.append(_raised(lambda: sel.register(a, selectors.EVENT_READ)) is not None)
        out.append(sel.select(0))
        b.send(b"x")
        out.append([(k.data, ev) for k, ev in sel.select(5)])
        key = sel.modify(a, selectors.EVENT_READ | selectors.EVENT_WRITE, "e")
        out.append(sorted((k.data, ev) for k, ev in sel.select(5)))
        out.append(sel.get_key(a).data)
        out.append(len(sel.get_map()))
        sel.unregister(a)
        out.append(_raised(lambda: sel.get_key(a)) is not None)
        a.close()
        b.close()
        sel.close()
        out.append(_raised(lambda: sel.register(b, selectors.EVENT_READ)))
        return out

    from evloop import _aio, _arena

    import re

    def norm(x):  # the fd numbers differ: each selector holds its own poller fd
        return re.sub(r"(fd=|FD | at 0x)[0-9a-f]+", r"\1N", repr(x))

    stock = [norm(x) for x in scenario(selectors.EpollSelector())]
    ours = [norm(x) for x in scenario(_aio._EvloopSelector(_arena.RawLoop()))]
    # the closed selector's message names the object: "epoll object" in the stdlib
    assert stock[-1].startswith("(<class 'ValueError'>") and ours[-1].startswith(stock[-1][:24])
    assert stock[:-1] == ours[:-1]
