#!/usr/bin/env python3
"""aio_soak: a soak of an asyncio event loop (evloop's, the stock one, or uvloop) under a
churn of connections, with timers, call_soon_threadsafe and signals going on throughout.

    python tests/soak/aio_soak.py --loop evloop --duration 150     # tests/soak/README.md

This process is the server: an HTTP/1.1 keep-alive server and an echo server (both
``asyncio.Protocol``) on the loop under test, two worker threads that call
``call_soon_threadsafe`` (tasks, and timers started and some cancelled), and a thread that
sends SIGUSR1 to the process every few ms and waits until the loop's handler
(``loop.add_signal_handler``) has counted it. The clients run in a child process on the stock
asyncio loop (this script again, with ``--role client``): they churn connections (a few
requests then close; reset with SO_LINGER 0; half-close and read the rest; a
``Connection: close`` request; slow readers, with a small receive buffer, that read nothing
for a while and then read slowly, so that the server's write buffer fills and
``pause_writing``/``resume_writing`` fire) and hold ``--idle`` idle connections open for
the whole run. Every reply is checked: HTTP status and a body that encodes the request id
(``id=<conn>/<seq>;`` then filler derived from the id), echo the exact bytes sent. Server and
client are pinned to different CPUs when there are two or more.

Every interval a row: requests, connections, RSS, malloc's bytes in use (``heap_MiB``, every
arena: what grows with a leak, where RSS alone may be fragmentation), the Python objects' memory
blocks (``sys.getallocatedblocks()``, thousands: what grows when objects leak), open fds, signals,
timers, threadsafe calls and, on evloop, the C loop's counters (``loop.evloop_stats()``).
Exits 1 (with the reasons) on a lost or corrupted reply, an error the server or the loop's
exception handler saw (resets of the deliberately reset clients are counted apart), a lost
signal, timer or threadsafe call, an fd count or connection count that does not return to its
baseline once the clients have left, or RSS that keeps growing after warm-up (see
``rss_verdict``).
"""

from __future__ import annotations

import argparse
import asyncio
import ctypes
import errno
import json
import os
import random
import resource
import signal
import socket
import statistics
import struct
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Tuple

ALPHA = b"abcdefghijklmnopqrstuvwxyz0123456789"
OP_TIMEOUT = 30.0  # s a client waits for any one reply before calling it lost
SIGNAL_TIMEOUT = 10.0  # s the signal thread waits for the loop to handle one signal
FD_TIMEOUT = 20.0  # s the server waits for connections and fds to return to baseline


# ---- the protocol, shared by the server and the client (c_soak.c speaks the same) ----


def fnv1a(data: bytes) -> int:
    h = 0x811C9DC5
    for b in data:
        h = ((h ^ b) * 0x01000193) & 0xFFFFFFFF
    return h


def http_body(rid: bytes, size: int) -> bytes:
    """The body of the reply to request rid ("<conn>/<seq>") asking for size filler bytes."""
    r = fnv1a(rid) % len(ALPHA)
    rot = ALPHA[r:] + ALPHA[:r]
    return b"id=" + rid + b";" + (rot * (size // len(ALPHA) + 1))[:size]


def http_request(cid: int, seq: int, size: int, close: bool = False) -> bytes:
    return b"GET /r/%d/%d HTTP/1.1\r\nHost: soak\r\nX-Size: %d\r\n%s\r\n" % (
        cid,
        seq,
        size,
        b"Connection: close\r\n" if close else b"",
    )


def http_reply(head: bytes) -> Tuple[bytes, bool, bool]:
    """The reply to one request head (without its final CRLFCRLF): (bytes, close, ok)."""
    lines = head.split(b"\r\n")
    parts = lines[0].split(b" ")
    if len(parts) != 3 or parts[0] != b"GET" or not parts[1].startswith(b"/r/"):
        return b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", False, False
    size, close = 0, False
    for line in lines[1:]:
        key, _, value = line.partition(b":")
        key = key.strip().lower()
        if key == b"x-size":
            size = int(value)
        elif key == b"connection":
            close = value.strip().lower() == b"close"
    body = http_body(parts[1][3:], size)
    reply = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n%s\r\n%s" % (
        len(body),
        b"Connection: close\r\n" if close else b"",
        body,
    )
    return reply, close, True


# ---- measurements of a process ----


def rss_bytes(pid: str = "self") -> int:
    with open(f"/proc/{pid}/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


try:
    _libc = ctypes.CDLL(None)
    _libc.open_memstream.restype = ctypes.c_void_p
    _libc.open_memstream.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
    _libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
    _libc.fclose.argtypes = [ctypes.c_void_p]
    _libc.free.argtypes = [ctypes.c_void_p]
except (AttributeError, OSError):  # not glibc
    _libc = None


def heap_in_use() -> Optional[int]:
    """Bytes malloc has handed out and not taken back, over every arena (glibc's malloc_info:
    the memory it holds from the system, less its free chunks, plus its mmapped chunks; a free
    top chunk not trimmed yet counts as used), None where unknown. Beside RSS it tells a leak
    (this grows) from fragmentation (RSS grows, this does not). Python objects mostly live in
    pymalloc's arenas instead: see sys.getallocatedblocks()."""
    if _libc is None:
        return None
    buf, size = ctypes.c_void_p(), ctypes.c_size_t()
    f = _libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not f:
        return None
    r = _libc.malloc_info(0, f)
    _libc.fclose(f)
    xml = ctypes.string_at(buf.value, size.value).decode() if buf.value else ""
    _libc.free(buf)
    totals = xml.rpartition("</heap>")[2]  # every arena's, after the last one's own
    if r != 0 or not totals:
        return None

    def size_of(tag: str) -> int:
        i = totals.find(tag)
        j = totals.find('size="', i)
        return int(totals[j + 6 : totals.index('"', j + 6)]) if i >= 0 and j >= 0 else 0

    held = size_of('<system type="current"')
    free = size_of('<total type="fast"') + size_of('<total type="rest"')
    return max(held - free, 0) + size_of('<total type="mmap"')


def fd_count(pid: str = "self") -> int:
    n = len(os.listdir(f"/proc/{pid}/fd"))
    return n - 1 if pid == "self" else n  # listdir's own fd


def raise_fd_limit(need: int) -> int:
    """Raises the soft RLIMIT_NOFILE up to the hard one; returns the soft limit now."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, need)
    if soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def pin(cpu: Optional[int]) -> None:
    if cpu is not None:
        os.sched_setaffinity(0, {cpu})


def rss_verdict(
    samples: List[Tuple[float, int, int, int]], warmup: float, limit_pct_h: float,
    floor_mib: float, frag_floor_mib: float = 6.0
) -> Tuple[bool, str]:
    """RSS keeps growing after warm-up when, over the samples (t, rss, heap, blocks) taken
    after warmup s of load, both: their line (Theil-Sen: the median of the slopes between
    every two samples, which a few spikes, such as a slow reader's buffered replies, do not
    move) projects more than limit_pct_h % growth per hour of their median, and the median of
    their second half exceeds that of their first half by more than a floor (so a step or
    noise in a short run does not fail it): floor_mib MiB when malloc's bytes in use (by more
    than half of floor_mib) or Python's blocks (by more than 10,000) rose too, which is what a
    leak does; frag_floor_mib MiB when neither did, which is fragmentation or an allocator's
    high-water mark (the asyncio soak's RSS rises by 3-4 MiB so before it settles: at CI size
    its two halves differ by 0.7-1.1 MiB, on either side of a 1 MiB floor, with malloc's
    bytes and Python's blocks flat)."""
    tail = [x for x in samples if x[0] >= warmup]
    if len(tail) < 4:
        return True, f"rss: {len(tail)} samples after warm-up, too few to judge growth (need 4)"
    slope = statistics.median(  # bytes per s
        (b[1] - a[1]) / (b[0] - a[0]) for i, a in enumerate(tail) for b in tail[i + 1 :]
    )
    rm = statistics.median(x[1] for x in tail)
    pct_h = slope * 3600 / rm * 100
    h = len(tail) // 2

    def rise(k: int) -> float:
        return statistics.median(x[k] for x in tail[h:]) - statistics.median(x[k] for x in tail[:h])

    leak_like = rise(2) / 2**20 > floor_mib / 2 or rise(3) > 10_000
    floor = floor_mib if leak_like else frag_floor_mib
    grows = pct_h > limit_pct_h and rise(1) / 2**20 > floor
    text = (
        f"rss: Theil-Sen slope {slope * 60 / 1024:+.1f} KiB/min over {len(tail)} samples after"
        f" {warmup:.0f} s of warm-up = {pct_h:+.1f} %/h of {rm / 2**20:.1f} MiB (limit"
        f" {limit_pct_h:g} %/h); median second half - first half = {rise(1) / 2**20:+.2f} MiB"
        f" (floor {floor:g} MiB: {'with' if leak_like else 'without'} malloc's or Python's"
        f" growth); meanwhile malloc's bytes in use {rise(2) / 2**20:+.2f} MiB,"
        f" Python's blocks {rise(3) / 1000:+.1f}k"
    )
    return not grows, text


# ---- the server: this process ----


class ServerStats:
    def __init__(self) -> None:
        self.accepted = 0
        self.open = 0
        self.http_requests = 0
        self.echo_bytes = 0
        self.resets = 0  # connection_lost with a reset or broken pipe: the reset clients
        self.handler_resets = 0  # the same, seen by the exception handler (expected)
        self.pauses = 0
        self.echo_pauses = 0  # of which the echo server's
        self.resumes = 0
        self.server_closes = 0  # Connection: close requests answered then closed
        self.signals = 0
        self.tsafe_sent = 0  # by the worker threads (their own counts, summed at the end)
        self.tsafe_run = 0
        self.tsafe_order = 0  # a thread's calls run out of order
        self.timers_started = 0
        self.timers_fired = 0
        self.timers_cancelled = 0
        self.timers_early = 0
        self.timer_late_max = 0.0
        self.timers_live: Dict[int, Any] = {}
        self.errors = 0
        self.messages: List[str] = []

    def error(self, msg: str) -> None:
        self.errors += 1
        if len(self.messages) < 20:
            self.messages.append(msg)
            print(f"aio_soak: server error: {msg}", file=sys.stderr, flush=True)

    def lost(self, exc: Optional[BaseException]) -> None:
        self.open -= 1
        if exc is None:
            return
        if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
            self.resets += 1
        else:
            self.error(f"connection_lost({exc!r})")


ST = ServerStats()


class HttpServer(asyncio.Protocol):
    def connection_made(self, transport: Any) -> None:
        ST.accepted += 1
        ST.open += 1
        self.tr = transport
        self.buf = bytearray()
        self.closing = False

    def data_received(self, data: bytes) -> None:
        if self.closing:
            return
        buf = self.buf
        buf += data
        out = []
        while True:
            i = buf.find(b"\r\n\r\n")
            if i < 0:
                break
            reply, close, ok = http_reply(bytes(buf[:i]))
            del buf[: i + 4]
            if not ok:
                ST.error("bad request")
            ST.http_requests += 1
            out.append(reply)
            if close:
                self.closing = True
                ST.server_closes += 1
                break
        if out:
            self.tr.write(b"".join(out))
        if self.closing:
            self.tr.close()  # after the replies are flushed
        elif len(buf) > 65536:
            ST.error("request head over 64 KiB")
            self.tr.close()

    def eof_received(self) -> bool:
        return False  # half-closed by the client: close once the replies are flushed

    def pause_writing(self) -> None:
        ST.pauses += 1
        ST.echo_pauses += isinstance(self, EchoServer)
        self.tr.pause_reading()

    def resume_writing(self) -> None:
        ST.resumes += 1
        self.tr.resume_reading()

    def connection_lost(self, exc: Optional[BaseException]) -> None:
        ST.lost(exc)


class EchoServer(HttpServer):
    def data_received(self, data: bytes) -> None:
        ST.echo_bytes += len(data)
        self.tr.write(data)


def on_exception(loop: asyncio.AbstractEventLoop, context: Dict[str, Any]) -> None:
    exc = context.get("exception")
    if isinstance(exc, (ConnectionResetError, BrokenPipeError, ConnectionAbortedError)):
        ST.handler_resets += 1
        return
    ST.error(f"exception handler: {context.get('message')}: {exc!r}")


class Workers:
    """Two threads calling call_soon_threadsafe throughout (a task that checks its thread's
    order; every fourth call a timer of 0-20 ms, one in five of them cancelled from the loop
    before it is due), and one thread sending SIGUSR1 every 2-5 ms, each acknowledged."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.stop = threading.Event()
        self.sig_seen = threading.Event()
        self.sent = [0, 0]
        self.sig_sent = 0
        self.sig_lost = 0
        self.last = [0, 0]
        self.next_token = 0
        self.threads = [threading.Thread(target=self.submitter, args=(i,)) for i in (0, 1)]
        self.threads.append(threading.Thread(target=self.signaller))

    def start(self) -> None:
        self.loop.add_signal_handler(signal.SIGUSR1, self.on_signal)
        for t in self.threads:
            t.start()

    def alive(self) -> bool:
        return any(t.is_alive() for t in self.threads)

    # threads

    def submitter(self, i: int) -> None:
        rng = random.Random(i)
        seq = 0
        while not self.stop.is_set():
            seq += 1
            self.loop.call_soon_threadsafe(self.on_task, i, seq)
            if seq % 4 == 0:
                self.loop.call_soon_threadsafe(self.start_timer, rng.random() * 0.02)
                self.sent[i] += 1
            self.sent[i] += 1
            time.sleep(0.0005 + rng.random() * 0.0015)

    def signaller(self) -> None:
        rng = random.Random(7)
        pid = os.getpid()
        while not self.stop.is_set():
            self.sig_seen.clear()
            os.kill(pid, signal.SIGUSR1)
            self.sig_sent += 1
            if not self.sig_seen.wait(SIGNAL_TIMEOUT):
                self.sig_lost += 1
                self.loop.call_soon_threadsafe(ST.error, "a SIGUSR1 not handled within 10 s")
            time.sleep(0.002 + rng.random() * 0.003)

    # loop thread

    def on_signal(self) -> None:
        ST.signals += 1
        self.sig_seen.set()

    def on_task(self, i: int, seq: int) -> None:
        ST.tsafe_run += 1
        if seq != self.last[i] + 1:
            ST.tsafe_order += 1
            ST.error(f"thread {i}: call {seq} ran after {self.last[i]}")
        self.last[i] = seq

    def start_timer(self, delay: float) -> None:
        ST.tsafe_run += 1
        self.next_token += 1
        token = self.next_token
        deadline = self.loop.time() + delay
        ST.timers_live[token] = self.loop.call_later(delay, self.on_timer, token, deadline)
        ST.timers_started += 1
        if token % 5 == 0:
            self.loop.call_later(delay / 2, self.cancel_timer, token)

    def cancel_timer(self, token: int) -> None:
        handle = ST.timers_live.pop(token, None)
        if handle is not None:
            handle.cancel()
            ST.timers_cancelled += 1

    def on_timer(self, token: int, deadline: float) -> None:
        if ST.timers_live.pop(token, None) is None:
            ST.error(f"timer {token} fired after its cancel or twice")
            return
        ST.timers_fired += 1
        now = self.loop.time()
        # asyncio runs a timer up to its clock resolution early; uvloop's clock is in ms.
        if now + getattr(self.loop, "_clock_resolution", 0.001) < deadline:
            ST.timers_early += 1
            ST.error(f"timer {token} fired {(deadline - now) * 1e3:.3f} ms early")
        ST.timer_late_max = max(ST.timer_late_max, now - deadline)


def make_loop(name: str) -> asyncio.AbstractEventLoop:
    if name == "evloop":
        import evloop

        return evloop.new_event_loop()
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.SelectorEventLoop()


COLUMNS = [
    ("t_s", 6),
    ("http_req", 9),
    ("req/s", 7),
    ("echo_MiB", 9),
    ("conns", 7),
    ("open", 6),
    ("rss_MiB", 8),
    ("heap_MiB", 9),
    ("py_kblk", 8),
    ("fds", 6),
    ("signals", 8),
    ("timers", 7),
    ("tsafe", 7),
    ("pauses", 7),
    ("resets", 7),
    ("cl_ok", 8),
    ("cl_err", 6),
    ("ticks", 9),
    ("io_cb", 9),
    ("tasks", 8),
    ("p_sleep", 8),
    ("p_wake", 8),
]


def print_row(values: List[Any]) -> None:
    print(" ".join(str(v).rjust(w) for v, (_, w) in zip(values, COLUMNS)), flush=True)


class Sampler:
    def __init__(self, loop: asyncio.AbstractEventLoop, t0: float) -> None:
        self.loop = loop
        self.t0 = t0
        self.prev_t = t0
        self.prev = (0, 0, 0)
        self.client: Dict[str, Any] = {}
        # (t, rss, heap, Python blocks) while the clients run
        self.samples: List[Tuple[float, int, int, int]] = []

    def row(self, under_load: bool) -> None:
        now = time.monotonic()
        rss, fds, heap = rss_bytes(), fd_count(), heap_in_use()
        if under_load:
            self.samples.append((now - self.t0, rss, heap or 0, sys.getallocatedblocks()))
        dt = max(now - self.prev_t, 1e-9)
        req, acc, echo = ST.http_requests, ST.accepted, ST.echo_bytes
        stats = ["-"] * 5
        if hasattr(self.loop, "evloop_stats"):
            s = self.loop.evloop_stats()
            stats = [s.ticks, s.io_callbacks, s.tasks_run, s.poller_sleeps, s.poller_wakes]
        c = self.client
        print_row(
            [
                f"{now - self.t0:.0f}",
                req - self.prev[0],
                f"{(req - self.prev[0]) / dt:.0f}",
                f"{(echo - self.prev[2]) / 2**20:.1f}",
                acc - self.prev[1],
                ST.open,
                f"{rss / 2**20:.1f}",
                "-" if heap is None else f"{heap / 2**20:.1f}",
                f"{sys.getallocatedblocks() / 1000:.1f}",
                fds,
                ST.signals,
                ST.timers_fired,
                ST.tsafe_run,
                ST.pauses,
                ST.resets + ST.handler_resets,
                c.get("ok", "-"),
                c.get("errors", "-"),
            ]
            + stats
        )
        self.prev = (req, acc, echo)
        self.prev_t = now


async def serve(args: argparse.Namespace) -> int:
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(on_exception)
    http = await loop.create_server(HttpServer, "127.0.0.1", 0, backlog=4096)
    echo = await loop.create_server(EchoServer, "127.0.0.1", 0, backlog=4096)
    http_port = http.sockets[0].getsockname()[1]
    echo_port = echo.sockets[0].getsockname()[1]
    workers = Workers(loop)
    workers.start()
    await asyncio.sleep(0.5)
    base_fds, base_rss = fd_count(), rss_bytes()
    t0 = time.monotonic()
    sampler = Sampler(loop, t0)
    backend = getattr(loop, "evloop_backend", "")
    print(
        f"aio_soak: loop {args.loop}{'/' + backend if backend else ''} ({type(loop).__name__}),"
        f" Python {sys.version.split()[0]}, duration {args.duration:g} s, interval"
        f" {args.interval:g} s, {args.idle} idle connections, {args.churners} churners,"
        f" server CPU {args.server_cpu}, client CPU {args.client_cpu}, fd limit"
        f" {resource.getrlimit(resource.RLIMIT_NOFILE)[0]}; baseline {base_fds} fds,"
        f" RSS {base_rss / 2**20:.1f} MiB",
        flush=True,
    )
    print_row([name for name, _ in COLUMNS])

    cmd = [sys.executable, os.path.abspath(__file__), "--role", "client"]
    cmd += ["--http-port", str(http_port), "--echo-port", str(echo_port)]
    cmd += ["--duration", str(args.duration), "--interval", str(args.interval)]
    cmd += ["--idle", str(args.idle), "--churners", str(args.churners)]
    if args.client_cpu is not None:
        cmd += ["--client-cpu", str(args.client_cpu)]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE)
    done: asyncio.Future = loop.create_future()
    final: Dict[str, Any] = {}

    def update(d: Dict[str, Any]) -> None:
        sampler.client = d
        if d.get("final"):
            final.update(d)

    def read_client() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            try:
                d = json.loads(line)
            except ValueError:
                continue
            loop.call_soon_threadsafe(update, d)
        rc = proc.wait()
        loop.call_soon_threadsafe(lambda: done.done() or done.set_result(rc))

    reader = threading.Thread(target=read_client)
    reader.start()
    next_row = t0 + args.interval
    while not done.done():
        await asyncio.wait([done], timeout=max(0.0, next_row - time.monotonic()))
        if time.monotonic() >= next_row:
            sampler.row(under_load=True)
            next_row += args.interval
    client_rc = done.result()
    reader.join()
    assert proc.stdout is not None
    proc.stdout.close()
    load_end = time.monotonic()
    rss_load_end = rss_bytes()

    # The clients have left: connections and fds must come back to the baseline.
    deadline = time.monotonic() + FD_TIMEOUT
    while (ST.open or fd_count() != base_fds) and time.monotonic() < deadline:
        await asyncio.sleep(0.05)
    fds_after = fd_count()
    sampler.row(under_load=False)

    workers.stop.set()
    while workers.alive():
        await asyncio.sleep(0.01)
    ST.tsafe_sent = sum(workers.sent)
    deadline = time.monotonic() + 10
    while (ST.tsafe_run < ST.tsafe_sent or ST.timers_live) and time.monotonic() < deadline:
        await asyncio.sleep(0.01)
    loop.remove_signal_handler(signal.SIGUSR1)
    http.close()
    echo.close()
    await http.wait_closed()
    await echo.wait_closed()

    # The verdict.
    fails: List[str] = []
    ok_rss, rss_text = rss_verdict(sampler.samples, args.warmup, args.rss_limit, args.rss_floor,
                                   args.rss_frag_floor)
    c = final
    cl = (
        f"client: {c.get('ok', 0)} replies checked ({c.get('http', 0)} HTTP,"
        f" {c.get('echo', 0)} echo), {c.get('conns', 0)} connections, {c.get('resets', 0)}"
        f" resets, {c.get('halfcloses', 0)} half-closes, {c.get('server_closes', 0)}"
        f" Connection: close, {c.get('slow', 0)} slow readers, {c.get('idle_peak', 0)} idle"
        f" held, {c.get('errors', '?')} errors"
    )
    print(f"aio_soak: {cl}")
    print(
        f"aio_soak: server: {ST.http_requests} HTTP requests, {ST.echo_bytes / 2**20:.1f} MiB"
        f" echoed, {ST.accepted} connections, {ST.resets} resets (+{ST.handler_resets} seen by"
        f" the exception handler), {ST.server_closes} closes on Connection: close,"
        f" pause_writing {ST.pauses} ({ST.echo_pauses} echo) / resume_writing {ST.resumes},"
        f" {ST.errors} errors"
    )
    print(
        f"aio_soak: signals {ST.signals} handled of {workers.sig_sent} sent ({workers.sig_lost}"
        f" lost); threadsafe calls {ST.tsafe_run} run of {ST.tsafe_sent} made"
        f" ({ST.tsafe_order} out of order); timers {ST.timers_started} started,"
        f" {ST.timers_fired} fired, {ST.timers_cancelled} cancelled, {len(ST.timers_live)}"
        f" pending, {ST.timers_early} early, latest {ST.timer_late_max * 1e3:.1f} ms late"
    )
    print(
        f"aio_soak: fds: baseline {base_fds}, after the clients left {fds_after}; open"
        f" connections {ST.open}; RSS baseline {base_rss / 2**20:.1f} MiB, first sample"
        f" {(sampler.samples[0][1] if sampler.samples else 0) / 2**20:.1f} MiB, end of load"
        f" {rss_load_end / 2**20:.1f} MiB, after {rss_bytes() / 2**20:.1f} MiB;"
        f" load {load_end - t0:.0f} s"
    )
    print(f"aio_soak: {rss_text}")
    if hasattr(loop, "evloop_stats"):
        s = loop.evloop_stats()
        print(
            f"aio_soak: evloop stats: ticks {s.ticks}, io_callbacks {s.io_callbacks}, tasks_run"
            f" {s.tasks_run}, timers_fired {s.timers_fired}, poller_sleeps {s.poller_sleeps},"
            f" poller_wakes {s.poller_wakes}, backend {s.backend}, ingress {s.ingress}"
        )
    if client_rc != 0 or not c:
        fails.append(f"the client exited {client_rc} (final report {'seen' if c else 'missing'})")
    if c.get("errors", 1):
        fails.append(f"{c.get('errors', '?')} lost or corrupted replies or client errors")
    if c and c.get("idle_peak", 0) < args.idle:
        fails.append(f"only {c.get('idle_peak')} of {args.idle} idle connections held")
    for what in ("resets", "halfcloses", "slow", "server_closes"):
        if c and not c.get(what):
            fails.append(f"the client made no {what}")
    if ST.errors:
        fails.append(f"{ST.errors} server errors: {'; '.join(ST.messages[:5])}")
    if not ST.echo_pauses or ST.pauses == ST.echo_pauses or not ST.resumes:
        fails.append("pause_writing/resume_writing never fired on the HTTP or the echo server")
    if workers.sig_lost or ST.signals != workers.sig_sent or not ST.signals:
        fails.append(f"signals: {ST.signals} handled of {workers.sig_sent} sent")
    if ST.tsafe_run != ST.tsafe_sent or ST.tsafe_order:
        fails.append(f"threadsafe calls: {ST.tsafe_run} run of {ST.tsafe_sent} made")
    if ST.timers_live or ST.timers_fired + ST.timers_cancelled != ST.timers_started:
        fails.append(f"timers: {len(ST.timers_live)} never fired")
    if ST.open:
        fails.append(f"{ST.open} connections still open after the clients left")
    if fds_after != base_fds:
        fails.append(f"fds: {fds_after} after the clients left, baseline {base_fds}")
    if not ok_rss:
        fails.append("RSS keeps growing after warm-up")
    for f in fails:
        print(f"aio_soak: FAIL: {f}")
    print(f"aio_soak: {'FAILED' if fails else 'passed'} ({args.loop})", flush=True)
    return 1 if fails else 0


# ---- the clients: a child process on the stock asyncio loop ----


class ClientError(Exception):
    pass


class Clients:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.rng = random.Random(12345)
        self.cid = 0
        self.c: Dict[str, int] = dict.fromkeys(
            (
                "ok http echo conns resets halfcloses server_closes slow idle idle_peak"
                " errors connect_retries"
            ).split(),
            0,
        )
        self.messages: List[str] = []
        self.end = time.monotonic() + args.duration

    def fail(self, msg: str) -> None:
        self.c["errors"] += 1
        if len(self.messages) < 20:
            self.messages.append(msg)
            print(f"aio_soak: client error: {msg}", file=sys.stderr, flush=True)

    async def open(
        self, kind: str, rcvbuf: int = 0
    ) -> Tuple[asyncio.StreamReader, asyncio.StreamWriter, int]:
        """A connection to the HTTP or echo server; rcvbuf: a small receive buffer (set
        before connecting, so the window stays small), for the slow readers."""
        port = self.args.http_port if kind == "http" else self.args.echo_port
        loop = asyncio.get_running_loop()
        for attempt in range(50):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setblocking(False)
            if rcvbuf:
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
            try:
                await asyncio.wait_for(loop.sock_connect(sock, ("127.0.0.1", port)), OP_TIMEOUT)
                r, w = await asyncio.open_connection(sock=sock)
                break
            except OSError as e:  # out of ports (EADDRNOTAVAIL) for a moment: not the server's
                sock.close()
                if e.errno != errno.EADDRNOTAVAIL or attempt == 49:
                    raise
                self.c["connect_retries"] += 1
                await asyncio.sleep(0.05)
            except BaseException:
                sock.close()
                raise
        self.cid += 1
        self.c["conns"] += 1
        return r, w, self.cid

    async def read_http(self, r: asyncio.StreamReader, cid: int, seq: int, size: int) -> None:
        try:
            head = await asyncio.wait_for(r.readuntil(b"\r\n\r\n"), OP_TIMEOUT)
        except asyncio.TimeoutError:
            raise ClientError(f"reply {cid}/{seq} lost: none within {OP_TIMEOUT:g} s") from None
        lines = head[:-4].split(b"\r\n")
        if lines[0] != b"HTTP/1.1 200 OK":
            raise ClientError(f"status {lines[0]!r} for {cid}/{seq}")
        length = -1
        for line in lines[1:]:
            key, _, value = line.partition(b":")
            if key.strip().lower() == b"content-length":
                length = int(value)
        body = await asyncio.wait_for(r.readexactly(length), OP_TIMEOUT)
        want = http_body(b"%d/%d" % (cid, seq), size)
        if body != want:
            raise ClientError(f"body of {cid}/{seq}: {body[:40]!r}... want {want[:40]!r}...")
        self.c["ok"] += 1
        self.c["http"] += 1

    async def read_echo(self, r: asyncio.StreamReader, msg: bytes, cid: int) -> None:
        try:
            got = await asyncio.wait_for(r.readexactly(len(msg)), OP_TIMEOUT)
        except asyncio.TimeoutError:
            raise ClientError(f"echo on {cid} lost: none within {OP_TIMEOUT:g} s") from None
        if got != msg:
            raise ClientError(f"echo on {cid}: {len(msg)} bytes differ from those sent")
        self.c["ok"] += 1
        self.c["echo"] += 1

    def echo_msg(self, cid: int, seq: int, size: int) -> bytes:
        return b"%d:%d:" % (cid, seq) + self.rng.randbytes(size)

    async def exchange(self, kind: str, r: Any, w: Any, cid: int, n: int, pipelined: bool,
                       close_last: bool = False, eof_after_send: bool = False) -> None:
        """n requests (or echo messages) on one connection, all sent at once if pipelined."""
        todo: List[Any] = []
        for seq in range(1, n + 1):
            if kind == "http":
                size = self.rng.choice((0, 10, 200, 1000, 4000, 8000))
                last = close_last and seq == n
                todo.append((http_request(cid, seq, size, last), seq, size))
            else:
                msg = self.echo_msg(cid, seq, self.rng.choice((1, 16, 100, 1500, 8000)))
                todo.append((msg, seq, msg))
        batches = [todo] if pipelined else [[t] for t in todo]
        for batch in batches:
            w.write(b"".join(t[0] for t in batch))
            if eof_after_send and batch is batches[-1]:
                w.write_eof()
            for _, seq, extra in batch:
                if kind == "http":
                    await self.read_http(r, cid, seq, extra)
                else:
                    await self.read_echo(r, extra, cid)

    async def expect_eof(self, r: asyncio.StreamReader, cid: int) -> None:
        rest = await asyncio.wait_for(r.read(), OP_TIMEOUT)
        if rest:
            raise ClientError(f"{len(rest)} bytes after the last reply on {cid}, EOF expected")

    async def scenario(self, name: str) -> None:
        kind = self.rng.choice(("http", "echo"))
        if name in ("server_close", "slow_http"):
            kind = "http"
        if name == "slow_echo":
            kind = "echo"
        r, w, cid = await self.open(kind, 8192 if name.startswith("slow") else 0)
        try:
            n = self.rng.randint(1, 6)
            if name == "plain":
                await self.exchange(kind, r, w, cid, n, self.rng.random() < 0.3)
            elif name == "server_close":
                await self.exchange(kind, r, w, cid, n, self.rng.random() < 0.5, close_last=True)
                await self.expect_eof(r, cid)
                self.c["server_closes"] += 1
            elif name == "halfclose":
                await self.exchange(kind, r, w, cid, n, True, eof_after_send=True)
                await self.expect_eof(r, cid)
                self.c["halfcloses"] += 1
            elif name == "reset":
                await self.reset(kind, r, w, cid, n)
                return
            elif name == "slow_http":
                await self.slow_http(r, w, cid)
            elif name == "slow_echo":
                await self.slow_echo(r, w, cid)
            w.close()
            await w.wait_closed()
        except (ClientError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
            self.fail(f"{name}/{kind} connection {cid}: {e!r}")
            w.transport.abort()

    async def reset(self, kind: str, r: Any, w: Any, cid: int, n: int) -> None:
        """Some requests, some of their replies read, then close with SO_LINGER 0: a RST."""
        read = self.rng.randint(0, n)
        await self.exchange(kind, r, w, cid, read, True)
        for seq in range(read + 1, n + 1):
            if kind == "http":
                w.write(http_request(cid, seq, 4000))
            else:
                w.write(self.echo_msg(cid, seq, 4000))
        if self.rng.random() < 0.5:
            await asyncio.sleep(0.001)
        sock = w.get_extra_info("socket")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        w.transport.abort()
        self.c["resets"] += 1

    async def slow_http(self, r: Any, w: Any, cid: int) -> None:
        """200 requests for 32 KiB bodies at once (6.3 MiB of replies: more than the server's
        send buffer takes), nothing read for 0.5 s, then read slowly."""
        n, size = 200, 32768
        w.write(b"".join(http_request(cid, seq, size) for seq in range(1, n + 1)))
        await asyncio.sleep(0.5)
        for seq in range(1, n + 1):
            await self.read_http(r, cid, seq, size)
            if seq % 3 == 0:
                await asyncio.sleep(0.004)
        self.c["slow"] += 1

    async def slow_echo(self, r: Any, w: Any, cid: int) -> None:
        """6 MiB sent in 32 KiB messages (more than the server's send buffer takes:
        net.ipv4.tcp_wmem's largest, 4 MiB by default), nothing read until the sender is done
        or has been held up for 2 s and 0.5 s more (time for the server, however slow, to fill
        its buffers), then the echo read back slowly."""
        msgs = [self.echo_msg(cid, seq, 32768) for seq in range(192)]

        async def send() -> None:
            for m in msgs:
                w.write(m)
                await asyncio.wait_for(w.drain(), OP_TIMEOUT)

        sender = asyncio.ensure_future(send())
        try:
            await asyncio.wait([sender], timeout=2.0)
            await asyncio.sleep(0.5)
            for m in msgs:
                await self.read_echo(r, m, cid)
                await asyncio.sleep(0.002)
            await sender
        finally:
            sender.cancel()
        self.c["slow"] += 1

    async def churner(self) -> None:
        names = ["plain", "server_close", "halfclose", "reset"]
        weights = [60, 10, 15, 15]
        while time.monotonic() < self.end:
            await self.scenario(self.rng.choices(names, weights)[0])

    async def slow_reader(self) -> None:
        while time.monotonic() < self.end:
            await self.scenario(self.rng.choice(("slow_http", "slow_echo")))
            await asyncio.sleep(0.5)

    async def idle(self, gate: asyncio.Semaphore, leave: asyncio.Event, i: int) -> None:
        """One connection held open the whole run: a reply when opened and one when left."""
        kind = "http" if i % 2 else "echo"
        async with gate:
            try:
                r, w, cid = await self.open(kind)
                await self.exchange(kind, r, w, cid, 1, False)
            except (ClientError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
                self.fail(f"idle connection {i}: {e!r}")
                return
        self.c["idle"] += 1
        self.c["idle_peak"] = max(self.c["idle_peak"], self.c["idle"])
        await leave.wait()
        async with gate:
            try:
                await self.exchange(kind, r, w, cid, 1, False)
                w.close()
                await w.wait_closed()
            except (ClientError, OSError, asyncio.TimeoutError, asyncio.IncompleteReadError) as e:
                self.fail(f"idle connection {i} at the end: {e!r}")
                w.transport.abort()
        self.c["idle"] -= 1

    def report(self, final: bool = False) -> None:
        print(json.dumps(dict(self.c, final=final)), flush=True)

    async def reporter(self) -> None:
        while True:
            await asyncio.sleep(self.args.interval / 2)
            self.report()

    async def run(self) -> int:
        gate = asyncio.Semaphore(64)
        leave = asyncio.Event()
        idle = [asyncio.ensure_future(self.idle(gate, leave, i)) for i in range(self.args.idle)]
        rep = asyncio.ensure_future(self.reporter())
        work = [self.churner() for _ in range(self.args.churners)] + [self.slow_reader()]
        await asyncio.gather(*work)
        leave.set()
        await asyncio.gather(*idle)
        rep.cancel()
        self.report(final=True)
        return 1 if self.c["errors"] else 0


def client_main(args: argparse.Namespace) -> int:
    pin(args.client_cpu)
    raise_fd_limit(args.idle + 1024)
    return asyncio.run(Clients(args).run())


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--loop", choices=("evloop", "asyncio", "uvloop"), default="evloop")
    p.add_argument("--duration", type=float, default=float(os.environ.get("SOAK_DURATION", 110)),
                   help="s of client load (default $SOAK_DURATION or 110)")
    p.add_argument("--interval", type=float, default=0,
                   help="s between rows (default: 10 up to 5 min, 30 up to 15 min, else 60)")
    p.add_argument("--idle", type=int, default=2000, help="idle connections held open")
    p.add_argument("--churners", type=int, default=16, help="concurrent churning clients")
    p.add_argument("--warmup", type=float, default=0,
                   help="s of load before RSS is judged (default: a third of the duration)")
    p.add_argument("--rss-limit", type=float, default=20.0,
                   help="%%/h of projected RSS growth after warm-up that fails (default 20)")
    p.add_argument("--rss-floor", type=float, default=1.0,
                   help="MiB the median of the second half of the samples after warm-up must"
                   " rise above the first half's for growth to fail, when malloc's bytes in"
                   " use or Python's blocks rose too (default 1)")
    p.add_argument("--rss-frag-floor", type=float, default=6.0,
                   help="the same when neither rose: fragmentation or a high-water mark"
                   " (default 6)")
    p.add_argument("--server-cpu", type=int, default=None)
    p.add_argument("--client-cpu", type=int, default=None)
    p.add_argument("--role", choices=("server", "client"), default="server",
                   help=argparse.SUPPRESS)
    p.add_argument("--http-port", type=int, help=argparse.SUPPRESS)
    p.add_argument("--echo-port", type=int, help=argparse.SUPPRESS)
    args = p.parse_args()
    if not args.interval:
        args.interval = 10.0 if args.duration <= 300 else 30.0 if args.duration <= 900 else 60.0
    if not args.warmup:
        args.warmup = args.duration / 3
    if args.role == "client":
        return client_main(args)
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        if args.server_cpu is None:
            args.server_cpu = cpus[-1]
        if args.client_cpu is None:
            args.client_cpu = cpus[0]
    pin(args.server_cpu)
    limit = raise_fd_limit(args.idle + 1024)
    if limit < args.idle + 512:
        print(f"aio_soak: fd limit {limit}: --idle lowered to {limit - 512}", file=sys.stderr)
        args.idle = max(0, limit - 512)
    loop = make_loop(args.loop)
    try:
        return loop.run_until_complete(serve(args))
    finally:
        loop.run_until_complete(loop.shutdown_asyncgens())
        loop.close()


if __name__ == "__main__":
    sys.exit(main())
