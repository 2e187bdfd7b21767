"""The asyncio loop's own costs (issue 30): an iteration, a timer, a task hand-over, a
connection, on each loop, each run in a fresh process.

    python bindings/python/measure/loop_costs.py rounds WORK N [--rounds 5] [--loops uvloop,evloop]
    python bindings/python/measure/loop_costs.py callgrind WORK N1 N2 [--loops uvloop,evloop]
    python bindings/python/measure/loop_costs.py run LOOP WORK N

WORK: ``chain`` (N call_soon, each callback scheduling the next: one handle per iteration;
ns per iteration), ``timers`` (N call_later spread over 0-1 ms, timed until the last fired;
ns per timer), ``queue`` (two tasks handing N values through asyncio.Queue(1); ns per
hand-over), ``http`` (a protocol server answering each request and closing, under
``wrk -t1 -c100 -dNs -H 'Connection: close'``; req/s, and the server's CPU ns per request:
all of it, in user space, in the kernel),
``httpsrv`` (the same server for N connections from a client process of 8 threads of
blocking sockets: ns per connection, for callgrind).

LOOP: stock, uvloop, rloop, evloop, or ``evloop@DIR``: the evloop package found in DIR (a
copy of an earlier build, for a before/after in one run). ``rounds`` interleaves the loops
and prints medians (min-max); ``callgrind`` prints user-space instructions per operation,
(Ir at N2 - Ir at N1) / (N2 - N1), which leaves the kernel out.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Tuple


def new_loop(name: str) -> asyncio.AbstractEventLoop:
    if name == "stock":
        return asyncio.new_event_loop()
    if name == "uvloop":
        import uvloop
        return uvloop.new_event_loop()
    if name == "rloop":
        import rloop
        return rloop.new_event_loop()
    import evloop
    return evloop.new_event_loop()


async def chain(n: int) -> float:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    left = [n]

    def cb() -> None:
        left[0] -= 1
        if left[0]:
            loop.call_soon(cb)
        else:
            done.set_result(None)

    t0 = time.perf_counter()
    loop.call_soon(cb)
    await done
    return (time.perf_counter() - t0) / n * 1e9


async def timers(n: int) -> float:
    loop = asyncio.get_running_loop()
    done = loop.create_future()
    left = [n]

    def cb() -> None:
        left[0] -= 1
        if left[0] == 0:
            done.set_result(None)

    t0 = time.perf_counter()
    for i in range(n):
        loop.call_later((i * 7919 % 1000) / 1e6, cb)
    await done
    return (time.perf_counter() - t0) / n * 1e9


async def queue(n: int) -> float:
    q: asyncio.Queue = asyncio.Queue(1)

    async def producer() -> None:
        put = q.put
        for i in range(n):
            await put(i)

    async def consumer() -> None:
        get = q.get
        for _ in range(n):
            await get()

    t0 = time.perf_counter()
    await asyncio.gather(producer(), consumer())
    return (time.perf_counter() - t0) / n * 1e9


RESPONSE = (b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 12\r\n"
            b"Connection: close\r\n\r\nHello World!")


class Hello(asyncio.Protocol):
    """Answers the first complete request and closes: a connection per request."""
    left = -1
    done: Any = None

    def connection_made(self, tr: Any) -> None:
        self.tr = tr
        self.buf = b""

    def data_received(self, data: bytes) -> None:
        self.buf += data
        if b"\r\n\r\n" in self.buf:
            self.tr.write(RESPONSE)
            self.tr.close()

    def connection_lost(self, exc: Any) -> None:
        Hello.left -= 1
        if Hello.left == 0:
            Hello.done.set_result(None)


async def http(seconds: int) -> Tuple[float, float, float, float]:
    loop = asyncio.get_running_loop()
    srv = await loop.create_server(Hello, "127.0.0.1", 0, backlog=1024)
    port = srv.sockets[0].getsockname()[1]
    cmd = ["wrk", "-t1", "-c100", f"-d{seconds}s", "-H", "Connection: close",
           f"http://127.0.0.1:{port}/"]
    r0 = resource.getrusage(resource.RUSAGE_SELF)
    proc = await asyncio.create_subprocess_exec(*cmd, stdout=asyncio.subprocess.PIPE)
    out, _ = await proc.communicate()
    r1 = resource.getrusage(resource.RUSAGE_SELF)
    user, kernel = r1.ru_utime - r0.ru_utime, r1.ru_stime - r0.ru_stime
    srv.close()
    await srv.wait_closed()
    rate = count = None
    for line in out.decode().splitlines():
        w = line.split()
        if line.strip().startswith("Requests/sec:"):
            rate = float(w[1])
        elif len(w) > 2 and w[1] == "requests" and w[2] == "in":
            count = int(w[0])
        elif "Non-2xx" in line:
            raise RuntimeError("wrk: " + line.strip())
    if rate is None or not count:
        raise RuntimeError("wrk printed no rate:\n" + out.decode())
    return rate, (user + kernel) / count * 1e9, user / count * 1e9, kernel / count * 1e9


CLIENT = r"""
import socket, sys, threading
port, n, par = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
req = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
def one(k):
    for _ in range(k):
        s = socket.create_connection(("127.0.0.1", port))
        s.sendall(req)
        while s.recv(4096):
            pass
        s.close()
ts = [threading.Thread(target=one, args=(n // par,)) for _ in range(par)]
[t.start() for t in ts]
[t.join() for t in ts]
"""


async def httpsrv(n: int) -> float:
    loop = asyncio.get_running_loop()
    Hello.left = n - n % 8
    Hello.done = loop.create_future()
    srv = await loop.create_server(Hello, "127.0.0.1", 0, backlog=1024)
    port = srv.sockets[0].getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-S", "-c", CLIENT, str(port), str(n), "8"])
    t0 = time.perf_counter()
    await Hello.done
    dt = time.perf_counter() - t0
    proc.wait()
    srv.close()
    await srv.wait_closed()
    return dt / n * 1e9


WORKS = {"chain": chain, "timers": timers, "queue": queue, "http": http, "httpsrv": httpsrv}


def run(loop_name: str, work: str, n: int) -> None:
    loop = new_loop(loop_name)
    try:
        r = loop.run_until_complete(WORKS[work](n))
    finally:
        loop.close()
    print(" ".join(f"{x:.1f}" for x in (r if isinstance(r, tuple) else (r,))))


def command(loop: str, work: str, n: int) -> Tuple[List[str], Dict[str, str]]:
    env = dict(os.environ)
    name, _, where = loop.partition("@")
    if where:
        env["PYTHONPATH"] = where
    return [sys.executable, os.path.abspath(__file__), "run", name, work, str(n)], env


def rounds(work: str, n: int, loops: List[str], count: int) -> None:
    res: Dict[str, List[List[float]]] = {lp: [] for lp in loops}
    for _ in range(count):
        for lp in loops:
            cmd, env = command(lp, work, n)
            out = subprocess.run(cmd, env=env, capture_output=True, text=True, cwd="/")
            if out.returncode:
                print(f"{lp}: failed\n{out.stderr[-2000:]}", file=sys.stderr)
                continue
            res[lp].append([float(x) for x in out.stdout.split()])
    for lp in loops:
        if not res[lp]:
            continue
        cols = list(zip(*res[lp]))
        parts = [f"{statistics.median(c):,.0f} ({min(c):,.0f}-{max(c):,.0f})" for c in cols]
        print(f"{work} {lp}: " + "  ".join(parts) + f"  [{len(cols[0])} rounds]")
    if "uvloop" in res and res["uvloop"]:
        base = statistics.median(r[0] for r in res["uvloop"])
        print("  vs uvloop: " + "  ".join(
            f"{lp} {statistics.median(r[0] for r in res[lp]) / base:.2f}x"
            for lp in loops if res[lp]))


def instructions(loop: str, work: str, n: int) -> int:
    cmd, env = command(loop, work, n)
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "cg.out")
        subprocess.run(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}"] + cmd,
                       env=env, capture_output=True, check=True, cwd="/")
        for line in open(out):
            if line.startswith(("totals:", "summary:")):
                total = int(line.split()[1])
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("loop")
    r.add_argument("work", choices=WORKS)
    r.add_argument("n", type=int)
    ro = sub.add_parser("rounds")
    ro.add_argument("work", choices=WORKS)
    ro.add_argument("n", type=int)
    ro.add_argument("--rounds", type=int, default=5)
    ro.add_argument("--loops", default="uvloop,evloop")
    cg = sub.add_parser("callgrind")
    cg.add_argument("work", choices=WORKS)
    cg.add_argument("n1", type=int)
    cg.add_argument("n2", type=int)
    cg.add_argument("--loops", default="uvloop,evloop")
    a = ap.parse_args()
    if a.cmd == "run":
        run(a.loop, a.work, a.n)
    elif a.cmd == "rounds":
        rounds(a.work, a.n, a.loops.split(","), a.rounds)
    else:
        for lp in a.loops.split(","):
            i1, i2 = instructions(lp, a.work, a.n1), instructions(lp, a.work, a.n2)
            print(f"{a.work} {lp}: {(i2 - i1) / (a.n2 - a.n1):,.0f} Ir per operation")


if __name__ == "__main__":
    main()
