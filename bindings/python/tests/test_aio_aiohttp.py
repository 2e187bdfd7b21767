"""A real application on evloop's asyncio loop: an aiohttp server and client exchange
requests (GET, POST bodies of 1 byte to 1 MiB, a websocket echo) over evloop.run()."""

from __future__ import annotations

import asyncio
import os

import pytest

import evloop

aiohttp = pytest.importorskip("aiohttp", reason="aiohttp is not installed (pip install "
                              "'pyevloop[test]' brings it)")
from aiohttp import web  # noqa: E402


async def exchange() -> dict:
    loop = asyncio.get_running_loop()
    assert isinstance(loop, evloop.EventLoop)

    async def hello(request: web.Request) -> web.Response:
        return web.Response(text="hello " + request.match_info["name"])

    async def echo(request: web.Request) -> web.Response:
        return web.Response(body=await request.read())

    async def ws(request: web.Request) -> web.WebSocketResponse:
        sock = web.WebSocketResponse()
        await sock.prepare(request)
        async for msg in sock:
            await sock.send_str(msg.data.upper())
        return sock

    app = web.Application()
    app.router.add_get("/hello/{name}", hello)
    app.router.add_post("/echo", echo)
    app.router.add_get("/ws", ws)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    base = f"http://127.0.0.1:{port}"
    out = {}
    try:
        async with aiohttp.ClientSession() as session:
            async def get(i: int) -> str:
                async with session.get(f"{base}/hello/{i}") as r:
                    assert r.status == 200
                    return await r.text()

            out["gets"] = await asyncio.gather(*(get(i) for i in range(50)))
            bodies = [os.urandom(n) for n in (1, 1000, 65536, 1 << 20)]
            echoed = []
            for b in bodies:
                async with session.post(f"{base}/echo", data=b) as r:
                    echoed.append(await r.read())
            out["posts_ok"] = echoed == bodies
            async with session.ws_connect(f"{base}/ws") as sock:
                await sock.send_str("ping")
                out["ws"] = (await sock.receive()).data
    finally:
        await runner.cleanup()
    return out


def test_aiohttp_server_and_client_exchange_requests_on_evloop():
    out = evloop.run(exchange())
    assert out["gets"] == [f"hello {i}" for i in range(50)]
    assert out["posts_ok"]
    assert out["ws"] == "PING"


@pytest.mark.parametrize("backend", evloop.backends())
def test_aiohttp_on_every_backend(backend):
    out = evloop.run(exchange(), backend=backend)
    assert out["posts_ok"] and out["ws"] == "PING"
