"""The asyncio loop's fd registry in C (src/aio/fds.cpp: _add_reader, _add_writer, _remove_reader,
_remove_writer): every sequence of calls leaves the selector's keys, the handles and the return
values as the stdlib's Python methods leave them on the stock loop, the poller follows the keys,
and what the C paths leave to the stdlib (file objects, a replaced selector, a closed loop)
behaves as there."""

from __future__ import annotations

import asyncio
import errno
import os
import random
import selectors
import socket

import pytest

import evloop

from conftest import AIO_LOOPS as LOOPS, on_both_loops as _both, raised as _raised

R, W = selectors.EVENT_READ, selectors.EVENT_WRITE


def _state(loop, fds):
    """What the registry says of each fd: (events, reader's callback, writer's callback)."""
    out = []
    for fd in fds:
        key = loop._selector.get_map().get(fd)
        if key is None:
            out.append(None)
            continue
        r, w = key.data
        assert key.fd == fd and key.fileobj == fd
        out.append((key.events, r and r._callback and r._callback.__name__,
                    w and w._callback and w._callback.__name__))
    return out


def _cb_a():
    pass


def _cb_b():
    pass


def test_the_c_methods_are_the_loops():
    loop = evloop.new_event_loop()
    try:
        for name in ("_add_reader", "_add_writer", "_remove_reader", "_remove_writer"):
            assert type(getattr(loop, name)).__name__ == "builtin_function_or_method", name
    finally:
        loop.close()


def test_a_random_sequence_of_calls_leaves_what_the_stdlib_leaves():
    rng = random.Random(7)
    calls = [(rng.randrange(6), rng.randrange(3), rng.choice([_cb_a, _cb_b]))
             for _ in range(400)]

    def scenario(loop):
        pairs = [socket.socketpair() for _ in range(3)]
        fds = [a.fileno() for a, _ in pairs]
        handles, out = [], []
        try:
            for op, i, cb in calls:
                fd = fds[i]
                if op == 0:
                    handles.append(loop._add_reader(fd, cb, i))
                elif op == 1:
                    handles.append(loop._add_writer(fd, cb, i))
                elif op == 2:
                    out.append(loop._remove_reader(fd))
                elif op == 3:
                    out.append(loop._remove_writer(fd))
                elif op == 4:
                    out.append(loop.remove_reader(fd))
                else:
                    assert loop.add_writer(fd, cb) is None
                out.append(tuple(_state(loop, fds)))
            out.append(tuple((h.cancelled(), h._args) for h in handles))
            for fd in fds:
                loop._remove_reader(fd)
                loop._remove_writer(fd)
            assert len(loop._selector.get_map()) == 1  # the self-pipe's
        finally:
            for a, b in pairs:
                a.close()
                b.close()
        return out

    stock, ours = _both(scenario)
    assert ours == stock


def test_the_poller_follows_the_keys():
    loop = evloop.new_event_loop()
    a, b = socket.socketpair()
    a.setblocking(False)
    try:
        seen = []
        loop._add_reader(a.fileno(), seen.append, "r1")
        loop._add_writer(a.fileno(), seen.append, "w")
        b.send(b"x")
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert sorted(seen) == ["r1", "w"]
        assert loop._remove_writer(a.fileno()) is True
        seen.clear()
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert seen == ["r1"]  # still readable, no longer watched for writing
        loop._add_reader(a.fileno(), seen.append, "r2")  # replaces r1
        seen.clear()
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert seen == ["r2"]
        assert loop._remove_reader(a.fileno()) is True
        assert loop._remove_reader(a.fileno()) is False
        seen.clear()
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert seen == []
        # removed from the poller too: the fd can be registered again from scratch
        loop._add_reader(a.fileno(), seen.append, "r3")
        loop.call_soon(loop.stop)
        loop.run_forever()
        assert seen == ["r3"]
    finally:
        a.close()
        b.close()
        loop.close()


def test_a_replaced_or_removed_handle_is_cancelled_and_lets_go_of_its_callback():
    loop = evloop.new_event_loop()
    a, b = socket.socketpair()
    try:
        h1 = loop._add_reader(a.fileno(), _cb_a, 1)
        h2 = loop._add_reader(a.fileno(), _cb_b, 2)
        assert h1.cancelled() and h1._callback is None and h1._args is None
        assert not h2.cancelled() and h2._args == (2,)
        assert loop._remove_reader(a.fileno()) is True
        assert h2.cancelled() and h2._callback is None
    finally:
        a.close()
        b.close()
        loop.close()


@pytest.mark.parametrize("what", ["closed fd", "regular file"])
def test_a_poller_refusal_raises_the_selectors_oserror_and_registers_nothing(what, tmp_path):
    def scenario(loop):
        if what == "closed fd":
            s = socket.socket()
            fd = s.fileno()
            s.close()
            f = None
        else:
            f = open(tmp_path / "f", "w")
            fd = f.fileno()
        try:
            try:
                loop._add_reader(fd, _cb_a)
            except OSError as e:
                return type(e), e.errno, fd in loop._selector.get_map()
            return None
        finally:
            if f:
                f.close()

    stock, ours = _both(scenario)
    assert ours == stock
    assert stock[0] is (PermissionError if what == "regular file" else OSError)
    assert stock[1] == (errno.EPERM if what == "regular file" else errno.EBADF)


def test_a_file_object_and_a_bad_fd_go_the_stdlibs_way():
    def scenario(loop):
        a, b = socket.socketpair()
        try:
            h = loop._add_reader(a, _cb_a)  # a socket object, not an int
            key = loop._selector.get_key(a)
            out = [key.fileobj is a, key.events, h is key.data[0], loop._remove_reader(a)]
            out.append(_raised(lambda: loop._add_reader(-1, _cb_a)))
            out.append(_raised(lambda: loop._add_reader("x", _cb_a)))
            out.append(_raised(lambda: loop._add_reader(2 ** 70, _cb_a)))
            out.append(_raised(lambda: loop._add_reader()))
            out.append(_raised(lambda: loop._remove_writer()))
            out.append(_raised(lambda: loop._remove_writer(-1)))
            return out
        finally:
            a.close()
            b.close()

    stock, ours = _both(scenario)
    assert ours == stock


def test_a_closed_loop_raises_and_removes_nothing():
    def scenario(loop):
        a, b = socket.socketpair()
        try:
            loop._add_reader(a.fileno(), _cb_a)
            loop.close()
            return [_raised(lambda: loop._add_reader(a.fileno(), _cb_a)),
                    _raised(lambda: loop._add_writer(a.fileno(), _cb_a)),
                    loop._remove_reader(a.fileno()), loop._remove_writer(a.fileno()),
                    loop.remove_reader(a.fileno())]
        finally:
            a.close()
            b.close()

    stock, ours = _both(scenario)
    assert ours == stock
    assert stock[0] == (RuntimeError, "Event loop is closed")


def test_a_replaced_selector_is_used_as_the_stdlib_uses_it():
    loop = evloop.new_event_loop()
    mine = loop._selector
    other = selectors.DefaultSelector()
    a, b = socket.socketpair()
    try:
        loop._selector = other
        h = loop._add_reader(a.fileno(), _cb_a)
        assert other.get_key(a.fileno()).data == (h, None)
        assert a.fileno() not in mine.get_map()
        assert loop._remove_reader(a.fileno()) is True
        assert a.fileno() not in other.get_map()
    finally:
        loop._selector = mine
        other.close()
        a.close()
        b.close()
        loop.close()


def test_debug_mode_handles_record_their_source_and_cancel_as_the_stdlibs():
    loop = evloop.new_event_loop()
    loop.set_debug(True)
    a, b = socket.socketpair()
    try:
        h = loop._add_reader(a.fileno(), _cb_a)
        assert h._source_traceback
        loop._remove_reader(a.fileno())
        assert h.cancelled() and "cancelled" in repr(h) and "_cb_a" in repr(h)
    finally:
        a.close()
        b.close()
        loop.close()


def test_many_fds_added_and_removed_leave_the_poller_empty():
    loop = evloop.new_event_loop()
    socks = [socket.socketpair() for _ in range(64)]
    try:
        for _ in range(20):
            for a, _ in socks:
                loop._add_reader(a.fileno(), _cb_a)
                loop._add_writer(a.fileno(), _cb_b)
            for a, _ in socks:
                loop._remove_writer(a.fileno())
                loop._remove_reader(a.fileno())
        assert len(loop._selector.get_map()) == 1
        # the poller has none of them: adding each again succeeds (an fd still in the
        # poller would make evloop_io_add fail with EEXIST)
        for a, _ in socks:
            loop._add_reader(a.fileno(), _cb_a)
    finally:
        for a, b in socks:
            a.close()
            b.close()
        loop.close()


@pytest.mark.parametrize("variant,backend", [(v, b) for v in ("arena", "chunk")
                                             for b in ("epoll", "io_uring")])
def test_sock_recv_and_sendall_over_every_backend(variant, backend):
    try:
        loop = evloop.new_event_loop(variant=variant, backend=backend)
    except evloop.Error:
        pytest.skip(f"{backend} not available here")

    async def main():
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        try:
            for i in range(200):
                msg = os.urandom(1 + i * 37 % 3000)
                t = asyncio.ensure_future(loop.sock_recv(b, 65536))
                await asyncio.sleep(0)
                await loop.sock_sendall(a, msg)
                got = await t
                while len(got) < len(msg):
                    got += await loop.sock_recv(b, 65536)
                assert got == msg
            return len(loop._selector.get_map())
        finally:
            a.close()
            b.close()

    try:
        assert loop.run_until_complete(main()) == 1
    finally:
        loop.close()
