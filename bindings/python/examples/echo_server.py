"""An asyncio echo server on evloop's event loop: the stdlib's streams API, unchanged, with
evloop.run in place of asyncio.run. Ctrl-C stops it.

    python echo_server.py --port 8888
    python echo_client.py --port 8888
"""

import argparse
import asyncio

import evloop


async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(65536):
            writer.write(data)
            await writer.drain()
    except ConnectionError:
        pass
    finally:
        writer.close()


async def serve(host: str, port: int) -> None:
    server = await asyncio.start_server(echo, host, port)
    host, port = server.sockets[0].getsockname()[:2]
    backend = asyncio.get_running_loop().evloop_backend  # the poller under evloop's loop
    print(f"listening on {host}:{port} (evloop's asyncio loop on {backend})", flush=True)
    async with server:
        await server.serve_forever()


def main() -> None:
    ap = argparse.ArgumentParser(description="An asyncio echo server on evloop.")
    ap.add_argument("--host", default="127.0.0.1")
    ap.add_argument("--port", type=int, default=8888, help="0: any free port")
    args = ap.parse_args()
    try:
        evloop.run(serve(args.host, args.port))  # as asyncio.run, on an evloop loop
    except KeyboardInterrupt:
        print("stopped")


if __name__ == "__main__":
    main()
