"""The stream transport's construction in C (src/aio/stream_init.cpp, evloop's
``_SocketTransport.__init__`` where the stdlib's construction is one it knows): each case
builds one transport with it and one with the stdlib's ``__init__`` on an equal socket, and
compares what they store, what they queue on the loop, what they register and call, and what
they raise."""

from __future__ import annotations

import asyncio
import collections
import socket
import sys
from typing import Any, Dict, List, Tuple

import pytest

import evloop
from evloop import _aio

NATIVE = _aio._SocketTransport.__init__
STD = asyncio.selector_events._SelectorSocketTransport.__init__


class Plain(asyncio.Protocol):
    pass


class Buffered(asyncio.BufferedProtocol):
    def get_buffer(self, sizehint: int) -> bytearray:
        return bytearray(100)

    def buffer_updated(self, nbytes: int) -> None:
        pass


class FakeServer:
    """Records _attach's calls (3.11 and 3.12 call it with no argument, 3.13 with the
    transport)."""

    def __init__(self) -> None:
        self.calls: List[Tuple[Any, ...]] = []

    def _attach(self, *a: Any) -> None:
        self.calls.append(a)

    def _detach(self, *a: Any) -> None:
        pass


def _attrs(tr: Any) -> Dict[str, Any]:
    """Every attribute the instance holds: its __dict__ and the slots of its classes."""
    out = dict(vars(tr)) if hasattr(tr, "__dict__") else {}
    for cls in type(tr).__mro__:
        for name in getattr(cls, "__slots__", ()):
            if name not in out and hasattr(tr, name):
                out[name] = getattr(tr, name)
    return out


def _norm(v: Any, tr: Any, known: Dict[int, str]) -> Any:
    """v with what belongs to this transport's case (its socket, loop, protocol, ...; its fd)
    named, so two transports on equal sockets compare equal."""
    if v is not None and id(v) in known:
        return known[id(v)]
    if type(v) is int and v == known.get(-1):
        return "FD"
    if v is tr:
        return "TRANSPORT"
    if hasattr(v, "__func__") and hasattr(v, "__self__"):
        return ("method", v.__func__.__name__, _norm(v.__self__, tr, known))
    if type(v).__name__ == "builtin_function_or_method" and getattr(v, "__self__", None) is tr:
        return ("method", v.__name__, "TRANSPORT")
    if isinstance(v, asyncio.trsock.TransportSocket):
        return ("TransportSocket", _norm(v._sock, tr, known))
    if isinstance(v, dict):
        return {k: _norm(x, tr, known) for k, x in v.items()}
    if isinstance(v, tuple):
        return tuple(_norm(x, tr, known) for x in v)
    if isinstance(v, (bytearray, collections.deque)):
        return (type(v).__name__, len(v))
    return (type(v).__name__, v)


def _sockets(kind: str) -> Tuple[socket.socket, socket.socket, List[socket.socket]]:
    """Two equal server-side sockets of `kind` (their peers kept open in the list)."""
    if kind == "unix":
        a, pa = socket.socketpair()
        b, pb = socket.socketpair()
        return a, b, [pa, pb]
    # proto IPPROTO_TCP, as create_server's listeners: _set_nodelay sets TCP_NODELAY
    lsn = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    lsn.bind(("127.0.0.1", 0))
    lsn.listen(2)
    peers = [socket.create_connection(lsn.getsockname()) for _ in range(2)]
    a, _ = lsn.accept()
    b, _ = lsn.accept()
    lsn.close()
    # the peer addresses differ (their ports): each is named where it is compared
    return a, b, peers


def _build(loop: Any, init: Any, sock: socket.socket, protocol: Any, waiter: Any, extra: Any,
           server: Any, keywords: bool) -> Tuple[Any, Dict[str, Any], List[Any]]:
    """A _SocketTransport made by init: it, its attributes and the handles it queued, named."""
    before = len(list(loop._ready))
    tr = _aio._SocketTransport.__new__(_aio._SocketTransport)
    if keywords:
        init(tr, loop=loop, sock=sock, protocol=protocol, waiter=waiter, extra=extra,
             server=server)
    else:
        init(tr, loop, sock, protocol, waiter, extra, server)
    known: Dict[int, Any] = {id(sock): "SOCK", id(loop): "LOOP", id(protocol): "PROTOCOL",
                             id(server): "SERVER", id(waiter): "WAITER", -1: sock.fileno()}
    peer = sock.getpeername()
    attrs = {k: _norm(v, tr, known) for k, v in _attrs(tr).items()}
    if attrs["_extra"].get("peername") == _norm(peer, tr, known) and peer:
        attrs["_extra"]["peername"] = "PEER"
    queued = [(_norm(h._callback, tr, known), _norm(h._args, tr, known))
              for h in list(loop._ready)[before:]]
    assert loop._transports.get(sock.fileno()) is tr
    return tr, attrs, queued


CASES = [
    # kind, protocol class, waiter, extra, server, keywords
    ("tcp", Plain, False, None, False, False),
    ("tcp", Buffered, True, "peername", True, False),
    ("tcp", Plain, True, "other", True, True),
    ("unix", Plain, False, None, True, False),
    ("unix", Buffered, True, "peername", False, True),
]


@pytest.mark.skipif(not _aio._STREAM_INIT_NATIVE, reason="the stdlib's construction here "
                    "is not one stream_init.cpp knows")
@pytest.mark.parametrize("kind,proto_cls,with_waiter,extra_kind,with_server,keywords", CASES)
def test_native_construction_matches_the_stdlibs(kind: str, proto_cls: Any, with_waiter: bool,
                                                 extra_kind: Any, with_server: bool,
                                                 keywords: bool) -> None:
    loop = evloop.new_event_loop()
    a, b, peers = _sockets(kind)
    try:
        seen = []
        for init, sock in ((STD, a), (NATIVE, b)):
            sock.setblocking(False)
            extra: Any = None
            if extra_kind == "peername":
                extra = {"peername": sock.getpeername()}
            elif extra_kind == "other":
                extra = {"other": 1}
            server = FakeServer() if with_server else None
            waiter = loop.create_future() if with_waiter else None
            tr, attrs, queued = _build(loop, init, sock, proto_cls(), waiter, extra, server,
                                       keywords)
            calls = [tuple("TRANSPORT" if x is tr else x for x in c)
                     for c in (server.calls if server else [])]
            nodelay = (sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0
                       if kind == "tcp" else None)
            seen.append((attrs, queued, calls, nodelay))
            tr.close()
            loop.run_until_complete(asyncio.sleep(0))
        assert seen[0] == seen[1]
        assert seen[1][3] in (True, None)  # TCP_NODELAY set on TCP
        cb = seen[1][0]["_read_ready_cb"]
        assert cb[1] == ("_read_ready__get_buffer" if proto_cls is Buffered
                         else "_read_ready__data_received")
    finally:
        for s in [a, b] + peers:
            s.close()
        loop.close()


@pytest.mark.skipif(not _aio._STREAM_INIT_NATIVE, reason="not the native construction here")
def test_a_closed_socket_raises_as_the_stdlibs() -> None:
    """getsockname and getpeername fail (None stored), then TCP_NODELAY's setsockopt raises
    OSError: the same error from both."""
    loop = evloop.new_event_loop()
    try:
        errors = []
        for init in (STD, NATIVE):
            # proto IPPROTO_TCP, as create_server's sockets: _set_nodelay sets the option
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
            sock.close()
            tr = _aio._SocketTransport.__new__(_aio._SocketTransport)
            with pytest.raises(OSError) as e:
                init(tr, loop, sock, Plain())
            errors.append((type(e.value), e.value.errno, tr._extra["sockname"],
                           tr._extra["peername"]))
            loop._transports.pop(-1, None)
            tr._sock = None  # no unclosed-transport warning: the socket is closed
        assert errors[0] == errors[1]
        assert errors[0][2:] == (None, None)
    finally:
        loop.close()


@pytest.mark.skipif(not _aio._STREAM_INIT_NATIVE, reason="not the native construction here")
def test_bad_arguments_get_the_stdlibs_errors() -> None:
    loop = evloop.new_event_loop()
    a, b = socket.socketpair()
    try:
        for args, kwargs in (((), {}), ((loop,), {}), ((loop, a, Plain()), {"bogus": 1}),
                             ((loop, a, Plain()), {"protocol": Plain()}),
                             ((loop, a, Plain(), None, None, None, 7), {})):
            msgs = []
            for init in (STD, NATIVE):
                tr = _aio._SocketTransport.__new__(_aio._SocketTransport)
                with pytest.raises(TypeError) as e:
                    init(tr, *args, **kwargs)
                msgs.append(str(e.value))
            assert msgs[0] == msgs[1]
    finally:
        a.close()
        b.close()
        loop.close()


def test_a_socket_subclass_takes_the_stdlibs_init() -> None:
    """Another socket class than socket.socket (its own methods) is left to the stdlib."""

    class Sub(socket.socket):
        calls = 0

        def getsockname(self) -> Any:
            Sub.calls += 1
            return super().getsockname()

    loop = evloop.new_event_loop()
    a, b = socket.socketpair()
    sub = Sub(a.family, a.type, a.proto, fileno=a.detach())
    try:
        tr = _aio._SocketTransport(loop, sub, Plain())
        assert Sub.calls == 1
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
    finally:
        sub.close()
        b.close()
        loop.close()


def test_a_changed_stdlib_keeps_its_own_init(monkeypatch: Any) -> None:
    """The check of the stdlib's code refuses a function it was not written from: here a
    write-buffer limit changed, and a store added to the socket transport's __init__."""
    assert _aio._stream_init_setup() == _aio._STREAM_INIT_NATIVE

    def limits(self: Any, high: Any = None, low: Any = None) -> None:
        self._high_water = 128 * 1024 if high is None else high
        self._low_water = self._high_water // 4 if low is None else low

    monkeypatch.setattr(asyncio.transports._FlowControlMixin, "_set_write_buffer_limits",
                        limits)
    assert _aio._stream_init_setup() is False
    monkeypatch.undo()

    def init(self: Any, loop: Any, sock: Any, protocol: Any, waiter: Any = None,
             extra: Any = None, server: Any = None) -> None:
        STD(self, loop, sock, protocol, waiter, extra, server)
        self._new_attribute = True

    monkeypatch.setattr(asyncio.selector_events._SelectorSocketTransport, "__init__", init)
    assert _aio._stream_init_setup() is False


def test_the_native_construction_is_used_where_written_from() -> None:
    """On the versions stream_init.cpp was written from the check must accept the stdlib's
    code (else the C is never used and the comparisons above are skipped)."""
    version = ".".join(map(str, sys.version_info[:3]))
    if version in ("3.11.2", "3.11.7", "3.12.1", "3.13.0"):
        assert _aio._STREAM_INIT_NATIVE
    else:
        pytest.skip(f"CPython {version}: not one it was written from")
