"""The one word that puts each server on evloop's asyncio loop, as the README's Python section
shows it: each test starts the server as a user would (its command line or its run call, in a
process of its own), asks an endpoint for ``type(asyncio.get_running_loop()).__module__`` and
checks that it is evloop's. A test skips, saying why, when its server is not installed.

Every server gets a free port (and a second try on another one if something took it in the
meantime), is waited on with a deadline, and is killed, with its process group, however the
test ends.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import textwrap
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Callable, List

import pytest

import evloop

EXPECTED = "evloop._aio"  # the module of evloop.EventLoop
READY_DEADLINE = 60.0  # seconds for a server to answer; gunicorn's arbiter is the slowest

# An ASGI app (uvicorn, gunicorn's uvicorn worker, hypercorn) whose every response is the
# running loop's module.
ASGI_APP = """
import asyncio

async def app(scope, receive, send):
    if scope["type"] == "lifespan":
        while True:
            message = await receive()
            await send({"type": message["type"] + ".complete"})
            if message["type"] == "lifespan.shutdown":
                return
    body = type(asyncio.get_running_loop()).__module__.encode()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": body})
"""


def need(module: str) -> None:
    pytest.importorskip(module, reason=f"{module} is not installed (pip install '.[test]')")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def get(port: int, timeout: float = 2.0) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/", timeout=timeout) as r:
        return str(r.read().decode())


def stop(proc: subprocess.Popen) -> None:
    """SIGTERM to the server's process group (gunicorn has workers), SIGKILL after 10 s."""
    if proc.poll() is None:
        for sig, wait in ((signal.SIGTERM, 10.0), (signal.SIGKILL, 10.0)):
            try:
                os.killpg(proc.pid, sig)
            except ProcessLookupError:
                break
            try:
                proc.wait(wait)
                break
            except subprocess.TimeoutExpired:
                continue
    # the group may outlive its leader (a gunicorn worker): nothing of it may stay
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def serve_and_get(tmp_path: Path, command: Callable[[int], List[str]]) -> str:
    """Starts command(port) in tmp_path, waits until it answers, returns the body."""
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    env["PYTHONPATH"] = str(tmp_path)  # the app's module, nothing of the source tree
    last_log = ""
    for attempt in range(2):  # a port taken between free_port() and the bind: once more
        port = free_port()
        log_path = tmp_path / f"server-{attempt}.log"
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(command(port), cwd=tmp_path, env=env, stdout=log,
                                    stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    start_new_session=True)
        try:
            deadline = time.monotonic() + READY_DEADLINE
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    break
                try:
                    return get(port)
                except (urllib.error.URLError, ConnectionError, socket.timeout):
                    time.sleep(0.1)
            else:
                pytest.fail(f"no answer on port {port} in {READY_DEADLINE} s:\n"
                            f"{log_path.read_text(errors='replace')}")
        finally:
            stop(proc)
        last_log = log_path.read_text(errors="replace")
        if "address already in use" not in last_log.lower():
            break
    pytest.fail(f"the server exited before answering:\n{last_log}")


def write(tmp_path: Path, name: str, text: str) -> None:
    (tmp_path / name).write_text(textwrap.dedent(text))


def test_uvicorn_command_line_loop_word(tmp_path):
    need("uvicorn")
    write(tmp_path, "app.py", ASGI_APP)
    body = serve_and_get(tmp_path, lambda port: [
        sys.executable, "-m", "uvicorn", "--loop", "evloop:new_event_loop",
        "--host", "127.0.0.1", "--port", str(port), "app:app"])
    assert body == EXPECTED


def test_uvicorn_run_with_loop_argument(tmp_path):
    need("uvicorn")
    write(tmp_path, "app.py", ASGI_APP)
    write(tmp_path, "main.py", """
        import sys, uvicorn
        from app import app
        uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), loop="evloop:new_event_loop")
    """)
    body = serve_and_get(tmp_path, lambda port: [sys.executable, "main.py", str(port)])
    assert body == EXPECTED


@pytest.mark.parametrize("worker", ["UvicornWorker", "UvicornH11Worker"])
def test_gunicorn_with_evloops_uvicorn_worker(tmp_path, worker):
    need("gunicorn")
    need("uvicorn")
    write(tmp_path, "app.py", ASGI_APP)
    body = serve_and_get(tmp_path, lambda port: [
        sys.executable, "-m", "gunicorn", "-k", f"evloop.uvicorn_worker.{worker}",
        "-w", "1", "-b", f"127.0.0.1:{port}", "app:app"])
    assert body == EXPECTED


def test_hypercorn_served_by_evloop_run(tmp_path):
    need("hypercorn")
    write(tmp_path, "app.py", ASGI_APP)
    write(tmp_path, "main.py", """
        import sys, evloop
        from hypercorn.asyncio import serve
        from hypercorn.config import Config
        from app import app
        config = Config()
        config.bind = [f"127.0.0.1:{sys.argv[1]}"]
        evloop.run(serve(app, config))
    """)
    body = serve_and_get(tmp_path, lambda port: [sys.executable, "main.py", str(port)])
    assert body == EXPECTED


def test_aiohttp_run_app_with_loop_argument(tmp_path):
    need("aiohttp")
    write(tmp_path, "main.py", """
        import asyncio, sys, evloop
        from aiohttp import web

        async def handle(request):
            return web.Response(text=type(asyncio.get_running_loop()).__module__)

        app = web.Application()
        app.router.add_get("/", handle)
        web.run_app(app, host="127.0.0.1", port=int(sys.argv[1]), loop=evloop.new_event_loop(),
                    print=None)
    """)
    body = serve_and_get(tmp_path, lambda port: [sys.executable, "main.py", str(port)])
    assert body == EXPECTED


def test_anyio_run_with_loop_factory_serves_on_evloop():
    need("anyio")
    import anyio

    async def main() -> str:
        # a TCP round trip through anyio's own listener, on the loop anyio.run made
        async def answer(stream):
            async with stream:
                await stream.send(type(__import__("asyncio").get_running_loop()).__module__
                                  .encode())

        listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
        port = listener.extra(anyio.abc.SocketAttribute.local_port)
        async with anyio.create_task_group() as tg:
            tg.start_soon(listener.serve, answer)
            async with await anyio.connect_tcp("127.0.0.1", port) as client:
                data = b""
                with anyio.fail_after(10):
                    while True:
                        try:
                            data += await client.receive()
                        except anyio.EndOfStream:
                            break
            tg.cancel_scope.cancel()
        return data.decode()

    got = anyio.run(main, backend="asyncio",
                    backend_options={"loop_factory": evloop.new_event_loop})
    assert got == EXPECTED


def test_pytest_asyncio_loop_factories_hook(tmp_path):
    need("pytest_asyncio")
    write(tmp_path, "pytest.ini", """
        [pytest]
        asyncio_mode = auto
    """)
    write(tmp_path, "conftest.py", """
        import evloop

        def pytest_asyncio_loop_factories(config, item):
            return {"evloop": evloop.new_event_loop}
    """)
    write(tmp_path, "test_loop.py", f"""
        import asyncio

        async def test_runs_on_evloop():
            assert type(asyncio.get_running_loop()).__module__ == {EXPECTED!r}
    """)
    env = dict(os.environ, PYTHONPATH="")
    r = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                        "-p", "asyncio", "test_loop.py"],
                       cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and "1 passed" in r.stdout, r.stdout + r.stderr
