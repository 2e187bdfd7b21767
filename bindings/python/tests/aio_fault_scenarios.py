"""Fault scenarios for test_aio_faults.py, each run in a process of its own under the faultshim
LD_PRELOAD library (faultshim.c), on one asyncio loop:

    python aio_fault_scenarios.py SCENARIO LOOP [ARG...]

LOOP is ``stock`` (asyncio.SelectorEventLoop) or ``evloop-<variant>-<backend>``. The last line
of the output is ``OUTCOME <json>``: what the scenario saw, in a form the test compares between
the stock loop and evloop's (``compare``) and checks on its own (``check``: counts that differ
between loops but must stay within a bound). The shim is driven through ctypes: it fails a
window of accept/recv/send/sendfile calls on one fd with a chosen errno and counts them."""

from __future__ import annotations

import asyncio
import ctypes
import errno
import gc
import json
import logging
import os
import re
import socket
import struct
import sys
import tempfile
import threading
import time
import warnings
import weakref
from typing import Any, Callable, Dict, List, Optional, Tuple

DEADLINE = 20.0  # seconds, as conftest's: generous for a loaded 2-core machine
RETRY_DELAY = 0.1  # asyncio.constants.ACCEPT_RETRY_DELAY here (1 s in the stdlib)

# ---------------------------------------------------------------------------- the shim

_shim = ctypes.CDLL(None)
try:
    _shim.faultshim_arm.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_long,
                                    ctypes.c_long, ctypes.c_uint]
    _shim.faultshim_clear.argtypes = [ctypes.c_char_p]
    _shim.faultshim_count.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
    _shim.faultshim_count.restype = ctypes.c_ulong
except AttributeError:
    sys.exit("faultshim is not preloaded (LD_PRELOAD=.../faultshim.so)")


def arm(kind: str, fd: int, err: int, skip: int = 0, count: int = 1, every: int = 1) -> None:
    """Calls of kind on fd (-1: any): after skip, count of them fail with err (-1: until
    cleared), one in every."""
    assert _shim.faultshim_arm(kind.encode(), fd, err, skip, count, every) == 0


def clear(kind: str) -> None:
    _shim.faultshim_clear(kind.encode())


def count(kind: str, what: str = "calls") -> int:
    return int(_shim.faultshim_count(kind.encode(), what.encode()))


# ---------------------------------------------------------------------------- helpers

def make_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "stock":
        return asyncio.SelectorEventLoop()
    import evloop
    _, variant, backend = kind.split("-")
    return evloop.new_event_loop(variant=variant, backend=backend)


def count_iterations(loop: asyncio.AbstractEventLoop) -> List[int]:
    """The loop's iterations (its _run_once calls) from now on, in box[0]."""
    box = [0]
    run_once = loop._run_once  # type: ignore[attr-defined]

    def counted() -> None:
        box[0] += 1
        run_once()

    loop._run_once = counted  # type: ignore[attr-defined]
    return box


def tcp_pair(sndbuf: int = 0, rcvbuf: int = 0) -> Tuple[socket.socket, socket.socket]:
    """A connected loopback TCP pair: the loop's end (non-blocking) and a blocking peer."""
    with socket.socket() as ls:
        ls.bind(("127.0.0.1", 0))
        ls.listen(1)
        a = socket.socket()
        if sndbuf:
            a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, sndbuf)
        a.connect(ls.getsockname())
        b, _ = ls.accept()
    if rcvbuf:
        b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
    a.setblocking(False)
    b.settimeout(DEADLINE)
    return a, b


async def until(pred: Callable[[], bool], step: float = 0.01) -> None:
    end = time.monotonic() + DEADLINE
    while not pred():
        if time.monotonic() > end:
            raise AssertionError("condition not reached in time")
        await asyncio.sleep(step)


def exc_name(exc: Optional[BaseException]) -> Optional[str]:
    """An exception as compared: its type, with the two a reset peer can give as one."""
    if exc is None:
        return None
    if isinstance(exc, (ConnectionResetError, BrokenPipeError)):
        return "reset-or-pipe"
    return type(exc).__name__


def exc_full(exc: Optional[BaseException]) -> Any:
    if exc is None:
        return None
    return [type(exc).__name__, getattr(exc, "errno", None), str(exc)]


def raised(fn: Callable[[], Any]) -> Any:
    try:
        fn()
    except BaseException as e:  # noqa: BLE001
        return [type(e).__name__, str(e)]
    return None


class Recorder(asyncio.Protocol):
    """Logs what the transport calls on it."""

    def __init__(self, log: List[Any]) -> None:
        self.log = log
        self.tr: Any = None
        self.lost = False
        self.exc: Optional[BaseException] = None

    def connection_made(self, tr: Any) -> None:
        self.tr = tr
        self.log.append(["made"])

    def data_received(self, data: bytes) -> None:
        if self.log and self.log[-1][0] == "data":
            self.log[-1][1] += len(data)
        else:
            self.log.append(["data", len(data)])

    def eof_received(self) -> None:
        self.log.append(["eof"])

    def pause_writing(self) -> None:
        self.log.append(["pause_writing"])

    def resume_writing(self) -> None:
        self.log.append(["resume_writing"])

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.lost = True
        self.exc = exc
        self.log.append(["lost", exc_name(exc)])


def contexts_of(loop: asyncio.AbstractEventLoop) -> List[Any]:
    """What the loop's exception handler gets, from now on."""
    out: List[Any] = []

    def handler(lp: Any, ctx: Dict[str, Any]) -> None:
        exc = ctx.get("exception")
        out.append([ctx.get("message"), exc_full(exc), sorted(ctx)])

    loop.set_exception_handler(handler)
    return out


def peer_end(b: socket.socket) -> str:
    """Reads the peer until the end: "eof" or the error that ended it."""
    try:
        while b.recv(1 << 20):
            pass
        return "eof"
    except OSError as e:
        return exc_name(e) or "?"


# ---------------------------------------------------------------------------- scenarios

def accept_fault(loop: asyncio.AbstractEventLoop, errname: str) -> Dict[str, Any]:
    """accept() failing with errname on the listening socket while a client waits in the
    backlog; an established connection echoes meanwhile; then the fault clears. The stock
    loop's server (asyncio's _accept_connection, which evloop's loop keeps) tries accept up
    to `backlog` (100) times per readiness, reports each failure to the exception handler,
    removes the reader and schedules _start_serving after ACCEPT_RETRY_DELAY, which adds it
    back: rounds of failures separated by re-adds, never two rounds in a row; the loop sleeps
    in between (few iterations); the waiting client is served once the fault clears."""
    import asyncio.constants
    asyncio.constants.ACCEPT_RETRY_DELAY = RETRY_DELAY  # read at each use by the stdlib
    err = getattr(errno, errname)
    contexts = contexts_of(loop)
    iters = count_iterations(loop)
    made: List[Any] = []
    events: List[Any] = []  # ["fail", n] per accept round that failed, ["ok"], ["serve"]
    rounds_failed = [0]
    second: List[Any] = []
    accept_connection = loop._accept_connection  # type: ignore[attr-defined]
    start_serving = loop._start_serving  # type: ignore[attr-defined]

    def counted_accept(*args: Any, **kwargs: Any) -> Any:
        before = count("accept", "failed")
        try:
            return accept_connection(*args, **kwargs)
        finally:
            n = count("accept", "failed") - before
            events.append(["fail", n] if n else ["ok"])
            if n:
                rounds_failed[0] += 1
                if rounds_failed[0] == 2 and second and not second[0].done():
                    second[0].set_result(None)

    def counted_serve(*args: Any, **kwargs: Any) -> Any:
        if not events or events[-1] != ["serve"]:
            events.append(["serve"])  # the stdlib schedules one per failure: one run of them
        return start_serving(*args, **kwargs)

    loop._accept_connection = counted_accept  # type: ignore[attr-defined]
    loop._start_serving = counted_serve  # type: ignore[attr-defined]

    class Echo(asyncio.Protocol):
        def connection_made(self, tr: Any) -> None:
            self.tr = tr
            made.append(tr)

        def data_received(self, data: bytes) -> None:
            self.tr.write(data)

    async def main() -> Dict[str, Any]:
        srv = await loop.create_server(Echo, "127.0.0.1", 0)
        lsock = srv.sockets[0]
        port = lsock.getsockname()[1]
        ra, wa = await asyncio.open_connection("127.0.0.1", port)
        wa.write(b"a0")
        assert await asyncio.wait_for(ra.readexactly(2), DEADLINE) == b"a0"
        second.append(loop.create_future())
        del events[:]
        arm("accept", lsock.fileno(), err, count=-1)
        it0 = iters[0]
        rb, wb = await asyncio.open_connection("127.0.0.1", port)  # waits in the backlog
        wb.write(b"b")
        echoes = []
        for i in range(1, 4):  # the established connection is served during the fault
            wa.write(b"a%d" % i)
            echoes.append((await asyncio.wait_for(ra.readexactly(2), DEADLINE)).decode())
        await asyncio.wait_for(second[0], DEADLINE)
        made_during = len(made)
        it1, failed, rounds = iters[0], count("accept", "failed"), rounds_failed[0]
        clear("accept")
        b_echo = (await asyncio.wait_for(rb.readexactly(1), DEADLINE)).decode()
        calls = count("accept")
        # Let the re-adds still pending run while the listener is open: a timer due after
        # srv.close() adds a reader on fd -1 and reports that (on either loop, as the
        # timing falls). Timers run in deadline order: theirs are all due before this one.
        await asyncio.sleep(3 * RETRY_DELAY)
        for w in (wa, wb):
            w.close()
        srv.close()
        await srv.wait_closed()
        # failure rounds and re-adds alternate, then the round that takes the client (re-adds
        # left over from the last failure round may run after it: the stdlib scheduled one
        # per failure, and they need not all fall due in the same iteration)
        pattern = [e[0] for e in events]
        while pattern and pattern[-1] == "serve":
            pattern.pop()
        alternating = pattern == ["fail", "serve"] * (len(pattern) // 2) + ["ok"]
        return {
            "compare": {
                "contexts": [c for i, c in enumerate(contexts) if i == 0 or c != contexts[0]],
                "one_context_per_failure": len(contexts) == failed,
                "failures_per_round": sorted({e[1] for e in events if e[0] == "fail"}),
                "rounds_and_re_adds_alternate": alternating,
                "accepts_beyond_the_failures": calls - failed,  # the client's, then EAGAIN
                "echoes_during_the_fault": echoes,
                "connections_during_the_fault": made_during,
                "waiting_client_echo": b_echo,
                "connections": len(made),
            },
            "check": {"iterations": it1 - it0, "rounds": rounds},
            "info": {"events": events[:12], "failed": failed},
        }

    return loop.run_until_complete(main())


def sock_accept_fault(loop: asyncio.AbstractEventLoop, errname: str) -> Dict[str, Any]:
    """accept() failing with errname under loop.sock_accept's reader (the first try found
    nothing; the one the reader makes when the client comes fails): sock_accept raises it,
    the client stays queued and the next sock_accept takes it."""
    err = getattr(errno, errname)
    contexts = contexts_of(loop)
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(8)
    ls.setblocking(False)

    async def main() -> Dict[str, Any]:
        arm("accept", ls.fileno(), err, skip=1, count=1)
        t = loop.create_task(loop.sock_accept(ls))
        await until(lambda: count("accept") >= 1)
        c = socket.create_connection(ls.getsockname(), timeout=DEADLINE)
        try:
            await t
            first = None
        except OSError as e:
            first = exc_full(e)
        conn, _ = await asyncio.wait_for(loop.sock_accept(ls), DEADLINE)
        c.sendall(b"q")
        conn.setblocking(False)
        got = (await asyncio.wait_for(loop.sock_recv(conn, 10), DEADLINE)).decode()
        conn.close()
        c.close()
        ls.close()
        return {"compare": {"first": first, "then": got, "calls": count("accept"),
                            "contexts": contexts}}

    return loop.run_until_complete(main())


def write_fault(loop: asyncio.AbstractEventLoop, errname: str, how: str) -> Dict[str, Any]:
    """send() failing with errname under a transport's write: at once (write() into an empty
    buffer: evloop's native path), from the buffer (_write_ready, after a partial send), or
    under sock_sendall. The stdlib's transport treats any OSError there as fatal: no exception
    handler call, connection_lost(exc), the socket closed (the peer reads to EOF);
    sock_sendall raises it."""
    err = getattr(errno, errname)
    contexts = contexts_of(loop)
    log: List[Any] = []
    a, b = tcp_pair(sndbuf=16384 if how == "buffered" else 0,
                    rcvbuf=16384 if how == "buffered" else 0)
    fd = a.fileno()

    async def main() -> Dict[str, Any]:
        if how == "sock_sendall":
            arm("send", fd, err, count=1)
            try:
                await loop.sock_sendall(a, b"x" * 1000)
                out = None
            except OSError as e:
                out = exc_full(e)
            a.close()
            return {"compare": {"sock_sendall": out, "failed": count("send", "failed"),
                                "contexts": contexts, "peer": peer_end(b)}}
        tr, pr = await loop.create_connection(lambda: Recorder(log), sock=a)
        if how == "at_once":
            arm("send", fd, err, count=1)
            tr.write(b"x" * 1000)
            buffered = tr.get_write_buffer_size()
        else:
            tr.write(b"x" * (4 << 20))  # a partial send, the rest buffered, a writer waiting
            buffered = int(tr.get_write_buffer_size() > 0)
            arm("send", fd, err, count=1)
            b.recv(1 << 16)  # room again: the writer's send is the one that fails
        await until(lambda: pr.lost)
        return {"compare": {"log": log, "exc": exc_full(pr.exc), "buffered_before": buffered,
                            "failed": count("send", "failed"), "contexts": contexts,
                            "closing": tr.is_closing(), "left": tr.get_write_buffer_size(),
                            "peer": peer_end(b)}}

    try:
        return loop.run_until_complete(main())
    finally:
        b.close()


def read_fault(loop: asyncio.AbstractEventLoop, errname: str, how: str) -> Dict[str, Any]:
    """recv() failing with errname under a transport's read callback (evloop's native read
    path), or under sock_recv's reader (evloop's, in C): connection_lost(exc) without an
    exception handler call for an OSError; sock_recv raises it."""
    err = getattr(errno, errname)
    contexts = contexts_of(loop)
    log: List[Any] = []
    a, b = tcp_pair()
    fd = a.fileno()

    async def main() -> Dict[str, Any]:
        if how == "sock_recv":
            # the first recv finds nothing and leaves a reader waiting (evloop: in C); the
            # one the reader makes when the byte comes is the one that fails
            arm("recv", fd, err, skip=1, count=1)
            fut = loop.create_task(loop.sock_recv(a, 100))
            await until(lambda: count("recv") >= 1)
            b.sendall(b"x")
            try:
                out: Any = (await asyncio.wait_for(fut, DEADLINE)).decode()
            except OSError as e:
                out = exc_full(e)
            # the byte is still there for the next sock_recv
            again = (await asyncio.wait_for(loop.sock_recv(a, 100), DEADLINE)).decode()
            a.close()
            return {"compare": {"sock_recv": out, "again": again,
                                "failed": count("recv", "failed"), "contexts": contexts}}
        tr, pr = await loop.create_connection(lambda: Recorder(log), sock=a)
        arm("recv", fd, err, count=1)
        b.sendall(b"x")
        await until(lambda: pr.lost)
        return {"compare": {"log": log, "exc": exc_full(pr.exc), "contexts": contexts,
                            "failed": count("recv", "failed"), "closing": tr.is_closing(),
                            "peer": peer_end(b)}}

    try:
        return loop.run_until_complete(main())
    finally:
        b.close()


def peer_gone_mid_write(loop: asyncio.AbstractEventLoop, how: str) -> Dict[str, Any]:
    """A real one: 8 MiB written to a peer that reads 4 KiB and then resets (SO_LINGER 0) or
    closes without reading the rest (a reset too): the buffered write ends in
    connection_lost(ConnectionResetError or BrokenPipeError), the buffer dropped; a
    StreamWriter.drain() waiting on it raises."""
    contexts = contexts_of(loop)
    log: List[Any] = []
    a, b = tcp_pair(sndbuf=16384, rcvbuf=16384)

    async def main() -> Dict[str, Any]:
        tr, pr = await loop.create_connection(lambda: Recorder(log), sock=a)
        tr.write(b"x" * (8 << 20))
        buffered = int(tr.get_write_buffer_size() > 0)
        got = 0
        while got < 4096:
            got += len(b.recv(4096 - got))
        if how == "reset":
            b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        b.close()
        await until(lambda: pr.lost)
        tr.write(b"late")  # after the loss: dropped (the stdlib warns after 5 such writes)
        return {"compare": {"log": log, "buffered_before": buffered, "contexts": contexts,
                            "closing": tr.is_closing(), "left": tr.get_write_buffer_size()},
                "info": {"exc": exc_full(pr.exc)}}

    return loop.run_until_complete(main())


def peer_gone_mid_sendfile(loop: asyncio.AbstractEventLoop, how: str) -> Dict[str, Any]:
    """A real one: loop.sendfile() of 64 MiB to a peer that reads 4 KiB, then resets or closes:
    sendfile raises ConnectionResetError or BrokenPipeError (some bytes went: no fallback),
    the transport then loses its connection (its reader, resumed, finds the reset)."""
    contexts = contexts_of(loop)
    log: List[Any] = []
    a, b = tcp_pair(sndbuf=16384, rcvbuf=16384)

    def peer() -> None:
        got = 0
        while got < 4096:
            got += len(b.recv(4096 - got))
        if how == "reset":
            b.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        b.close()

    async def main() -> Dict[str, Any]:
        tr, pr = await loop.create_connection(lambda: Recorder(log), sock=a)
        t = threading.Thread(target=peer)
        with tempfile.TemporaryFile() as f:
            f.truncate(64 << 20)
            t.start()
            try:
                await asyncio.wait_for(loop.sendfile(tr, f), DEADLINE)
                out = None
            except Exception as e:  # noqa: BLE001
                out = exc_name(e)
            pos = f.tell()
        t.join(DEADLINE)
        await until(lambda: pr.lost)
        return {"compare": {"sendfile": out, "log": log, "contexts": contexts,
                            "file_position_moved": 0 < pos < (64 << 20),
                            "closing": tr.is_closing()},
                "info": {"exc": exc_full(pr.exc), "sendfile_calls": count("sendfile", "total")}}

    return loop.run_until_complete(main())


def eintr(loop: asyncio.AbstractEventLoop) -> Dict[str, Any]:
    """EINTR from accept (3 in a row on the listener), and from every other recv, send and
    sendfile of the process: a 1 MiB echo through a server and streams, sock_recv and
    sock_sendall on a socket pair, and a sendfile, all complete with every byte: the socket
    module and evloop's native paths retry EINTR (PEP 475); nothing reaches the protocol or
    the exception handler."""
    contexts = contexts_of(loop)
    blob = os.urandom(1 << 20)

    async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
        while True:
            data = await r.read(1 << 16)
            if not data:
                break
            w.write(data)
            await w.drain()
        w.close()

    async def main() -> Dict[str, Any]:
        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
        lsock = srv.sockets[0]
        arm("accept", lsock.fileno(), errno.EINTR, count=3)
        arm("recv", -1, errno.EINTR, count=-1, every=2)
        arm("send", -1, errno.EINTR, count=-1, every=2)
        arm("sendfile", -1, errno.EINTR, count=-1, every=2)
        r, w = await asyncio.open_connection("127.0.0.1", lsock.getsockname()[1])

        async def reader() -> bytes:
            return await r.readexactly(len(blob))

        rt = loop.create_task(reader())
        for i in range(0, len(blob), 1 << 15):
            w.write(blob[i:i + (1 << 15)])
            await w.drain()
        echo_ok = await asyncio.wait_for(rt, DEADLINE) == blob
        a, b = tcp_pair()
        b.setblocking(False)
        await loop.sock_sendall(a, blob[:1 << 16])
        got = b""
        while len(got) < 1 << 16:
            got += await loop.sock_recv(b, 1 << 16)
        sock_ok = got == blob[:1 << 16]
        with tempfile.TemporaryFile() as f:
            f.write(blob)
            f.flush()
            f.seek(0)
            rt = loop.create_task(reader())
            sent = await asyncio.wait_for(loop.sendfile(w.transport, f), DEADLINE)
            sendfile_ok = sent == len(blob) and await asyncio.wait_for(rt, DEADLINE) == blob
        injected = {k: count(k, "failed") > 0 for k in ("accept", "recv", "send", "sendfile")}
        for k in ("recv", "send", "sendfile"):
            clear(k)
        w.close()
        a.close()
        b.close()
        srv.close()
        await srv.wait_closed()
        return {"compare": {"echo": echo_ok, "sock": sock_ok, "sendfile": sendfile_ok,
                            "injected": injected, "accept_eintrs": count("accept", "failed"),
                            "contexts": contexts}}

    return loop.run_until_complete(main())


def eintr_signal(loop: asyncio.AbstractEventLoop, path: str, excname: str) -> Dict[str, Any]:
    """EINTR whose signal's Python handler raises (the shim raises SIGUSR1 in the failing call,
    as a real EINTR comes): under write() at once and the transport's read callback (evloop's
    native paths), sock_recv's reader and sock_sendall. As the socket module does, the
    handler's exception replaces the EINTR; the stdlib then treats a ValueError as a fatal
    transport error (exception handler and connection_lost) and lets KeyboardInterrupt
    through (out of write(), or out of run_until_complete), the transport still usable."""
    import signal
    cls = {"ValueError": ValueError, "KeyboardInterrupt": KeyboardInterrupt}[excname]

    def handler(signo: int, frame: Any) -> None:
        raise cls("from the handler")

    signal.signal(signal.SIGUSR1, handler)
    contexts = contexts_of(loop)
    log: List[Any] = []
    a, b = tcp_pair()
    fd = a.fileno()
    kind = "send" if path in ("write", "sock_sendall") else "recv"
    out: Dict[str, Any] = {}

    def failing() -> None:
        arm(kind, fd, errno.EINTR, skip=int(path == "sock_recv"), count=1)
        _shim.faultshim_signal(kind.encode(), signal.SIGUSR1)

    async def main() -> None:
        if path == "sock_sendall":
            failing()
            out["result"] = exc_full(None)
            await loop.sock_sendall(a, b"hello")
            return
        if path == "sock_recv":
            failing()
            t = loop.create_task(loop.sock_recv(a, 100))
            await until(lambda: count("recv") >= 1)
            b.sendall(b"hello")
            out["result"] = (await t).decode()
            return
        tr, pr = await loop.create_connection(lambda: Recorder(log), sock=a)
        out["transport"] = tr
        failing()
        if path == "write":
            try:
                tr.write(b"hello")
                out["write"] = None
            except BaseException as e:  # noqa: BLE001
                out["write"] = [type(e).__name__, str(e)]
                return  # went up through write(): nothing else happened
        else:
            b.sendall(b"hello")
        await until(lambda: pr.lost or bool(log[1:]))

    try:
        loop.run_until_complete(main())
        out["propagated"] = None
    except BaseException as e:  # noqa: BLE001
        out["propagated"] = [type(e).__name__, str(e)]
    tr = out.pop("transport", None)
    if tr is not None:  # what the transport does next: a write and a read go through
        if not tr.is_closing():
            tr.write(b"+more")
            b.sendall(b"+back")
        loop.run_until_complete(asyncio.sleep(0.05))
        out["closing"] = tr.is_closing()
        tr.close()
        loop.run_until_complete(asyncio.sleep(0))
    a.close()
    b.settimeout(1.0)
    out["peer"] = peer_end_data(b)
    b.close()
    out["log"] = log
    out["contexts"] = contexts
    out["failed"] = count(kind, "failed")
    return {"compare": out}


def peer_end_data(b: socket.socket) -> List[Any]:
    """What the peer reads until the end, and how it ends."""
    got = b""
    try:
        while True:
            c = b.recv(1 << 16)
            if not c:
                return [got.decode(), "eof"]
            got += c
    except socket.timeout:
        return [got.decode(), "open"]
    except OSError as e:
        return [got.decode(), exc_name(e)]


# ---- the loop closed (or dropped) with transports, servers and threadsafe callbacks pending

_REPR = re.compile(r"<(\w+)[^<>]*(?:<[^<>]*>[^<>]*)*>")
_CLASS = {"EventLoop": "LOOP", "_UnixSelectorEventLoop": "LOOP", "_SocketTransport": "TRANSPORT",
          "_SelectorSocketTransport": "TRANSPORT"}


def normalized(msg: str) -> str:
    """A warning or error message without addresses, fds and ports: object reprs as their
    class (evloop's loop and transport classes read as the stdlib's)."""
    return _REPR.sub(lambda m: "<%s>" % _CLASS.get(m.group(1), m.group(1)), msg)


def _pending_world(loop: asyncio.AbstractEventLoop) -> Dict[str, Any]:
    """A server with a connection, a client transport with a write buffered towards a peer that
    does not read, a task waiting forever, three call_soon_threadsafe callbacks queued from
    another thread while the loop is not running, and a call_later far ahead."""
    ran: List[int] = []
    # w holds all of it and is in no reference cycle (nothing in it refers back to it), so
    # that dropping it frees each object at once, in a fixed order: what the collector frees
    # together it finalizes in an order of its own (a socket's "unclosed socket" warning
    # before or instead of its transport's)
    w: Dict[str, Any] = {"ran": ran}

    class Cb:
        def __init__(self, i: int) -> None:
            self.i = i

        def __call__(self) -> None:
            ran.append(self.i)

    async def setup() -> None:
        srv = await loop.create_server(asyncio.Protocol, "127.0.0.1", 0)
        # plain protocols, not streams: a StreamWriter's __del__ warns one way or another
        # depending on whether the collector reaches it before or after the loop's
        client, _ = await loop.create_connection(asyncio.Protocol, "127.0.0.1",
                                                 srv.sockets[0].getsockname()[1])
        a, b = tcp_pair(sndbuf=16384, rcvbuf=16384)
        tr, _ = await loop.create_connection(asyncio.Protocol, sock=a)
        tr.write(b"x" * (4 << 20))
        w.update(srv=srv, client=client, tr=tr, peer=b,
                 task=loop.create_task(asyncio.sleep(3600)),
                 later=loop.call_later(3600, Cb(-1)))
        await asyncio.sleep(0)

    loop.run_until_complete(setup())
    cbs = [Cb(i) for i in range(3)]
    w["refs"] = [weakref.ref(c) for c in cbs]
    t = threading.Thread(target=lambda: [loop.call_soon_threadsafe(c) for c in cbs])
    t.start()
    t.join()
    del cbs
    w["buffered"] = w["tr"].get_write_buffer_size() > 0
    return w


class _Records(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.seen: List[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.seen.append("%s: %s" % (record.levelname, normalized(record.getMessage())))


def close_pending(kind: str, how: str) -> Dict[str, Any]:
    """The loop closed (``close``), or dropped unclosed (``drop``), with all of _pending_world
    pending, while another thread calls call_soon_threadsafe in a loop: the same warnings,
    log records, unraisable errors and exceptions as the stock loop, none of the pending
    callbacks run, their objects released, the other thread stopped by RuntimeError('Event
    loop is closed') (close), no crash, no hang. This scenario makes its loop itself, so that
    nothing else holds it when it is dropped."""
    unraisable: List[Any] = []
    sys.unraisablehook = lambda u: unraisable.append(
        [type(u.exc_value).__name__, normalized(str(u.exc_value)), u.err_msg])
    records = _Records()
    logging.getLogger("asyncio").addHandler(records)
    out: Dict[str, Any] = {}
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop = make_loop(kind)
        w = _pending_world(loop)
        stop = threading.Event()
        hammer: Dict[str, Any] = {"calls": 0, "exc": None}

        def hammer_main() -> None:
            while not stop.is_set():
                try:
                    loop.call_soon_threadsafe(lambda: None)
                except BaseException as e:  # noqa: BLE001
                    hammer["exc"] = [type(e).__name__, str(e)]
                    return
                hammer["calls"] += 1

        ht = threading.Thread(target=hammer_main, daemon=True)
        ht.start()
        while hammer["calls"] < 100 and ht.is_alive():
            time.sleep(0.001)
        if how == "close":
            out["close"] = raised(loop.close)
            ht.join(DEADLINE)
            out["hammer_stopped_by"] = hammer["exc"]
            out["hammer_alive"] = ht.is_alive()
            out["after"] = {
                "close_again": raised(loop.close),
                "call_soon": raised(lambda: loop.call_soon(print)),
                "call_soon_threadsafe": raised(lambda: loop.call_soon_threadsafe(print)),
                "call_later": raised(lambda: loop.call_later(1, print)),
                "create_task": raised(lambda: loop.create_task(asyncio.sleep(0))),
                "run_until_complete": raised(lambda: loop.run_until_complete(
                    asyncio.sleep(0))),
                "time": type(loop.time()).__name__,
                "is_closed": loop.is_closed(),
                "transport_write": raised(lambda: w["tr"].write(b"y")),
                "transport_close": raised(w["tr"].close),
                "transport_abort": raised(w["tr"].abort),
                "server_close": raised(w["srv"].close),
                "client_close": raised(w["client"].close),
                "timer_cancel": raised(w["later"].cancel),
            }
        else:
            stop.set()
            ht.join(DEADLINE)
            out["hammer_stopped_by"] = hammer["exc"]
            out["hammer_alive"] = ht.is_alive()
        out["ran"] = list(w["ran"])
        out["buffered"] = w["buffered"]
        refs = w["refs"]
        w["peer"].close()
        task = w.pop("task")
        if how == "drop":
            del loop
            gc.collect()
        else:
            loop = None  # type: ignore[assignment]
        del w, task
        gc.collect()
        gc.collect()
        out["callbacks_alive"] = sum(r() is not None for r in refs)
    out["warnings"] = warning_list(caught)
    out["unraisable"] = sorted(unraisable)
    out["log"] = sorted(records.seen)
    return {"compare": out}


def warning_list(caught: List[warnings.WarningMessage]) -> List[str]:
    """The warnings, normalized and sorted, less the "unclosed socket" of a socket whose
    transport warned "unclosed transport" too: when the collector frees a transport and its
    socket together it may finalize the socket first (both warn) or not (only the transport
    does); the stock loop gives either from one run to the next."""
    transport_socks = {id(x.source._sock) for x in caught
                       if getattr(x.source, "_sock", None) is not None}
    return sorted("%s: %s" % (x.category.__name__, normalized(str(x.message))) for x in caught
                  if not (x.category is ResourceWarning and id(x.source) in transport_socks))


def close_running(loop: asyncio.AbstractEventLoop) -> Dict[str, Any]:
    """close() and run_forever() called from inside the running loop raise as the stock loop
    says it; the loop goes on."""
    out: Dict[str, Any] = {}

    def inside() -> None:
        out["close"] = raised(loop.close)
        out["run_forever"] = raised(loop.run_forever)
        out["run_until_complete"] = raised(lambda: loop.run_until_complete(asyncio.sleep(0)))

    async def main() -> None:
        loop.call_soon(inside)
        await asyncio.sleep(0.01)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        loop.run_until_complete(main())
        out["still_open"] = not loop.is_closed()
        loop.close()
        gc.collect()
    out["warnings"] = warning_list(caught)
    return {"compare": out}


SCENARIOS = {
    "accept": accept_fault,
    "sock_accept": sock_accept_fault,
    "write": write_fault,
    "read": read_fault,
    "peer_mid_write": peer_gone_mid_write,
    "peer_mid_sendfile": peer_gone_mid_sendfile,
    "eintr": eintr,
    "eintr_signal": eintr_signal,
    "close_pending": close_pending,
    "close_running": close_running,
}


OWN_LOOP = {"close_pending"}  # scenarios that make (and drop) their loop themselves


def main(argv: List[str]) -> None:
    name, kind, args = argv[1], argv[2], argv[3:]
    if name in OWN_LOOP:
        outcome = SCENARIOS[name](kind, *args)
    else:
        loop = make_loop(kind)
        try:
            outcome = SCENARIOS[name](loop, *args)
        finally:
            if not loop.is_closed():
                loop.close()
    print("OUTCOME " + json.dumps(outcome, sort_keys=True), flush=True)


if __name__ == "__main__":
    main(sys.argv)
