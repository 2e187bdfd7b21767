"""add_reader / add_writer / remove_reader / remove_writer with real pipes and sockets."""

from __future__ import annotations

import errno
import os
import socket
import sys
import tempfile
import threading

import pytest

import evloop
from conftest import DEADLINE, wait_until


@pytest.fixture
def pipe():
    r, w = os.pipe()
    os.set_blocking(r, False)
    os.set_blocking(w, False)
    yield r, w
    for fd in (r, w):
        try:
            os.close(fd)
        except OSError:
            pass


def test_reader_runs_when_the_pipe_has_data(running, pipe):
    r, w = pipe
    got = []
    done = threading.Event()

    def on_readable(tag):
        got.append((tag, os.read(r, 100)))
        done.set()

    running.loop.add_reader(r, on_readable, "tag")
    os.write(w, b"hello")
    assert done.wait(DEADLINE)
    assert got == [("tag", b"hello")]
    assert running.loop.remove_reader(r) is True
    assert running.loop.remove_reader(r) is False
    assert running.loop.stats().io_callbacks >= 1


def test_writer_runs_while_the_pipe_is_writable(running, pipe):
    r, w = pipe
    done = threading.Event()
    running.loop.add_writer(w, done.set)
    assert done.wait(DEADLINE)
    assert running.loop.remove_writer(w) is True
    assert running.loop.remove_writer(w) is False


def test_socketpair_echo_with_reader_and_writer_on_one_fd(running):
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    loop = running.loop
    received = []
    done = threading.Event()
    out = bytearray(b"x" * 200000)

    def on_b_readable():
        data = b.recv(65536)
        received.append(data)
        if sum(map(len, received)) == 200000:
            done.set()

    def on_a_writable():
        if out:
            try:
                n = a.send(out)
            except BlockingIOError:
                return
            del out[:n]
        if not out:
            loop.remove_writer(a)

    def on_a_readable():
        pass  # registered beside the writer: the fd carries both interests

    try:
        loop.add_reader(a, on_a_readable)  # socket objects work through fileno()
        loop.add_writer(a, on_a_writable)
        loop.add_reader(b.fileno(), on_b_readable)
        assert done.wait(DEADLINE)
        assert b"".join(received) == b"x" * 200000
        assert wait_until(lambda: loop.remove_reader(a))
        assert loop.remove_reader(b) is True
        assert loop._live_fds() == 0
    finally:
        a.close()
        b.close()


def test_replacing_a_reader_calls_the_new_one(running, pipe):
    r, w = pipe
    got = []
    done = threading.Event()
    running.loop.add_reader(r, lambda: got.append("old"))
    running.loop.add_reader(r, lambda: (got.append("new"), os.read(r, 10), done.set()))
    os.write(w, b"1")
    assert done.wait(DEADLINE)
    assert "old" not in got
    running.loop.remove_reader(r)


def test_hangup_calls_the_reader(running, pipe):
    r, w = pipe
    done = threading.Event()
    got = []

    def on_readable():
        got.append(os.read(r, 10))
        running.loop.remove_reader(r)
        done.set()

    running.loop.add_reader(r, on_readable)
    os.close(w)
    assert done.wait(DEADLINE)
    assert got == [b""]  # EOF


def test_no_reader_callback_after_remove_from_another_thread(running, pipe):
    r, w = pipe
    calls = [0]

    def on_readable():
        calls[0] += 1  # never reads: stays readable, so it would run again and again

    for _ in range(50):
        running.loop.add_reader(r, on_readable)
        os.write(w, b"z")
        wait_until(lambda: calls[0] > 0)
        assert running.loop.remove_reader(r)
        n = calls[0]
        done = threading.Event()
        running.loop.submit(done.set)
        assert done.wait(DEADLINE)
        assert calls[0] == n
        os.read(r, 100)
        calls[0] = 0
    assert running.loop._live_fds() == 0


def test_fd_added_while_the_loop_sleeps_on_the_futex_wakes_it(running, pipe):
    r, w = pipe
    assert wait_until(lambda: running.loop.state == evloop.State.SLEEPING)
    os.write(w, b"ready")
    done = threading.Event()
    running.loop.add_reader(r, lambda: (os.read(r, 10), done.set()))
    assert done.wait(DEADLINE)
    running.loop.remove_reader(r)


def test_bad_fds_raise_oserror_with_errno(loop, pipe):
    r, _ = pipe
    with pytest.raises(ValueError):
        loop.add_reader(-1, print)
    d = os.dup(r)
    os.close(d)
    with pytest.raises(evloop.Error) as ei:
        loop.add_reader(d, print)
    assert ei.value.errno == errno.EBADF
    assert isinstance(ei.value, OSError)
    assert loop._live_fds() == 0


def test_a_regular_file_is_refused_by_epoll(loop):
    if loop.backend != "epoll":
        pytest.skip("epoll-specific")
    with tempfile.TemporaryFile() as f:
        with pytest.raises(evloop.Error) as ei:
            loop.add_reader(f, print)
        assert ei.value.errno == errno.EPERM


def test_fd_callbacks_are_released_at_stop_and_on_remove(loop, pipe):
    r, w = pipe

    def fn():
        pass

    arg = object()
    before = (sys.getrefcount(fn), sys.getrefcount(arg))
    for _ in range(1000):
        loop.add_reader(r, fn, arg)
        loop.add_writer(w, fn, arg)
        loop.add_writer(r, fn, arg)
        assert loop.remove_writer(r)
        assert loop.remove_reader(r)
        assert loop.remove_writer(w)
    loop.add_reader(r, fn, arg)
    loop.add_writer(w, fn, arg)
    loop.submit(loop.stop)
    loop.run()
    assert loop._live_fds() == 0
    assert (sys.getrefcount(fn), sys.getrefcount(arg)) == before


def test_many_pipes_at_once(running):
    pipes = [os.pipe() for _ in range(64)]
    seen = set()
    done = threading.Event()

    def on_readable(i, r):
        os.read(r, 10)
        running.loop.remove_reader(r)
        seen.add(i)
        if len(seen) == len(pipes):
            done.set()

    try:
        for i, (r, w) in enumerate(pipes):
            running.loop.add_reader(r, on_readable, i, r)
        for r, w in pipes:
            os.write(w, b".")
        assert done.wait(DEADLINE)
    finally:
        for r, w in pipes:
            os.close(r)
            os.close(w)
