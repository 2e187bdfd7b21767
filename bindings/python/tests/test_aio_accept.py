"""A server's accept path on evloop's asyncio loop (src/aio/accept.cpp: accept4, the socket,
the protocol and the transport made in C, no task between them): what a server's protocols
see must be what they see on the stock loop, each scenario run on both. The accept errors
are in test_aio_faults.py (out of descriptors or memory, EINTR)."""

from __future__ import annotations

import asyncio
import contextvars
import socket
import sys
from typing import Any, Dict, List, Optional, Tuple

import pytest

import evloop

from conftest import AIO_LOOPS, DEADLINE, on_both_loops

HAS_IPV6 = socket.has_ipv6
try:
    with socket.socket(socket.AF_INET6) as _s:
        _s.bind(("::1", 0))
except OSError:
    HAS_IPV6 = False


class Seen(asyncio.Protocol):
    """Records what a server's protocol is told, and answers b"ok" then closes."""

    log: List[Dict[str, Any]] = []

    def connection_made(self, tr: Any) -> None:
        sock = tr.get_extra_info("socket")
        self.log.append({
            "peername": tr.get_extra_info("peername"),
            "sockname": tr.get_extra_info("sockname"),
            "family": sock.family, "type": sock.type,
            "blocking": tr.get_extra_info("socket").gettimeout(),
            "nodelay": sock.family != socket.AF_UNIX and sock.getsockopt(
                socket.IPPROTO_TCP, socket.TCP_NODELAY) != 0,
            "inheritable": socket.socket.get_inheritable(sock),  # type: ignore[arg-type]
            "closing": tr.is_closing(),
        })
        tr.write(b"ok")
        tr.close()


def _serve_and_connect(loop: asyncio.AbstractEventLoop, factory: Any, host: str,
                       clients: int) -> List[Tuple[Any, bytes]]:
    """A server on host with factory; `clients` clients connect at once, each reads to EOF:
    [(its own address, what it read)]."""

    async def main() -> List[Tuple[Any, bytes]]:
        srv = await loop.create_server(factory, host, 0, backlog=clients)
        port = srv.sockets[0].getsockname()[1]

        async def client() -> Tuple[Any, bytes]:
            r, w = await asyncio.open_connection(host, port)
            me = w.get_extra_info("sockname")
            data = await r.read()
            w.close()
            return me, data

        out = await asyncio.wait_for(asyncio.gather(*(client() for _ in range(clients))),
                                     DEADLINE)
        srv.close()
        await srv.wait_closed()
        return out

    return loop.run_until_complete(main())


@pytest.mark.parametrize("host", ["127.0.0.1", "::1"])
def test_each_connection_gets_its_protocol_and_transport_as_on_the_stock_loop(host: str) -> None:
    if host == "::1" and not HAS_IPV6:
        pytest.skip("no IPv6 loopback")

    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        Seen.log = []
        got = _serve_and_connect(loop, Seen, host, 50)
        assert all(data == b"ok" for _, data in got)
        # each protocol saw its own client as the peer
        assert sorted(map(repr, (e["peername"] for e in Seen.log))) == sorted(
            repr(me) for me, _ in got)
        shape = {(len(e["peername"]), type(e["peername"][0]), e["family"], e["type"],
                  e["blocking"], e["nodelay"], e["inheritable"], e["closing"])
                 for e in Seen.log}
        return len(Seen.log), shape

    stock, ours = on_both_loops(scenario)
    assert ours == stock
    assert stock[0] == 50


def test_no_task_is_made_per_connection_on_evloop() -> None:
    # The stdlib makes a task per connection (_accept_connection2, which awaits the
    # transport's waiter); evloop's loop makes the protocol and transport in the accepting
    # callback instead (the one deliberate difference: docs/asyncio.md).
    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        names: List[str] = []

        def factory(lp: Any, coro: Any, **kw: Any) -> Any:
            names.append(coro.__qualname__)
            return asyncio.Task(coro, loop=lp, **kw)

        loop.set_task_factory(factory)
        Seen.log = []
        _serve_and_connect(loop, Seen, "127.0.0.1", 4)
        return names.count("BaseSelectorEventLoop._accept_connection2"), len(Seen.log)

    stock, ours = on_both_loops(scenario)
    assert stock == (4, 4)
    assert ours == (0, 4)


def test_an_overridden_accept_connection2_is_called_as_the_stdlib_calls_it() -> None:
    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        calls: List[Any] = []
        std2 = loop._accept_connection2  # type: ignore[attr-defined]

        def accept2(factory: Any, conn: Any, extra: Any, *args: Any) -> Any:
            calls.append((type(conn).__name__, sorted(extra)))
            return std2(factory, conn, extra, *args)

        loop._accept_connection2 = accept2  # type: ignore[attr-defined]
        Seen.log = []
        _serve_and_connect(loop, Seen, "127.0.0.1", 3)
        return calls, len(Seen.log)

    stock, ours = on_both_loops(scenario)
    assert ours == stock == ([("socket", ["peername"])] * 3, 3)


def test_each_protocol_factory_runs_in_its_own_copy_of_the_context() -> None:
    var: contextvars.ContextVar[int] = contextvars.ContextVar("var", default=0)

    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        seen: List[Tuple[str, int]] = []

        class P(asyncio.Protocol):
            def __init__(self) -> None:
                seen.append(("factory", var.get()))
                var.set(var.get() + 1)

            def connection_made(self, tr: Any) -> None:
                seen.append(("made", var.get()))
                tr.close()

        async def main() -> None:
            srv = await loop.create_server(P, "127.0.0.1", 0)
            port = srv.sockets[0].getsockname()[1]
            for _ in range(3):  # one at a time: each factory starts from the server's context
                r, w = await asyncio.open_connection("127.0.0.1", port)
                await asyncio.wait_for(r.read(), DEADLINE)
                w.close()
            srv.close()
            await srv.wait_closed()

        var.set(10)
        loop.run_until_complete(main())
        return seen, var.get()

    stock, ours = on_both_loops(scenario)
    assert ours == stock == ([("factory", 10), ("made", 11)] * 3, 10)


def test_a_failing_protocol_factory_drops_that_connection_and_serves_the_next() -> None:
    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        errors: List[Any] = []
        loop.set_exception_handler(lambda lp, ctx: errors.append(ctx.get("message")))
        n = [0]

        def factory() -> asyncio.Protocol:
            n[0] += 1
            if n[0] == 1:
                raise ValueError("no protocol")
            return Seen()

        async def main() -> Tuple[bytes, bytes]:
            srv = await loop.create_server(factory, "127.0.0.1", 0)
            port = srv.sockets[0].getsockname()[1]
            got = []
            for _ in range(2):
                r, w = await asyncio.open_connection("127.0.0.1", port)
                try:
                    got.append(await asyncio.wait_for(r.read(), DEADLINE))
                except ConnectionResetError:
                    got.append(b"reset")
                w.close()
            srv.close()
            await srv.wait_closed()
            return got[0], got[1]

        Seen.log = []
        return loop.run_until_complete(main()), errors  # outside debug mode: not reported

    stock, ours = on_both_loops(scenario)
    assert ours == stock == ((b"", b"ok"), [])


def test_a_factory_that_closes_the_server_ends_the_round_as_the_stdlibs() -> None:
    # Eight clients wait; the first protocol_factory closes the server. Every connection the
    # round accepted still gets its factory called (the stdlib accepts the whole round before
    # any factory runs, in tasks), and nothing accepts on the closed (or a reused) fd: no
    # error reaches the exception handler.
    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        errors: List[Any] = []
        loop.set_exception_handler(lambda lp, ctx: errors.append(ctx.get("message")))
        box: Dict[str, Any] = {"calls": 0}

        def factory() -> asyncio.Protocol:
            box["calls"] += 1
            if box["srv"].is_serving():
                box["srv"].close()
            return asyncio.Protocol()

        async def main() -> None:
            srv = box["srv"] = await loop.create_server(factory, "127.0.0.1", 0, backlog=50)
            port = srv.sockets[0].getsockname()[1]
            socks = [socket.create_connection(("127.0.0.1", port)) for _ in range(8)]
            try:
                for _ in range(200):
                    await asyncio.sleep(0.005)
            finally:
                for c in socks:
                    c.close()

        loop.run_until_complete(main())
        return box["calls"], box["srv"].is_serving(), errors

    stock, ours = on_both_loops(scenario)
    assert ours == stock == (8, False, [])


@pytest.mark.parametrize("exc", [KeyboardInterrupt, SystemExit])
def test_keyboardinterrupt_or_systemexit_from_the_factory_goes_up(exc: type) -> None:
    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        def factory() -> asyncio.Protocol:
            raise exc()

        async def main() -> None:
            srv = await loop.create_server(factory, "127.0.0.1", 0)
            port = srv.sockets[0].getsockname()[1]
            r, w = await asyncio.open_connection("127.0.0.1", port)
            await asyncio.sleep(DEADLINE)

        try:
            loop.run_until_complete(asyncio.wait_for(main(), DEADLINE))
        except BaseException as e:  # noqa: BLE001
            return type(e)
        return None

    stock, ours = on_both_loops(scenario)
    assert ours == stock == exc


def test_debug_mode_and_unix_sockets_take_the_stdlibs_path_and_serve() -> None:
    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        loop.set_debug(True)
        Seen.log = []
        got = _serve_and_connect(loop, Seen, "127.0.0.1", 3)
        loop.set_debug(False)

        async def unix(path: str) -> bytes:
            srv = await loop.create_unix_server(Seen, path)
            r, w = await asyncio.open_unix_connection(path)
            data = await asyncio.wait_for(r.read(), DEADLINE)
            w.close()
            srv.close()
            await srv.wait_closed()
            return data

        import tempfile
        import os
        with tempfile.TemporaryDirectory() as d:
            data = loop.run_until_complete(unix(os.path.join(d, "s")))
        return [g[1] for g in got], data, len(Seen.log)

    stock, ours = on_both_loops(scenario)
    assert ours == stock == ([b"ok"] * 3, b"ok", 4)


def test_bad_arguments_raise_as_the_stdlibs() -> None:
    def scenario(loop: asyncio.AbstractEventLoop) -> Any:
        out = []
        with socket.socket() as ls:
            ls.bind(("127.0.0.1", 0))
            ls.listen()
            ls.setblocking(False)
            for args in [(), (Seen,), (Seen, ls, None, None, "x")]:
                try:
                    loop._accept_connection(*args)  # type: ignore[attr-defined]
                    out.append(None)
                except BaseException as e:  # noqa: BLE001
                    out.append(type(e).__name__)
            # nothing waits: returns at once
            out.append(loop._accept_connection(Seen, ls))  # type: ignore[attr-defined]
        return out

    stock, ours = on_both_loops(scenario)
    assert ours == stock == ["TypeError", "TypeError", "TypeError", None]
