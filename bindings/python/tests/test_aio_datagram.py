"""The native datagram path of evloop's asyncio loop (src/aio/datagram.cpp: the read callback and
sendto's send-at-once case in C, on the stdlib's _SelectorDatagramTransport, for AF_INET and
AF_INET6): each scenario runs on the stock loop and on evloop's, over real UDP sockets on the
loopback, and what the protocol saw (its calls, in order, with their arguments) must be the
same on both."""

from __future__ import annotations

import asyncio
import socket
import sys
import time
from typing import Any, Callable, List, Optional, Tuple

import pytest

import evloop

from conftest import on_both_loops as _both, raised

DEADLINE = 20.0


class Recorder(asyncio.DatagramProtocol):
    """Logs ("made",), ("data", bytes, addr), ("error", exc type, errno), ("lost", exc type);
    data_received raises `fail` when set (once)."""

    def __init__(self, log: List[Any], fail: Optional[BaseException] = None) -> None:
        self.log = log
        self.fail = fail
        self.tr: Any = None

    def connection_made(self, tr: Any) -> None:
        self.tr = tr
        self.log.append(("made",))

    def datagram_received(self, data: bytes, addr: Any) -> None:
        assert type(data) is bytes
        self.log.append(("data", data, addr))
        if self.fail is not None:
            exc, self.fail = self.fail, None
            raise exc

    def error_received(self, exc: Exception) -> None:
        self.log.append(("error", type(exc), getattr(exc, "errno", None)))

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.log.append(("lost", type(exc) if exc is not None else None))


def _run_until(loop: asyncio.AbstractEventLoop, pred: Callable[[], bool]) -> None:
    async def wait() -> None:
        end = time.monotonic() + DEADLINE
        while not pred():
            if time.monotonic() > end:
                raise AssertionError("condition not reached in time")
            await asyncio.sleep(0.001)

    loop.run_until_complete(wait())


def _endpoint(loop: asyncio.AbstractEventLoop, proto: Any, host: str = "127.0.0.1",
              **kw: Any) -> Tuple[Any, Any]:
    if "remote_addr" not in kw and "sock" not in kw:
        kw["local_addr"] = (host, 0)
    return loop.run_until_complete(loop.create_datagram_endpoint(lambda: proto, **kw))


def _peer(family: int = socket.AF_INET, host: str = "127.0.0.1") -> socket.socket:
    s = socket.socket(family, socket.SOCK_DGRAM)
    s.bind((host, 0))
    s.settimeout(DEADLINE)
    return s


def _local(addr: Any) -> Any:
    """A peer address as the loop reports it, with the host part only (the port varies)."""
    return (addr[0],) + tuple(addr[2:])


def _ipv6() -> bool:
    if not socket.has_ipv6:
        return False
    try:
        with socket.socket(socket.AF_INET6, socket.SOCK_DGRAM) as s:
            s.bind(("::1", 0))
        return True
    except OSError:
        return False


# ------------------------------------------------------------------ the transport itself


def test_inet_endpoints_get_the_native_transport_others_the_stdlibs(aloop):
    tr, pr = _endpoint(aloop, Recorder([]))
    try:
        assert isinstance(tr, asyncio.DatagramTransport)
        assert isinstance(tr, asyncio.selector_events._SelectorDatagramTransport)
        assert isinstance(tr, evloop._asyncio_core._AioDatagramBase)
        assert type(tr)._read_ready is evloop._asyncio_core._AioDatagramBase._read_ready
        assert tr.get_extra_info("socket").family == socket.AF_INET
    finally:
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
    tr, pr = _endpoint(aloop, Recorder([]), sock=a)
    try:  # AF_UNIX: the stdlib's read path (its addresses are the socket module's to make)
        assert isinstance(tr, asyncio.DatagramTransport)
        assert not isinstance(tr, evloop._asyncio_core._AioDatagramBase)
        b.send(b"unix")
        _run_until(aloop, lambda: len(pr.log) >= 2)
        assert pr.log[1][:2] == ("data", b"unix")
    finally:
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
        b.close()


@pytest.mark.parametrize("family", ["ipv4", "ipv6"])
def test_echo_gives_the_same_data_and_addresses_as_the_stdlib(family):
    if family == "ipv6" and not _ipv6():
        pytest.skip("no IPv6 loopback here")
    fam, host = (socket.AF_INET, "127.0.0.1") if family == "ipv4" else (socket.AF_INET6, "::1")

    def scenario(loop):
        log: List[Any] = []
        tr, pr = _endpoint(loop, Recorder(log), host=host)
        peer = _peer(fam, host)
        port = tr.get_extra_info("sockname")[1]
        payloads = [b"x", bytes(range(256)) * 4, b"\0" * 1472, b"y" * 65000]
        for p in payloads:
            peer.sendto(p, (host, port))
        _run_until(loop, lambda: len(log) == 1 + len(payloads))
        addr = log[1][2]
        assert addr == peer.getsockname()  # the tuple socket.recvfrom gives
        tr.sendto(b"back", addr)  # bytes, bytearray, memoryview: each sent whole
        tr.sendto(bytearray(b"array"), addr)
        tr.sendto(memoryview(b"..view..")[2:6], addr=addr)
        tr.sendto(data=b"keywords", addr=addr)
        got = [peer.recv(100) for _ in range(4)]
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        peer.close()
        return [(e[0], e[1], _local(e[2])) if e[0] == "data" else e for e in log], got

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[1] == [b"back", b"array", b"view", b"keywords"]


def test_ipv4_addresses_of_every_digit_count_are_written_as_the_socket_module():
    """The native path writes IPv4 addresses itself: senders bound across 127.0.0.0/8 (one,
    two and three digits in each place, zeros) come out as socket.recvfrom gives them."""
    hosts = ["127.0.0.1", "127.9.10.99", "127.100.0.250", "127.255.1.0", "127.0.100.10"]

    def scenario(loop):
        log: List[Any] = []
        tr, pr = _endpoint(loop, Recorder(log))
        out = []
        for h in hosts:
            try:
                peer = _peer(host=h)
            except OSError:  # not a local address here
                continue
            peer.sendto(h.encode(), tr.get_extra_info("sockname"))
            _run_until(loop, lambda: len(log) == 2 + len(out))
            out.append((log[-1][1], log[-1][2] == peer.getsockname(), log[-1][2][0]))
            peer.close()
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        return out

    stock, ours = _both(scenario)
    assert stock == ours and len(ours) >= 1
    assert all(sent.decode() == host and same for sent, same, host in ours)


def test_max_size_truncates_as_the_stdlib_and_past_the_native_buffer_reads_whole():
    def scenario(loop):
        out = []
        for max_size in (10, 0, 300_000):
            log: List[Any] = []
            tr, pr = _endpoint(loop, Recorder(log))
            tr.max_size = max_size
            peer = _peer()
            peer.sendto(b"0123456789abcdef" * 8, tr.get_extra_info("sockname"))
            peer.sendto(b"second", tr.get_extra_info("sockname"))
            _run_until(loop, lambda: len(log) == 3)
            out.append([(e[0], e[1]) for e in log[1:]])
            tr.close()
            loop.run_until_complete(asyncio.sleep(0))
            peer.close()
        return out

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[0] == [("data", b"0123456789"), ("data", b"second")]
    assert ours[1] == [("data", b""), ("data", b"")]
    assert ours[2][0] == ("data", b"0123456789abcdef" * 8)


def test_bad_max_size_is_a_fatal_read_error_as_the_stdlib(caplog):
    def scenario(loop):
        out = []
        for bad in (-1, "big"):
            log: List[Any] = []
            tr, pr = _endpoint(loop, Recorder(log))
            tr.max_size = bad
            peer = _peer()
            peer.sendto(b"x", tr.get_extra_info("sockname"))
            _run_until(loop, lambda: log[-1][0] == "lost")
            out.append(log)
            peer.close()
        return out

    stock, ours = _both(scenario)
    assert stock == ours == [[("made",), ("lost", ValueError)], [("made",), ("lost", TypeError)]]


def test_icmp_refusal_reaches_error_received_on_both_paths():
    """A connected endpoint whose peer port is closed: the kernel's ECONNREFUSED comes from
    the next send or recvfrom, and goes to error_received; the endpoint stays open."""
    def scenario(loop):
        log: List[Any] = []
        gone = _peer()
        addr = gone.getsockname()
        gone.close()
        tr, pr = _endpoint(loop, Recorder(log), remote_addr=addr)
        for _ in range(3):
            tr.sendto(b"ping")
            loop.run_until_complete(asyncio.sleep(0.02))
        _run_until(loop, lambda: any(e[0] == "error" for e in log))
        closing = tr.is_closing()
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        return sorted(set(e for e in log if e[0] == "error")), closing, log[-1]

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[0] == [("error", ConnectionRefusedError, 111)] and ours[1] is False


def test_datagram_received_raising_reaches_the_exception_handler_and_reading_goes_on():
    def scenario(loop):
        caught: List[Any] = []
        loop.set_exception_handler(lambda lp, ctx: caught.append(type(ctx.get("exception"))))
        log: List[Any] = []
        tr, pr = _endpoint(loop, Recorder(log, fail=ValueError("boom")))
        peer = _peer()
        peer.sendto(b"one", tr.get_extra_info("sockname"))
        _run_until(loop, lambda: caught)
        peer.sendto(b"two", tr.get_extra_info("sockname"))
        _run_until(loop, lambda: len(log) == 3)
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        peer.close()
        return caught, [(e[0], e[1]) for e in log[1:]]

    stock, ours = _both(scenario)
    assert stock == ours == ([ValueError], [("data", b"one"), ("data", b"two"), ("lost", None)])


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_keyboardinterrupt_in_datagram_received_goes_up(exc):
    def scenario(loop):
        log: List[Any] = []
        tr, pr = _endpoint(loop, Recorder(log, fail=exc()))
        peer = _peer()
        peer.sendto(b"x", tr.get_extra_info("sockname"))
        r = raised(lambda: loop.run_until_complete(asyncio.sleep(DEADLINE)))
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        peer.close()
        return r and r[0]

    stock, ours = _both(scenario)
    assert stock == ours == exc


def test_sendto_refusals_and_a_closed_transport_as_the_stdlib(caplog):
    def scenario(loop):
        out = []
        tr, pr = _endpoint(loop, Recorder([]))
        peer = _peer()
        out.append(raised(lambda: tr.sendto("text", peer.getsockname())))
        out.append(raised(lambda: tr.sendto(b"x", None)))  # unconnected, no address: fatal
        out.append(tr.is_closing())
        tr2, pr2 = _endpoint(loop, Recorder([]), remote_addr=peer.getsockname())
        r = raised(lambda: tr2.sendto(b"x", ("127.0.0.1", 1)))
        out.append(r and (r[0], r[1].replace(repr(peer.getsockname()), "<peer>")))
        out.append(raised(lambda: tr2.sendto(b"ok", peer.getsockname())))  # its own: fine
        out.append(peer.recv(10))
        tr2.sendto(b"")  # 3.11, 3.12: nothing; 3.13: an empty datagram
        tr2.sendto(b"last")
        out.append(peer.recv(10))
        tr2.close()
        tr2.sendto(b"after close")  # counted, not sent (the stdlib's lost-connection branch)
        loop.run_until_complete(asyncio.sleep(0))
        out.append(raised(lambda: tr2.sendto(b"x", "a", "b")))
        peer.close()
        return out

    stock, ours = _both(scenario)
    assert stock == ours
    assert ours[6] == (b"" if sys.version_info >= (3, 13) else b"last")
    assert ours[0][0] is TypeError and ours[3][0] is ValueError and ours[2] is True


DATAGRAM_HOT = ("_protocol", "_conn_lost", "_buffer", "_sock_fd", "_address", "_extra", "_sock")


def test_the_hot_attributes_are_slots_and_a_patch_on_the_class_wins(aloop):
    """The attributes the native paths read are slots the stdlib's code sets; a property put
    on the class under one of the names wins over the slot for the native sendto too (the
    class's version tag changes); put back, the slot serves again."""
    cls = evloop._aio._DatagramTransport
    tr, pr = _endpoint(aloop, Recorder([]))
    peer = _peer()
    saved = cls.__dict__["_address"]
    try:
        assert set(cls.__slots__) == set(DATAGRAM_HOT)
        assert not set(DATAGRAM_HOT) & set(vars(tr))
        assert tr._address is None and tr._conn_lost == 0 and tr._sock_fd == tr._sock.fileno()
        tr.sendto(b"slot", peer.getsockname())
        assert peer.recv(10) == b"slot"
        cls._address = property(lambda self: peer.getsockname())
        tr.sendto(b"via the patch")  # no addr: the endpoint's own, which the property gives
        assert peer.recv(20) == b"via the patch"
        cls._address = saved
        assert tr._address is None
        tr.sendto(b"slot again", peer.getsockname())
        assert peer.recv(20) == b"slot again"
    finally:
        cls._address = saved
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
        peer.close()


def test_a_deleted_attribute_raises_attributeerror_as_the_stdlib():
    def scenario(loop):
        tr, pr = _endpoint(loop, Recorder([]))
        peer = _peer()
        del tr._address
        r = raised(lambda: tr.sendto(b"x", peer.getsockname()))
        tr._address = None
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
        peer.close()
        return r and (r[0], r[1].endswith("object has no attribute '_address'"))

    stock, ours = _both(scenario)
    assert stock == ours == (AttributeError, True)


def test_many_datagrams_both_ways_none_lost_or_reordered(aloop):
    """10,000 datagrams from a peer that waits for each echo: each comes back once, in order."""
    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, tr: Any) -> None:
            self.tr = tr

        def datagram_received(self, data: bytes, addr: Any) -> None:
            self.tr.sendto(data, addr)

    tr, pr = _endpoint(aloop, Echo())
    peer = _peer()
    peer.setblocking(False)
    dest = tr.get_extra_info("sockname")

    async def run() -> List[int]:
        got = []
        for i in range(10_000):
            peer.sendto(i.to_bytes(4, "big"), dest)
            while True:
                try:
                    got.append(int.from_bytes(peer.recv(8, socket.MSG_DONTWAIT), "big"))
                    break
                except BlockingIOError:
                    await asyncio.sleep(0)
        return got

    try:
        got = aloop.run_until_complete(asyncio.wait_for(run(), DEADLINE * 3))
        assert got == list(range(10_000))
    finally:
        tr.close()
        aloop.run_until_complete(asyncio.sleep(0))
        peer.close()
