"""evloop as an asyncio event loop: ``evloop.new_event_loop()``, ``evloop.run()``,
``evloop.EventLoopPolicy``, ``evloop.install()``.

Design (docs/asyncio.md maps it, with its invariants and fallbacks; the measurements are in
tournament/results/asyncio-log.md): ``EventLoop`` is asyncio's own Unix selector event loop
(``asyncio.SelectorEventLoop``), so its servers, TLS, sendfile, subprocesses, pipes and
signals are the standard library's, with the parts below replaced:

- the hot paths, native (``evloop._asyncio_core._AioCore``, src/aio/core.cpp, the C base of
  ``EventLoop``): ``call_soon``, ``call_later``, ``call_at``, ``call_soon_threadsafe`` and
  the iteration (``_run_once``), with the ready queue as a ring of handles and the timers on a
  4-ary heap in C. The handles are the stdlib's own ``asyncio.Handle`` and
  ``asyncio.TimerHandle`` objects (their slots filled from C); the iteration calls their
  callbacks from C, and keeps the stdlib's order, cancelled-timer clean-up, debug mode (slow
  callbacks logged, through ``_run_debug``) and exception reporting (``_callback_failed``);
- the stream socket transport: ``_SocketTransport``, the stdlib's ``_SelectorSocketTransport``
  behind a C base (``evloop._asyncio_core._AioStreamBase``, src/aio/transport.cpp) whose read
  callbacks recv in C and call the protocol's ``data_received`` (or
  ``get_buffer``/``buffer_updated``) from C, whose ``write`` sends in C when nothing is
  buffered, and whose ``is_closing`` is C; its construction is C too where the stdlib's
  code is one it knows (src/aio/stream_init.cpp); every other branch is the stdlib's code;
- the datagram transport of ``AF_INET``/``AF_INET6`` sockets: ``_DatagramTransport``, the
  stdlib's ``_SelectorDatagramTransport`` behind a C base
  (``evloop._asyncio_core._AioDatagramBase``, src/aio/datagram.cpp) whose read callback
  recvfroms in C and calls ``datagram_received`` from C, and whose ``sendto`` sends in C when
  nothing is buffered;
- the fd registry and the socket methods' hot path, native (src/aio/fds.cpp, sock.cpp):
  ``_add_reader``/``_remove_reader``/``_add_writer``/``_remove_writer`` store the stdlib's
  keys and handles and add the fd to evloop's poller from C; on a plain ``socket.socket``
  ``sock_recv`` receives and waits in C and ``sock_sendall`` makes its first send in C;
- a server's accept path: the listening socket's reader (``_accept_connection``,
  src/aio/accept.cpp) accepts in C and makes each connection's socket, protocol and transport
  there, without the stdlib's task per connection (``_accept_connection2``); TLS, debug mode
  and other sockets take the stdlib's way;
- the selector: ``_EvloopSelector`` registers fds with the evloop C loop
  (``evloop_io_add``/``_modify``/``_remove``); the iteration waits in ``evloop_run_once``,
  where the fd callbacks only record readiness, and then does ``_process_events``'s work in
  C, with the events as the stdlib's epoll selector reports them (an overriding
  ``_process_events`` gets them as ``(SelectorKey, events)`` pairs);
- the cross-thread wake-up: ``call_soon_threadsafe`` from another thread queues its handle
  and then, instead of writing a byte to the self-pipe, submits a C no-op to the evloop loop
  (one lane store, no lock; a wake syscall only when the loop really sleeps in
  ``run_once``), and only if no such wake is already on its way. The self-pipe stays for
  signals (the C signal handler writes to it through ``signal.set_wakeup_fd``);
- the default executor: ``run_in_executor(None, ...)`` runs on the library's work pool
  (src/aio/executor.cpp, ``evloop/_executor.py``), the iteration settling the futures,
  instead of a ``ThreadPoolExecutor``.
"""

from __future__ import annotations

import asyncio
import collections
import errno
import functools
import inspect
import math
import os
import selectors
import socket
import _socket
import sys
import threading
import weakref
from collections.abc import Mapping
from typing import Any, Callable, Coroutine, Dict, Iterator, List, Optional, Tuple, TypeVar

from asyncio import base_events, constants, events, format_helpers, futures, trsock

from ._common import Error
from . import _asyncio_core, _common
from ._executor import _PoolExecutor
from ._loop import _module

__all__ = ["EventLoop", "EventLoopPolicy", "new_event_loop", "run", "install"]

_T = TypeVar("_T")

_EV_READ = selectors.EVENT_READ
_EV_WRITE = selectors.EVENT_WRITE
_C_READ = _common.READABLE
_C_WRITE = _common.WRITABLE
# As the stdlib's epoll selector reads them: hang-up and error wake both directions.
_C_ANY_READ = _common.READABLE | _common.HANGUP | _common.ERROR
_C_ANY_WRITE = _common.WRITABLE | _common.HANGUP | _common.ERROR
_INT_MAX = 2**31 - 1


def _fileobj_to_fd(fileobj: Any) -> int:
    """The fd of an int or an object with fileno(), as selectors checks it."""
    if isinstance(fileobj, int):
        fd = fileobj
    else:
        try:
            fd = int(fileobj.fileno())
        except (AttributeError, TypeError, ValueError):
            raise ValueError(f"Invalid file object: {fileobj!r}") from None
    if fd < 0:
        raise ValueError(f"Invalid file descriptor: {fd}")
    return fd


def _c_events(events: int) -> int:
    return (_C_READ if events & _EV_READ else 0) | (_C_WRITE if events & _EV_WRITE else 0)


def _os_error(e: Error) -> OSError:
    """evloop.Error as the plain OSError subclass the stdlib's selector would raise
    (OSError(EPERM, ...) is a PermissionError)."""
    return OSError(e.errno, os.strerror(e.errno) if e.errno else str(e))


class _KeyMapping(Mapping):
    """The read-only fileobj -> SelectorKey view that get_map() returns."""

    __slots__ = ("_sel",)

    def __init__(self, sel: "_EvloopSelector") -> None:
        self._sel = sel

    def __len__(self) -> int:
        return len(self._sel._keys)

    def __getitem__(self, fileobj: Any) -> selectors.SelectorKey:
        fd = self._sel._lookup_fd(fileobj)
        try:
            return self._sel._keys[fd]
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None

    def __iter__(self) -> Iterator[int]:
        return iter(self._sel._keys)


class _EvloopSelector(selectors.BaseSelector):
    """A selectors.BaseSelector over one evloop C loop (a RawLoop): level-triggered fd
    readiness from evloop's poller (epoll or io_uring), the wait in evloop_run_once."""

    def __init__(self, raw: Any) -> None:
        self._raw = raw
        # What close() hands the RawLoop to instead of freeing it itself (EventLoop.close on
        # one of the loop's own pool threads).
        self._free_later: Optional[Callable[[Any], None]] = None
        self._keys: Dict[int, selectors.SelectorKey] = {}
        self._map = _KeyMapping(self)
        # The fds are added with io_add_native: their C callback only records the readiness
        # (no GIL, no Python inside run_once), which select() takes with take_io() and the
        # loop's native iteration reads directly. Nothing of this selector's runs inside
        # run_once, so on_error only keeps what might (raised again from select()). A closure
        # over a list, not a method: the RawLoop holds on_error in C++, where the garbage
        # collector cannot see a cycle back to this selector.
        pending: List[BaseException] = []
        self._pending = pending

        def on_error(exc: BaseException, callback: Any) -> None:
            if not pending:
                pending.append(exc)

        raw.on_error = on_error

    def _live(self) -> Any:
        raw = self._raw
        if raw is None:  # as the stdlib's epoll selector words it
            raise ValueError("I/O operation on closed selector")
        return raw

    def _lookup_fd(self, fileobj: Any) -> int:
        try:
            return _fileobj_to_fd(fileobj)
        except ValueError:
            # a closed file object: find it by identity, as selectors does
            for key in self._keys.values():
                if key.fileobj is fileobj:
                    return key.fd
            raise

    def register(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        if not events or events & ~(_EV_READ | _EV_WRITE):
            raise ValueError(f"Invalid events: {events!r}")
        fd = _fileobj_to_fd(fileobj)
        if fd in self._keys:
            raise KeyError(f"{fileobj!r} (FD {fd}) is already registered")
        if fd > _INT_MAX:  # as the stdlib's epoll selector refuses it
            raise OverflowError("Python int too large to convert to C int")
        try:
            self._live().io_add_native(fd, _c_events(events))
        except Error as e:
            raise _os_error(e) from None
        key = selectors.SelectorKey(fileobj, fd, events, data)
        self._keys[fd] = key
        return key

    def unregister(self, fileobj: Any) -> selectors.SelectorKey:
        fd = self._lookup_fd(fileobj)
        try:
            key = self._keys.pop(fd)
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None
        try:
            if self._raw is not None:
                self._raw.io_remove(fd)
        except Error:
            pass  # the fd was closed first: as with epoll, it has left the poller already
        return key

    def modify(self, fileobj: Any, events: int, data: Any = None) -> selectors.SelectorKey:
        fd = self._lookup_fd(fileobj)
        try:
            key = self._keys[fd]
        except KeyError:
            raise KeyError(f"{fileobj!r} is not registered") from None
        if not events or events & ~(_EV_READ | _EV_WRITE):
            raise ValueError(f"Invalid events: {events!r}")
        if events != key.events:
            try:
                self._live().io_modify(fd, _c_events(events))
            except Error as e:
                raise _os_error(e) from None
        if events != key.events or data is not key.data:
            key = key._replace(events=events, data=data)
            self._keys[fd] = key
        return key

    def select(self, timeout: Optional[float] = None) -> List[Tuple[selectors.SelectorKey, int]]:
        if timeout is None:
            ns = -1
        elif timeout <= 0:
            ns = 0
        else:
            # never early: a timer due in `timeout` must be due when the wait ends
            ns = math.ceil(timeout * 1e9) if timeout < 1e9 else 10**18
        self._live().run_once(ns)
        return self._evloop_events()

    def _evloop_events(self) -> List[Tuple[selectors.SelectorKey, int]]:
        """What the last run_once reported, as select() returns it (and taken): for select(),
        and for the loop's iteration when its _process_events is not the stdlib's."""
        raw = self._live()
        if self._pending:
            raw.take_io()
            raise self._pending.pop()
        out = []
        keys = self._keys
        for fd, rev in raw.take_io():
            key = keys.get(fd)
            if key is None:
                continue
            ev = 0
            if rev & _C_ANY_READ:
                ev |= _EV_READ
            if rev & _C_ANY_WRITE:
                ev |= _EV_WRITE
            ev &= key.events
            if ev:
                out.append((key, ev))
        return out

    def close(self) -> None:
        self._keys.clear()
        self._map = None  # as the stdlib's selectors: the view points back at this selector
        raw, self._raw = self._raw, None
        if raw is not None:
            raw.on_error = None
            if self._free_later is not None:
                self._free_later(raw)
            else:
                raw.free()

    def get_map(self) -> Mapping:
        return self._map


# Python 3.13 formats a callback for the exception handler's message with the loop's debug flag.
_FORMAT_TAKES_DEBUG = "debug" in inspect.signature(
    format_helpers._format_callback_source).parameters


def _callback_failed(handle: events.Handle, exc: BaseException) -> None:
    """The native iteration calls a handle's callback itself; when it raises (anything but
    SystemExit and KeyboardInterrupt, which go up), this does what ``Handle._run`` does with
    the exception: the same message and context to the loop's exception handler. Raised once
    here first, so that its traceback starts with a frame of the loop's, as the stdlib's starts
    with Handle._run's (a C callable called from C leaves none at all)."""
    try:
        raise exc
    except BaseException:
        pass
    try:
        if _FORMAT_TAKES_DEBUG:
            cb = format_helpers._format_callback_source(handle._callback, handle._args,
                                                        debug=handle._loop.get_debug())
        else:
            cb = format_helpers._format_callback_source(handle._callback, handle._args)
        context = {"message": f"Exception in callback {cb}", "exception": exc,
                   "handle": handle}
        if handle._source_traceback:
            context["source_traceback"] = handle._source_traceback
        handle._loop.call_exception_handler(context)
    finally:
        # This frame is in exc's traceback now: it must not keep the handle (and what its
        # callback holds, a task say) or the context alive, as Handle._run clears `self`.
        handle = exc = context = None  # type: ignore[assignment]


def _run_debug(loop: "EventLoop", handle: events.Handle) -> None:
    """A handle in debug mode, as the stdlib's iteration runs it there: the stdlib's
    ``Handle._run``, ``loop._current_handle`` set meanwhile, and a warning for a callback
    slower than ``loop.slow_callback_duration``."""
    try:
        loop._current_handle = handle
        t0 = loop.time()
        handle._run()
        dt = loop.time() - t0
        if dt >= loop.slow_callback_duration:
            base_events.logger.warning("Executing %s took %.3f seconds",
                                       base_events._format_handle(handle), dt)
    finally:
        loop._current_handle = None
        # A traceback made under this call can keep this frame alive (through f_back): it
        # must not keep the handle, as the stdlib's _run_once clears `handle`.
        handle = None  # type: ignore[assignment]


# The core fills and runs the stdlib's own handle classes (False: their layout is not the
# one it knows, and it makes and runs them through their Python code instead).
_NATIVE_HANDLES = _asyncio_core._aio_setup(events.Handle, events.TimerHandle, _callback_failed,
                                           _run_debug, base_events.BaseEventLoop.run_forever)


# Whether the stdlib's _make_socket_transport first refuses an fd that a transport still uses
# (3.12 on; read from its code, as patch releases may differ).
_ENSURE_FD_NO_TRANSPORT = "_ensure_fd_no_transport" in (
    asyncio.selector_events.BaseSelectorEventLoop._make_socket_transport.__code__.co_names)


class _ReadyView:
    """``loop._ready``: the native ready queue, as far as the stdlib's code and tests use the
    deque it replaces (len, truth, iteration, append, popleft, clear)."""

    __slots__ = ("_loop",)

    def __init__(self, loop: "EventLoop") -> None:
        self._loop = loop

    def __len__(self) -> int:
        return self._loop._evloop_ready_len()

    def __bool__(self) -> bool:
        return self._loop._evloop_ready_len() > 0

    def __iter__(self) -> Iterator[events.Handle]:
        return iter(self._loop._evloop_ready_list())

    def __getitem__(self, i: int) -> events.Handle:
        return self._loop._evloop_ready_list()[i]

    def append(self, handle: events.Handle) -> None:
        self._loop._evloop_ready_append(handle)

    def extend(self, handles: Any) -> None:
        for h in handles:
            self._loop._evloop_ready_append(h)

    def popleft(self) -> events.Handle:
        return self._loop._evloop_ready_popleft()

    def clear(self) -> None:
        self._loop._evloop_ready_clear()

    def __repr__(self) -> str:
        return f"<evloop ready queue {self._loop._evloop_ready_list()!r}>"


class _ScheduledView:
    """``loop._scheduled``: the native timer heap, as far as the stdlib's code and tests use
    the list it replaces (len, truth, iteration and indexing in heap order, ``[0]`` the
    earliest, clear)."""

    __slots__ = ("_loop",)

    def __init__(self, loop: "EventLoop") -> None:
        self._loop = loop

    def __len__(self) -> int:
        return self._loop._evloop_timers_len()

    def __bool__(self) -> bool:
        return self._loop._evloop_timers_len() > 0

    def __iter__(self) -> Iterator[events.TimerHandle]:
        return iter(self._loop._evloop_timers_list())

    def __getitem__(self, i: int) -> events.TimerHandle:
        return self._loop._evloop_timers_list()[i]

    def clear(self) -> None:
        self._loop._evloop_timers_clear()

    def __repr__(self) -> str:
        return f"<evloop timer heap {self._loop._evloop_timers_list()!r}>"


_StdDatagramTransport = asyncio.selector_events._SelectorDatagramTransport
if issubclass(_StdDatagramTransport, asyncio.DatagramTransport):
    _PlainDatagramTransport = _StdDatagramTransport
else:
    class _PlainDatagramTransport(_StdDatagramTransport,  # type: ignore
                                  asyncio.DatagramTransport):
        """The stdlib's datagram transport, also an asyncio.DatagramTransport (it is one
        from Python 3.13 on; before, it only derives from asyncio.Transport)."""


class _DatagramTransport(_asyncio_core._AioDatagramBase,  # type: ignore[misc]
                         _PlainDatagramTransport):
    """The datagram transport of AF_INET and AF_INET6 sockets: the stdlib's, with its read
    callback and ``sendto``'s send-at-once case native (``_AioDatagramBase``,
    src/aio/datagram.cpp: recvfrom into a reused buffer, the address built as socket.recvfrom
    builds it, ``datagram_received`` called from C). The attributes those read on every
    datagram are slots, read at their offsets (src/aio/slots.cpp)."""

    __slots__ = ("_protocol", "_conn_lost", "_buffer", "_sock_fd", "_address", "_extra",
                 "_sock")


_asyncio_core._aio_datagram_setup(_StdDatagramTransport._read_ready, _StdDatagramTransport.sendto,
                                  _DatagramTransport)

# Whether the stdlib's _make_datagram_transport first refuses an fd that a transport still
# uses (3.12 on), as for _make_socket_transport below.
_DATAGRAM_ENSURE_FD_NO_TRANSPORT = "_ensure_fd_no_transport" in (
    asyncio.selector_events.BaseSelectorEventLoop._make_datagram_transport.__code__.co_names)


_StdSocketTransport = asyncio.selector_events._SelectorSocketTransport


class _SocketTransport(_asyncio_core._AioStreamBase, _StdSocketTransport):  # type: ignore[misc]
    """The stdlib's stream socket transport with its hot methods native
    (``_AioStreamBase``, src/aio/transport.cpp): the read callbacks (recv and the protocol's
    ``data_received`` or ``get_buffer``/``buffer_updated`` from C), ``write``'s send-at-once
    case and ``is_closing``; the rest, and every rare branch of those, is the stdlib's code
    on the same attributes. The attributes the native methods read on every message are slots, which
    they read at their offsets (src/aio/slots.cpp); the stdlib's code sets and reads them as
    before."""

    __slots__ = ("_protocol", "_conn_lost", "_read_ready_cb", "_eof", "_empty_waiter",
                 "_buffer", "_sock_fd", "_closing")


_asyncio_core._aio_transport_setup(_StdSocketTransport.write, _SocketTransport)
_StdLoop = asyncio.selector_events.BaseSelectorEventLoop
_asyncio_core._aio_fds_setup(selectors.SelectorKey, _StdLoop._add_reader, _StdLoop._add_writer,
                             _StdLoop._remove_reader, _StdLoop._remove_writer)
_asyncio_core._aio_sock_setup(socket.socket, asyncio.Future, functools.partial,
                              weakref.WeakValueDictionary, _StdLoop._ensure_fd_no_transport,
                              _StdLoop._sock_recv)
_asyncio_core._aio_executor_setup(futures._convert_future_exc)
_asyncio_core._aio_accept_setup(socket.socket, _socket.socket, _StdLoop._accept_connection,
                                _StdLoop._accept_connection2)


# The stdlib's stream transport construction as src/aio/stream_init.cpp writes it: for each
# function it stands for, the names and constants of the versions it was written from (CPython
# 3.11.2, 3.11.7, 3.12 and 3.13). A version whose code differs in either (a store added, a
# limit changed) keeps the stdlib's __init__; tests/test_aio_stream_init.py compares the two
# constructions.
_SST_INIT_NAMES = {
    "3.11.7": ("_read_ready_cb", "super", "__init__", "_eof", "_empty_waiter", "base_events",
               "_set_nodelay", "_sock", "_loop", "call_soon", "_protocol", "connection_made",
               "_add_reader", "_sock_fd", "_read_ready", "futures",
               "_set_result_unless_cancelled"),
    "3.11.2": ("_read_ready_cb", "super", "__init__", "_eof", "_paused", "_empty_waiter",
               "base_events", "_set_nodelay", "_sock", "_loop", "call_soon", "_protocol",
               "connection_made", "_add_reader", "_sock_fd", "_read_ready", "futures",
               "_set_result_unless_cancelled"),
    "3.12": ("_read_ready_cb", "super", "__init__", "_eof", "_empty_waiter", "_HAS_SENDMSG",
             "_write_sendmsg", "_write_ready", "_write_send", "base_events", "_set_nodelay",
             "_sock", "_loop", "call_soon", "_protocol", "connection_made", "_add_reader",
             "_sock_fd", "_read_ready", "futures", "_set_result_unless_cancelled"),
}
_ST_INIT_NAMES = {
    "3.11.7": ("super", "__init__", "trsock", "TransportSocket", "_extra", "getsockname",
               "OSError", "getpeername", "socket", "error", "_sock", "fileno", "_sock_fd",
               "_protocol_connected", "set_protocol", "_server", "_buffer_factory", "_buffer",
               "_conn_lost", "_closing", "_paused", "_attach", "_transports"),
    "3.11.2": ("super", "__init__", "trsock", "TransportSocket", "_extra", "getsockname",
               "OSError", "getpeername", "socket", "error", "_sock", "fileno", "_sock_fd",
               "_protocol_connected", "set_protocol", "_server", "_buffer_factory", "_buffer",
               "_conn_lost", "_closing", "_attach", "_transports"),
    "3.12": ("super", "__init__", "trsock", "TransportSocket", "_extra", "getsockname",
             "OSError", "getpeername", "socket", "error", "_sock", "fileno", "_sock_fd",
             "_protocol_connected", "set_protocol", "_server", "collections", "deque",
             "_buffer", "_conn_lost", "_closing", "_paused", "_attach", "_transports"),
}
_STREAM_INIT_CODE = {
    # function: the (names, constants) pairs of the versions it was written from; 3.13's
    # are 3.12's
    "_SelectorSocketTransport.__init__": tuple(
        (names, (None, False)) for names in _SST_INIT_NAMES.values()),
    "_SelectorTransport.__init__": tuple(
        (names, (None, "socket", "sockname", "peername", False, 0))
        for names in _ST_INIT_NAMES.values()),
    "_FlowControlMixin.__init__": (
        (("super", "__init__", "_loop", "_protocol_paused", "_set_write_buffer_limits"),
         (None, False)),),
    "BaseTransport.__init__": ((("_extra",), (None,)),),
    "_SelectorSocketTransport.set_protocol": (
        (("isinstance", "protocols", "BufferedProtocol", "_read_ready__get_buffer",
          "_read_ready_cb", "_read_ready__data_received", "super", "set_protocol"), (None,)),),
    "_SelectorTransport.set_protocol": ((("_protocol", "_protocol_connected"), (None, True)),),
    "_FlowControlMixin._set_write_buffer_limits": (
        (("ValueError", "_high_water", "_low_water"),
         (None, 65536, 4, 0, "high (", ") must be >= low (", ") must be >= 0")),),
    "_set_nodelay": (
        (("family", "socket", "AF_INET", "AF_INET6", "type", "SOCK_STREAM", "proto",
          "IPPROTO_TCP", "setsockopt", "TCP_NODELAY"), (None, 1)),),
}


def _stream_init_setup() -> bool:
    """Makes _SocketTransport.__init__ the native construction when every function of the
    stdlib's construction is one src/aio/stream_init.cpp was written from; whether it did."""
    se = asyncio.selector_events
    tr = asyncio.transports
    funcs = {
        "_SelectorSocketTransport.__init__": _StdSocketTransport.__init__,
        "_SelectorTransport.__init__": se._SelectorTransport.__init__,
        "_FlowControlMixin.__init__": tr._FlowControlMixin.__init__,
        "BaseTransport.__init__": tr.BaseTransport.__init__,
        "_SelectorSocketTransport.set_protocol": _StdSocketTransport.set_protocol,
        "_SelectorTransport.set_protocol": se._SelectorTransport.set_protocol,
        "_FlowControlMixin._set_write_buffer_limits":
            tr._FlowControlMixin._set_write_buffer_limits,
        "_set_nodelay": base_events._set_nodelay,
    }
    for name, f in funcs.items():
        code = getattr(f, "__code__", None)
        if code is None or (code.co_names, code.co_consts) not in _STREAM_INIT_CODE[name]:
            return False
    st_names = se._SelectorTransport.__init__.__code__.co_names
    if "deque" in st_names:
        factory: Any = collections.deque
    elif getattr(se._SelectorTransport, "_buffer_factory", None) is bytearray:
        factory = bytearray
    else:
        return False
    sst_names = _StdSocketTransport.__init__.__code__.co_names
    write_ready = None
    if "_write_ready" in sst_names:
        write_ready = "_write_sendmsg" if se._HAS_SENDMSG else "_write_send"
    # Where _paused is stored (stream_init.cpp's InitGlobals::paused): the versions above
    # store it in one __init__ of the two, or in neither.
    if "_paused" in st_names and "_paused" in sst_names:
        return False
    paused = 1 if "_paused" in st_names else 2 if "_paused" in sst_names else 0
    # 3.13's Server._attach(transport) is called with the transport, the ones before without.
    attach_self = base_events.Server._attach.__code__.co_argcount == 2
    _asyncio_core._aio_stream_init_setup(
        _SocketTransport, socket.socket, _StdSocketTransport.__init__, trsock.TransportSocket,
        asyncio.BufferedProtocol, factory, futures._set_result_unless_cancelled, write_ready,
        paused, attach_self)
    _SocketTransport.__init__ = _asyncio_core._AioStreamBase._evloop_init  # type: ignore
    return True


_STREAM_INIT_NATIVE = _stream_init_setup()


# The loop's methods that the stdlib's code calls on self and the native core replaces
# (src/aio/aio.h's Hook, bit by bit): where a subclass overrides one, or one is set on the
# instance, the core calls it as the stdlib does.
_HOOKS = ("time", "call_at", "_process_events", "_write_to_self",
          "_add_reader", "_add_writer", "_remove_reader", "_remove_writer", "_run_once")


class EventLoop(_asyncio_core._AioCore,  # type: ignore[misc,valid-type]
                asyncio.SelectorEventLoop):
    """An asyncio event loop on evloop: asyncio's Unix selector event loop with its ready
    queue, timers and iteration native (``_AioCore``), evloop's poller and wait as its
    selector, and evloop's lane submit as its cross-thread wake-up.

    ``EventLoop(*, backend=None, variant=None, spin_ns=0, fence=None)``: as ``evloop.Loop``
    (``spin_ns`` 0 by default: an asyncio loop that waits for I/O does not spin)."""

    def __init__(self, *, backend: Optional[str] = None, variant: Optional[str] = None,
                 spin_ns: int = 0, fence: Optional[str] = None) -> None:
        raw = _module(variant).RawLoop(backend, spin_ns, 0, False, None, fence)
        self._evloop_raw = raw
        self._evloop_wake = raw.wake
        selector = _EvloopSelector(raw)
        # The core calls the methods of _HOOKS that a subclass overrides as the stdlib does.
        cls = type(self)
        hooks = sum(1 << i for i, name in enumerate(_HOOKS)
                    if getattr(cls, name) is not getattr(EventLoop, name))
        self._evloop_attach(raw, selector, selector._keys, hooks, _C_ANY_READ, _C_ANY_WRITE)
        super().__init__(selector)

    # The stdlib's deque and heap list, replaced by the native queue and heap.
    @property
    def _ready(self) -> _ReadyView:
        return _ReadyView(self)

    @_ready.setter
    def _ready(self, handles: Any) -> None:
        self._evloop_ready_clear()
        for h in handles:
            self._evloop_ready_append(h)

    @property
    def _scheduled(self) -> _ScheduledView:
        return _ScheduledView(self)

    @_scheduled.setter
    def _scheduled(self, timers: Any) -> None:
        self._evloop_timers_clear()
        for t in timers:
            self._evloop_timers_add(t)

    def _write_to_self(self) -> None:
        # The stdlib's wake-up after queueing a handle from elsewhere (its signal path, and
        # call_soon_threadsafe in debug mode; otherwise the core wakes the loop itself): make
        # a loop waiting in run_once return. No syscall unless it really sleeps.
        try:
            self._evloop_wake()
        except Error:
            pass  # closed or closing: nothing waits any more

    def _make_socket_transport(self, sock: Any, protocol: Any, waiter: Any = None, *,
                               extra: Any = None, server: Any = None) -> Any:
        if type(sock) is not socket.socket:
            # A subclass may have its own recv, recv_into or send, which the stdlib's
            # transport calls and the native one (reading the fd itself) would not.
            return super()._make_socket_transport(sock, protocol, waiter, extra=extra,
                                                  server=server)
        if _ENSURE_FD_NO_TRANSPORT:  # as the stdlib's method checks first
            self._ensure_fd_no_transport(sock)
        return _SocketTransport(self, sock, protocol, waiter, extra, server)

    def _make_datagram_transport(self, sock: Any, protocol: Any, address: Any = None,
                                 waiter: Any = None, extra: Any = None) -> Any:
        if type(sock) is socket.socket and sock.family in (socket.AF_INET, socket.AF_INET6):
            if _DATAGRAM_ENSURE_FD_NO_TRANSPORT:  # as the stdlib's method checks first
                self._ensure_fd_no_transport(sock)
            return _DatagramTransport(self, sock, protocol, address, waiter, extra)
        tr = super()._make_datagram_transport(sock, protocol, address, waiter, extra)
        if type(tr) is not _PlainDatagramTransport:  # the same object layout: only the class
            tr.__class__ = _PlainDatagramTransport
        return tr

    async def sock_recv(self, sock: Any, n: int) -> bytes:
        """Receive up to n bytes from the socket (the stdlib's sock_recv; for a plain
        socket.socket outside debug mode the recv, the wait and the callbacks are in C,
        src/aio/sock.cpp)."""
        r = self._evloop_sock_recv(sock, n)
        if r.__class__ is bytes:
            return r  # type: ignore[no-any-return]
        if r is NotImplemented:
            return await _StdLoop.sock_recv(self, sock, n)  # type: ignore[no-any-return]
        return await r  # type: ignore[no-any-return]

    async def sock_sendall(self, sock: Any, data: Any) -> None:
        """Send all of data on the socket (the stdlib's sock_sendall; for a plain
        socket.socket outside debug mode the first send is made in C)."""
        n = self._evloop_sock_send(sock, data)
        if n < 0:
            return await _StdLoop.sock_sendall(self, sock, data)  # type: ignore[no-any-return]
        if n == len(data):
            return None
        # the rest as the stdlib sends it: a writer that sends what is left at each readiness
        fut = self.create_future()
        fd = sock.fileno()
        self._ensure_fd_no_transport(fd)
        handle = self._add_writer(fd, self._sock_sendall, fut, sock, memoryview(data), [n])
        fut.add_done_callback(functools.partial(self._sock_write_done, fd, handle=handle))
        return await fut  # type: ignore[no-any-return]

    def _evloop_accept_failed(self, exc: OSError, protocol_factory: Any, sock: Any,
                              sslcontext: Any = None, server: Any = None, backlog: int = 100,
                              *args: Any) -> None:
        """accept's error exc, out of descriptors or memory, as the stdlib's _accept_connection
        handles it (the native accept path, src/aio/accept.cpp, met it and goes on trying):
        reported, and the listener rests ACCEPT_RETRY_DELAY before _start_serving again."""
        self.call_exception_handler({"message": "socket.accept() out of system resource",
                                     "exception": exc, "socket": trsock.TransportSocket(sock)})
        self._remove_reader(sock.fileno())
        self.call_later(constants.ACCEPT_RETRY_DELAY, self._start_serving, protocol_factory,
                        sock, sslcontext, server, backlog, *args)

    def run_in_executor(self, executor: Any, func: Callable[..., _T], *args: Any) -> Any:
        """The stdlib's run_in_executor; with no executor of the caller's (executor None and
        no set_default_executor), func runs on evloop's work pool (evloop/_executor.py)."""
        self._check_closed()
        if self._debug:
            self._check_callback(func, "run_in_executor")
        if executor is None:
            executor = self._default_executor
            self._check_default_executor()
            if executor is None:
                executor = self._default_executor = _PoolExecutor(self)
            if executor.__class__ is _PoolExecutor and not executor._shutdown:
                fut = self._evloop_run_in_executor(func, args)
                if fut is not NotImplemented:
                    return fut
        return futures.wrap_future(executor.submit(func, *args), loop=self)

    def close(self) -> None:
        # Every call the work pool accepted runs and returns before the pool ends with the
        # loop (the stdlib's close leaves its pool's threads running them).
        if not self.is_running() and not self.is_closed():
            if self._evloop_work_drain() is None and isinstance(self._selector, _EvloopSelector):
                # A call on this loop's own pool closes it (run_in_executor(None, loop.close)):
                # the RawLoop's free waits for every pool call to return, this one too, so a
                # thread of its own frees it; the loop reads as closed at once, as the stock
                # loop's close() from its executor leaves it.
                self._selector._free_later = self._free_on_thread
        super().close()

    def _free_on_thread(self, raw: Any) -> None:
        def free() -> None:
            raw.free()  # once the pool's calls have returned
            self._evloop_work_drain()  # settles their items (the closed loop's futures stay)

        threading.Thread(target=free, name="evloop-close").start()

    @property
    def evloop_backend(self) -> str:
        """The poller under this loop: ``"epoll"`` or ``"io_uring"``."""
        return str(self._evloop_raw.backend)

    def evloop_stats(self) -> Any:
        """The C loop's counters (``evloop.Stats``)."""
        return self._evloop_raw.stats()


def new_event_loop(**kwargs: Any) -> EventLoop:
    """A new asyncio event loop on evloop (keyword arguments: see ``EventLoop``)."""
    return EventLoop(**kwargs)


class EventLoopPolicy(asyncio.DefaultEventLoopPolicy):  # type: ignore[misc,valid-type]
    """The default asyncio policy, making evloop loops."""

    _loop_factory = EventLoop

    def __repr__(self) -> str:
        return "<evloop.EventLoopPolicy>"


def install() -> None:
    """Makes evloop asyncio's default loop: ``asyncio.set_event_loop_policy(
    evloop.EventLoopPolicy())``. Prefer ``evloop.run(main())`` or ``asyncio.Runner(
    loop_factory=evloop.new_event_loop)``: policies are deprecated from Python 3.14."""
    asyncio.set_event_loop_policy(EventLoopPolicy())


def run(main: Coroutine[Any, Any, _T], *, debug: Optional[bool] = None,
        **loop_kwargs: Any) -> _T:
    """``asyncio.run(main)`` on a new evloop loop: runs the coroutine, cancels what is
    left, shuts down async generators and the default executor, closes the loop.
    Ctrl-C cancels the main task, as asyncio.run does."""
    if asyncio.events._get_running_loop() is not None:
        # the stdlib's own message, before the coroutine is wrapped in anything
        raise RuntimeError("asyncio.run() cannot be called from a running event loop")

    def factory() -> EventLoop:
        return EventLoop(**loop_kwargs)

    if not hasattr(asyncio, "Runner"):  # Python 3.9 and 3.10: asyncio.run under our policy
        policy = asyncio.get_event_loop_policy()
        ours = EventLoopPolicy()
        ours._loop_factory = factory  # type: ignore[assignment]
        asyncio.set_event_loop_policy(ours)
        try:
            return asyncio.run(main, debug=bool(debug))
        finally:
            asyncio.set_event_loop_policy(policy)
    with asyncio.Runner(debug=debug, loop_factory=factory) as runner:
        return runner.run(main)
