"""User-space instructions per message of an asyncio echo server (1 KiB, 10 clients; protocol,
streams, sock or datagram mode, as evloop.bench.aio's echo families), counted by valgrind's
callgrind: the count does not drift with the machine's load as times do. The server runs
under callgrind twice, for FEW and MANY round trips per client; (Ir(MANY) - Ir(FEW)) /
(10 * (MANY - FEW)) is the cost of one message echoed, with start-up and shutdown cancelled
out. The clients are a separate process, not counted.

    python bindings/python/measure/echo_instructions.py [--loops evloop,uvloop,asyncio]
        [--mode protocol] [--few 200 --many 600]

Needs valgrind, the evloop package (its echo server, evloop.bench.aio.start_echo_server, runs
for every loop), and uvloop for its row. Prints one line per loop.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import subprocess
import sys
import tempfile
import threading
import time

SERVER = r"""
import asyncio, sys
name, port_file, mode = sys.argv[1], sys.argv[2], sys.argv[3]
if name == "evloop":
    import evloop
    loop = evloop.new_event_loop()
elif name == "uvloop":
    import uvloop
    loop = uvloop.new_event_loop()
else:
    loop = asyncio.new_event_loop()
from evloop.bench.aio import start_echo_server
done = loop.create_future()
closed = [0]

def one_closed():
    closed[0] += 1
    if closed[0] == 10 and not done.done():
        done.set_result(None)

async def main():
    port, stop = await start_echo_server(mode, one_closed)
    with open(port_file, "w") as f:
        f.write(str(port))
    await done
    await stop()

loop.run_until_complete(main())
loop.close()
"""

CLIENTS = 10
SIZE = 1024


def clients(port: int, rounds: int, mode: str) -> None:
    msg = b"x" * SIZE
    errors: list = []

    def one() -> None:
        try:
            exchange_datagrams() if mode == "datagram" else exchange()
        except Exception as e:  # noqa: BLE001 -- reported after the join
            errors.append(e)

    def exchange_datagrams() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect(("127.0.0.1", port))
            s.settimeout(60)  # the server runs under callgrind; loopback loses nothing
            for _ in range(rounds):
                s.send(msg)
                if len(s.recv(65536)) != SIZE:
                    raise RuntimeError("a datagram came back cut")
            s.send(b"")  # this client is done

    def exchange() -> None:
        with socket.create_connection(("127.0.0.1", port)) as s:
            s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            for _ in range(rounds):
                s.sendall(msg)
                got = 0
                while got < SIZE:
                    chunk = s.recv(65536)
                    if not chunk:
                        raise RuntimeError("the server closed the connection")
                    got += len(chunk)

    ts = [threading.Thread(target=one) for _ in range(CLIENTS)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(f"{len(errors)} of {CLIENTS} clients failed: {errors[0]!r}")


def instructions(name: str, rounds: int, tmp: str, mode: str) -> int:
    port_file = os.path.join(tmp, f"port.{name}.{rounds}")
    out = os.path.join(tmp, f"callgrind.{name}.{rounds}")
    script = os.path.join(tmp, "server.py")
    with open(script, "w") as f:
        f.write(SERVER)
    if os.path.exists(port_file):
        os.unlink(port_file)  # a loop named twice: never a port from its last run
    proc = subprocess.Popen(["valgrind", "--tool=callgrind", f"--callgrind-out-file={out}",
                             sys.executable, script, name, port_file, mode],
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (os.path.exists(port_file) and os.path.getsize(port_file)):
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise RuntimeError(f"{name}: the server did not start: {proc.stderr.read()}")
        time.sleep(0.1)
    try:
        with open(port_file) as f:
            clients(int(f.read()), rounds, mode)
    except BaseException:
        proc.kill()
        proc.wait()
        raise
    _, err = proc.communicate(timeout=300)
    if proc.returncode != 0:
        raise RuntimeError(f"{name}: the server failed ({proc.returncode}): {err[-2000:]}")
    m = re.search(r"I\s+refs:\s+([\d,]+)", err)
    if not m:
        raise RuntimeError(f"{name}: no instruction count in callgrind's output")
    return int(m.group(1).replace(",", ""))


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loops", default="evloop,uvloop,asyncio")
    ap.add_argument("--mode", default="protocol",
                    choices=("protocol", "streams", "sock", "datagram"))
    ap.add_argument("--few", type=int, default=200, help="round trips per client, first run")
    ap.add_argument("--many", type=int, default=600, help="round trips per client, second run")
    args = ap.parse_args()
    if args.many <= args.few or args.few < 1:
        ap.error("need 1 <= --few < --many")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.loops.split(","):
            few = instructions(name, args.few, tmp, args.mode)
            many = instructions(name, args.many, tmp, args.mode)
            per = (many - few) / (CLIENTS * (args.many - args.few))
            print(f"{name:8} {per:8.0f} instructions per message "
                  f"({few:,} and {many:,} in all)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
