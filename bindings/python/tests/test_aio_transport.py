"""The native stream-socket path of evloop's asyncio loop (src/aio/transport.cpp: the read
callbacks and write's send-at-once case in C, on the stdlib's _SelectorSocketTransport): each
scenario runs on the stock loop and on evloop's, over a real TCP connection, and the protocol's
view of it (the calls it got, in order, with their arguments) must be the same on both."""

from __future__ import annotations

import array
import asyncio
import logging
import socket
import struct
import time
from typing import Any, Callable, List, Optional, Tuple

import pytest

import evloop

from conftest import AIO_LOOPS as LOOPS, on_both_loops as _both, raised

DEADLINE = 20.0


def _tcp_pair() -> Tuple[socket.socket, socket.socket]:
    """A connected TCP pair on the loopback (the loop's end, the peer's end), blocking."""
    with socket.socket() as ls:
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        a = socket.create_connection(ls.getsockname())
        b, _ = ls.accept()
    return a, b


def _run_until(loop: asyncio.AbstractEventLoop, pred: Callable[[], bool],
               timeout: float = DEADLINE) -> None:
    async def wait() -> None:
        end = time.monotonic() + timeout
        while not pred():
            if time.monotonic() > end:
                raise AssertionError("condition not reached in time")
            await asyncio.sleep(0.001)

    loop.run_until_complete(wait())


class Recorder(asyncio.Protocol):
    """Logs what the transport calls: ("made",), ("data", bytes), ("eof",), ("lost", exc
    type or None); eof_received returns `keep`."""

    def __init__(self, log: List[Any], keep: Optional[bool] = None) -> None:
        self.log = log
        self.keep = keep
        self.tr: Any = None
        self.lost = False

    def connection_made(self, tr: Any) -> None:
        self.tr = tr
        self.log.append(("made",))

    def data_received(self, data: bytes) -> None:
        assert type(data) is bytes
        self.log.append(("data", data))

    def eof_received(self) -> Optional[bool]:
        self.log.append(("eof",))
        return self.keep

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.lost = True
        self.log.append(("lost", type(exc) if exc is not None else None))


def _connect(loop: asyncio.AbstractEventLoop, factory: Callable[[], Any]
             ) -> Tuple[Any, Any, socket.socket]:
    a, b = _tcp_pair()
    tr, pr = loop.run_until_complete(loop.create_connection(factory, sock=a))
    return tr, pr, b


def _joined(log: List[Any]) -> List[Any]:
    """The log with consecutive data chunks joined (how the bytes are split is the kernel's)."""
    out: List[Any] = []
    for e in log:
        if e[0] == "data" and out and out[-1][0] == "data":
            out[-1] = ("data", out[-1][1] + e[1])
        else:
            out.append(e)
    return out


def _drain_peer(b: socket.socket, n: int) -> bytes:
    got = bytearray()
    b.settimeout(DEADLINE)
    while len(got) < n:
        c = b.recv(n - len(got))
        if not c:
            break
        got += c
    return bytes(got)


# ------------------------------------------------------------------ the transport itself


def test_evloop_transport_is_a_stdlib_transport_with_the_native_methods(aloop):
    tr, pr, b = _connect(aloop, lambda: Recorder([]))
    try:
        assert isinstance(tr, asyncio.Transport)
        assert isinstance(tr, asyncio.selector_events._SelectorSocketTransport)
        assert isinstance(tr, evloop._aio._SocketTransport)
        assert isinstance(tr, evloop._asyncio_core._AioStreamBase)
        sock = tr.get_extra_info("socket")
        assert sock.fileno() == tr._sock_fd
        assert tr.get_extra_info("peername") == b.getsockname()
        assert tr.get_extra_info("sockname") == b.getpeername()
        assert tr.get_extra_info("nope", 5) == 5
        # the read callback set_protocol chose is the native one, bound to this transport
        assert tr._read_ready_cb.__self__ is tr
        assert tr._read_ready_cb.__name__ == "_read_ready__data_received"
        assert tr.is_reading() and not tr.is_closing()
        assert tr.can_write_eof()
    finally:
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
        b.close()


def test_streams_use_the_native_transport(aloop):
    async def main() -> Tuple[bytes, bool]:
        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            w.write(await r.readexactly(5))
            await w.drain()
            w.close()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        r, w = await asyncio.open_connection(*srv.sockets[0].getsockname())
        native = isinstance(w.transport, evloop._aio._SocketTransport)
        w.write(b"hello")
        got = await r.read()
        w.close()
        await w.wait_closed()
        srv.close()
        await srv.wait_closed()
        return got, native

    assert aloop.run_until_complete(main()) == (b"hello", True)


# ------------------------------------------------------------------ the hot attributes

HOT = ("_protocol", "_conn_lost", "_read_ready_cb", "_eof", "_empty_waiter", "_buffer",
       "_sock_fd", "_closing")


def test_the_hot_attributes_are_slots_the_stdlib_code_uses(aloop):
    tr, pr, b = _connect(aloop, lambda: Recorder([]))
    try:
        assert set(type(tr).__slots__) == set(HOT)
        assert not set(HOT) & set(vars(tr))  # in the slots, not the instance's __dict__
        assert tr._protocol is pr and tr._conn_lost == 0 and tr._eof is False
        assert tr._sock_fd == tr.get_extra_info("socket").fileno()
        tr.write(b"ping")  # the native write, reading them at their offsets
        assert _drain_peer(b, 4) == b"ping"
        tr.write_eof()  # the stdlib's code sets _eof in its slot
        assert tr._eof is True
        with pytest.raises(RuntimeError, match="Cannot call write.. after write_eof"):
            tr.write(b"late")
    finally:
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
        b.close()


def test_a_hot_attribute_patched_on_the_class_is_read_through_the_patch(aloop):
    """A property put on the class under a slot's name wins over the slot for every reader,
    the native methods too (the class's version tag changes); put back, the slot serves
    again."""
    cls = evloop._aio._SocketTransport
    tr, pr, b = _connect(aloop, lambda: Recorder([]))
    saved = cls.__dict__["_empty_waiter"]
    try:
        tr.write(b"a")
        assert _drain_peer(b, 1) == b"a"
        cls._empty_waiter = property(lambda self: "sendfile in progress")
        with pytest.raises(RuntimeError, match="unable to write; sendfile is in progress"):
            tr.write(b"b")
        cls._empty_waiter = saved
        assert tr._empty_waiter is None
        tr.write(b"c")
        assert _drain_peer(b, 1) == b"c"
    finally:
        cls._empty_waiter = saved
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
        b.close()


def test_is_closing_follows_close_abort_and_the_peer_as_the_stdlib():
    """is_closing (native on evloop's transport) through close(), abort(), the peer's reset
    and a transport whose _closing was deleted: the same answers and errors on both loops."""
    def scenario(loop):
        out = []
        for how in ("close", "abort", "peer", "deleted"):
            tr, pr, b = _connect(loop, lambda: Recorder([]))
            out.append((how, tr.is_closing()))
            if how == "close":
                tr.close()
                out.append(tr.is_closing())
            elif how == "abort":
                tr.abort()
                out.append(tr.is_closing())
            elif how == "peer":
                b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                b.close()  # an RST: the transport's read fails, fatal error, closing
                _run_until(loop, lambda: pr.lost)
                out.append(tr.is_closing())
            else:
                del tr._closing
                exc = raised(tr.is_closing)
                out.append(exc and (exc[0], exc[1].endswith("has no attribute '_closing'")))
                tr._closing = False
                tr.close()
            loop.run_until_complete(asyncio.sleep(0))
            out.append(pr.lost)
            b.close()
        return out

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[1] is True and ours[4] is True and ours[7] is True


def test_a_subclass_is_closing_wins_over_the_native_one(aloop):
    class Mine(evloop._aio._SocketTransport):
        __slots__ = ()

        def is_closing(self) -> bool:
            return "mine"  # type: ignore[return-value]

    tr, pr, b = _connect(aloop, lambda: Recorder([]))
    try:
        assert tr.is_closing() is False
        tr.__class__ = Mine
        assert tr.is_closing() == "mine"
        tr.__class__ = evloop._aio._SocketTransport
    finally:
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
        b.close()


def test_a_deleted_hot_attribute_raises_attributeerror_as_the_stdlib():
    def scenario(loop):
        tr, pr, b = _connect(loop, lambda: Recorder([]))
        del tr._conn_lost
        exc = raised(lambda: tr.write(b"x"))
        out = exc and (exc[0], exc[1].endswith("object has no attribute '_conn_lost'"))
        tr._conn_lost = 0
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        b.close()
        return out

    stock, ours = _both(scenario)
    assert stock == ours == (AttributeError, True)


# ------------------------------------------------------------------ reading


def test_partial_reads_honour_max_size_and_keep_the_order():
    payload = bytes(range(256)) * 400  # 100 KiB

    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: Recorder(log))
        tr.max_size = 1000
        b.sendall(payload)
        _run_until(loop, lambda: sum(len(e[1]) for e in log if e[0] == "data") >= len(payload))
        sizes = [len(e[1]) for e in log if e[0] == "data"]
        tr.close()
        _run_until(loop, lambda: pr.lost)
        b.close()
        return max(sizes) <= 1000, len(sizes) >= len(payload) // 1000, _joined(log)

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[0] and ours[1]
    assert ours[2] == [("made",), ("data", payload), ("lost", None)]


@pytest.mark.parametrize("max_size", [1, 256 * 1024 + 1, 4 * 1024 * 1024])
def test_a_max_size_past_the_native_buffer_or_tiny(max_size):
    payload = b"0123456789abcdef" * (64 * 1024)  # 1 MiB

    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: Recorder(log))
        tr.max_size = max_size
        n = len(payload) if max_size > 1 else 3000
        b.sendall(payload[:n])
        _run_until(loop, lambda: sum(len(e[1]) for e in log if e[0] == "data") >= n)
        assert all(len(e[1]) <= max_size for e in log if e[0] == "data")
        b.close()
        _run_until(loop, lambda: pr.lost)
        return _joined(log)

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[1][0] == "data" and ours[-2:] == [("eof",), ("lost", None)]


def test_large_messages_both_ways():
    big = bytes(range(251)) * (16 * 1024)  # ~4 MiB: more than the socket buffers hold

    def scenario(loop):
        log: List[Any] = []

        class Echo(Recorder):
            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                self.tr.write(data)

        tr, pr, b = _connect(loop, lambda: Echo(log))
        got = bytearray()
        b.setblocking(False)
        sent = 0
        end = time.monotonic() + DEADLINE

        async def pump() -> None:
            nonlocal sent
            while len(got) < len(big):
                assert time.monotonic() < end
                if sent < len(big):
                    try:
                        sent += b.send(big[sent:sent + 65536])
                    except BlockingIOError:
                        pass
                try:
                    got.extend(b.recv(1 << 20))
                except BlockingIOError:
                    pass
                await asyncio.sleep(0)

        loop.run_until_complete(pump())
        buffered_max = tr.get_write_buffer_size()
        tr.close()
        _run_until(loop, lambda: pr.lost)
        b.close()
        return bytes(got) == big, buffered_max, _joined(log)

    stock, ours = _both(scenario)
    assert ours[0] and stock[0]
    assert stock[2] == ours[2] == [("made",), ("data", big), ("lost", None)]


def test_pause_reading_inside_data_received():
    def scenario(loop):
        log: List[Any] = []

        class P(Recorder):
            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                self.tr.pause_reading()
                self.log.append(("reading", self.tr.is_reading()))

        tr, pr, b = _connect(loop, lambda: P(log))
        b.sendall(b"first")
        _run_until(loop, lambda: any(e[0] == "data" for e in log))
        b.sendall(b"second")
        loop.run_until_complete(asyncio.sleep(0.05))
        before = list(log)  # nothing more while paused
        tr.resume_reading()
        _run_until(loop, lambda: len(log) > len(before))
        b.close()
        tr.resume_reading()
        _run_until(loop, lambda: pr.lost)
        return before, log

    stock, ours = _both(scenario)
    assert stock == ours
    before, log = ours
    assert before == [("made",), ("data", b"first"), ("reading", False)]
    assert log[3:] == [("data", b"second"), ("reading", False), ("eof",), ("lost", None)]


@pytest.mark.parametrize("keep", [True, False, None])
def test_eof_with_eof_received_keeping_the_transport_open_or_not(keep):
    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: Recorder(log, keep))
        b.sendall(b"bye")
        b.shutdown(socket.SHUT_WR)
        _run_until(loop, lambda: ("eof",) in log)
        loop.run_until_complete(asyncio.sleep(0.01))
        state = (tr.is_closing(), tr.is_reading(), pr.lost)
        if keep:
            tr.write(b"still here")  # the write side stays open
            tr.write_eof()
            reply = _drain_peer(b, 100)
            tr.close()
        else:
            reply = _drain_peer(b, 100)
        _run_until(loop, lambda: pr.lost)
        b.close()
        return state, reply, log

    stock, ours = _both(scenario)
    assert stock == ours
    state, reply, log = ours
    if keep:
        assert state == (False, True, False) and reply == b"still here"  # as the stdlib says
    else:
        assert state[0] and state[2] and reply == b""
    assert log == [("made",), ("data", b"bye"), ("eof",), ("lost", None)]


def test_connection_reset_by_the_peer():
    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: Recorder(log))
        b.sendall(b"x")
        _run_until(loop, lambda: len(log) >= 2)
        b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        b.close()  # an RST
        _run_until(loop, lambda: pr.lost)
        return log

    stock, ours = _both(scenario)
    assert stock == ours == [("made",), ("data", b"x"), ("lost", ConnectionResetError)]


def test_close_inside_data_received_delivers_nothing_more():
    def scenario(loop):
        log: List[Any] = []

        class P(Recorder):
            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                self.tr.close()
                self.log.append(("closing", self.tr.is_closing()))

        tr, pr, b = _connect(loop, lambda: P(log))
        b.sendall(b"one")
        _run_until(loop, lambda: pr.lost)
        try:
            b.sendall(b"two")
        except OSError:
            pass
        loop.run_until_complete(asyncio.sleep(0.02))
        peer = _drain_peer(b, 10)  # the transport closed its end
        b.close()
        return peer, log

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours == (b"", [("made",), ("data", b"one"), ("closing", True), ("lost", None)])


def test_write_after_close_and_after_the_connection_is_lost(caplog):
    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: Recorder(log))
        tr.write(b"before")
        tr.close()
        tr.write(b"after close")  # dropped, no error
        _run_until(loop, lambda: pr.lost)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="asyncio"):
            for _ in range(8):
                tr.write(b"after lost")
        warned = sum("socket.send() raised exception." in r.getMessage()
                     for r in caplog.records)
        peer = _drain_peer(b, 100)
        b.close()
        return peer, warned, tr._conn_lost, log

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[0] == b"before" and ours[1] > 0


def test_write_after_write_eof_and_bad_arguments_raise_as_the_stdlib():
    def scenario(loop):
        tr, pr, b = _connect(loop, lambda: Recorder([]))
        out = []
        for arg in ("text", 5, None, array.array("B", b"AR"), b"", bytearray(b"ba"),
                    memoryview(b"--mv--")[2:4]):
            try:
                tr.write(arg)
            except TypeError as e:
                out.append(str(e))
        tr.write_eof()
        try:
            tr.write(b"late")
        except RuntimeError as e:
            out.append(str(e))
        peer = _drain_peer(b, 100)
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        b.close()
        return out, peer

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[1] == b"bamv"


def test_a_memoryview_of_wider_items_is_sent_whole():
    data = array.array("i", range(1000))

    def scenario(loop):
        tr, pr, b = _connect(loop, lambda: Recorder([]))
        tr.write(memoryview(data))
        peer = _drain_peer(b, len(data) * data.itemsize)
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        b.close()
        return peer

    stock, ours = _both(scenario)
    assert stock == ours == data.tobytes()


def test_a_write_error_is_fatal_as_the_stdlib_says_it():
    def scenario(loop):
        log: List[Any] = []
        ctx: List[Any] = []
        loop.set_exception_handler(lambda lp, c: ctx.append(c.get("message")))
        tr, pr, b = _connect(loop, lambda: Recorder(log))
        tr.pause_reading()  # only the write can find the reset
        b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        b.close()
        time.sleep(0.05)
        tr.write(b"into the void")
        _run_until(loop, lambda: pr.lost)
        return log, ctx

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[0][-1][1] in (ConnectionResetError, BrokenPipeError)


def test_data_received_raising_is_a_fatal_error_with_the_stdlibs_message():
    def scenario(loop):
        log: List[Any] = []
        ctx: List[Any] = []
        loop.set_exception_handler(
            lambda lp, c: ctx.append((c.get("message"), type(c.get("exception")),
                                      c.get("protocol") is pr, c.get("transport") is tr)))

        class P(Recorder):
            def data_received(self, data: bytes) -> None:
                super().data_received(data)
                raise ValueError("boom")

        tr, pr, b = _connect(loop, lambda: P(log))
        b.sendall(b"x")
        _run_until(loop, lambda: pr.lost)
        b.close()
        return log, ctx

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[1] == [("Fatal error: protocol.data_received() call failed.", ValueError,
                        True, True)]
    assert ours[0][-1] == ("lost", ValueError)


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_keyboardinterrupt_in_data_received_goes_up(exc):
    def scenario(loop):
        class P(Recorder):
            def data_received(self, data: bytes) -> None:
                raise exc()

        tr, pr, b = _connect(loop, lambda: P([]))
        b.sendall(b"x")
        try:
            _run_until(loop, lambda: False, timeout=5)
        except exc:
            out = "raised"
        else:
            out = "not raised"
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        b.close()
        return out

    assert _both(scenario) == ["raised", "raised"]


def test_a_read_callback_patched_on_the_transport_is_called():
    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: Recorder(log))
        orig = tr._read_ready_cb

        def cb() -> None:
            log.append(("patched",))
            orig()

        tr._read_ready_cb = cb
        b.sendall(b"x")
        _run_until(loop, lambda: ("data", b"x") in log)
        tr.close()
        _run_until(loop, lambda: pr.lost)
        b.close()
        return log

    stock, ours = _both(scenario)
    assert stock == ours == [("made",), ("patched",), ("data", b"x"), ("lost", None)]


# ------------------------------------------------------------------ BufferedProtocol


class BufRecorder(asyncio.BufferedProtocol):
    def __init__(self, log: List[Any], size: int = 7, bad: Optional[str] = None) -> None:
        self.log = log
        self.buf = bytearray(size)
        self.bad = bad
        self.lost = False
        self.tr: Any = None

    def connection_made(self, tr: Any) -> None:
        self.tr = tr
        self.log.append(("made",))

    def get_buffer(self, sizehint: int) -> Any:
        self.log.append(("get_buffer", sizehint))
        if self.bad == "empty":
            return bytearray()
        if self.bad == "raise":
            raise ValueError("no buffer")
        if self.bad == "readonly":
            return b"readonly"
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        self.log.append(("data", bytes(self.buf[:nbytes])))
        if self.bad == "updated":
            raise ValueError("bad update")

    def eof_received(self) -> None:
        self.log.append(("eof",))

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.lost = True
        self.log.append(("lost", type(exc) if exc is not None else None))


def test_buffered_protocol_gets_the_bytes_in_its_own_buffer():
    payload = b"abcdefghijklmnopqrstuvwxyz" * 10

    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: BufRecorder(log))
        b.sendall(payload)
        b.shutdown(socket.SHUT_WR)
        _run_until(loop, lambda: pr.lost)
        b.close()
        data = b"".join(e[1] for e in log if e[0] == "data")
        sizes = {len(e[1]) for e in log if e[0] == "data"}
        hints = {e[1] for e in log if e[0] == "get_buffer"}
        return data, max(sizes), hints, [e for e in log if e[0] not in ("data", "get_buffer")]

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours == (payload, 7, {-1}, [("made",), ("eof",), ("lost", None)])


@pytest.mark.parametrize("bad", ["empty", "raise", "readonly", "updated"])
def test_buffered_protocol_errors_as_the_stdlib(bad):
    def scenario(loop):
        log: List[Any] = []
        ctx: List[Any] = []
        loop.set_exception_handler(
            lambda lp, c: ctx.append((c.get("message"), type(c.get("exception")))))
        tr, pr, b = _connect(loop, lambda: BufRecorder(log, bad=bad))
        b.sendall(b"payload")
        _run_until(loop, lambda: pr.lost)
        b.close()
        return log, ctx

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[0][-1][0] == "lost" and ours[0][-1][1] is not None
    assert len(ours[1]) == 1


def test_switching_protocols_between_buffered_and_not():
    def scenario(loop):
        log: List[Any] = []
        tr, pr, b = _connect(loop, lambda: Recorder(log))
        b.sendall(b"plain")
        _run_until(loop, lambda: ("data", b"plain") in log)
        bp = BufRecorder(log, size=64)
        tr.set_protocol(bp)
        b.sendall(b"buffered")
        _run_until(loop, lambda: ("data", b"buffered") in log)
        tr.set_protocol(pr)
        b.sendall(b"plain again")
        _run_until(loop, lambda: ("data", b"plain again") in log)
        tr.close()
        _run_until(loop, lambda: pr.lost)
        b.close()
        return log

    stock, ours = _both(scenario)
    assert stock == ours


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_a_partial_send_buffers_the_rest_and_pauses_the_protocol(kind):
    big = bytes(range(256)) * (64 * 1024)  # 16 MiB: more than the socket takes at once

    def scenario(loop):
        log: List[Any] = []

        class P(Recorder):
            def pause_writing(self) -> None:
                self.log.append(("pause_writing", self.tr.get_write_buffer_size() > 0))

            def resume_writing(self) -> None:
                low = self.tr.get_write_buffer_limits()[0]
                self.log.append(("resume_writing", self.tr.get_write_buffer_size() <= low))

        tr, pr, b = _connect(loop, lambda: P(log))
        tr.write(kind(big))  # a partial send: the rest buffered, the writer started
        buffered = tr.get_write_buffer_size()
        after_write = list(log)
        tr.write(b"tail")  # behind the buffered rest
        got = bytearray()
        b.setblocking(False)

        async def drain() -> None:
            end = time.monotonic() + DEADLINE
            while len(got) < len(big) + 4:
                assert time.monotonic() < end
                try:
                    got.extend(b.recv(1 << 20))
                except BlockingIOError:
                    await asyncio.sleep(0.001)

        loop.run_until_complete(drain())
        tr.close()
        _run_until(loop, lambda: pr.lost)
        b.close()
        return 0 < buffered < len(big), after_write, bytes(got) == big + b"tail", log

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[:3] == (True, [("made",), ("pause_writing", True)], True)
    assert ours[3][2:] == [("resume_writing", True), ("lost", None)]
