"""Benchmarks of evloop's asyncio loop beside the stock loop and uvloop:
``python -m evloop.bench.tournament --asyncio`` (or ``python -m evloop.bench.aio``).

Families (each a per-operation time, lower is better, except the echo and where said):

- ``call_soon``: 200,000 ``call_soon`` of a callback that counts, ns per call until all ran;
- ``iteration``: a callback that ``call_soon``-s itself 100,000 times, one handle per loop
  iteration: ns per iteration (the poll with a zero timeout that each iteration makes
  included);
- ``timers``: 50,000 ``call_later`` with delays spread over 0-10 ms, ns per timer until all
  fired (the loop's clock included);
- ``threadsafe-busy-T`` (T = 1, 4, 16 threads): each thread makes ``call_soon_threadsafe``
  calls while the loop is busy with a ``call_soon`` chain; ns per call, until all ran;
- ``threadsafe-sleeping``: the loop sleeps; another thread calls ``call_soon_threadsafe``
  and waits for the callback to set a ``threading.Event``: the round trip, p50 in us;
- ``executor``: ``await loop.run_in_executor(None, f)`` in sequence, us per round trip;
  ``executor-batch100``: gathered batches of 100 such calls, us per call;
  ``executor-burst``: one gather of 10,000 such calls, us per call;
- ``echo-{protocol,streams,sock}-1KiB``: a server on the loop under test echoes 1 KiB
  messages to 10 clients (one client process, separate from the server, a thread per
  client, each waiting for its echo before sending again); messages per second;
  ``echo-{protocol,streams}-{1B,10KiB,100KiB}``: the same at other message sizes;
  ``echo-datagram-1KiB``: the same over UDP (a ``DatagramProtocol`` server; each client a
  connected UDP socket that resends after a second without its echo);
- ``http-hello``: a minimal keep-alive HTTP/1.1 server (an ``asyncio.Protocol`` that answers
  every request with a fixed 12-byte body) on the loop under test, driven by
  ``wrk -t1 -c50 -d2s`` in its own process; requests per second. The loop's thread is pinned
  to the first CPU this process may use and wrk to another when taskset is installed (on one
  CPU, or without taskset, they share). A run
  in which wrk counts a socket error or a non-2xx reply fails the family (an error, never a
  figure). Left out when wrk is not installed.
- ``http-aiohttp``: the same under wrk, with aiohttp's own server (``aiohttp.web``, one GET
  route answering the same body, access log off) in place of the protocol: the loop under a
  real framework's parser, routing and response objects. Left out when wrk or aiohttp is not
  installed.

``--loops`` also takes ``evloop-stdtransport``: evloop's loop with the stdlib's own socket
and datagram transports in place of its native ones (src/aio/transport.cpp,
src/aio/datagram.cpp), for a before/after in one run.

Rounds interleave the loops (the order rotates each round); the report gives the median
of the rounds with its spread and, for evloop, the ratio to uvloop and to asyncio with their
absolute figures beside it.

``--clock cpu`` measures the CPU time of the benchmark's process (all its threads:
``time.process_time``) instead of the wall clock, for a machine shared with other work, where
the wall clock also counts the time the loop waited for a CPU: then ``call_soon``, ``timers``,
``threadsafe-busy-T`` and the ``executor`` families are CPU time per operation, and the echo
families the server process's CPU time per message (lower is better); ``threadsafe-sleeping``
stays a wall clock round trip.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import shutil
import socket
import statistics
import subprocess
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Tuple

LOOPS = ("evloop", "uvloop", "asyncio", "rloop")  # those installed run (rloop: a third peer)

# Messages the last echo run exchanged (for tools that count per message themselves).
last_echo_count = 0

# The clock of the per-operation families: time.perf_counter, or time.process_time for
# --clock cpu.
_clock: Callable[[], float] = time.perf_counter


def loop_factory(name: str) -> Callable[[], asyncio.AbstractEventLoop]:
    if name == "evloop":
        import evloop

        return evloop.new_event_loop
    if name == "evloop-stdtransport":  # for A/B runs: evloop with the stdlib's socket transport
        import evloop

        class StdTransportLoop(evloop.EventLoop):
            _make_socket_transport = asyncio.SelectorEventLoop._make_socket_transport
            _make_datagram_transport = asyncio.SelectorEventLoop._make_datagram_transport

        return StdTransportLoop
    if name == "uvloop":
        import uvloop

        return uvloop.new_event_loop
    if name == "rloop":
        import rloop

        return rloop.new_event_loop
    return asyncio.SelectorEventLoop


def run_on(name: str, coro_fn: Callable[[], Any]) -> Any:
    loop = loop_factory(name)()
    try:
        asyncio.set_event_loop(loop)
        return loop.run_until_complete(coro_fn())
    finally:
        asyncio.set_event_loop(None)
        loop.close()


# ------------------------------------------------------------------------- families

async def b_call_soon(n: int = 200_000) -> float:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    left = [n]

    def cb() -> None:
        left[0] -= 1
        if left[0] == 0:
            done.set_result(None)

    t0 = _clock()
    for _ in range(n):
        loop.call_soon(cb)
    await done
    return (_clock() - t0) / n * 1e9


async def b_iteration(n: int = 100_000) -> float:
    """A callback that schedules itself with call_soon: one handle per loop iteration, so
    each iteration's own cost (the poll with a zero timeout included) is what is timed."""
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    left = [n]

    def cb() -> None:
        left[0] -= 1
        if left[0]:
            loop.call_soon(cb)
        else:
            done.set_result(None)

    t0 = _clock()
    loop.call_soon(cb)
    await done
    return (_clock() - t0) / n * 1e9


async def b_timers(n: int = 50_000) -> float:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    left = [n]

    def cb() -> None:
        left[0] -= 1
        if left[0] == 0:
            done.set_result(None)

    t0 = _clock()
    for i in range(n):
        loop.call_later((i * 7919 % 1000) / 100_000, cb)  # 0..10 ms, scattered
    await done
    return (_clock() - t0) / n * 1e9


async def b_threadsafe_busy(threads: int, total: int = 200_000) -> float:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    per = total // threads
    left = [per * threads]
    busy = [True]

    def cb() -> None:
        left[0] -= 1
        if left[0] == 0:
            busy[0] = False
            done.set_result(None)

    def spin() -> None:  # keeps the loop awake: a call_soon chain
        if busy[0]:
            loop.call_soon(spin)

    start = threading.Barrier(threads + 1)

    def producer() -> None:
        cst = loop.call_soon_threadsafe
        start.wait()
        for _ in range(per):
            cst(cb)

    ts = [threading.Thread(target=producer) for _ in range(threads)]
    for t in ts:
        t.start()
    loop.call_soon(spin)
    await asyncio.sleep(0)
    t0 = _clock()
    start.wait()
    await done
    dt = _clock() - t0
    for t in ts:
        t.join()
    return dt / (per * threads) * 1e9


async def b_thread_beside_busy(seconds: float = 0.5) -> float:
    """The progress of a pure-Python thread (counts per second, in millions) while the loop
    runs a call_soon chain that never waits: how the loop shares the GIL with the threads
    of its program. Always wall time: the share of the interpreter is the figure."""
    loop = asyncio.get_running_loop()
    busy = [True]
    count = [0]

    def spin() -> None:
        if busy[0]:
            loop.call_soon(spin)

    def counter() -> None:
        end = time.perf_counter() + seconds
        n = 0
        while True:
            n += 1
            if not n & 1023 and time.perf_counter() >= end:
                break
        count[0] = n

    loop.call_soon(spin)
    await asyncio.sleep(0)
    t = threading.Thread(target=counter)
    t0 = time.perf_counter()
    t.start()
    while t.is_alive():
        await asyncio.sleep(0.01)
    dt = time.perf_counter() - t0
    busy[0] = False
    t.join()
    return count[0] / dt / 1e6


async def b_threadsafe_sleeping(n: int = 2000) -> float:
    loop = asyncio.get_running_loop()
    ev = threading.Event()
    samples: List[float] = []

    def client() -> None:
        for _ in range(n):
            time.sleep(0.0002)  # let the loop fall asleep
            ev.clear()
            t0 = time.perf_counter()
            loop.call_soon_threadsafe(ev.set)
            ev.wait()
            samples.append(time.perf_counter() - t0)

    await loop.run_in_executor(None, client)
    return statistics.median(samples) * 1e6


async def b_executor(n: int = 3000) -> float:
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, int)  # the pool's threads start outside the timing
    t0 = _clock()
    for _ in range(n):
        await loop.run_in_executor(None, int)
    return (_clock() - t0) / n * 1e6


async def b_executor_gather(batch: int, total: int = 10_000) -> float:
    """total no-op calls of the default executor, gathered batch at a time."""
    loop = asyncio.get_running_loop()
    await loop.run_in_executor(None, int)  # the pool's threads start outside the timing
    t0 = _clock()
    for _ in range(total // batch):
        await asyncio.gather(*[loop.run_in_executor(None, int) for _ in range(batch)])
    return (_clock() - t0) / total * 1e6


async def b_queue_handover(n: int = 50_000) -> float:
    """Two tasks handing n values through asyncio.Queue(1): each put waits for the get before,
    so every hand-over is a task switch each way through call_soon and an iteration."""
    q: asyncio.Queue = asyncio.Queue(1)

    async def consumer() -> None:
        for _ in range(n):
            await q.get()

    task = asyncio.ensure_future(consumer())
    t0 = _clock()
    for i in range(n):
        await q.put(i)
    await task
    return (_clock() - t0) / n * 1e9


async def b_gather_sleep0(tasks: int = 1000, steps: int = 20) -> float:
    """A gather of many tasks, each awaiting sleep(0) steps times: the cost of one task step
    (Task.__step scheduled through call_soon, a full ready queue each iteration)."""

    async def worker() -> None:
        for _ in range(steps):
            await asyncio.sleep(0)

    t0 = _clock()
    await asyncio.gather(*(worker() for _ in range(tasks)))
    return (_clock() - t0) / (tasks * steps) * 1e9


async def b_done_futures(n: int = 200_000) -> float:
    """create_future, set_result and an await of the done future, n times in one task: no
    iteration, the future's own path (the loop's create_future included)."""
    loop = asyncio.get_running_loop()
    t0 = _clock()
    for i in range(n):
        fut = loop.create_future()
        fut.set_result(i)
        await fut
    return (_clock() - t0) / n * 1e9


# The echo clients: one process, a thread per client, each sending a message and waiting for
# its echo before the next; argv: port, size, clients, seconds; prints msg/s and the count.
_CLIENT_HEAD = r"""
import socket, sys, threading, time
port, size, clients, seconds = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
msg = b"x" * size
counts = [0] * clients
start = threading.Barrier(clients + 1)
stop = [False]
"""
_CLIENT_MAIN = r"""
ts = [threading.Thread(target=run, args=(i,)) for i in range(clients)]
for t in ts: t.start()
start.wait()
t0 = time.perf_counter(); time.sleep(seconds); stop[0] = True; dt = time.perf_counter() - t0
for t in ts: t.join()
print(sum(counts) / dt, sum(counts))
"""
ECHO_CLIENT = _CLIENT_HEAD + r"""
def run(i):
    s = socket.create_connection(("127.0.0.1", port))
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    start.wait()
    while not stop[0]:
        s.sendall(msg)
        got = 0
        while got < size:
            c = s.recv(size - got)
            if not c:
                return
            got += len(c)
        counts[i] += 1
    s.close()
""" + _CLIENT_MAIN
# Over UDP: a connected socket per client; a datagram without its echo after a second is
# sent again, uncounted; an empty datagram at the end says the client is done.
ECHO_DGRAM_CLIENT = _CLIENT_HEAD + r"""
def run(i):
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.connect(("127.0.0.1", port))
    s.settimeout(1.0)
    start.wait()
    while not stop[0]:
        s.send(msg)
        try:
            got = s.recv(65536)
        except socket.timeout:
            continue
        if len(got) == size:
            counts[i] += 1
    s.send(b"")
    s.close()
""" + _CLIENT_MAIN


async def start_echo_server(mode: str, closed: Optional[Callable[[], None]] = None
                            ) -> Tuple[int, Callable[[], Any]]:
    """An echo server on the running loop, on 127.0.0.1: "protocol" (an asyncio.Protocol
    writing back what it receives), "streams" (start_server, read then write and drain) or
    "sock" (sock_accept, then sock_recv / sock_sendall per connection), or "datagram" (a
    DatagramProtocol on UDP, echoing each datagram to its sender). closed(), when given, is
    called as each connection ends (datagram: as each client sends an empty datagram).
    Returns its port and a coroutine function that stops it (measure/echo_instructions.py runs
    the same server under callgrind)."""
    loop = asyncio.get_running_loop()

    def one_closed() -> None:
        if closed is not None:
            closed()

    if mode == "protocol":
        class Echo(asyncio.Protocol):
            def connection_made(self, tr: Any) -> None:
                self.tr = tr

            def data_received(self, data: bytes) -> None:
                self.tr.write(data)

            def connection_lost(self, exc: Optional[BaseException]) -> None:
                one_closed()

        srv = await loop.create_server(Echo, "127.0.0.1", 0)
    elif mode == "streams":
        async def handle(r: asyncio.StreamReader, w: asyncio.StreamWriter) -> None:
            while True:
                data = await r.read(65536)
                if not data:
                    break
                w.write(data)
                await w.drain()
            w.close()
            one_closed()

        srv = await asyncio.start_server(handle, "127.0.0.1", 0)
    elif mode == "sock":
        lsock = socket.socket()
        lsock.bind(("127.0.0.1", 0))
        lsock.listen(64)
        lsock.setblocking(False)
        conns: List[asyncio.Task] = []

        async def serve(c: socket.socket) -> None:
            with c:
                while True:
                    data = await loop.sock_recv(c, 65536)
                    if not data:
                        break
                    await loop.sock_sendall(c, data)
            one_closed()

        async def acceptor() -> None:
            while True:
                c, _ = await loop.sock_accept(lsock)
                c.setblocking(False)
                conns.append(loop.create_task(serve(c)))

        acc = loop.create_task(acceptor())

        async def stop_sock() -> None:
            acc.cancel()
            for t in conns:
                t.cancel()
            await asyncio.gather(acc, *conns, return_exceptions=True)
            lsock.close()

        return lsock.getsockname()[1], stop_sock
    elif mode == "datagram":
        class DatagramEcho(asyncio.DatagramProtocol):
            def connection_made(self, tr: Any) -> None:
                self.tr = tr

            def datagram_received(self, data: bytes, addr: Any) -> None:
                if data:
                    self.tr.sendto(data, addr)
                else:
                    one_closed()

        dtr, _ = await loop.create_datagram_endpoint(DatagramEcho, local_addr=("127.0.0.1", 0))

        async def stop_datagram() -> None:
            dtr.close()
            await asyncio.sleep(0)

        return dtr.get_extra_info("sockname")[1], stop_datagram
    else:
        raise ValueError(f"unknown echo mode {mode!r}")

    async def stop() -> None:
        srv.close()
        await srv.wait_closed()

    return srv.sockets[0].getsockname()[1], stop


async def b_echo(mode: str, size: int = 1024, clients: int = 10, seconds: float = 1.0) -> float:
    port, stop = await start_echo_server(mode)
    cpu0 = time.process_time()
    client = ECHO_DGRAM_CLIENT if mode == "datagram" else ECHO_CLIENT
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", client, str(port), str(size), str(clients), str(seconds),
        stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    cpu = time.process_time() - cpu0
    await stop()
    rate, count = out.split()
    global last_echo_count
    last_echo_count = int(count)
    if _clock is time.process_time:  # the server's CPU time per message echoed
        return cpu / max(int(count), 1) * 1e9
    return float(rate)


HTTP_RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n\r\n"
                 b"Hello World!")


class _HttpHello(asyncio.Protocol):
    """Answers each request (a GET: no body) as soon as its header block is complete."""

    def connection_made(self, tr: Any) -> None:
        self.tr = tr
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        buf = self.buf + data
        n = buf.count(b"\r\n\r\n")
        if n:
            self.tr.write(HTTP_RESPONSE * n)
            buf = buf[buf.rfind(b"\r\n\r\n") + 4:]
        self.buf = buf


HTTP_CLOSE_RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n"
                       b"Connection: close\r\n\r\nHello World!")


class _HttpHelloClose(asyncio.Protocol):
    """Answers the first request and closes: a connection per request (HTTP/1.0 clients,
    health checks), so accept, transport and protocol set-up and teardown are the work."""

    def connection_made(self, tr: Any) -> None:
        self.tr = tr
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\r\n\r\n" in self.buf:
            self.tr.write(HTTP_CLOSE_RESPONSE)
            self.tr.close()
            self.buf = b""


def parse_wrk(out: str) -> Tuple[float, int]:
    """wrk's requests/s and request count; ValueError on errors or an output it cannot read."""
    errors = []
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("Socket errors:") or line.startswith("Non-2xx or 3xx responses:"):
            errors.append(line)
    if errors:
        raise ValueError("wrk reported errors: " + "; ".join(errors))
    rate = count = None
    for line in out.splitlines():
        words = line.split()
        if line.strip().startswith("Requests/sec:"):
            rate = float(words[1])
        elif len(words) > 2 and words[1] == "requests" and words[2] == "in":
            count = int(words[0])
    if rate is None or count is None:
        raise ValueError("wrk printed no request rate:\n" + out)
    return rate, count


async def _serve_hello() -> Tuple[int, Callable[[], Any]]:
    """The minimal server: its port, and a coroutine function that closes it."""
    srv = await asyncio.get_running_loop().create_server(_HttpHello, "127.0.0.1", 0)

    async def close() -> None:
        srv.close()
        await srv.wait_closed()

    return srv.sockets[0].getsockname()[1], close


async def _serve_hello_close() -> Tuple[int, Callable[[], Any]]:
    """The minimal server answering one request per connection, then closing it."""
    srv = await asyncio.get_running_loop().create_server(_HttpHelloClose, "127.0.0.1", 0,
                                                         backlog=1024)

    async def close() -> None:
        srv.close()
        await srv.wait_closed()

    return srv.sockets[0].getsockname()[1], close


async def _serve_aiohttp() -> Tuple[int, Callable[[], Any]]:
    """aiohttp's server (aiohttp.web, one GET route) answering the same 12-byte body."""
    from aiohttp import web

    async def hello(request: Any) -> Any:
        return web.Response(text="Hello World!")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    return runner.addresses[0][1], runner.cleanup


async def b_http(conns: int = 50, seconds: int = 2,
                 serve: Callable[[], Any] = _serve_hello, close: bool = False) -> float:
    """wrk against the server that serve() starts on the running loop; close: every request
    says "Connection: close", so wrk opens a connection per request."""
    port, close = await serve()
    cpus = sorted(os.sched_getaffinity(0))
    before = os.sched_getaffinity(0)
    os.sched_setaffinity(0, {cpus[0]})  # this thread: the loop's
    wrk = ["wrk", "-t1", f"-c{conns}", f"-d{seconds}s", f"http://127.0.0.1:{port}/"]
    if close:
        wrk[1:1] = ["-H", "Connection: close"]
    if len(cpus) > 1 and shutil.which("taskset"):
        wrk = ["taskset", "-c", str(cpus[1])] + wrk
    try:
        cpu0 = time.process_time()
        proc = await asyncio.create_subprocess_exec(*wrk, stdout=asyncio.subprocess.PIPE)
        out, _ = await proc.communicate()
        cpu = time.process_time() - cpu0
    finally:
        os.sched_setaffinity(0, before)
        await close()
    if proc.returncode != 0:
        raise RuntimeError(f"wrk exited with {proc.returncode}")
    rate, count = parse_wrk(out.decode())
    if _clock is time.process_time:  # the server's CPU time per request
        return cpu / max(count, 1) * 1e9
    return rate


# (name, coroutine factory, unit, higher is better)
FAMILIES: List[Tuple[str, Callable[[], Any], str, bool]] = [
    ("call_soon", b_call_soon, "ns/call", False),
    ("iteration", b_iteration, "ns/iteration", False),
    ("timers", b_timers, "ns/timer", False),
    ("threadsafe-busy-1", lambda: b_threadsafe_busy(1), "ns/call", False),
    ("threadsafe-busy-4", lambda: b_threadsafe_busy(4), "ns/call", False),
    ("threadsafe-busy-16", lambda: b_threadsafe_busy(16), "ns/call", False),
    ("threadsafe-sleeping", b_threadsafe_sleeping, "us p50", False),
    ("thread-beside-busy", b_thread_beside_busy, "M counts/s", True),
    ("executor", b_executor, "us/call", False),
    ("executor-batch100", lambda: b_executor_gather(100), "us/call", False),
    ("executor-burst", lambda: b_executor_gather(10_000), "us/call", False),
    ("queue-handover", b_queue_handover, "ns/hand-over", False),
    ("gather-sleep0", b_gather_sleep0, "ns/task step", False),
    ("done-futures", b_done_futures, "ns/await", False),
    ("echo-protocol-1KiB", lambda: b_echo("protocol"), "msg/s", True),
    ("echo-streams-1KiB", lambda: b_echo("streams"), "msg/s", True),
    ("echo-sock-1KiB", lambda: b_echo("sock"), "msg/s", True),
    ("echo-datagram-1KiB", lambda: b_echo("datagram"), "msg/s", True),
]
# The echo over protocols and streams at other message sizes.
_ECHO_SIZES = (("1B", 1), ("10KiB", 10 * 1024), ("100KiB", 100 * 1024))
FAMILIES += [(f"echo-{mode}-{label}", (lambda m=mode, n=size: b_echo(m, n)), "msg/s", True)
             for mode in ("protocol", "streams") for label, size in _ECHO_SIZES]
if shutil.which("wrk") and hasattr(os, "sched_setaffinity"):
    FAMILIES.append(("http-hello", b_http, "req/s", True))
    FAMILIES.append(("http-close", lambda: b_http(conns=100, serve=_serve_hello_close,
                                                  close=True), "req/s", True))
    if importlib.util.find_spec("aiohttp") is not None:
        FAMILIES.append(("http-aiohttp", lambda: b_http(serve=_serve_aiohttp), "req/s", True))


def _unit(fam: str, unit: str, higher: bool, cpu: bool) -> Tuple[str, bool]:
    """A family's unit and direction under the clock chosen."""
    if not cpu:
        return unit, higher
    if fam.startswith("echo-"):
        return "server CPU ns/msg", False
    if fam.startswith("http-"):
        return "server CPU ns/request", False
    if fam in ("threadsafe-sleeping", "thread-beside-busy"):
        return unit + " (wall)", higher
    return "CPU " + unit, higher


def _fmt(v: float) -> str:
    return f"{v:.0f}" if v >= 100 else f"{v:.2f}"


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m evloop.bench.tournament --asyncio",
                                 description="evloop's asyncio loop beside uvloop and asyncio")
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--filter", default="",
                    help="substring of the family names (several: comma-separated, any)")
    ap.add_argument("--loops", default=",".join(LOOPS))
    ap.add_argument("--out", help="also write the report (markdown) here")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="cpu: this process's CPU time per operation (all threads) instead of "
                         "the wall clock, for a machine shared with other work")
    args, _ = ap.parse_known_args(argv)
    global _clock
    cpu = args.clock == "cpu"
    _clock = time.process_time if cpu else time.perf_counter
    loops = []
    for name in args.loops.split(","):
        try:
            loop_factory(name)
            loops.append(name)
        except ImportError:
            print(f"{name}: not installed, left out (pip install {name})",
                  file=sys.stderr)
    fams = [(f, fn, *_unit(f, u, h, cpu)) for f, fn, u, h in FAMILIES
            if any(x in f for x in args.filter.split(","))]
    peers = [o for o in ("uvloop", "asyncio", "rloop") if o in loops]
    res: Dict[Tuple[str, str], List[float]] = {}
    for r in range(args.rounds):
        for fam, fn, unit, _ in fams:
            order = loops[r % len(loops):] + loops[:r % len(loops)]
            for name in order:
                v = run_on(name, fn)
                res.setdefault((fam, name), []).append(v)
                print(f"round {r + 1}: {fam} {name}: {_fmt(v)} {unit}", flush=True)
    lines = [f"asyncio loops, {args.rounds} interleaved rounds, Python "
             f"{sys.version.split()[0]}, {os.cpu_count()} CPUs, "
             f"{'CPU time of this process' if cpu else 'wall clock'} "
             f"(load average at the end {os.getloadavg()[0]:.1f}); median (± half the "
             f"spread of the rounds, % of the median)", "",
             "| family | unit | " + " | ".join(loops) + " | "
             + " | ".join(f"evloop/{o}" for o in peers) + " |",
             "|---" * (len(loops) + len(peers) + 2) + "|"]
    for fam, _, unit, higher in fams:
        med = {}
        cells = []
        for name in loops:
            vs = res[(fam, name)]
            m = statistics.median(vs)
            med[name] = m
            spread = (max(vs) - min(vs)) / 2 / m * 100 if m else 0.0
            cells.append(f"{_fmt(m)} ±{spread:.0f}%")
        ratios = []
        for other in peers:
            if other in med and "evloop" in med and med[other]:
                ratios.append(f"{med['evloop'] / med[other]:.2f}")
            else:
                ratios.append("-")
        lines.append(f"| {fam} | {unit}{' (higher is better)' if higher else ''} | "
                     + " | ".join(cells) + " | " + " | ".join(ratios) + " |")
    report = "\n".join(lines)
    print("\n" + report)
    if args.out:
        with open(args.out, "w") as f:
            f.write(report + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
