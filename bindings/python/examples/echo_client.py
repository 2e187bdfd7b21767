"""An asyncio client on evloop's event loop: a few connections, each sending messages to the
echo server (echo_server.py) and waiting for each echo; prints the round trips.

    python echo_client.py --port 8888 --connections 4 --messages 1000
"""

import argparse
import asyncio
import statistics
import time

import evloop


async def client(host: str, port: int, messages: int, size: int) -> list:
    reader, writer = await asyncio.open_connection(host, port)
    payload = b"x" * size
    times = []
    for _ in range(messages):
        t0 = time.perf_counter_ns()
        writer.write(payload)
        echoed = await reader.readexactly(size)
        times.append(time.perf_counter_ns() - t0)
        assert echoed == payload
    writer.close()
    await writer.wait_closed()
    return times


async def main(args: argparse.Namespace) -> None:
    per_conn = await asyncio.gather(*(client(args.host, args.port, args.messages, args.size)
                                      for _ in range(args.connections)))
    times = sorted(t for conn in per_conn for t in conn)
    p99 = times[int(0.99 * (len(times) - 1))]
    print(f"{len(times)} echoes of {args.size} B over {args.connections} connections: "
          f"round trip p50 {statistics.median(times) / 1e3:.1f} us, p99 {p99 / 1e3:.1f} us")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description="An asyncio echo client on evloop.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8888)
    ap.add_argument("--connections", type=int, default=4)
    ap.add_argument("--messages", type=int, default=1000, help="per connection")
    ap.add_argument("--size", type=int, default=1024, help="bytes per message")
    evloop.run(main(ap.parse_args()))
