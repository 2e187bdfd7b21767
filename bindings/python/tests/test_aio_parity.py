"""Where evloop's native paths replace the stdlib's Python, what a user or a test can replace
is still honoured, and a closed loop leaves nothing for the cycle collector: each scenario runs
on the stock loop and on evloop's, and the outcomes are compared."""

from __future__ import annotations

import asyncio
import gc
import socket
from unittest import mock

import pytest

from conftest import AIO_LOOPS, on_both_loops


# ---------------------------------------------------------------- cyclic garbage

def _garbage_of(scenario):
    """The objects that scenario() leaves to the cycle collector, by type name (sorted)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        scenario()
        gc.collect()
        return sorted(type(o).__name__ for o in gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def _echo_round_trips():
    loop = asyncio.get_running_loop()

    async def serve(reader, writer):
        writer.write(await reader.read(100))
        await writer.drain()
        writer.close()
        await writer.wait_closed()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    for _ in range(3):
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        writer.write(b"ping")
        assert await reader.read(100) == b"ping"
        writer.close()
        await writer.wait_closed()
    server.close()
    await server.wait_closed()

    class Echo(asyncio.DatagramProtocol):
        def connection_made(self, transport):
            self.transport = transport

        def datagram_received(self, data, addr):
            self.transport.sendto(data, addr)

    got = loop.create_future()

    class Client(asyncio.DatagramProtocol):
        def datagram_received(self, data, addr):
            got.set_result(data)

    st, _ = await loop.create_datagram_endpoint(Echo, local_addr=("127.0.0.1", 0))
    ct, _ = await loop.create_datagram_endpoint(Client, remote_addr=st.get_extra_info("sockname"))
    ct.sendto(b"dgram")
    assert await got == b"dgram"
    ct.close()
    st.close()

    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    await loop.sock_sendall(a, b"sock")
    assert await loop.sock_recv(b, 4) == b"sock"
    a.close()
    b.close()
    assert await loop.run_in_executor(None, sum, [1, 2]) == 3
    await asyncio.sleep(0)


@pytest.mark.parametrize("name", ["stock", "evloop"])
def test_a_closed_loop_leaves_no_cyclic_garbage(name):
    """As tornado's circlerefs test checks: a loop made, run and closed leaves no garbage."""
    def plain():
        AIO_LOOPS[name]().close()

    assert _garbage_of(plain) == []


def test_a_loop_that_served_connections_leaves_no_more_garbage_than_the_stock_loop():
    """Transports, servers, handles, datagram endpoints, the sock path and the executor."""
    def served(make):
        def scenario():
            loop = make()
            try:
                loop.run_until_complete(_echo_round_trips())
                loop.run_until_complete(loop.shutdown_default_executor())
            finally:
                loop.close()
        return scenario

    stock = _garbage_of(served(AIO_LOOPS["stock"]))
    ours = sorted(_AS_STOCK.get(n, n) for n in _garbage_of(served(AIO_LOOPS["evloop"])))
    # What the cycles hold, by kind: the same loops, selectors, transports, sockets and futures
    # as the stock loop's; the incidental objects (bound methods, dicts, tuples) are only
    # compared by kind, since a native method binds differently from a Python one.
    incidental = {"method", "dict", "tuple", "list", "deque", "cell", "function"}
    assert [n for n in ours if n not in incidental] == [n for n in stock if n not in incidental]
    assert set(ours) - incidental <= set(stock)


# evloop's classes under the stock loop's names, for comparing the garbage.
_AS_STOCK = {"EventLoop": "_UnixSelectorEventLoop", "_SocketTransport": "_SelectorSocketTransport",
             "_DatagramTransport": "_SelectorDatagramTransport",
             "builtin_function_or_method": "method"}


# ---------------------------------------------------------------- a patched clock

def test_a_time_patched_on_the_instance_is_the_clock_the_iteration_uses():
    """mock.patch.object(loop, "time"), as web frameworks' tests do to expire timers: the
    timer due at the patched time fires, and call_later reads the patched clock."""
    def scenario(loop):
        fired = []
        real = loop.time()
        loop.call_later(3600, fired.append, "far")
        with mock.patch.object(loop, "time", return_value=real + 7200):
            loop.call_later(1, fired.append, "late")  # due at real + 7201
            loop.call_soon(loop.stop)
            loop.run_forever()
            when = [h.when() for h in loop._scheduled]
        # the patch is gone: the real clock again, and the late timer is still far away
        loop.call_soon(loop.stop)
        loop.run_forever()
        return fired, [round(w - real) for w in when], "time" in vars(loop)

    stock, ours = on_both_loops(scenario)
    assert stock == (["far"], [7201], False)
    assert ours == stock


def test_a_time_set_and_deleted_on_the_instance():
    """A clock set on the instance serves the iteration and call_at's due check; once it is
    deleted, the class's clock serves again."""
    def scenario(loop):
        fired = []
        loop.time = lambda: 1e12
        loop.call_at(1e12 - 5, fired.append, "due")
        loop.call_at(1e12 + 3600, fired.append, "far")
        loop.call_soon(loop.stop)
        loop.run_forever()
        del loop.time
        loop.call_later(0, fired.append, "now")
        loop.call_soon(loop.stop)
        loop.run_forever()
        return fired, loop.time() < 1e11, len(loop._scheduled)

    stock, ours = on_both_loops(scenario)
    assert stock == (["due", "now"], True, 1)
    assert ours == stock


def test_call_later_goes_through_a_call_at_of_the_subclass_or_the_instance():
    """The stdlib's call_later calls self.call_at(self.time() + delay, ...): a subclass's
    call_at, or one patched on the instance, sees every timer call_later makes."""
    import evloop

    def subclass_of(base):
        class Recording(base):
            seen = []

            def call_at(self, when, callback, *args, context=None):
                self.seen.append((callback, args, context is None))
                return super().call_at(when, callback, *args, context=context)
        return Recording

    def scenario(loop):
        fired = []
        loop.call_later(0, fired.append, "a")
        loop.call_soon(loop.stop)
        loop.run_forever()
        return fired, [(cb.__name__, args, no_ctx) for cb, args, no_ctx in loop.seen]

    stock = scenario(subclass_of(asyncio.SelectorEventLoop)())
    ours = scenario(subclass_of(evloop.EventLoop)())
    assert stock == (["a"], [("append", ("a",), True)])
    assert ours == stock

    def patched(loop):
        seen = []
        real = loop.call_at

        def call_at(when, callback, *args, context=None):
            seen.append(args)
            return real(when, callback, *args, context=context)

        with mock.patch.object(loop, "call_at", call_at):
            loop.call_later(0, print, "x", context=None)
        loop.call_later(0, print, "y")  # the patch is gone
        return seen

    assert on_both_loops(patched) == [[("x",)], [("x",)]]


def test_a_process_events_patched_on_the_instance_gets_the_events():
    def scenario(loop):
        a, b = socket.socketpair()
        got = []
        try:
            loop.add_reader(a, got.append, "ready")
            b.send(b"x")
            real = loop._process_events
            seen = []

            def process_events(event_list):
                seen.append([(key.fd == a.fileno(), ev) for key, ev in event_list])
                real(event_list)

            with mock.patch.object(loop, "_process_events", process_events):
                loop.run_until_complete(asyncio.sleep(0.01))
            loop.remove_reader(a)
            return [e for e in seen if e], got[:1]
        finally:
            a.close()
            b.close()

    stock, ours = on_both_loops(scenario)
    assert stock[1] == ["ready"] and stock[0][0] == [(True, 1)]
    assert ours[1] == stock[1] and ours[0][0] == stock[0][0]


# ---------------------------------------------------------------- socket subclasses

class _CountingSocket(socket.socket):
    """A socket.socket subclass whose recv/recv_into/send the transport must call."""

    calls: list

    def recv(self, *args):
        self.calls.append("recv")
        return super().recv(*args)

    def recv_into(self, *args):
        self.calls.append("recv_into")
        return super().recv_into(*args)

    def send(self, *args):
        self.calls.append("send")
        return super().send(*args)


def _subclass_pair():
    a, b = socket.socketpair()
    sub = _CountingSocket(a.family, a.type, a.proto, fileno=a.detach())
    sub.calls = []
    sub.setblocking(False)
    return sub, b


def test_a_socket_subclass_gets_its_methods_called_by_the_transport():
    def scenario(loop):
        sub, peer = _subclass_pair()

        async def main():
            reader, writer = await asyncio.open_connection(sock=sub)
            writer.write(b"hello")
            await writer.drain()
            peer.sendall(b"world")
            data = await reader.readexactly(5)
            writer.close()
            await writer.wait_closed()
            return data

        try:
            data = loop.run_until_complete(main())
            return data, peer.recv(5), sorted(set(sub.calls))
        finally:
            peer.close()

    stock, ours = on_both_loops(scenario)
    assert stock[0] == b"world" and stock[1] == b"hello"
    assert "send" in stock[2]
    assert ours == stock


def test_a_socket_subclass_with_create_connection_and_buffered_protocol():
    def scenario(loop):
        sub, peer = _subclass_pair()
        got = bytearray()

        class Proto(asyncio.BufferedProtocol):
            def __init__(self):
                self.buf = bytearray(64)
                self.done = loop.create_future()

            def get_buffer(self, hint):
                return self.buf

            def buffer_updated(self, n):
                got.extend(self.buf[:n])
                if len(got) >= 4:
                    self.done.set_result(None)

        async def main():
            tr, pr = await loop.create_connection(Proto, sock=sub)
            peer.sendall(b"data")
            await pr.done
            tr.close()
            await asyncio.sleep(0)

        try:
            loop.run_until_complete(main())
            return bytes(got), sorted(set(sub.calls))
        finally:
            peer.close()

    stock, ours = on_both_loops(scenario)
    assert stock[0] == b"data" and "recv_into" in stock[1]
    assert ours == stock


def test_a_socket_subclass_gets_its_methods_called_by_the_datagram_transport():
    class CountingUDP(socket.socket):
        calls: list

        def recvfrom(self, *args):
            self.calls.append("recvfrom")
            return super().recvfrom(*args)

        def send(self, *args):
            self.calls.append("send")
            return super().send(*args)

    def scenario(loop):
        peer = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        peer.bind(("127.0.0.1", 0))
        sub = CountingUDP(socket.AF_INET, socket.SOCK_DGRAM)
        sub.calls = []
        sub.setblocking(False)
        sub.connect(peer.getsockname())
        got = loop.create_future()

        class Proto(asyncio.DatagramProtocol):
            def datagram_received(self, data, addr):
                got.set_result(data)

        async def main():
            tr, _ = await loop.create_datagram_endpoint(Proto, sock=sub)
            tr.sendto(b"out")
            data, addr = peer.recvfrom(10)
            peer.sendto(b"in", addr)
            r = await got
            tr.close()
            await asyncio.sleep(0)
            return data, r

        try:
            return loop.run_until_complete(main()), sorted(set(sub.calls))
        finally:
            peer.close()

    stock, ours = on_both_loops(scenario)
    assert stock == ((b"out", b"in"), ["recvfrom", "send"])
    assert ours == stock


def test_a_subclass_s_write_to_self_and_fd_registry_methods_are_called():
    """call_soon_threadsafe calls self._write_to_self(), and sock_recv self._add_reader(),
    as the stdlib's do, when a subclass overrides them."""
    import threading

    import evloop

    def subclass_of(base):
        class Recording(base):
            def __init__(self):
                self.log = []
                super().__init__()

            def _write_to_self(self):
                self.log.append("_write_to_self")
                super()._write_to_self()

            def _add_reader(self, fd, callback, *args):
                self.log.append("_add_reader")
                return super()._add_reader(fd, callback, *args)
        return Recording

    def scenario(loop):
        a, b = socket.socketpair()
        a.setblocking(False)

        async def main():
            t = threading.Thread(target=loop.call_soon_threadsafe, args=(print,))
            t.start()
            t.join()
            loop.call_soon(b.send, b"x")
            return await loop.sock_recv(a, 1)

        try:
            return loop.run_until_complete(main()), sorted(set(loop.log))
        finally:
            a.close()
            b.close()
            loop.close()

    stock = scenario(subclass_of(asyncio.SelectorEventLoop)())
    assert stock == (b"x", ["_add_reader", "_write_to_self"])
    assert scenario(subclass_of(evloop.EventLoop)()) == stock


def test_a_write_after_a_drained_close_never_reaches_a_reused_fd():
    """close() with data buffered waits for the buffer to drain; the stdlib then closes the
    socket with _conn_lost still 0. A write after that must not send on the fd number, which
    may already name another socket (found by the differential test, seed 698)."""
    def scenario(loop):
        a, b = socket.socketpair()
        b.setblocking(False)
        lost = loop.create_future()

        class Proto(asyncio.Protocol):
            def connection_made(self, transport):
                self.transport = transport

            def eof_received(self):
                return None  # the transport closes itself, its buffer still full

            def connection_lost(self, exc):
                lost.set_result(exc)

        async def main():
            tr, _ = await loop.create_connection(Proto, sock=a)
            tr.write(b"x" * (4 << 20))  # more than the socket buffers hold
            b.shutdown(socket.SHUT_WR)
            got = 0
            while True:
                chunk = await loop.sock_recv(b, 1 << 16)
                if not chunk:
                    break
                got += len(chunk)
            return tr, got, await lost

        tr, got, exc = loop.run_until_complete(main())
        c, d = socket.socketpair()  # may take the transport's old fd number
        try:
            outcome = None
            try:
                tr.write(b"SECRET")
            except Exception as e:  # noqa: BLE001
                outcome = type(e).__name__
            d.setblocking(False)
            try:
                leaked = d.recv(16)
            except BlockingIOError:
                leaked = b""
            return got, exc, outcome, leaked
        finally:
            for s in (b, c, d):
                s.close()

    stock, ours = on_both_loops(scenario)
    assert stock[0] == 4 << 20 and stock[1] is None and stock[3] == b""
    assert ours == stock
