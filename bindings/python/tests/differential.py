"""Differential testing of evloop's asyncio loop against the stock selector loop.

``generate(seed)`` makes a random sequence of operations (stream transports over socketpairs,
loopback TCP and a server's connections, raw fds under add_reader/add_writer and the sock_*
methods, datagram endpoints, callbacks and timers, tasks, loop.stop()); ``run_sequence(make,
ops)`` runs one on a loop and returns its trace; ``check(seed)`` runs a seed on the stock loop
and on evloop's and reports a divergence with the seed, the operations and both traces.

The trace must be the same on the stock loop run twice whatever the timing, so that what
differs between the loops is the loops'. Three things make it so:
- a step is one operation, then a settle: the loop runs until it is quiescent (nothing ready,
  no short timer pending, no byte, FIN or RST of ours on its way between two sockets, no fd
  the loop watches ready, each expected accept and datagram in); bytes a peer sends are in the
  loop's socket before the settle starts;
- within a step, events go to channels and only the order inside a channel is kept (CHANNELS
  below says which); the order across channels is the kernel's and the clock's, not the loop's;
- inside a channel data_received chunks are joined, datagrams sorted, and callbacks of timers
  due at the very same time sorted (KNOWN_DIVERGENCES).
"""

from __future__ import annotations

import asyncio
import fcntl
import json
import logging
import os
import random
import re
import select
import socket
import struct
import sys
import termios
import threading
import time
import zlib
from typing import Any, Callable, Dict, List, Optional, Tuple

import evloop

DEADLINE = 20.0  # seconds: as conftest's, for every wait on the loop or the kernel

COMBOS = [(v, b) for v in evloop.variants() for b in evloop.backends()]

# CHANNELS. Each event of a step is recorded in one channel; the order inside a channel is
# asyncio's and is compared, the order across channels is not:
# - "cb": callbacks whose order asyncio fixes from the step's operation alone: call_soon,
#   call_later(0) and call_at(a past time) from the operation, their call_soon/call_later(0)
#   children, tasks (their steps and done callbacks), connection_lost scheduled by a close() or
#   abort() made in this channel, the loop leaving run_forever after a stop() made here (the
#   "exit" event). An operation's synchronous events (pause_writing inside write(), the
#   exception handler) go to the channel of whoever called, the operation being "cb".
# - "timers": the roots of call_at(base + d), d > 0, base read once per operation: ordered by
#   their fixed times. "t<id>": a call_later(d > 0) root (call_later reads the clock at each
#   call, so two of them may swap), and the children of either kind of positive timer.
# - "c<id>" a stream connection, "r<id>" a raw socketpair, "d<id>" a datagram endpoint,
#   "p<id>" an iteration probe: what their I/O made happen.
# - "log": the asyncio logger's records; "harness": a wait of the harness that ran out of time.

# KNOWN_DIVERGENCES: deliberate, documented differences between the loops; the trace puts
# both loops' behaviour in one canonical form for each of them (and nothing else).
KNOWN_DIVERGENCES = {
    "equal-when-timer-order": (
        "Timers due at exactly the same time: evloop runs them in the order they were "
        "scheduled (its heap orders on (when, seq)), the stdlib in whatever order heapq's sifts "
        "leave them (asyncio documents that order as undefined; docs/asyncio.md, 'Known "
        "differences from the stock loop'). The trace sorts the callbacks of each group of timers "
        "scheduled with one call_at time; the generator keeps those callbacks free of actions."),
}

_log = logging.getLogger("asyncio")

# -------------------------------------------------------------------------------- helpers


def payload(size: int, tag: int, kind: str = "bytes") -> Any:
    """Deterministic bytes, different for each tag, as bytes, bytearray or a memoryview (of a
    slice, so that it does not start at its buffer's start)."""
    b = random.Random(tag).randbytes(size)
    if kind == "bytearray":
        return bytearray(b)
    if kind == "memoryview":
        return memoryview(b"<" + b + b">")[1:-1]
    return b


def blob(b: bytes) -> Any:
    """Bytes as a trace shows them: short ones as they are, long ones by length and crc."""
    b = bytes(b)
    return b if len(b) <= 32 else (f"{len(b)} bytes", zlib.crc32(b))


_SCRUB = [(re.compile(r"0x[0-9a-fA-F]+"), "0x?"), (re.compile(r"fd=-?\d+"), "fd=?"),
          (re.compile(r"FD -?\d+"), "FD ?"), (re.compile(r"'127\.0\.0\.1', \d+"), "'127.0.0.1', ?"),
          (re.compile(r"port=\d+"), "port=?")]


def scrub(msg: str) -> str:
    """A message without what differs between two runs of one loop (addresses, fds, ports)."""
    for pat, rep in _SCRUB:
        msg = pat.sub(rep, msg)
    return msg


def exc_repr(e: BaseException) -> Tuple[str, str]:
    return (type(e).__name__, scrub(str(e)))


def _ioctl_int(fd: int, req: int) -> int:
    return struct.unpack("i", fcntl.ioctl(fd, req, b"\0\0\0\0"))[0]


def _is_open(s: Any) -> bool:
    try:
        return s is not None and s.fileno() != -1
    except (OSError, ValueError):
        return False


def _inq(s: Any) -> int:
    """Bytes waiting in a socket's receive queue (-1 when it cannot say)."""
    try:
        return _ioctl_int(s.fileno(), termios.FIONREAD)
    except (OSError, ValueError):
        return -1


def _outq(s: Any) -> int:
    """Bytes a TCP socket has not had acknowledged yet (sent or not)."""
    try:
        return _ioctl_int(s.fileno(), termios.TIOCOUTQ)
    except (OSError, ValueError):
        return 0


_FIN_PENDING = {4, 9, 11}  # TCP_FIN_WAIT1, TCP_LAST_ACK, TCP_CLOSING: a FIN not acked yet
_ENDED = {6, 7}  # TCP_TIME_WAIT, TCP_CLOSE: nothing more goes out


def _tcp_state(s: Any) -> int:
    try:
        return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0]
    except (OSError, ValueError):
        return 7  # TCP_CLOSE


def _revents(s: Any, mask: int) -> int:
    try:
        p = select.poll()
        p.register(s.fileno(), mask)
        got = p.poll(0)
    except (OSError, ValueError):
        return 0
    return got[0][1] if got else 0


_HUP = select.POLLRDHUP | select.POLLHUP | select.POLLERR


def _send_all(s: socket.socket, data: bytes) -> Any:
    """Sends data on a non-blocking driver socket (waiting for room with a deadline)."""
    view = memoryview(data)
    end = time.monotonic() + DEADLINE
    while view:
        try:
            n = s.send(view)
        except BlockingIOError:
            if time.monotonic() > end:
                return ("timeout", len(data) - len(view))
            select.select([], [s], [], 0.01)
            continue
        except OSError as e:
            return exc_repr(e)
        view = view[n:]
    return None


def _wait_kernel(pred: Callable[[], bool]) -> bool:
    """Waits (the loop not running) until pred() holds: for the kernel to deliver bytes, a FIN
    or an RST on the loopback. False after DEADLINE."""
    end = time.monotonic() + DEADLINE
    while not pred():
        if time.monotonic() > end:
            return False
        time.sleep(0.0002)
    return True


def _small_bufs(loop_side: socket.socket, peer: socket.socket) -> None:
    """The loop's end sends into little room and the peer takes little: a big write stays
    buffered in the transport until the peer reads."""
    loop_side.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    peer.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)


def _stream_pair(family: str, small: bool) -> Tuple[socket.socket, socket.socket]:
    """(the loop's end, the peer's end), both non-blocking."""
    if family == "unix":
        a, b = socket.socketpair()
        if small:
            _small_bufs(a, b)
    else:
        with socket.socket() as ls:
            ls.bind(("127.0.0.1", 0))
            ls.listen(1)
            b = socket.socket()
            if small:  # before connecting: the window follows the receive buffer
                b.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            b.settimeout(DEADLINE)
            b.connect(ls.getsockname())
            ls.settimeout(DEADLINE)
            a, _ = ls.accept()
            if small:
                a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    a.setblocking(False)
    b.setblocking(False)
    return a, b


# -------------------------------------------------------------------------------- generator
# An operation is a tuple of plain values (name, args...), printable and JSON-able. A callback
# spec is (hid, when, arg, tie, actions), when one of "soon", "later0", "at_past" (arg: ms
# before base), "at_fut" (ms after base), "later_pos" (ms), "long" (an hour: only ever
# cancelled); tie: whether another root of the operation has the same call_at time.


class _Gen:
    """The generator's model of what it made: enough to keep each sequence inside what the
    trace can see deterministically (bounded unread bytes, no small write racing the TCP
    window, no writer replacing a blocked sock_sendall's, ...)."""

    def __init__(self, rng: random.Random) -> None:
        self.r = rng
        self.nid = 0
        self.tag = 0
        self.conns: Dict[int, dict] = {}
        self.raws: Dict[int, dict] = {}
        self.srvs: Dict[int, dict] = {}
        self.eps: Dict[int, dict] = {}
        self.tasks: Dict[int, bool] = {}  # tid -> still pending
        self.stasks: Dict[int, Tuple[int, str]] = {}  # pending sock tasks: stid -> (rid, kind)
        self.longs: List[int] = []  # long timers not cancelled yet
        self.probes = 0

    def id(self) -> int:
        self.nid += 1
        return self.nid

    def t(self) -> int:
        self.tag += 1
        return self.tag

    # ---- choosing

    def op(self) -> Optional[tuple]:
        r = self.r
        menu: List[Tuple[int, Callable[[], Optional[tuple]]]] = [
            (6 if len(self.conns) < 5 else 0, self.new_pair),
            (2 if len(self.srvs) < 2 else 0, self.new_server),
            (4 if self.srvs else 0, self.srv_connect),
            (2 if len(self.raws) < 2 else 0, self.new_raw),
            (2 if len(self.eps) < 3 else 0, self.new_ep),
            (2 if len(self.tasks) < 4 else 0, self.new_task),
            (30 if self.conns else 0, self.conn_op),
            (14 if self.conns else 0, self.peer_op),
            (12, self.sched),
            (10 if self.raws else 0, self.raw_op),
            (8 if self.eps else 0, self.ep_op),
            (2 if self.srvs else 0, self.srv_close),
            (2 if self.longs else 0, self.cancel_long),
            (2 if any(self.tasks.values()) else 0, self.cancel_task),
            (1, self.stop),
            (1 if self.probes < 2 else 0, self.probe),
        ]
        total = sum(w for w, _ in menu)
        x = r.uniform(0, total)
        for w, fn in menu:
            if x < w:
                return fn()
            x -= w
        return None

    # ---- resources

    def conn_model(self, raw: bool, tcp: bool, small: bool, o: tuple) -> dict:
        return dict(raw=raw, tcp=tcp, small=small, echo=o[1], fragile=bool(o[2]) or
                    o[0] == "raise" or bool(o[5]) or o[4] in (7, "empty"), greet=o[6],
                    paused=False, closed=False, eof=False, peer_open=raw, peer_shut=False,
                    big=False, undrained=16 if o[6] else 0, written=0, peer_sent=0)

    def opts(self, raw: bool, small: bool) -> tuple:
        """A protocol, as _StreamProto reads it: (eof_received's return or "raise", echo,
        raise in data_received, small buffers, buffered, pause in data_received, greet).
        buffered 0 is an asyncio.Protocol, else a BufferedProtocol with that buffer size
        ("empty": get_buffer returns an empty one); greet: write in connection_made."""
        r = self.r
        keep = r.choice([None, True, False, None, True, False, "raise"])
        echo = raw and not small and r.random() < 0.25
        raise_ = raw and not echo and r.random() < 0.1
        buffered = r.choice([0, 0, 0, 0, 7, 65536, 65536, "empty"])
        # only where the peer is the driver: the bytes of one step are all in before it
        pause_in = raw and r.random() < 0.15
        greet = r.random() < 0.15
        return (keep, echo, raise_, small, buffered, pause_in, greet)

    def new_pair(self) -> tuple:
        r = self.r
        cid = self.id()
        fam = r.choice(["unix", "tcp"])
        how = "accepted" if fam == "tcp" and r.random() < 0.4 else "sock"
        small = r.random() < 0.35
        o = self.opts(True, small)
        self.conns[cid] = self.conn_model(True, fam == "tcp", small, o)
        return ("conn", cid, fam, how, o)

    def new_server(self) -> tuple:
        sid = self.id()
        self.srvs[sid] = dict(open=True)
        return ("server", sid)

    def srv_connect(self) -> Optional[tuple]:
        r = self.r
        open_ = [s for s, m in self.srvs.items() if m["open"]]
        if not open_ or len(self.conns) >= 6:
            return None
        sid = r.choice(open_)
        if r.random() < 0.5:
            cid = self.id()
            o = self.opts(True, False)
            self.conns[cid] = self.conn_model(True, True, False, o)
            return ("srv_raw", sid, cid, o)
        a, b = self.id(), self.id()
        oa, ob = self.opts(False, False), self.opts(False, False)
        self.conns[a] = self.conn_model(False, True, False, oa)
        self.conns[b] = self.conn_model(False, True, False, ob)
        for x, y in ((a, b), (b, a)):
            if self.conns[x]["greet"]:
                self.conns[x]["written"] += 16
        return ("srv_loop", sid, a, b, oa, ob)

    def new_raw(self) -> tuple:
        rid = self.id()
        fam = self.r.choice(["unix", "tcp"])
        self.raws[rid] = dict(tcp=fam == "tcp", blocked=False, y_open=True, y_shut=False,
                              undrained=0, sent=0)
        return ("raw", rid, fam)

    def new_ep(self) -> tuple:
        eid = self.id()
        self.eps[eid] = dict(open=True)
        return ("endpoint", eid)

    def new_task(self) -> tuple:
        r = self.r
        tid = self.id()
        mode = r.choice(["return", "raise", "forever", "long"])
        self.tasks[tid] = mode in ("forever", "long")
        return ("task", tid, r.randint(0, 3), mode)

    # ---- streams

    def write_ok(self, c: dict, n: int) -> bool:
        """Whether n more bytes may go to the connection without the trace depending on the
        kernel's timing: bounded, and on a small-buffer TCP connection either behind a big
        write (buffered anyway) or well inside the peer's window."""
        if not c["raw"]:  # the loop's own peer may never read
            return c["written"] + n <= 24000
        if c["big"]:
            return True
        return c["undrained"] + n <= (2000 if c["small"] and c["tcp"] else 24000)

    def kind(self) -> str:
        return self.r.choice(["bytes", "bytes", "bytearray", "memoryview"])

    def sizes(self) -> int:
        r = self.r
        return r.choice([0, 1, r.randint(2, 64), r.randint(65, 2000)])

    def conn_op(self) -> Optional[tuple]:
        r = self.r
        cid = r.choice(sorted(self.conns))
        c = self.conns[cid]
        k = r.choices(["write", "writelines", "write_big", "write_bad", "write_eof", "pause",
                       "resume", "close", "abort", "limits", "size", "state"],
                      [30, 8, 14 if c["small"] else 0, 2, 3, 6, 6, 3, 3, 5, 6, 4])[0]
        if k == "write":
            n = self.sizes()
            if not self.write_ok(c, n):
                return None
            self.wrote(c, n)
            return ("write", cid, n, self.t(), self.kind())
        if k == "writelines":
            ns = [self.sizes() for _ in range(r.randint(0, 3))]
            if not self.write_ok(c, sum(ns)):
                return None
            self.wrote(c, sum(ns))
            return ("writelines", cid, ns, self.t(), self.kind())
        if k == "write_big":
            if c["closed"] or not c["peer_open"] or c["undrained"] > 400000:
                return None
            n = r.randint(65536, 262144)
            c["big"] = True
            self.wrote(c, n)
            return ("write", cid, n, self.t(), self.kind())
        if k == "write_bad":
            return ("write_bad", cid, r.choice(["str", "int", "eof_then"]))
        if k == "write_eof":
            c["eof"] = True
            return ("write_eof", cid)
        if k in ("pause", "resume"):
            c["paused"] = k == "pause"
            return (k, cid)
        if k in ("close", "abort"):
            c["closed"] = True
            return (k, cid)
        if k == "limits":
            hi = r.choice([None, 0, 1, 100, 4096, 16384, 65536])
            lo = r.choice([None, 0, 1, 50, 1024, 70000])
            return ("limits", cid, hi, lo)
        return (k, cid)

    def wrote(self, c: dict, n: int) -> None:
        # counted even where the model has the transport closed: a close() in a callback
        # may have been cancelled
        c["undrained"] += n
        c["written"] += n

    def peer_op(self) -> Optional[tuple]:
        r = self.r
        raw = [cid for cid, c in self.conns.items() if c["raw"] and c["peer_open"]]
        if not raw:
            return None
        cid = r.choice(raw)
        c = self.conns[cid]
        k = r.choices(["send", "send_big", "shut", "close", "drain"],
                      [10, 2, 2, 2, 12 if c["undrained"] else 2])[0]
        if k == "send_big":
            # while the loop reads (the driver sends as it runs): past the transport's max_size
            if c["peer_shut"] or c["paused"] is not False or c["closed"] or c["echo"] or \
                    c["fragile"]:
                return None
            n = r.randint(262144, 700000)
            return ("peer_send_big", cid, n, self.t())
        if k == "send":
            if c["peer_shut"]:
                return None
            n = r.choice([1, r.randint(2, 100), r.randint(101, 2000)])
            if c["peer_sent"] + n > 24000:
                return None
            c["peer_sent"] += n
            if c["echo"]:
                c["undrained"] += n
            return ("peer_send", cid, n, self.t())
        if k == "shut":
            if c["peer_shut"]:
                return None
            c["peer_shut"] = True
            return ("peer_shut", cid)
        if k == "close":
            c["peer_open"] = False
            c["big"] = False
            return ("peer_close", cid, c["tcp"] and r.random() < 0.4)
        c["undrained"] = 0
        c["big"] = False
        return ("peer_drain", cid)

    # ---- callbacks

    def sched(self) -> tuple:
        r = self.r
        n = r.randint(1, 5)
        roots = []
        for _ in range(n):
            when = r.choices(["soon", "later0", "at_past", "at_fut", "later_pos", "long"],
                             [30, 15, 15, 15, 10, 10])[0]
            arg = {"at_past": r.randint(1, 3), "at_fut": r.randint(1, 4),
                   "later_pos": r.randint(1, 4)}.get(when, 0)
            roots.append([self.id(), when, arg])
        times = [(w, a) for _, w, a in roots if w in ("at_past", "at_fut")]
        specs = []
        for i, (hid, when, arg) in enumerate(roots):
            tie = when in ("at_past", "at_fut") and times.count((when, arg)) > 1
            acts: tuple = ()
            if not tie and when != "long":
                acts = self.actions(when, 0, roots, i)
            specs.append((hid, when, arg, tie, acts))
            if when == "long":
                self.longs.append(hid)
        return ("sched", tuple(specs))

    def actions(self, when: str, depth: int, roots: list, i: int) -> tuple:
        """What a callback does when it runs (see _World.fire): each action kept to where its
        effect is deterministic (CHANNELS)."""
        r = self.r
        cb_chan = when in ("soon", "later0", "at_past")
        out = []
        for _ in range(r.choice([0, 1, 1, 2, 3])):
            k = r.choices(["child", "cancel", "stop", "write", "close", "pause", "resume",
                           "cancel_task", "raise"], [8, 5, 2, 4, 1, 1, 1, 1, 2])[0]
            if k == "child" and depth < 2:
                cw = r.choice(["soon", "later0"])
                out.append(("child", (self.id(), cw, 0, False,
                                      self.actions(when if not cb_chan else cw, depth + 1,
                                                   roots, -1))))
            elif k == "cancel":
                t = self.cancel_target(when, depth, roots, i)
                if t is not None:
                    out.append(("cancel", t))
            elif k == "stop" and cb_chan:
                out.append(("stop",))
            elif k in ("write", "close", "pause", "resume") and cb_chan:
                ok = [cid for cid, c in self.conns.items()
                      if c["raw"] and c["peer_open"] and not c["closed"]]
                if ok:
                    cid = r.choice(ok)
                    c = self.conns[cid]
                    if k == "write":
                        n = r.randint(1, 300)
                        if self.write_ok(c, n):
                            self.wrote(c, n)
                            out.append(("write", cid, n, self.t()))
                    elif k == "close":
                        c["closed"] = True
                        out.append(("close", cid))
                    else:
                        # callbacks run in an order (children later, some cancelled) that
                        # the model does not follow: reading or not is unknown after this
                        c["paused"] = None
                        out.append((k, cid))
            elif k == "cancel_task" and cb_chan:
                live = [t for t, p in self.tasks.items() if p]
                if live:
                    tid = r.choice(live)
                    self.tasks[tid] = False
                    out.append(("cancel_task", tid))
            elif k == "raise":
                out.append(("raise",))
                break
        return tuple(out)

    def cancel_target(self, when: str, depth: int, roots: list, i: int) -> Optional[int]:
        """A handle this callback may cancel with a deterministic outcome: an hour-long timer
        (never due), or a root of its own operation that it surely runs before (a call_soon
        root runs before any timer of its operation; a callback of "cb" before the other "cb"
        roots' children; an at_fut root before a later at_fut root), or after (a no-op)."""
        r = self.r
        cands = list(self.longs)
        for j, (hid, w, a) in enumerate(roots):
            if j == i or w == "long":
                continue
            if depth == 0 and when == "soon":
                cands.append(hid)
            elif when in ("soon", "later0", "at_past") and w in ("soon", "later0", "at_past"):
                cands.append(hid)
            elif depth == 0 and when == "at_fut" and w == "at_fut" and i >= 0 and \
                    a > roots[i][2]:
                cands.append(hid)
        if not cands:
            return None
        t = r.choice(cands)
        if t in self.longs:
            self.longs.remove(t)
        return t

    def cancel_long(self) -> tuple:
        hid = self.r.choice(self.longs)
        self.longs.remove(hid)
        return ("cancel", hid)

    def cancel_task(self) -> tuple:
        tid = self.r.choice([t for t, p in self.tasks.items() if p])
        self.tasks[tid] = False
        return ("cancel_task", tid)

    def stop(self) -> tuple:
        return ("stop",)

    def probe(self) -> tuple:
        self.probes += 1
        return ("probe", self.id())

    # ---- raw fds

    def raw_op(self) -> Optional[tuple]:
        r = self.r
        rid = r.choice(sorted(self.raws))
        m = self.raws[rid]
        k = r.choices(["add_reader", "remove_reader", "add_writer", "remove_writer", "y_send",
                       "y_shut", "y_close", "y_drain", "sock_recv", "sock_recv_into",
                       "sock_sendall", "sock_sendall_big", "cancel_stask"],
                      [6, 3, 3, 2, 12, 1, 1, 8 if m["undrained"] else 1, 4, 3, 4, 3, 2])[0]
        if k in ("add_writer", "remove_writer") and m["blocked"]:
            return None
        if k in ("add_reader", "remove_reader", "add_writer", "remove_writer"):
            return (k, rid)
        if k == "y_send":
            n = r.choice([1, r.randint(2, 100), r.randint(101, 2000)])
            if not m["y_open"] or m["y_shut"] or m["sent"] + n > 24000:
                return None
            m["sent"] += n
            return ("y_send", rid, n, self.t())
        if k in ("y_shut", "y_close", "y_drain"):
            if not m["y_open"] or k == "y_shut" and m["y_shut"]:
                return None
            if k == "y_shut":
                m["y_shut"] = True
            elif k == "y_close":
                m["y_open"] = False
                m["blocked"] = False
            else:
                m["undrained"] = 0
                m["blocked"] = False
            return (k, rid)
        if k in ("sock_recv", "sock_recv_into"):
            stid = self.id()
            self.stasks[stid] = (rid, k)
            return (k, rid, r.choice([0, 1, 7, 100, 4096]), stid)
        if k == "sock_sendall":
            n = r.choice([0, 1, r.randint(2, 500)])
            if m["blocked"] or m["undrained"] + n > (2000 if m["tcp"] else 24000):
                return None
            m["undrained"] += n
            stid = self.id()
            return ("sock_sendall", rid, n, self.t(), stid, self.kind())
        if k == "sock_sendall_big":
            if m["blocked"] or not m["y_open"]:
                return None
            m["blocked"] = True
            n = r.randint(65536, 262144)
            m["undrained"] += n
            stid = self.id()
            self.stasks[stid] = (rid, "sendall")
            return ("sock_sendall", rid, n, self.t(), stid, self.kind())
        live = sorted(self.stasks)
        if not live:
            return None
        stid = r.choice(live)
        rid2, kind = self.stasks.pop(stid)
        if kind == "sendall":
            self.raws[rid2]["blocked"] = False
        return ("cancel_stask", stid)

    # ---- datagrams and servers

    def ep_op(self) -> Optional[tuple]:
        r = self.r
        eid = r.choice(sorted(self.eps))
        k = r.choices(["sendto", "sendto_bad", "u_send", "close", "abort"], [10, 2, 6, 1, 1])[0]
        if k == "sendto":
            target = r.choice(["u"] + [f"d{e}" for e, m in self.eps.items() if m["open"]])
            return ("sendto", eid, target, r.choice([0, 1, r.randint(2, 1400)]), self.t(),
                    self.kind())
        if k == "sendto_bad":
            return ("sendto_bad", eid, r.choice(["str", "noaddr", "port0"]))
        if k == "u_send":
            if not self.eps[eid]["open"]:
                return None
            return ("u_send", eid, r.choice([0, 1, r.randint(2, 1400)]), self.t())
        self.eps[eid]["open"] = False
        return ("ep_" + k, eid)

    def srv_close(self) -> Optional[tuple]:
        open_ = [s for s, m in self.srvs.items() if m["open"]]
        if not open_:
            return None
        sid = self.r.choice(open_)
        self.srvs[sid]["open"] = False
        return ("srv_close", sid)


def generate(seed: int) -> List[tuple]:
    """The operations of sequence `seed`: 5 to 40 of them."""
    rng = random.Random(seed)
    g = _Gen(rng)
    n = rng.randint(5, 40)
    ops: List[tuple] = []
    while len(ops) < n:
        op = g.op()
        if op is not None:
            ops.append(op)
    return ops


def combo_of(seed: int) -> Tuple[str, str]:
    """The evloop variant and backend that sequence `seed` runs on."""
    return COMBOS[seed % len(COMBOS)]


# -------------------------------------------------------------------------------- executor


class _Conn:
    """A stream connection of the loop's: its transport and protocol, the socket under it, and
    the peer's end (a socket of the driver's; None where the peer is another connection)."""

    def __init__(self, cid: int, opts: tuple) -> None:
        self.cid = cid
        self.ch = f"c{cid}"
        self.opts = opts
        self.tr: Any = None
        self.sock: Any = None  # the loop's socket (or the transport's TransportSocket)
        self.peer: Optional[socket.socket] = None
        self.tcp = False
        self.small = False
        self.stream = bytearray()  # what the transport accepted to send, in order
        self.drained = 0  # how much of it the peer has read
        self.lossy = False  # part of the stream was dropped (abort, fatal error)
        self.lost_ch: Optional[str] = None  # connection_lost's channel, if scheduled by us


class _StreamProto(asyncio.Protocol):
    """Records what the transport calls; keep/echo/raise as generated."""

    def __init__(self, w: "_World", c: _Conn) -> None:
        self.w, self.c = w, c
        self.keep, self.echo, self.raise_, _, _, self.pause_in, self.greet = c.opts

    def connection_made(self, tr: Any) -> None:
        w, c = self.w, self.c
        c.tr = tr
        if c.sock is None:
            c.sock = tr.get_extra_info("socket")
        with w.inside(c.ch):
            w.rec(c.ch, ("made",))
            if self.greet:
                w.rec(c.ch, ("greet", w.tw(c, b"hello from c%-4d" % c.cid)))

    def data_received(self, data: bytes) -> None:
        with self.w.inside(self.c.ch):
            self.received("bytes" if type(data) is bytes else type(data).__name__, data)

    def received(self, how: str, data: bytes) -> None:
        w, c = self.w, self.c
        w.rec(c.ch, ("data", how, data))
        if self.echo:
            w.tw(c, data)
        if self.pause_in:
            c.tr.pause_reading()
        if self.raise_:
            raise ValueError("data refused")

    def eof_received(self) -> Optional[bool]:
        self.w.rec(self.c.ch, ("eof", self.keep))
        if self.keep == "raise":
            with self.w.inside(self.c.ch):
                raise ValueError("eof refused")
        return self.keep

    def pause_writing(self) -> None:
        self.w.rec(self.c.ch, ("pause_writing",))

    def resume_writing(self) -> None:
        self.w.rec(self.c.ch, ("resume_writing",))

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        c = self.c
        if exc is not None:
            c.lossy = True
        self.w.rec(c.lost_ch or c.ch, ("lost", exc and type(exc).__name__))


class _BufferedProto(_StreamProto, asyncio.BufferedProtocol):
    """The same, reading through get_buffer()/buffer_updated() into a buffer of the size
    generated (7 bytes: many calls a message)."""

    def __init__(self, w: "_World", c: _Conn) -> None:
        super().__init__(w, c)
        self.buf = bytearray(c.opts[4] if c.opts[4] != "empty" else 0)

    def get_buffer(self, sizehint: int) -> bytearray:
        if sizehint != -1:  # the stdlib's transport always passes -1
            self.w.rec(self.c.ch, ("get_buffer", sizehint))
        return self.buf

    def buffer_updated(self, nbytes: int) -> None:
        with self.w.inside(self.c.ch):
            self.received("buffered", bytes(self.buf[:nbytes]))


def _proto(w: "_World", c: _Conn) -> asyncio.BaseProtocol:
    return _BufferedProto(w, c) if c.opts[4] else _StreamProto(w, c)


class _Raw:
    def __init__(self, rid: int) -> None:
        self.rid = rid
        self.ch = f"r{rid}"
        self.x: Any = None  # the loop's end
        self.y: Any = None  # the driver's end
        self.tcp = False
        self.stream = bytearray()  # what sock_sendall was given, in order
        self.drained = 0
        self.lossy = False


class _Ep:
    def __init__(self, eid: int) -> None:
        self.eid = eid
        self.ch = f"d{eid}"
        self.tr: Any = None
        self.sock: Any = None
        self.expected = 0
        self.got = 0
        self.errors = 0
        self.lost_ch: Optional[str] = None


class _DgramProto(asyncio.DatagramProtocol):
    def __init__(self, w: "_World", e: _Ep) -> None:
        self.w, self.e = w, e

    def connection_made(self, tr: Any) -> None:
        self.e.tr = tr
        self.e.sock = tr.get_extra_info("socket")
        self.w.rec(self.e.ch, ("made",))

    def datagram_received(self, data: bytes, addr: Any) -> None:
        self.e.got += 1
        self.w.rec(self.e.ch, ("dgram", data, self.w.name_of(addr)))

    def error_received(self, exc: Exception) -> None:
        self.e.errors += 1
        self.w.rec(self.e.ch, ("error", type(exc).__name__, getattr(exc, "errno", None)))

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        self.w.rec(self.e.lost_ch or self.e.ch, ("lost", exc and type(exc).__name__))


# Messages the garbage collector times (a task or future of some earlier loop collected now):
# never part of a trace.
_GC_MESSAGES = ("Task was destroyed but it is pending", "exception was never retrieved")


def _gc_timed(msg: str) -> bool:
    return any(m in msg for m in _GC_MESSAGES)


class _LogHandler(logging.Handler):
    def __init__(self, w: "_World") -> None:
        super().__init__(logging.DEBUG)
        self.w = w

    def emit(self, record: logging.LogRecord) -> None:
        if not _gc_timed(str(record.msg)):
            self.w.rec("log", ("log", record.levelname, scrub(str(record.msg))))


class _Watchdog:
    """Stops a loop that a bug left waiting past every deadline (a lost timer, a lost wake),
    so that the test reports instead of hanging. One thread for the process."""

    def __init__(self) -> None:
        self.loop: Any = None
        self.until = 0.0
        self.fired = False
        self.lock = threading.Lock()
        threading.Thread(target=self._main, daemon=True, name="evloop-diff-watchdog").start()

    def arm(self, loop: Any, seconds: float) -> None:
        with self.lock:
            self.loop, self.until, self.fired = loop, time.monotonic() + seconds, False

    def disarm(self) -> None:
        with self.lock:
            self.loop = None

    def _main(self) -> None:
        while True:
            time.sleep(0.5)
            with self.lock:
                loop = self.loop
                if loop is None or time.monotonic() < self.until:
                    continue
                self.fired = True
                self.loop = None
            try:
                loop.call_soon_threadsafe(loop.stop)
            except Exception:  # noqa: BLE001 - closed meanwhile
                pass


_watchdog: Optional[_Watchdog] = None


class _Inside:
    """A context in which synchronous events go to channel ch (unless one is set already)."""

    def __init__(self, w: "_World", ch: str) -> None:
        self.w, self.ch, self.prev = w, ch, None

    def __enter__(self) -> None:
        self.prev = self.w.cur
        if self.prev is None:
            self.w.cur = self.ch

    def __exit__(self, et: Any, ev: Any, tb: Any) -> None:
        if et is not None and self.w.fail_ch is None:
            self.w.fail_ch = self.w.cur
        self.w.cur = self.prev


class _World:
    """Runs one sequence on one loop and builds its trace."""

    def __init__(self, loop: asyncio.AbstractEventLoop, deadline: float = DEADLINE) -> None:
        global _watchdog
        if _watchdog is None:
            _watchdog = _Watchdog()
        self.loop = loop
        self.deadline = deadline
        self.trace: List[tuple] = []
        self.events: Dict[str, list] = {}
        self.cur: Optional[str] = None
        self.fail_ch: Optional[str] = None
        self.stop_ch: Optional[str] = None
        self.broken = False  # a wait ran out of time: the rest of the sequence is skipped
        self.conns: Dict[int, _Conn] = {}
        self.raws: Dict[int, _Raw] = {}
        self.srvs: Dict[int, dict] = {}
        self.eps: Dict[int, _Ep] = {}
        self.tasks: Dict[int, asyncio.Task] = {}
        self.stasks: Dict[int, Tuple[asyncio.Task, _Raw, str]] = {}
        self.handles: Dict[int, Any] = {}
        self.specs: Dict[int, tuple] = {}
        self.short: Dict[int, Any] = {}  # handles that must run or be cancelled in the step
        self.fired: set = set()
        self.names: Dict[Any, str] = {}
        self.tcp_pairs: List[Tuple[Callable[[], Any], Callable[[], Any], bool]] = []
        self.u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.u.bind(("127.0.0.1", 0))
        self.u.setblocking(False)
        self.names[self.u.getsockname()] = "u"
        self.u_expected = 0
        self.probe_socks: List[socket.socket] = []
        loop.set_exception_handler(self._exc_handler)
        self.log = _LogHandler(self)

    # ---- recording

    def rec(self, ch: str, ev: tuple) -> None:
        self.events.setdefault(ch, []).append(ev)

    def inside(self, ch: str) -> _Inside:
        return _Inside(self, ch)

    def name_of(self, addr: Any) -> str:
        return self.names.get(tuple(addr) if isinstance(addr, list) else addr, "?")

    def _exc_handler(self, loop: Any, ctx: dict) -> None:
        if _gc_timed(ctx.get("message", "")):
            return
        ch = self.cur or self.fail_ch
        self.fail_ch = None
        if ch is None:
            p = ctx.get("protocol")
            ch = getattr(getattr(p, "c", None) or getattr(p, "e", None), "ch", None) or "loop"
        exc = ctx.get("exception")
        self.rec(ch, ("exception_handler", scrub(ctx.get("message", "")),
                      exc and exc_repr(exc)))

    # ---- running the loop

    def run(self, aw: Any) -> Any:
        """Runs an awaitable to completion with a deadline, the channel context cleared."""
        prev, self.cur = self.cur, None
        _watchdog.arm(self.loop, 2 * self.deadline)  # type: ignore[union-attr]
        try:
            return self.loop.run_until_complete(asyncio.wait_for(aw, self.deadline))
        except asyncio.TimeoutError:
            self.rec("harness", ("operation timed out",))
            self.broken = True
            raise
        except RuntimeError:
            if _watchdog.fired:  # type: ignore[union-attr]
                self.rec("harness", ("watchdog stopped the loop",))
                self.broken = True
            raise
        finally:
            _watchdog.disarm()  # type: ignore[union-attr]
            self.cur = prev

    def settle(self) -> None:
        """Runs the loop until it is quiescent (see busy()), recording a stop() made by a
        callback as an "exit" in the stopper's channel, and a deadline as "harness"."""
        end = time.monotonic() + self.deadline
        prev, self.cur = self.cur, None
        try:
            while True:
                fut = self.loop.create_future()
                self.loop.call_soon(self._poll, fut, end, 0)
                _watchdog.arm(self.loop, 2 * self.deadline)  # type: ignore[union-attr]
                try:
                    self.loop.run_until_complete(fut)
                except RuntimeError as e:
                    if "stopped before Future completed" not in str(e):
                        raise
                    fut.cancel()  # ends this poll chain: the next run starts its own
                    if _watchdog.fired:  # type: ignore[union-attr]
                        self.rec("harness", ("watchdog stopped the loop",))
                        self.broken = True
                        return
                    self.rec(self.stop_ch or "cb", ("exit",))
                    self.stop_ch = None
                    if time.monotonic() > end:
                        self.rec("harness", ("settle: stopped past the deadline",))
                        self.broken = True
                        return
                    continue
                finally:
                    _watchdog.disarm()  # type: ignore[union-attr]
                why = fut.result()
                if why is not None:
                    self.rec("harness", ("settle timed out", why))
                    self.broken = True
                return
        finally:
            self.cur = prev

    def _poll(self, fut: asyncio.Future, end: float, n: int) -> None:
        if fut.done():
            return
        why = self.busy()
        if why is None:
            fut.set_result(None)
        elif time.monotonic() > end:
            fut.set_result(why)
        elif n < 20 or why == "ready queue":
            self.loop.call_soon(self._poll, fut, end, n + 1)
        else:
            self.loop.call_later(0.0003, self._poll, fut, end, n + 1)

    def busy(self) -> Optional[str]:
        """None when the loop is quiescent, else what it still has to do."""
        if self.stop_ch is not None:
            return "a stop() to honour"
        if len(self.loop._ready):  # type: ignore[attr-defined]
            return "ready queue"
        for hid, h in self.short.items():
            if hid not in self.fired and not h.cancelled():
                return f"handle {hid}"
        for s in self.srvs.values():
            if s["expected"] != s["accepted"]:
                return "accept"
        for e in self.eps.values():
            if e.got < e.expected:
                return f"datagram for d{e.eid}"
        why = self.in_flight()
        if why:
            return why
        return self.fd_ready()

    def in_flight(self) -> Optional[str]:
        """Whether bytes, a FIN or an RST are still on their way between two of our TCP
        sockets (where the receiving end may not be full: a small-buffer direction toward an
        open peer is left out)."""
        for get1, get2, small in self.tcp_pairs:
            s1, s2 = get1(), get2()
            for a, b, sm in ((s1, s2, small), (s2, s1, False)):
                a_open, b_open = _is_open(a), _is_open(b)
                if a_open and not (b_open and sm):
                    st = _tcp_state(a)
                    # a reset socket keeps its send sequence, so SIOCOUTQ stays > 0 there
                    if st in _FIN_PENDING or st not in _ENDED and _outq(a) > 0:
                        return "tcp data or FIN in flight"
                elif not a_open and b_open and a is not None and not sm:
                    if not _revents(b, select.POLLIN | select.POLLRDHUP) & _HUP:
                        return "tcp FIN or RST in flight"
        return None

    def fd_ready(self) -> Optional[str]:
        """Whether an fd the loop watches is ready (the loop has work it has not seen yet),
        with the stdlib epoll selector's reading of hang-ups and errors."""
        p = select.poll()
        keys = list(self.loop._selector.get_map().values())  # type: ignore[attr-defined]
        for key in keys:
            m = 0
            if key.events & 1:
                m |= select.POLLIN
            if key.events & 2:
                m |= select.POLLOUT
            p.register(key.fd, m)
        for fd, ev in p.poll(0):
            key = next(k for k in keys if k.fd == fd)
            rd = bool(ev & ~select.POLLOUT) and key.events & 1
            wr = bool(ev & ~select.POLLIN) and key.events & 2
            if rd or wr:
                return f"fd ready ({'r' if rd else ''}{'w' if wr else ''})"
        return None

    # ---- one step

    def step(self, i: int, op: tuple) -> None:
        self.events = {}
        self.fail_ch = None
        self.cur = "cb"
        _log.addHandler(self.log)
        try:
            try:
                res = getattr(self, "op_" + op[0])(*op[1:])
            except Exception as e:  # noqa: BLE001 - an operation's error is its result
                res = ("raised",) + exc_repr(e)
            self.cur = None
            self.settle()
            self.after_settle()
        finally:
            self.cur = None
            _log.removeHandler(self.log)
        self.trace.append((i, op[0], res, canonical(self.events)))

    def after_settle(self) -> None:
        """What the driver reads once the loop is quiet: the datagrams sent to its socket."""
        if self.u_expected:
            got = []
            end = time.monotonic() + self.deadline
            while len(got) < self.u_expected and time.monotonic() < end:
                try:
                    data, addr = self.u.recvfrom(65536)
                except BlockingIOError:
                    select.select([self.u], [], [], 0.01)
                    continue
                got.append((blob(data), self.name_of(addr)))
            if len(got) < self.u_expected:
                self.rec("harness", ("datagrams to u missing", self.u_expected - len(got)))
                self.broken = True
            self.u_expected = 0
            self.rec("u", ("received", tuple(sorted(got, key=repr))))

    # ---- the transport calls, recorded as the trace needs them

    def tw(self, c: _Conn, data: Any, lines: Optional[list] = None) -> Any:
        """write() or writelines() on c's transport: its outcome, and the bytes it took."""
        tr = c.tr
        lost0 = tr._conn_lost
        try:
            if lines is not None:
                tr.writelines(lines)
            else:
                tr.write(data)
        except Exception as e:  # noqa: BLE001
            return exc_repr(e)
        finally:
            if not lost0 and tr._conn_lost:
                c.lost_ch = self.cur or c.ch
        if not lost0 and not tr._conn_lost:
            c.stream += b"".join(bytes(x) for x in lines) if lines is not None else data
        return None

    def tclose(self, c: _Conn, how: str) -> None:
        tr = c.tr
        lost0 = tr._conn_lost
        if how == "abort" and tr.get_write_buffer_size() and not lost0:
            c.lossy = True
        getattr(tr, how)()
        if not lost0 and tr._conn_lost:
            c.lost_ch = self.cur or c.ch

    def size(self, c: _Conn) -> Any:
        """get_write_buffer_size: exact over a socketpair (the kernel takes what it takes
        there at once), over TCP only whether anything is buffered (the kernel's share there
        follows acks as they come)."""
        n = c.tr.get_write_buffer_size()
        return n if not c.tcp else n > 0

    # ---- operations: streams

    def _conn(self, cid: int) -> Optional[_Conn]:
        c = self.conns.get(cid)
        return c if c is not None and c.tr is not None else None

    def op_conn(self, cid: int, fam: str, how: str, opts: tuple) -> Any:
        c = _Conn(cid, opts)
        c.tcp, c.small = fam == "tcp", bool(opts[3])
        a, b = _stream_pair(fam, c.small)
        c.sock, c.peer = a, b
        self.conns[cid] = c
        if c.tcp:
            self.tcp_pairs.append((lambda: c.sock, lambda: c.peer, c.small))
        factory = lambda: _proto(self, c)  # noqa: E731
        if how == "accepted":
            tr, _ = self.run(self.loop.connect_accepted_socket(factory, a))
        else:
            tr, _ = self.run(self.loop.create_connection(factory, sock=a))
        return tr.is_reading()

    def op_write(self, cid: int, n: int, tag: int, kind: str) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        res = self.tw(c, payload(n, tag, kind))
        return res, self.size(c)

    def op_writelines(self, cid: int, ns: list, tag: int, kind: str) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        res = self.tw(c, None, [payload(n, tag * 8 + i, kind) for i, n in enumerate(ns)])
        return res, self.size(c)

    def op_write_bad(self, cid: int, how: str) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        if how == "eof_then":
            self.tw(c, b"", None)  # an empty write is a no-op, whatever the state
            c.tr.write_eof()
            return self.tw(c, b"late")
        return self.tw(c, "text" if how == "str" else 5)

    def op_write_eof(self, cid: int) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        try:
            c.tr.write_eof()
        except Exception as e:  # noqa: BLE001
            return exc_repr(e)
        return c.tr.can_write_eof(), c.tr.is_closing()

    def op_pause(self, cid: int) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        c.tr.pause_reading()
        return c.tr.is_reading()

    def op_resume(self, cid: int) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        c.tr.resume_reading()
        return c.tr.is_reading()

    def op_close(self, cid: int) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        self.tclose(c, "close")
        return c.tr.is_closing()

    def op_abort(self, cid: int) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        self.tclose(c, "abort")
        return c.tr.is_closing()

    def op_limits(self, cid: int, hi: Any, lo: Any) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        try:
            c.tr.set_write_buffer_limits(high=hi, low=lo)
        except Exception as e:  # noqa: BLE001
            return exc_repr(e)
        return c.tr.get_write_buffer_limits()

    def op_size(self, cid: int) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        return self.size(c), c.tr.get_write_buffer_limits()

    def op_state(self, cid: int) -> Any:
        c = self._conn(cid)
        if c is None:
            return "absent"
        tr = c.tr
        return (tr.is_closing(), tr.is_reading(), tr.can_write_eof(),
                tr.get_extra_info("socket") is not None, tr.get_protocol() is not None)

    # ---- operations: the peer of a stream connection

    def op_peer_send(self, cid: int, n: int, tag: int) -> Any:
        c = self.conns.get(cid)
        if c is None or not _is_open(c.peer):
            return "absent"
        data = payload(n, tag)
        watch = c.sock if c.tcp and _is_open(c.sock) else None
        q0 = _inq(watch) if watch is not None else 0
        res = _send_all(c.peer, data)
        if res is None and watch is not None:
            if not _wait_kernel(lambda: not _is_open(watch) or _inq(watch) >= q0 + n
                                or _inq(watch) < 0):
                self.rec("harness", ("peer bytes not delivered",))
                self.broken = True
        return res

    def op_peer_send_big(self, cid: int, n: int, tag: int) -> Any:
        """The peer sends more than the transport reads at once (max_size), the loop running
        and reading meanwhile."""
        c = self.conns.get(cid)
        if c is None or not _is_open(c.peer):
            return "absent"
        data = memoryview(payload(n, tag))

        async def send() -> Any:
            view = data
            while view:
                try:
                    view = view[c.peer.send(view):]
                except BlockingIOError:
                    await asyncio.sleep(0.0002)
                except OSError as e:
                    return exc_repr(e)
            # the last bytes have left the peer (TCP: acked; a socketpair: read), the loop
            # reading meanwhile: the settle then starts with all of them in
            while _is_open(c.sock) and _outq(c.peer) > 0:
                await asyncio.sleep(0.0002)
            return None

        return self.run(send())

    def _wait_hup(self, s: Any) -> None:
        if s is not None and _is_open(s):
            if not _wait_kernel(lambda: not _is_open(s) or
                                bool(_revents(s, select.POLLIN | select.POLLRDHUP) & _HUP)):
                self.rec("harness", ("FIN/RST not delivered",))
                self.broken = True

    def op_peer_shut(self, cid: int) -> Any:
        c = self.conns.get(cid)
        if c is None or not _is_open(c.peer):
            return "absent"
        try:
            c.peer.shutdown(socket.SHUT_WR)
        except OSError as e:
            return exc_repr(e)
        if c.tcp:
            self._wait_hup(c.sock)
        return None

    def op_peer_close(self, cid: int, reset: bool) -> Any:
        c = self.conns.get(cid)
        if c is None or not _is_open(c.peer):
            return "absent"
        if reset:
            c.peer.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.peer.close()
        if c.tcp:
            self._wait_hup(c.sock)
        return None

    def op_peer_drain(self, cid: int) -> Any:
        """The peer reads what the transport was given (running the loop meanwhile, which
        flushes its buffer), then the EOF or reset if the transport is closing or sent EOF.
        After an abort or a fatal error the stream may be cut short: then it reads to the
        end and records only whether what came is a prefix of what was written."""
        c = self.conns.get(cid)
        if c is None or not _is_open(c.peer) or c.tr is None:
            return "absent"
        return self.run(self._drain(c.peer, c, lambda: c.lossy,
                                    lambda: c.tr.is_closing() or c.tr._eof))

    async def _drain(self, peer: socket.socket, c: Any, lossy: Callable[[], bool],
                     eof_coming: Callable[[], bool]) -> Any:
        got = bytearray()
        end_how = None
        spins = 0
        while True:
            want = len(c.stream) - c.drained - len(got)
            if want <= 0 and not lossy() and not eof_coming():
                break
            try:
                chunk = peer.recv(1 << 20)
            except BlockingIOError:
                spins += 1
                await asyncio.sleep(0 if spins < 50 else 0.0005)
                continue
            except OSError as e:
                end_how = type(e).__name__
                break
            if not chunk:
                end_how = "eof"
                break
            got += chunk
        expect = bytes(c.stream[c.drained:c.drained + len(got)])
        c.drained += len(got)
        if lossy():
            return ("lossy", bytes(got) == expect, end_how)
        return (blob(got), bytes(got) == expect, end_how)

    # ---- operations: servers

    def op_server(self, sid: int) -> Any:
        s = dict(expected=0, accepted=0, queue=[], srv=None, port=None)

        def factory() -> asyncio.Protocol:
            cid, opts = s["queue"].pop(0)
            c = self.conns[cid]
            s["accepted"] += 1
            return _proto(self, c)

        srv = self.run(self.loop.create_server(factory, "127.0.0.1", 0))
        s["srv"] = srv
        s["port"] = srv.sockets[0].getsockname()[1]
        self.srvs[sid] = s
        return (srv.is_serving(), len(srv.sockets))

    def _new_server_conn(self, s: dict, cid: int, opts: tuple) -> _Conn:
        c = _Conn(cid, opts)
        c.tcp = True
        self.conns[cid] = c
        s["queue"].append((cid, opts))
        s["expected"] += 1
        return c

    def op_srv_raw(self, sid: int, cid: int, opts: tuple) -> Any:
        s = self.srvs.get(sid)
        if s is None or s["srv"] is None:
            return "absent"
        c = self._new_server_conn(s, cid, opts)
        peer = socket.socket()
        peer.settimeout(DEADLINE)
        try:
            peer.connect(("127.0.0.1", s["port"]))
        except OSError as e:
            peer.close()
            return exc_repr(e)
        peer.setblocking(False)
        c.peer = peer
        self.tcp_pairs.append((lambda: c.sock, lambda: c.peer, False))
        return None

    def op_srv_loop(self, sid: int, a: int, b: int, oa: tuple, ob: tuple) -> Any:
        s = self.srvs.get(sid)
        if s is None or s["srv"] is None:
            return "absent"
        ca = _Conn(a, oa)
        ca.tcp = True
        self.conns[a] = ca
        cb = self._new_server_conn(s, b, ob)
        self.tcp_pairs.append((lambda: ca.sock, lambda: cb.sock, False))
        tr, _ = self.run(self.loop.create_connection(lambda: _proto(self, ca),
                                                     "127.0.0.1", s["port"]))
        # Whether a greeting has had its effect here when create_connection returns is the
        # loops' timing (evloop's accept makes no task: the accepted side's connection_made
        # runs an iteration sooner than the stdlib's): the accepted side's greeting, or this
        # side's, which the accepted side may answer with an abort (a protocol that fails on
        # its first read) whose reset closes this transport. What it did shows in the events.
        return None if oa[6] or ob[6] else tr.is_reading()

    def op_srv_close(self, sid: int) -> Any:
        s = self.srvs.get(sid)
        if s is None or s["srv"] is None:
            return "absent"
        srv = s["srv"]
        srv.close()
        self.run(srv.wait_closed())
        return (srv.is_serving(), srv.sockets)

    # ---- operations: callbacks and timers

    def op_sched(self, specs: tuple) -> Any:
        base = self.loop.time()
        for spec in specs:
            self.schedule(spec, base, None)
        return len(specs)

    def schedule(self, spec: tuple, base: float, parent_ch: Optional[str]) -> None:
        hid, when, arg, tie, acts = spec
        if parent_ch is not None:
            ch = parent_ch
        elif when in ("soon", "later0", "at_past", "long"):
            ch = "cb"
        elif when == "at_fut":
            ch = "timers"
        else:
            ch = f"t{hid}"
        # the children of a positive timer have a channel of their own (their order against
        # the other timers is the clock's)
        child_ch = f"t{hid}" if parent_ch is None and ch == "timers" else ch
        # only the id as the argument: the exception handler's message shows the arguments
        self.specs[hid] = (ch, child_ch, (when, arg) if tie else None, acts, base)
        args = (hid,)
        loop = self.loop
        if when == "soon":
            h = loop.call_soon(self.fire, *args)
        elif when == "later0":
            h = loop.call_later(0, self.fire, *args)
        elif when == "at_past":
            h = loop.call_at(base - arg / 1000, self.fire, *args)
        elif when == "at_fut":
            h = loop.call_at(base + arg / 1000, self.fire, *args)
        elif when == "later_pos":
            h = loop.call_later(arg / 1000, self.fire, *args)
        else:
            h = loop.call_later(3600, self.fire, *args)
        self.handles[hid] = h
        if when != "long":
            self.short[hid] = h

    def fire(self, hid: int) -> None:
        ch, child_ch, tie_key, acts, base = self.specs[hid]
        self.fired.add(hid)
        with self.inside(ch):
            self.rec(ch, ("cb", hid, tie_key))
            for act in acts:
                self.act(act, ch, child_ch, base)

    def act(self, act: tuple, ch: str, child_ch: str, base: float) -> None:
        k = act[0]
        if k == "child":
            self.schedule(act[1], self.loop.time(), child_ch)
        elif k == "cancel":
            h = self.handles.get(act[1])
            if h is not None:
                h.cancel()
            self.rec(ch, ("cancel", act[1], h is not None and h.cancelled()))
        elif k == "stop":
            self.stop_ch = ch
            self.loop.stop()
            self.rec(ch, ("stop",))
        elif k == "raise":
            raise ValueError("callback failed")
        elif k == "cancel_task":
            t = self.tasks.get(act[1])
            self.rec(ch, ("cancel_task", act[1], t is not None and t.cancel()))
        else:
            c = self._conn(act[1])
            if c is None:
                self.rec(ch, (k, act[1], "absent"))
            elif k == "write":
                self.rec(ch, ("write", act[1], self.tw(c, payload(act[2], act[3]))))
            elif k == "close":
                self.tclose(c, "close")
                self.rec(ch, ("close", act[1]))
            else:
                getattr(c.tr, "pause_reading" if k == "pause" else "resume_reading")()
                self.rec(ch, (k, act[1], c.tr.is_reading()))

    def op_cancel(self, hid: int) -> Any:
        h = self.handles.get(hid)
        if h is None:
            return "absent"
        h.cancel()
        return h.cancelled()

    def op_stop(self) -> Any:
        self.stop_ch = "cb"
        self.loop.stop()
        return None

    def op_probe(self, pid: int) -> Any:
        """The order of one iteration: a call_soon callback (queued before it), an fd ready
        before it (a byte on a socketpair), a timer due (call_at in the past, then
        call_later(0)), and a callback queued by the first: A, reader, T, L, then B."""
        ch = f"p{pid}"
        a, b = socket.socketpair()
        a.setblocking(False)
        self.probe_socks += [a, b]
        loop = self.loop

        def reader() -> None:
            try:
                data = a.recv(100)
            except BlockingIOError:
                data = None
            self.rec(ch, ("reader", data))
            self.rec(ch, ("remove_reader", loop.remove_reader(a)))

        def cb(name: str, key: int) -> None:
            self.fired.add(key)
            self.rec(ch, (name,))
            if name == "A":
                self.short[-pid * 10 - 2] = loop.call_soon(cb, "B", -pid * 10 - 2)

        base = loop.time()
        loop.add_reader(a, reader)
        b.send(b"!")
        k = -pid * 10
        self.short[k - 3] = loop.call_soon(cb, "A", k - 3)
        self.short[k - 4] = loop.call_at(base - 0.001, cb, "T", k - 4)
        self.short[k - 5] = loop.call_later(0, cb, "L", k - 5)
        return None

    # ---- operations: tasks

    def op_task(self, tid: int, steps: int, mode: str) -> Any:
        async def body() -> Any:
            self.rec("cb", ("task", tid, "start"))
            try:
                for i in range(steps):
                    await asyncio.sleep(0)
                    self.rec("cb", ("task", tid, "step", i))
                if mode == "raise":
                    raise RuntimeError(f"task {tid} failed")
                if mode == "forever":
                    await self.loop.create_future()
                elif mode == "long":
                    await asyncio.sleep(3600)
            except asyncio.CancelledError:
                self.rec("cb", ("task", tid, "cancelled inside"))
                raise
            return tid

        def done(t: asyncio.Task) -> None:
            if t.cancelled():
                out: Any = "cancelled"
            elif t.exception() is not None:
                out = exc_repr(t.exception())  # type: ignore[arg-type]
            else:
                out = ("result", t.result())
            self.rec("cb", ("task", tid, "done", out))

        t = self.loop.create_task(body())
        t.add_done_callback(done)
        self.tasks[tid] = t
        return None

    def op_cancel_task(self, tid: int) -> Any:
        t = self.tasks.get(tid)
        if t is None:
            return "absent"
        return t.cancel()

    # ---- operations: raw fds

    def op_raw(self, rid: int, fam: str) -> Any:
        r = _Raw(rid)
        r.tcp = fam == "tcp"
        r.x, r.y = _stream_pair(fam, True)
        self.raws[rid] = r
        if r.tcp:
            self.tcp_pairs.append((lambda: r.x, lambda: r.y, True))
        return None

    def _raw_reader(self, r: _Raw) -> None:
        with self.inside(r.ch):
            got = bytearray()
            end = None
            while True:
                try:
                    chunk = r.x.recv(65536)
                except BlockingIOError:
                    break
                except OSError as e:
                    end = type(e).__name__
                    break
                if not chunk:
                    end = "eof"
                    break
                got += chunk
            self.rec(r.ch, ("readable", blob(got), end))
            if end is not None:
                self.rec(r.ch, ("remove_reader", self.loop.remove_reader(r.x)))

    def _raw_writer(self, r: _Raw) -> None:
        with self.inside(r.ch):
            self.rec(r.ch, ("writable",))
            self.rec(r.ch, ("remove_writer", self.loop.remove_writer(r.x)))

    def _rawop(self, rid: int) -> Optional[_Raw]:
        r = self.raws.get(rid)
        return r if r is not None and _is_open(r.x) else None

    def op_add_reader(self, rid: int) -> Any:
        r = self._rawop(rid)
        return "absent" if r is None else self.loop.add_reader(r.x, self._raw_reader, r)

    def op_remove_reader(self, rid: int) -> Any:
        r = self._rawop(rid)
        return "absent" if r is None else self.loop.remove_reader(r.x)

    def op_add_writer(self, rid: int) -> Any:
        r = self._rawop(rid)
        return "absent" if r is None else self.loop.add_writer(r.x, self._raw_writer, r)

    def op_remove_writer(self, rid: int) -> Any:
        r = self._rawop(rid)
        return "absent" if r is None else self.loop.remove_writer(r.x)

    def op_y_send(self, rid: int, n: int, tag: int) -> Any:
        r = self.raws.get(rid)
        if r is None or not _is_open(r.y):
            return "absent"
        q0 = _inq(r.x)
        res = _send_all(r.y, payload(n, tag))
        if res is None and r.tcp:
            if not _wait_kernel(lambda: _inq(r.x) >= q0 + n or _inq(r.x) < 0):
                self.rec("harness", ("peer bytes not delivered",))
                self.broken = True
        return res

    def op_y_shut(self, rid: int) -> Any:
        r = self.raws.get(rid)
        if r is None or not _is_open(r.y):
            return "absent"
        r.y.shutdown(socket.SHUT_WR)
        if r.tcp:
            self._wait_hup(r.x)
        return None

    def op_y_close(self, rid: int) -> Any:
        r = self.raws.get(rid)
        if r is None or not _is_open(r.y):
            return "absent"
        r.y.close()
        if r.tcp:
            self._wait_hup(r.x)
        return None

    def op_y_drain(self, rid: int) -> Any:
        r = self.raws.get(rid)
        if r is None or not _is_open(r.y):
            return "absent"
        if r.lossy:
            return "lossy"
        return self.run(self._drain(r.y, r, lambda: False, lambda: False))

    def _sock_task(self, r: _Raw, stid: int, kind: str, coro: Any,
                   show: Callable[[Any], Any]) -> None:
        async def body() -> None:
            try:
                res = await coro
            except asyncio.CancelledError:
                self.rec(r.ch, (kind, stid, "cancelled"))
                if kind == "sendall":
                    r.lossy = True
                raise
            except Exception as e:  # noqa: BLE001
                if kind == "sendall":
                    r.lossy = True
                self.rec(r.ch, (kind, stid, exc_repr(e)))
            else:
                self.rec(r.ch, (kind, stid, show(res)))

        self.stasks[stid] = (self.loop.create_task(body()), r, kind)

    def op_sock_recv(self, rid: int, n: int, stid: int) -> Any:
        r = self._rawop(rid)
        if r is None:
            return "absent"
        self._sock_task(r, stid, "recv", self.loop.sock_recv(r.x, n), blob)
        return None

    def op_sock_recv_into(self, rid: int, n: int, stid: int) -> Any:
        r = self._rawop(rid)
        if r is None:
            return "absent"
        buf = bytearray(n)
        self._sock_task(r, stid, "recv_into", self.loop.sock_recv_into(r.x, buf),
                        lambda k: (k, blob(buf[:k]) if isinstance(k, int) else None))
        return None

    def op_sock_sendall(self, rid: int, n: int, tag: int, stid: int, kind: str) -> Any:
        r = self._rawop(rid)
        if r is None:
            return "absent"
        data = payload(n, tag, kind)
        r.stream += data
        self._sock_task(r, stid, "sendall", self.loop.sock_sendall(r.x, data), repr)
        return None

    def op_cancel_stask(self, stid: int) -> Any:
        t = self.stasks.get(stid)
        if t is None:
            return "absent"
        return t[0].cancel()

    # ---- operations: datagrams

    def op_endpoint(self, eid: int) -> Any:
        e = _Ep(eid)
        self.eps[eid] = e
        tr, _ = self.run(self.loop.create_datagram_endpoint(
            lambda: _DgramProto(self, e), local_addr=("127.0.0.1", 0)))
        self.names[tr.get_extra_info("sockname")] = e.ch
        return tr.get_write_buffer_size()

    def _addr_of(self, target: str) -> Any:
        if target == "u":
            return self.u.getsockname()
        e = self.eps.get(int(target[1:]))
        return e.sock.getsockname() if e is not None and _is_open(e.sock) else None

    def op_sendto(self, eid: int, target: str, n: int, tag: int, kind: str) -> Any:
        e = self.eps.get(eid)
        if e is None or e.tr is None:
            return "absent"
        addr = self._addr_of(target)
        if addr is None:
            return "no target"
        te = None if target == "u" else self.eps[int(target[1:])]
        tr = e.tr
        closing, lost0, err0 = tr.is_closing(), tr._conn_lost, e.errors
        try:
            tr.sendto(payload(n, tag, kind), addr)
        except Exception as ex:  # noqa: BLE001
            return exc_repr(ex)
        finally:
            if not lost0 and tr._conn_lost:
                e.lost_ch = self.cur or e.ch
        if n and not closing and e.errors == err0 and not tr._conn_lost:
            if te is None:
                self.u_expected += 1
            elif not te.tr.is_closing():
                te.expected += 1
        return tr.get_write_buffer_size()

    def op_sendto_bad(self, eid: int, how: str) -> Any:
        e = self.eps.get(eid)
        if e is None or e.tr is None:
            return "absent"
        tr = e.tr
        lost0 = tr._conn_lost
        try:
            if how == "str":
                tr.sendto("text", self.u.getsockname())
            elif how == "noaddr":
                tr.sendto(b"x")
            else:
                tr.sendto(b"x", ("127.0.0.1", 0))
        except Exception as ex:  # noqa: BLE001
            return exc_repr(ex)
        finally:
            if not lost0 and tr._conn_lost:
                e.lost_ch = self.cur or e.ch
        return tr.is_closing()

    def op_u_send(self, eid: int, n: int, tag: int) -> Any:
        e = self.eps.get(eid)
        if e is None or e.tr is None or not _is_open(e.sock):
            return "absent"
        try:
            self.u.sendto(payload(n, tag), e.sock.getsockname())
        except OSError as ex:
            return exc_repr(ex)
        e.expected += 1
        return None

    def op_ep_close(self, eid: int) -> Any:
        return self._ep_end(eid, "close")

    def op_ep_abort(self, eid: int) -> Any:
        return self._ep_end(eid, "abort")

    def _ep_end(self, eid: int, how: str) -> Any:
        e = self.eps.get(eid)
        if e is None or e.tr is None:
            return "absent"
        lost0 = e.tr._conn_lost
        getattr(e.tr, how)()
        if not lost0 and e.tr._conn_lost:
            e.lost_ch = self.cur or e.ch
        return e.tr.is_closing()

    # ---- the end

    def teardown(self) -> None:
        """Cancels what is pending and closes everything, in id order (the close order is in
        the "cb" channel: connection_lost scheduled by abort() from here)."""
        self.events = {}
        self.cur = "cb"
        _log.addHandler(self.log)
        res: List[Any] = []
        try:
            for tid in sorted(self.tasks):
                res.append(("task", tid, self.tasks[tid].cancel()))
            for stid in sorted(self.stasks):
                res.append(("stask", stid, self.stasks[stid][0].cancel()))
            for hid in sorted(self.handles):
                self.handles[hid].cancel()
            for cid in sorted(self.conns):
                c = self.conns[cid]
                if c.tr is None:
                    res.append(("conn", cid, "never made"))
                    continue
                res.append(("conn", cid, c.tr.is_closing(), self.size(c)))
                try:
                    self.tclose(c, "abort")
                except Exception as e:  # noqa: BLE001 - the stdlib's, after a flush closed it
                    res.append(("abort", cid, exc_repr(e)))
            for rid in sorted(self.raws):
                r = self.raws[rid]
                res.append(("raw", rid, self.loop.remove_reader(r.x),
                            self.loop.remove_writer(r.x)))
            for eid in sorted(self.eps):
                e = self.eps[eid]
                if e.tr is not None:
                    self._ep_end(eid, "abort")
            for sid in sorted(self.srvs):
                self.srvs[sid]["srv"].close()
            self.cur = None
            # what was cancelled above runs its cancellation now (a short wait when an earlier
            # one ran out: then this only tidies up)
            for s in self.srvs.values():
                s["expected"] = s["accepted"]
            for e in self.eps.values():
                e.expected = e.got
            self.u_expected = 0
            if self.broken:
                self.deadline = min(self.deadline, 2.0)
            self.settle()
        finally:
            self.cur = None
            _log.removeHandler(self.log)
            self.trace.append((-1, "teardown", tuple(res), canonical(self.events)))

    def close_all(self) -> None:
        """Closes every socket of the driver's (the loop's were closed by its transports)."""
        socks: List[Any] = [self.u] + self.probe_socks
        for c in self.conns.values():
            socks += [c.peer]
            if isinstance(c.sock, socket.socket):
                socks.append(c.sock)
        for r in self.raws.values():
            socks += [r.x, r.y]
        for s in socks:
            if s is not None:
                try:
                    s.close()
                except OSError:
                    pass


# -------------------------------------------------------------------------------- the trace


def canonical(events: Dict[str, list]) -> tuple:
    """A step's events in the form compared: channels sorted by name; inside each, data
    chunks joined (how the kernel splits a stream is not the loop's), datagrams sorted (two
    sends on the loopback may reach the queue in either order when the kernel defers them),
    and each run of timers due at one call_at time sorted (KNOWN_DIVERGENCES)."""
    out = []
    for ch in sorted(events):
        evs: List[Any] = []
        for ev in events[ch]:
            if ev[0] == "data" and evs and evs[-1][0] == "data" and evs[-1][1] == ev[1]:
                evs[-1] = ("data", ev[1], evs[-1][2] + ev[2])
            else:
                evs.append(ev)
        evs = _sort_runs(evs, lambda e: e[0] == "dgram" and "dgram")
        evs = _sort_runs(evs, lambda e: e[0] == "cb" and e[2])
        out.append((ch, tuple(_blobbed(e) for e in evs)))
    return tuple(out)


def _sort_runs(evs: list, key: Callable[[Any], Any]) -> list:
    out: list = []
    i = 0
    while i < len(evs):
        k = key(evs[i])
        j = i + 1
        if k:
            while j < len(evs) and key(evs[j]) == k:
                j += 1
            out += sorted(evs[i:j], key=repr)
        else:
            out.append(evs[i])
        i = j
    return out


def _blobbed(ev: tuple) -> tuple:
    return tuple(blob(x) if isinstance(x, (bytes, bytearray)) else x for x in ev)


# -------------------------------------------------------------------------------- running


def make_stock() -> asyncio.AbstractEventLoop:
    return asyncio.SelectorEventLoop()


def make_evloop(combo: Tuple[str, str]) -> Callable[[], asyncio.AbstractEventLoop]:
    return lambda: evloop.new_event_loop(variant=combo[0], backend=combo[1])


def run_sequence(make: Callable[[], asyncio.AbstractEventLoop], ops: List[tuple],
                 deadline: float = DEADLINE) -> List[tuple]:
    """The trace of ops on a new loop from make()."""
    loop = make()
    w = _World(loop, deadline)
    try:
        for i, op in enumerate(ops):
            if w.broken:
                w.trace.append((i, op[0], "skipped: an earlier wait ran out of time", ()))
                continue
            w.step(i, op)
        w.teardown()
    finally:
        w.close_all()
        loop.set_exception_handler(None)
        try:
            loop.close()
        except Exception as e:  # noqa: BLE001
            w.trace.append((-2, "loop.close", exc_repr(e), ()))
    return w.trace


def harness_broken(trace: List[tuple]) -> bool:
    return any(ch == "harness" for _, _, _, chans in trace for ch, _ in chans)


class Outcome:
    """What check_ops() found for one sequence: `diverges` when the stock loop gave one trace
    twice and evloop's another one twice; `unstable` when one loop's two runs differ or a
    wait of the harness's ran out on the stock loop (the harness's fault, not evloop's)."""

    def __init__(self, seed: Optional[int], combo: Tuple[str, str], ops: List[tuple]) -> None:
        self.seed, self.combo, self.ops = seed, combo, ops
        self.runs: Dict[str, List[tuple]] = {}  # "stock", "stock#2", "evloop", "evloop#2"
        self.diverges = False
        self.unstable = False
        self.pair = ("stock", "evloop")  # the two runs the report compares

    @property
    def stock(self) -> List[tuple]:
        return self.runs["stock"]

    @property
    def ours(self) -> List[tuple]:
        return self.runs.get("evloop", [])

    def report(self, both_traces: bool = True) -> str:
        v, b = self.combo
        head = f"seed {self.seed}, evloop {v}-{b}" if self.seed is not None else \
            f"evloop {v}-{b}"
        what = "DIVERGENCE" if self.diverges else "UNSTABLE TRACE (the harness's fault)"
        lines = [f"{what}: {head}, {self.pair[0]} against {self.pair[1]}"]
        if self.seed is not None:
            lines.append(f"  replay: EVLOOP_DIFF_SEED={self.seed} python -m pytest "
                         "test_aio_differential.py -k random, or python differential.py "
                         f"{self.seed} [--shrink]")
        lines.append("  operations:")
        lines += [f"    {i:2d} {op!r}" for i, op in enumerate(self.ops)]
        x, y = (self.runs.get(k, []) for k in self.pair)
        first = first_difference(x, y)
        if first is not None:
            lines.append(f"  first difference at step {first}:")
            for name, t in zip(self.pair, (x, y)):
                lines.append(f"    {name:8s}: {t[first] if first < len(t) else '-'}")
        if both_traces:
            for name, t in zip(self.pair, (x, y)):
                lines.append(f"  {name} trace:")
                lines += [f"    {step}" for step in t]
        return "\n".join(lines)


def first_difference(a: List[tuple], b: List[tuple]) -> Optional[int]:
    for i in range(max(len(a), len(b))):
        if i >= len(a) or i >= len(b) or a[i] != b[i]:
            return i
    return None


def check_ops(ops: List[tuple], combo: Tuple[str, str], seed: Optional[int] = None,
              stock_twice: bool = False, deadline: float = DEADLINE) -> Outcome:
    """Runs ops on the stock loop and on evloop's (combo); on a difference, runs both again
    to tell a divergence of evloop's (both reproduce) from a trace that timing changed."""
    out = Outcome(seed, combo, ops)
    runs = out.runs

    def unstable(a: str, b: str) -> Outcome:
        out.unstable, out.pair = True, (a, b)
        return out

    runs["stock"] = run_sequence(make_stock, ops, deadline)
    if harness_broken(runs["stock"]):
        return unstable("stock", "stock")
    if stock_twice:
        runs["stock#2"] = run_sequence(make_stock, ops, deadline)
        if runs["stock#2"] != runs["stock"]:
            return unstable("stock", "stock#2")
    runs["evloop"] = run_sequence(make_evloop(combo), ops, deadline)
    if runs["evloop"] == runs["stock"]:
        return out
    if "stock#2" not in runs:
        runs["stock#2"] = run_sequence(make_stock, ops, deadline)
        if runs["stock#2"] != runs["stock"]:
            return unstable("stock", "stock#2")
    runs["evloop#2"] = run_sequence(make_evloop(combo), ops, deadline)
    if runs["evloop#2"] != runs["evloop"]:
        return unstable("evloop", "evloop#2")
    out.diverges = True
    return out


def check(seed: int, stock_twice: bool = False) -> Outcome:
    return check_ops(generate(seed), combo_of(seed), seed, stock_twice)


def shrink(out: Outcome, budget_s: float = 60.0) -> Outcome:
    """A shorter sequence with the same kind of divergence: drops operations one chunk at a
    time while the stock loop stays deterministic and evloop still differs (operations on what
    was dropped record "absent"). Short waits: a candidate whose waits time out is dropped."""
    end = time.monotonic() + budget_s
    best = out
    ops = list(out.ops)
    chunk = max(1, len(ops) // 4)
    while chunk >= 1 and time.monotonic() < end:
        i = 0
        while i < len(ops) and time.monotonic() < end:
            cand = ops[:i] + ops[i + chunk:]
            if not cand:
                i += chunk
                continue
            o = check_ops(cand, out.combo, None, stock_twice=True, deadline=3.0)
            if o.diverges and not harness_broken(o.stock):
                ops, best = cand, o
            else:
                i += chunk
        chunk //= 2
    return best


def _tuples(x: Any) -> Any:
    return tuple(_tuples(i) for i in x) if isinstance(x, list) else x


def main(argv: List[str]) -> int:
    """python differential.py SEED [--shrink] [--show] | --ops JSON [--combo VARIANT-BACKEND]:
    runs one sequence on both loops and prints the divergence, if any (and with --show the
    operations and the stock loop's trace)."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("seed", nargs="?", type=int)
    ap.add_argument("--ops", help="a JSON list of operations (as a report prints them)")
    ap.add_argument("--combo", help="variant-backend, e.g. arena-epoll")
    ap.add_argument("--shrink", action="store_true")
    ap.add_argument("--show", action="store_true")
    a = ap.parse_args(argv)
    if a.ops:
        ops = [_tuples(op) for op in json.loads(a.ops)]
        combo = tuple(a.combo.split("-")) if a.combo else COMBOS[0]
        out = check_ops(ops, combo, None, stock_twice=True)  # type: ignore[arg-type]
    else:
        out = check(a.seed, stock_twice=True)
    if a.show:
        print("operations:\n" + "\n".join(f"  {i:2d} {op!r}" for i, op in enumerate(out.ops)))
        print("stock trace:\n" + "\n".join(f"  {step}" for step in out.stock))
    if not (out.diverges or out.unstable):
        print(f"same trace on both loops ({len(out.stock)} steps)")
        return 0
    print(out.report())
    if a.shrink and out.diverges:
        small = shrink(out)
        print("\nshrunk:\n" + small.report())
        print("  as JSON: " + json.dumps(small.ops))
    return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
