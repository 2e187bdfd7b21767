"""The families of evloop.bench.aio: the iteration chain runs to its end on each loop; the echo
server echoes in its three modes; wrk's output read right, a run with errors refused, and both
HTTP servers (the minimal protocol, aiohttp's) answering wrk on evloop's loop (when wrk is
installed)."""

from __future__ import annotations

import asyncio
import shutil
import socket

import pytest

import evloop
from evloop.bench import aio

CLEAN = """Running 2s test @ http://127.0.0.1:4242/
  1 threads and 50 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.10ms  200.00us   3.00ms   90.00%
    Req/Sec    45.00k     1.00k   47.00k    80.00%
  90123 requests in 2.00s, 8.08MB read
Requests/sec:  45061.50
Transfer/sec:      4.04MB
"""


def test_a_clean_run_gives_its_rate_and_count():
    assert aio.parse_wrk(CLEAN) == (45061.5, 90123)


@pytest.mark.parametrize("line", ["  Socket errors: connect 0, read 3, write 0, timeout 0",
                                  "  Non-2xx or 3xx responses: 17"])
def test_a_run_with_errors_is_refused(line):
    out = CLEAN.replace("Requests/sec:", line + "\nRequests/sec:")
    with pytest.raises(ValueError, match="errors"):
        aio.parse_wrk(out)


def test_an_output_without_a_rate_is_refused():
    with pytest.raises(ValueError, match="no request rate"):
        aio.parse_wrk("unable to connect to 127.0.0.1:1 Connection refused\n")


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk is not installed")
def test_the_hello_server_answers_wrk_on_evloop():
    rate = aio.run_on("evloop", lambda: aio.b_http(conns=10, seconds=1))
    assert rate > 0


@pytest.mark.skipif(not shutil.which("wrk"), reason="wrk is not installed")
def test_aiohttps_server_answers_wrk_on_evloop():
    pytest.importorskip("aiohttp", reason="aiohttp is not installed")
    rate = aio.run_on("evloop", lambda: aio.b_http(
        conns=10, seconds=1, serve=aio._serve_aiohttp))
    assert rate > 0
    assert "http-aiohttp" in [f[0] for f in aio.FAMILIES]


def test_the_iteration_family_runs_its_chain_to_the_end_on_each_loop():
    for name in aio.LOOPS:
        try:
            aio.loop_factory(name)
        except ImportError:
            continue  # uvloop is a benchmark-only extra
        ns = aio.run_on(name, lambda: aio.b_iteration(n=2000))
        assert ns > 0


@pytest.mark.parametrize("loop", ["evloop", "asyncio"])
def test_the_task_families_run_to_the_end(loop):
    # each returns the time per operation; a family that lost a hand-over would hang instead
    assert aio.run_on(loop, lambda: aio.b_queue_handover(n=500)) > 0
    assert aio.run_on(loop, lambda: aio.b_gather_sleep0(tasks=50, steps=3)) > 0
    assert aio.run_on(loop, lambda: aio.b_done_futures(n=500)) > 0
    names = [f[0] for f in aio.FAMILIES]
    assert {"queue-handover", "gather-sleep0", "done-futures"} <= set(names)


@pytest.mark.parametrize("loop", ["evloop", "asyncio"])
def test_the_executor_families_run_to_the_end(loop):
    assert aio.run_on(loop, lambda: aio.b_executor_gather(100, total=1000)) > 0
    assert aio.run_on(loop, lambda: aio.b_executor_gather(1000, total=1000)) > 0
    names = [f[0] for f in aio.FAMILIES]
    assert {"executor", "executor-batch100", "executor-burst"} <= set(names)


@pytest.mark.parametrize("loop", ["evloop", "asyncio"])
def test_the_close_server_answers_one_request_per_connection_and_closes(loop):
    async def main():
        port, stop = await aio._serve_hello_close()
        try:
            got = []
            for _ in range(3):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                w.write(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
                got.append(await asyncio.wait_for(r.read(), 10))  # until the server closes
                w.close()
                await w.wait_closed()
            return got
        finally:
            await stop()

    assert aio.run_on(loop, main) == [aio.HTTP_CLOSE_RESPONSE] * 3


async def _closes(closed, n, stop):
    """Waits (20 s at most) until closed holds n entries, stops the server: how many it holds."""
    for _ in range(2000):
        if len(closed) == n:
            break
        await asyncio.sleep(0.01)
    await stop()
    return len(closed)


def _on_evloop(main):
    loop = evloop.new_event_loop()
    try:
        return loop.run_until_complete(main())
    finally:
        loop.close()


@pytest.mark.parametrize("mode", ["protocol", "streams", "sock"])
def test_the_echo_server_echoes_in_each_mode_and_reports_each_close(mode):
    """start_echo_server, the echo families' server (and measure/echo_instructions.py's): two
    clients' bytes come back whole, and closed() runs once per connection that ends."""

    async def main():
        closed = []
        port, stop = await aio.start_echo_server(mode, lambda: closed.append(1))
        got = []
        for payload in (b"x" * 3000, b"hello"):
            r, w = await asyncio.open_connection("127.0.0.1", port)
            w.write(payload)
            got.append(await asyncio.wait_for(r.readexactly(len(payload)), 20))
            w.close()
            await w.wait_closed()
        return got, await _closes(closed, 2, stop)

    assert _on_evloop(main) == ([b"x" * 3000, b"hello"], 2)


def test_the_datagram_echo_server_echoes_and_counts_each_client_done():
    """The datagram mode: each datagram comes back to its sender whole; an empty one is a
    client saying it is done (closed() once each)."""

    async def main():
        closed = []
        port, stop = await aio.start_echo_server("datagram", lambda: closed.append(1))
        got = []
        for payload in (b"x" * 3000, b"hello"):
            with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
                s.connect(("127.0.0.1", port))
                s.setblocking(False)
                s.send(payload)
                for _ in range(2000):
                    try:
                        got.append(s.recv(65536))
                        break
                    except BlockingIOError:
                        await asyncio.sleep(0.01)
                s.send(b"")
        return got, await _closes(closed, 2, stop)

    assert _on_evloop(main) == ([b"x" * 3000, b"hello"], 2)


def test_an_unknown_echo_mode_is_refused():
    with pytest.raises(ValueError, match="unknown echo mode 'udp'"):
        asyncio.run(aio.start_echo_server("udp"))
