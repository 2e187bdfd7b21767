"""sock_recv and sock_sendall with their hot path in C (src/aio/sock.cpp): each outcome (data now,
data later, errors, cancellation, bad arguments, another class of socket, debug mode, an fd a
transport uses) is the stdlib's, checked against the stock loop doing the same; and the
helpers every call makes (create_future, get_debug, _ensure_fd_no_transport) likewise."""

from __future__ import annotations

import asyncio
import errno
import socket
import struct

import pytest

import evloop

from conftest import AIO_LOOPS as LOOPS, on_both_loops as _both


def _run(loop, coro, timeout=10.0):
    return loop.run_until_complete(asyncio.wait_for(coro, timeout))


async def _outcome(aw):
    """What awaiting aw gave: ("ok", value) or (exception type, errno or message)."""
    try:
        return "ok", await aw
    except BaseException as e:  # noqa: BLE001
        return type(e), getattr(e, "errno", None) or str(e)


def _pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    return a, b


def test_data_now_later_and_at_eof_as_the_stdlib():
    def scenario(loop):
        async def main():
            a, b = _pair()
            try:
                a.send(b"now")
                out = [await loop.sock_recv(b, 100)]
                t = loop.create_task(loop.sock_recv(b, 2))
                await asyncio.sleep(0)
                out.append(b.fileno() in loop._selector.get_map())  # waiting on it
                a.send(b"later")
                out.append(await t)  # n bytes at most
                out.append(await loop.sock_recv(b, 100))
                await asyncio.sleep(0)  # the done callback has removed the reader
                out.append(b.fileno() in loop._selector.get_map())
                out.append(await loop.sock_recv(b, 0))
                a.close()
                out.append(await loop.sock_recv(b, 100))  # EOF
                return out
            finally:
                a.close()
                b.close()

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert ours == stock == [b"now", True, b"la", b"ter", False, b"", b""]


def test_a_cancelled_recv_leaves_no_reader_and_the_next_recv_gets_the_data():
    def scenario(loop):
        async def main():
            a, b = _pair()
            try:
                t = loop.create_task(loop.sock_recv(b, 100))
                await asyncio.sleep(0)
                t.cancel()
                out = [await _outcome(t)]
                await asyncio.sleep(0)
                out.append(b.fileno() in loop._selector.get_map())
                a.send(b"x")
                out.append(await loop.sock_recv(b, 100))
                # two recvs racing on one socket: the second replaces the first's reader
                t1 = loop.create_task(loop.sock_recv(b, 100))
                t2 = loop.create_task(loop.sock_recv(b, 100))
                await asyncio.sleep(0)
                a.send(b"y")
                done, pending = await asyncio.wait([t1, t2], timeout=0.2)
                out.append(sorted(t.result() for t in done))
                for t in pending:
                    t.cancel()
                return out
            finally:
                a.close()
                b.close()

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert ours == stock
    assert stock[0][0] is asyncio.CancelledError and stock[2] == b"x"


def test_errors_and_bad_arguments_raise_as_the_stdlib():
    def scenario(loop):
        async def main():
            out = []
            a, b = _pair()
            c, d = _pair()
            c.close()
            try:
                out.append(await _outcome(loop.sock_recv(c, 10)))  # closed: EBADF
                out.append(await _outcome(loop.sock_sendall(c, b"x")))
                out.append(await _outcome(loop.sock_recv(b, -1)))
                out.append(await _outcome(loop.sock_recv(b, "10")))
                out.append(await _outcome(loop.sock_recv(b, 2 ** 70)))
                out.append(await _outcome(loop.sock_sendall(b, "text")))
                out.append(await _outcome(loop.sock_sendall(b, memoryview(b"abcd")[::2])))
                out.append(await _outcome(loop.sock_recv("not a socket", 10)))
                return out
            finally:
                for s in (a, b, d):
                    s.close()

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert ours == stock
    assert stock[0] == (OSError, errno.EBADF)


def test_a_reset_connection_fails_the_pending_recv_as_the_stdlib():
    def scenario(loop):
        async def main():
            srv = socket.create_server(("127.0.0.1", 0))
            srv.setblocking(False)
            c = socket.socket()
            c.setblocking(False)
            try:
                await loop.sock_connect(c, srv.getsockname())
                s, _ = await loop.sock_accept(srv)
                s.setblocking(False)
                t = loop.create_task(loop.sock_recv(s, 100))
                await asyncio.sleep(0)
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                c.close()  # RST
                r = await _outcome(t)
                s.close()
                return r
            finally:
                c.close()
                srv.close()

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert ours == stock == (ConnectionResetError, errno.ECONNRESET)


def test_sendall_of_more_than_the_buffer_holds_arrives_whole():
    payload = bytes(range(256)) * 40000  # ~10 MB: many partial sends

    def scenario(loop):
        async def main():
            a, b = _pair()
            try:
                got = bytearray()

                async def reader():
                    while len(got) < len(payload):
                        got.extend(await loop.sock_recv(b, 1 << 16))

                r = loop.create_task(reader())
                await loop.sock_sendall(a, payload)
                await r
                await asyncio.sleep(0)
                return bytes(got) == payload, len(loop._selector.get_map())
            finally:
                a.close()
                b.close()

        return _run(loop, main(), timeout=60)

    stock, ours = _both(scenario)
    assert ours == stock == (True, 1)


def test_a_socket_subclass_and_debug_mode_take_the_stdlibs_path():
    class MySocket(socket.socket):
        def recv(self, n, *args):
            return b"sub:" + super().recv(n, *args)

    def scenario(loop):
        async def main():
            a, b = _pair()
            s = MySocket(fileno=b.detach())
            s.setblocking(False)
            try:
                a.send(b"x")
                out = [await loop.sock_recv(s, 10)]
                loop.set_debug(True)
                blocking = socket.socket()
                try:
                    out.append(await _outcome(loop.sock_recv(blocking, 10)))
                    out.append(await _outcome(loop.sock_sendall(blocking, b"x")))
                finally:
                    blocking.close()
                a.send(b"y")
                out.append(await loop.sock_recv(s, 10))
                loop.set_debug(False)
                return out
            finally:
                a.close()
                s.close()

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert ours == stock
    assert stock[0] == b"sub:x" and stock[1] == (ValueError, "the socket must be non-blocking")


def test_an_fd_a_transport_uses_is_refused_until_the_transport_closes():
    def scenario(loop):
        async def main():
            a, b = _pair()
            try:
                tr, _ = await loop.create_connection(asyncio.Protocol, sock=b)
                r = await _outcome(loop.sock_recv(b, 10))
                out = [r[0], "is used by transport" in r[1]]
                tr.close()
                await asyncio.sleep(0)
                out.append(loop._ensure_fd_no_transport(b.fileno()) if b.fileno() >= 0
                           else "closed")
                return out
            finally:
                a.close()

        return _run(loop, main())

    stock, ours = _both(scenario)
    assert ours == stock
    assert stock[:2] == [RuntimeError, True]


def test_ensure_fd_no_transport_takes_what_the_stdlibs_takes():
    def scenario(loop):
        a, b = _pair()
        try:
            out = []
            for fd in (a.fileno(), a, -1, "x", 2 ** 70):
                try:
                    out.append(("ok", loop._ensure_fd_no_transport(fd)))
                except BaseException as e:  # noqa: BLE001
                    out.append((type(e), str(e)))
            return out
        finally:
            a.close()
            b.close()

    stock, ours = _both(scenario)
    assert ours == stock


def test_create_future_and_get_debug_as_the_stdlib(aloop):
    f = aloop.create_future()
    assert type(f) is asyncio.Future and f.get_loop() is aloop
    assert aloop.get_debug() is False
    aloop.set_debug(True)
    assert aloop.get_debug() is True
    f2 = aloop.create_future()
    assert f2._source_traceback  # a future of a debug loop records where it was made
    aloop.set_debug(False)
    assert aloop.get_debug() is False
    f.cancel()
    f2.cancel()


def test_a_subclass_create_future_is_used_by_sock_recv():
    made = []

    class Loop(evloop.EventLoop):
        def create_future(self):
            made.append(1)
            return super().create_future()

    loop = Loop()
    try:
        async def main():
            a, b = _pair()
            try:
                t = loop.create_task(loop.sock_recv(b, 10))
                await asyncio.sleep(0)
                a.send(b"z")
                return await t
            finally:
                a.close()
                b.close()

        assert _run(loop, main()) == b"z" and made
    finally:
        loop.close()


def test_the_fast_path_is_taken_for_plain_sockets():
    loop = evloop.new_event_loop()
    a, b = _pair()
    try:
        assert loop._evloop_sock_recv(b, 10) is not NotImplemented
        fut = loop._evloop_sock_recv(b, 10)  # nothing to read: a future, reader registered
        assert isinstance(fut, asyncio.Future) and b.fileno() in loop._selector.get_map()
        fut.cancel()
        assert loop._evloop_sock_send(a, b"x") == 1
        loop.set_debug(True)
        assert loop._evloop_sock_recv(b, 10) is NotImplemented
        assert loop._evloop_sock_send(a, b"x") == -1
    finally:
        a.close()
        b.close()
        loop.close()


def test_the_callbacks_called_with_wrong_arguments_raise_as_the_stdlibs():
    def scenario(loop):
        out = []
        for args in [(), (1,), (1, 2, 3, 4), (1, 2, 3, 4, 5, 6, 7, 8, 9, 10)]:
            for name in ("_sock_recv", "_sock_read_done"):
                try:
                    getattr(loop, name)(*args)
                    out.append((name, len(args), None))
                except TypeError as e:
                    out.append((name, len(args), TypeError))
                except BaseException as e:  # noqa: BLE001
                    out.append((name, len(args), type(e)))
        return out

    stock, ours = _both(scenario)
    assert ours == stock
