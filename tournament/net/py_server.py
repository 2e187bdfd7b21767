"""One real Python HTTP server on one asyncio loop, for the pyserver family of run_net.py.

    python py_server.py --server uvicorn-httptools --loop evloop --port 0

Servers: uvicorn with its httptools parser or its h11 parser (a bare ASGI app), and aiohttp's
web server (one GET route). Loops: evloop, uvloop, rloop, asyncio (the stock loop). Every
server answers every request with the body "hello" (so net_servers.py's protocol check applies
to it as to the C servers). The script binds the socket itself (backlog 4096, --port 0: a free
port), starts the server on it, and prints "ready <server> on <loop> (versions) 127.0.0.1:PORT"
once the server accepts. SIGTERM stops it gracefully; it then prints "served N requests" on
stderr and exits 0.

`--probe` prints, as JSON, which of the packages the servers and loops need import in this
Python and why not; run_net.py asks it before measuring. Only the standard library is
imported before the server and loop chosen need theirs.
"""
import argparse
import asyncio
import importlib
import json
import signal
import socket
import sys

SERVERS = {"uvicorn-httptools": ("uvicorn", "httptools"), "uvicorn-h11": ("uvicorn", "h11"),
           "aiohttp": ("aiohttp",)}
LOOPS = {"evloop": "evloop", "uvloop": "uvloop", "rloop": "rloop", "asyncio": None}
BODY = b"hello"
served = 0


def probe():
    """{package: null or why it does not import} for every package a server or loop needs."""
    out = {}
    for name in sorted({p for ps in SERVERS.values() for p in ps} |
                       {m for m in LOOPS.values() if m}):
        try:
            mod = importlib.import_module(name)
            out[name] = {"version": getattr(mod, "__version__", None)}
        except Exception as e:  # an ImportError, or a broken build's own error
            out[name] = {"error": f"{type(e).__name__}: {e}"}
    return out


def loop_factory(name):
    if name == "asyncio":
        return asyncio.new_event_loop
    return importlib.import_module(LOOPS[name]).new_event_loop


def version_of(name):
    mod = sys.modules.get(name) or importlib.import_module(name)
    return f"{name} {getattr(mod, '__version__', '?')}"


def listening_socket(port):
    # IPPROTO_TCP, as loop.create_server(host, port) makes it (uvicorn's and aiohttp's usual
    # path, through getaddrinfo): the stock loop, and evloop's as it keeps the stock loop's
    # rules, set TCP_NODELAY on an accepted socket only when its proto says TCP, and a proto
    # of 0 would leave Nagle's algorithm on under uvicorn's two writes per response (the
    # 40 ms delayed ACK in every keep-alive request).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(4096)
    sock.setblocking(False)
    return sock


async def asgi_app(scope, receive, send):
    """A bare ASGI app: "hello" for every request, with its length (without it uvicorn would
    send it chunked); lifespan is off."""
    global served
    served += 1
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain"),
                            (b"content-length", b"%d" % len(BODY))]})
    await send({"type": "http.response.body", "body": BODY})


async def serve_uvicorn(http, sock, stopping, ready):
    import uvicorn

    config = uvicorn.Config(asgi_app, http=http, loop="none", lifespan="off",
                            access_log=False, log_level="warning", backlog=4096)

    class Server(uvicorn.Server):
        # uvicorn's own SIGTERM handling re-raises the signal after a graceful shutdown
        # (exit status -15); here the loop's handler below stops it instead.
        def capture_signals(self):
            import contextlib
            return contextlib.nullcontext()

        def install_signal_handlers(self):  # the same, in uvicorns before capture_signals
            pass

    server = Server(config)
    task = asyncio.ensure_future(server.serve(sockets=[sock]))
    while not server.started:
        if task.done():
            task.result()  # its error, or why it stopped before it started
            raise RuntimeError("uvicorn stopped before it started")
        await asyncio.sleep(0.01)
    ready()
    await stopping.wait()
    server.should_exit = True
    await task


async def serve_aiohttp(sock, stopping, ready):
    from aiohttp import web

    async def hello(request):
        global served
        served += 1
        return web.Response(body=BODY, content_type="text/plain")

    app = web.Application()
    app.router.add_get("/", hello)
    runner = web.AppRunner(app, access_log=None, handle_signals=False)
    await runner.setup()
    await web.SockSite(runner, sock, backlog=4096).start()
    ready()
    await stopping.wait()
    await runner.cleanup()


async def main(args, sock):
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stopping.set)
    versions = ", ".join(version_of(p) for p in SERVERS[args.server] + ((LOOPS[args.loop],)
                                                                          if LOOPS[args.loop]
                                                                          else ()))
    host, port = sock.getsockname()[:2]

    def ready():
        print(f"ready {args.server} on {args.loop} ({versions}; {type(loop).__module__}."
              f"{type(loop).__name__}) {host}:{port}", flush=True)

    if args.server == "aiohttp":
        await serve_aiohttp(sock, stopping, ready)
    else:
        await serve_uvicorn(args.server.split("-", 1)[1], sock, stopping, ready)


def run_on(name, coro):
    if hasattr(asyncio, "Runner"):  # 3.11+
        with asyncio.Runner(loop_factory=loop_factory(name)) as runner:
            return runner.run(coro)
    loop = loop_factory(name)()
    asyncio.set_event_loop(loop)
    try:
        return loop.run_until_complete(coro)
    finally:
        loop.close()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--server", choices=list(SERVERS))
    ap.add_argument("--loop", choices=list(LOOPS))
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--probe", action="store_true",
                    help="print which packages import (JSON) and exit")
    a = ap.parse_args()
    if a.probe:
        print(json.dumps({"python": sys.executable, "version": sys.version.split()[0],
                          "packages": probe()}))
        sys.exit(0)
    if not a.server or not a.loop:
        ap.error("--server and --loop are needed (or --probe)")
    run_on(a.loop, main(a, listening_socket(a.port)))
    print(f"served {served} requests", file=sys.stderr, flush=True)
