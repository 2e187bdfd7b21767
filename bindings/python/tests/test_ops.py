"""The completion operations from Python: sock_accept, sock_recv, sock_recv_into,
sock_sendall, sock_cancel (evloop_accept, evloop_recv, evloop_send, evloop_op_cancel), and
the raw calls' references and buffers."""

from __future__ import annotations

import errno
import os
import socket
import sys
import threading

import pytest

import evloop
from conftest import DEADLINE, wait_until


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


class Results:
    """Collects callback(result, error) calls; wait(n) until n have come."""

    def __init__(self):
        self.got = []
        self.cond = threading.Condition()

    def __call__(self, result, error):
        with self.cond:
            self.got.append((result, error))
            self.cond.notify_all()

    def wait(self, n=1):
        with self.cond:
            assert self.cond.wait_for(lambda: len(self.got) >= n, DEADLINE), self.got
        return self.got


def test_recv_completes_with_the_data_then_with_eof(running, pair):
    a, b = pair
    res = Results()
    running.loop.sock_recv(a, 100, res)
    b.sendall(b"hello")
    assert res.wait() == [(b"hello", None)]
    running.loop.sock_recv(a.fileno(), 100, res)
    b.shutdown(socket.SHUT_WR)
    assert res.wait(2)[1] == (b"", None)


def test_recv_into_a_buffer(running, pair):
    a, b = pair
    res = Results()
    buf = bytearray(8)
    running.loop.sock_recv_into(a, buf, res)
    b.sendall(b"abc")
    assert res.wait() == [(3, None)]
    assert buf[:3] == b"abc"


def test_sendall_sends_everything_in_order(running, pair):
    a, b = pair
    res = Results()
    chunks = [bytes([i]) * 300_000 for i in range(3)]
    for c in chunks:
        running.loop.sock_sendall(a, c, res)
    received = bytearray()
    b.setblocking(True)
    b.settimeout(DEADLINE)
    while len(received) < 900_000:
        received += b.recv(1 << 20)
    assert res.wait(3) == [(None, None)] * 3
    assert bytes(received) == b"".join(chunks)


def test_accept_gives_a_connected_non_blocking_socket(running):
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen()
    srv.setblocking(False)
    res = Results()
    try:
        running.loop.sock_accept(srv, res)
        cli = socket.create_connection(srv.getsockname(), timeout=DEADLINE)
        [((conn, addr), err)] = res.wait()
        assert err is None
        assert addr == cli.getsockname()
        assert not conn.getblocking()
        cli.sendall(b"ping")
        got = Results()
        running.loop.sock_recv(conn, 10, got)
        assert got.wait() == [(b"ping", None)]
        conn.close()
        cli.close()
    finally:
        srv.close()


def test_cancel_completes_the_pending_ops_with_ecanceled(running, pair):
    a, _ = pair
    res = Results()
    running.loop.sock_recv(a, 10, res)
    assert running.loop.sock_cancel(a) is True
    [(data, err)] = res.wait()
    assert data is None and isinstance(err, OSError) and err.errno == errno.ECANCELED
    assert wait_until(lambda: running.loop.sock_cancel(a) is False)


def test_stop_completes_pending_ops_before_run_returns(loop, pair):
    a, _ = pair
    res = Results()
    loop.sock_recv(a, 10, res)
    loop.submit(loop.stop)
    loop.run()
    assert len(res.got) == 1 and res.got[0][1].errno == errno.ECANCELED


def test_refused_operations_raise_and_never_call_back(running, pair):
    a, b = pair
    res = Results()
    running.loop.sock_recv(a, 10, res)
    with pytest.raises(evloop.Error) as ei:
        running.loop.sock_recv(a, 10, res)  # a second pending recv
    assert ei.value.errno == errno.EBUSY
    with pytest.raises(evloop.Error) as ei:
        running.loop.sock_recv(b, 0, res)  # len 0
    assert ei.value.errno == errno.EINVAL
    r, w = os.pipe()
    try:
        with pytest.raises(evloop.Error) as ei:
            running.loop.sock_recv(r, 10, res)
        assert ei.value.errno == errno.ENOTSOCK
    finally:
        os.close(r)
        os.close(w)
    running.loop.add_reader(b, lambda: None)
    with pytest.raises(evloop.Error) as ei:
        running.loop.sock_sendall(b, b"x", res)
    assert ei.value.errno == errno.EBUSY
    running.loop.remove_reader(b)
    with pytest.raises(TypeError):
        running.loop.sock_recv(a, 10, None)
    assert running.loop.sock_cancel(a) is True
    assert res.wait() == [(None, res.got[0][1])]
    assert res.got[0][1].errno == errno.ECANCELED


def test_operations_on_a_closed_loop_raise_loop_closed_error(loop, pair):
    loop.close()
    with pytest.raises(evloop.LoopClosedError):
        loop.sock_recv(pair[0], 10, print)


def test_an_exception_in_a_callback_goes_to_the_handler(running, pair):
    a, b = pair
    seen = []
    done = threading.Event()
    running.loop.set_exception_handler(lambda exc, cb: (seen.append((exc, cb)), done.set()))

    def boom(data, err):
        raise ValueError(data)

    running.loop.sock_recv(a, 10, boom)
    b.sendall(b"x")
    assert done.wait(DEADLINE)
    assert isinstance(seen[0][0], ValueError) and seen[0][1] is boom


def test_callbacks_and_buffers_are_released_once_done(running, pair):
    a, b = pair
    done = threading.Event()
    count = [0]

    def cb(n, err):
        count[0] += 1
        if count[0] == 2000:
            done.set()

    buf = bytearray(16)
    data = b"y" * 16
    before = (sys.getrefcount(cb), sys.getrefcount(buf), sys.getrefcount(data))
    for i in range(1000):
        running.loop.sock_sendall(b, data, cb)
        running.loop.sock_recv_into(a, buf, cb)
        assert wait_until(lambda: count[0] == 2 * (i + 1))
    assert done.wait(DEADLINE)
    assert wait_until(lambda: (sys.getrefcount(cb), sys.getrefcount(buf),
                               sys.getrefcount(data)) == before)
    buf.extend(b"z")  # no buffer export is left behind


def test_raw_ops_pass_fd_and_res(running, pair):
    a, b = pair
    got = []
    done = threading.Event()
    buf = bytearray(4)
    running.loop._c.recv(a.fileno(), buf, lambda fd, res: (got.append((fd, res)), done.set()))
    b.sendall(b"12")
    assert done.wait(DEADLINE)
    assert got == [(a.fileno(), 2)] and buf[:2] == b"12"
    with pytest.raises(BufferError):
        running.loop._c.recv(a.fileno(), b"read-only", print)
