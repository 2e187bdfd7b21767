"""What the sock_* methods and the fd registry cost per call on each loop, in one process (no
client process, so the figure is the loop's and the kernel's, not a client's): a socketpair
with one task echoing through loop.sock_recv / loop.sock_sendall and the other sending and
receiving 1 KiB N times (the round trip), then M add_reader + remove_reader pairs on one fd.

    python bindings/python/measure/sock_costs.py [--loops evloop,uvloop,asyncio] [--rounds 2]
        [-n 20000] [-m 100000]

Rounds interleave the loops. Needs the evloop package (evloop.bench.aio.run_on makes each
loop) and uvloop for its row. Prints one line per loop and round.
"""

from __future__ import annotations

import argparse
import asyncio
import socket
import time
from typing import Any, Callable

from evloop.bench import aio as aio_bench


def costs(n: int, m: int) -> Callable[[], Any]:
    async def main() -> tuple:
        loop = asyncio.get_running_loop()
        a, b = socket.socketpair()
        a.setblocking(False)
        b.setblocking(False)
        try:
            async def echo() -> None:  # until EOF: a message may come in pieces
                while data := await loop.sock_recv(b, 65536):
                    await loop.sock_sendall(b, data)

            t = loop.create_task(echo())
            msg = b"x" * 1024
            t0 = time.perf_counter()
            for _ in range(n):
                await loop.sock_sendall(a, msg)
                got = 0
                while got < len(msg):
                    got += len(await loop.sock_recv(a, 65536))
            rt = (time.perf_counter() - t0) / n
            a.shutdown(socket.SHUT_WR)
            await t

            def cb() -> None:
                pass

            fd = a.fileno()
            t0 = time.perf_counter()
            for _ in range(m):
                loop.add_reader(fd, cb)
                loop.remove_reader(fd)
            pair = (time.perf_counter() - t0) / m
            return rt, pair
        finally:
            a.close()
            b.close()

    return main


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", default="evloop,uvloop,asyncio")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("-n", type=int, default=20000, help="1 KiB round trips")
    ap.add_argument("-m", type=int, default=100000, help="add_reader + remove_reader pairs")
    args = ap.parse_args()
    for r in range(args.rounds):
        for name in args.loops.split(","):
            rt, pair = aio_bench.run_on(name, costs(args.n, args.m))
            print(f"round {r + 1} {name:8s} sock round trip {rt * 1e6:7.2f} us   "
                  f"add_reader + remove_reader {pair * 1e9:6.0f} ns", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
