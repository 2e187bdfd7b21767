"""evloop.Loop: the Python API, written over the 1:1 binding of the C API
(``evloop._arena.RawLoop`` / ``evloop._chunk.RawLoop``, one per ingress variant).

What is here and not in C++: seconds instead of ns, TimerHandle, a reader and a writer
sharing one fd registration, the exception handler, Ctrl-C (a signal wake-up while run()
blocks the main thread; run_in_thread() with an interruptible join), the context manager.
The hand-off itself (submit, submit_internal, queue_microtask, submit_batch, stop) is the
C++ method, bound once per loop: no Python frame on that path.
"""

from __future__ import annotations

import functools
import math
import os
import signal
import socket
import threading
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Tuple, Type, Union

from ._common import Error, State, default_exception_handler
from . import _arena, _chunk

_MODULES = {"arena": _arena, "chunk": _chunk}
_STATES = (State.AWAKE, State.RUNNING, State.SLEEPING, State.TERMINATING, State.TERMINATED)

READABLE = _arena.READABLE
WRITABLE = _arena.WRITABLE
# A reader also runs on hang-up and error, as a writer does (level-triggered, like select).
_WHEN = (READABLE | _arena.HANGUP | _arena.ERROR, WRITABLE | _arena.HANGUP | _arena.ERROR)
_BITS = (READABLE, WRITABLE)

_PathLike = Union[str, "os.PathLike[str]"]
FileDescriptorLike = Any


def _module(variant: Optional[str]) -> Any:
    if variant is None:
        variant = os.environ.get("EVLOOP_VARIANT") or "arena"
    try:
        return _MODULES[variant]
    except KeyError:
        raise ValueError(f"unknown variant {variant!r}: expected one of "
                         f"{list(_MODULES)}") from None


def _ns(seconds: float, what: str) -> int:
    """Seconds to ns for the C timers, rounded up (a timer never fires early)."""
    if math.isnan(seconds):
        raise ValueError(f"{what} is NaN")
    if seconds <= 0:
        return 0
    return math.ceil(seconds * 1e9) if seconds < 1.8e10 else 2**64 - 1  # inf: never


def _fileno(fd: FileDescriptorLike) -> int:
    n = fd if isinstance(fd, int) else fd.fileno()
    if not 0 <= n <= 0x7FFFFFFF:
        raise ValueError(f"invalid file descriptor: {n}")
    return n


def _report(cell: List[Optional[Callable[[BaseException, Any], object]]],
            exc: BaseException, callback: Any) -> None:
    """The loop's on_error: an Exception goes to the handler (cell[0] or the default);
    anything else (KeyboardInterrupt, SystemExit) is raised again, which stops the loop
    gracefully and makes run() raise it. So does a BaseException from the handler; an
    Exception from the handler goes to sys.unraisablehook."""
    if not isinstance(exc, Exception):
        raise exc
    handler = cell[0] or default_exception_handler
    try:
        handler(exc, callback)
    except Exception as e:  # noqa: BLE001 - the handler's own failure
        _arena.write_unraisable(e, handler)


def _call(report: Callable[[BaseException, Any], None], fn: Callable[..., object],
          args: Tuple[Any, ...]) -> None:
    try:
        fn(*args)
    except Exception as e:  # noqa: BLE001 - handed to the handler
        report(e, fn)


def _dispatch_io(fds: Dict[int, list], report: Callable[[BaseException, Any], None],
                 fd: int, events: int) -> None:
    """The one C callback of every fd: runs its reader, then its writer (read again: the
    reader may have removed it), as the events say."""
    rw = fds.get(fd)
    if rw is None:
        return
    for slot in (0, 1):
        call = rw[slot]
        if call is not None and events & _WHEN[slot]:
            _call(report, *call)


class TimerHandle:
    """What ``Loop.call_later`` and ``Loop.call_every`` return."""

    __slots__ = ("_t", "_delay", "_interval")

    def __init__(self, timer: Any, delay: float, interval: float) -> None:
        self._t = timer  # the RawLoop's Timer: the C arg, until the timer is done
        self._delay = max(delay, 0.0)
        self._interval = interval

    def cancel(self) -> bool:
        """Cancels the timer. Returns True if this call stopped it (its callback will not
        start, or for call_every, not start again); False if it had already fired
        (one-shot), was cancelled, or its loop has ended. Any thread."""
        return bool(self._t.cancel())

    def cancelled(self) -> bool:
        """True once cancel() succeeded, or the loop ended before the timer fired."""
        return bool(self._t.cancelled)

    def restart(self, delay: Optional[float] = None) -> bool:
        """Makes the timer fire delay seconds from now (default: its delay or interval); a
        call_every timer keeps its interval from then on. False if it is no longer armed
        (fired, cancelled, loop ended). Any thread (from another one, a firing the loop has
        already begun still runs)."""
        return bool(self._t.again(_ns(self.interval if delay is None else delay, "delay")))

    @property
    def active(self) -> bool:
        """True while the timer may still fire."""
        return bool(self._t.active)

    @property
    def periodic(self) -> bool:
        """True for call_every timers."""
        return self._interval > 0

    @property
    def interval(self) -> float:
        """The delay (call_later) or interval (call_every) in seconds."""
        return self._interval or self._delay

    def __repr__(self) -> str:
        what = "every" if self.periodic else "after"
        state = "armed" if self.active else "cancelled" if self.cancelled() else "done"
        return f"<evloop.TimerHandle {what} {self.interval}s {state}>"


def _dispatch_signal(signals: Dict[int, tuple], report: Callable[[BaseException, Any], None],
                     sig: int) -> None:
    """The C callback of a watched signal: its handler now (none once removed)."""
    call = signals.get(sig)
    if call is not None:
        _call(report, *call)


class _SignalWakeup:
    """Ctrl-C while run() blocks the main thread in C. Python's C-level signal handler
    only sets a flag; the Python handler runs when the main thread next checks it, and the
    loop may be asleep in a futex or the poller. So, while run() lasts: the handler also
    writes the signal's number to a pipe (signal.set_wakeup_fd); a helper thread blocked
    on the pipe submits check_signals, which runs the Python handlers on the loop thread.
    A KeyboardInterrupt from them stops the loop gracefully and is raised from run(). No
    periodic wake-up, and no fd in the loop (it keeps sleeping on its futex)."""

    def __init__(self, submit: Callable[..., None], check: Callable[[], None]) -> None:
        self._r, self._w = os.pipe()
        os.set_blocking(self._w, False)
        try:
            self._old = signal.set_wakeup_fd(self._w, warn_on_full_buffer=False)
        except ValueError:  # not the main thread of the main interpreter
            os.close(self._r)
            os.close(self._w)
            raise
        self._closing = False
        self._thread = threading.Thread(target=self._watch, args=(submit, check),
                                        name="evloop-signals", daemon=True)
        self._thread.start()

    def _watch(self, submit: Callable[..., None], check: Callable[[], None]) -> None:
        while os.read(self._r, 512) and not self._closing:
            try:
                submit(check)
            except Error:
                pass  # the loop is stopping: run() returns soon and Python checks then

    def close(self) -> None:
        self._closing = True
        current = signal.set_wakeup_fd(self._old)
        if current != self._w:  # someone replaced ours meanwhile: theirs stays
            signal.set_wakeup_fd(current)
        os.write(self._w, b"\0")
        self._thread.join()
        os.close(self._r)
        os.close(self._w)


class Loop:
    """An evloop event loop.

    ``Loop(backend=None, variant=None, spin_ns=-1, batch_budget=0, profile=None, fence=None)``

    - backend: ``None``/``"auto"`` (the best that starts here, or ``$EVLOOP_BACKEND``),
      ``"epoll"``, ``"io_uring"`` or ``"kqueue"``. One that cannot start raises
      ``evloop.Error`` with ``errno.ENOTSUP``.
    - variant: the ingress queue, ``"arena"`` or ``"chunk"``; ``None`` means
      ``$EVLOOP_VARIANT`` or ``"arena"``.
    - spin_ns: how long the loop spins before sleeping: -1 adaptive, 0 never, else ns.
    - batch_budget: external tasks run per tick: 0 adaptive, else a fixed count.
    - profile: a profile saved by ``evloop.autotune(save=...)`` to start from where the
      arguments above are adaptive or "auto". ``None``: ``$EVLOOP_PROFILE`` if set; ``""``:
      none. A missing or malformed file raises ``evloop.Error`` (``ENOENT``, ``EINVAL``).
    - fence: how a submit is ordered against the loop going to sleep: ``None``/``"auto"``,
      ``"membarrier"`` or ``"seq_cst"`` (see ``evloop_config.fence``).

    Threads: ``run()`` runs the loop on the calling thread (or ``run_in_thread()`` on a new
    one); every other method may be called from any thread and from callbacks, which run
    on the loop thread one at a time. The GIL is released while the loop waits.

    A callback that raises an ``Exception`` goes to the exception handler (default: the
    traceback is printed; the loop keeps running). ``KeyboardInterrupt`` and
    ``SystemExit`` stop the loop gracefully (what was accepted still runs) and are raised
    from ``run()``. Ctrl-C does the same while ``run()`` blocks the main thread; with the
    loop on another thread (``run_in_thread()``), a Ctrl-C in the main thread's ``join()``
    or ``with`` block stops the loop gracefully, waits for it, and propagates.

    ``with evloop.Loop() as loop:`` stops the loop, waits for its thread if
    ``run_in_thread()`` started one, and closes it on exit, also on an exception. Close
    loops you are done with: ``close()`` runs the tasks still queued and releases every
    callback the loop holds (a loop left to the garbage collector with callbacks that
    refer back to it may never be freed).
    """

    def __init__(self, backend: Optional[str] = None, variant: Optional[str] = None,
                 spin_ns: int = -1, batch_budget: int = 0,
                 profile: Optional[_PathLike] = None, fence: Optional[str] = None) -> None:
        mod = _module(variant)
        if spin_ns < -1:
            raise ValueError("spin_ns must be -1 (adaptive), 0 (never) or a duration in ns")
        if not 0 <= batch_budget <= 0xFFFFFFFF:
            raise ValueError("batch_budget must be 0 (adaptive) or a positive count")
        path = None if profile is None else os.fspath(profile)
        c = mod.RawLoop(backend, spin_ns, batch_budget, False, path, fence)
        self._c = c
        self._mod = mod
        self._backend: str = c.backend
        # The hand-off and stop: the C++ methods themselves (these attributes shadow the
        # documented methods below, which do the same one frame slower).
        self.submit = c.submit  # type: ignore[method-assign]
        self.submit_internal = c.submit_internal  # type: ignore[method-assign]
        self.queue_microtask = c.queue_microtask  # type: ignore[method-assign]
        self.submit_batch = c.submit_batch  # type: ignore[method-assign]
        self.stop = c.stop  # type: ignore[method-assign]
        self._handler: List[Optional[Callable[[BaseException, Any], object]]] = [None]
        self._report = functools.partial(_report, self._handler)
        c.on_error = self._report
        self._fds: Dict[int, list] = {}  # fd -> [(reader, args) or None, (writer, args) or None]
        self._io_lock = threading.Lock()
        self._dispatch = functools.partial(_dispatch_io, self._fds, self._report)
        self._signals: Dict[int, tuple] = {}  # signal -> (callback, args)
        self._thread: Optional[threading.Thread] = None
        self._thread_error: Optional[BaseException] = None

    # ------------------------------------------------------------------ tasks

    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Queues fn(*args) to run on the loop thread. Any thread; tasks from one thread run
        in the order submitted; a task submitted from a callback runs after it, never
        nested. Raises LoopClosedError once the loop is stopping or closed (not accepted)."""
        self._c.submit(fn, *args)

    def submit_internal(self, fn: Callable[..., object], *args: Any) -> None:
        """As submit(), but runs before external tasks still waiting. Any thread."""
        self._c.submit_internal(fn, *args)

    def queue_microtask(self, fn: Callable[..., object], *args: Any) -> None:
        """Runs fn(*args) right after the callback now running (from another thread: after
        the next callback ends), before any other task. Any thread."""
        self._c.queue_microtask(fn, *args)

    def submit_batch(self, tasks: Any) -> None:
        """Queues a sequence of tasks at once, in order: each item a callable or a tuple
        ``(fn, *args)``. One publication and at most one wake for the batch; all are
        accepted or none (LoopClosedError, TypeError for an item that is not callable).
        Any thread."""
        self._c.submit_batch(tasks)

    def stop(self) -> None:
        """Asks the loop to stop gracefully: new work is refused (LoopClosedError),
        everything accepted runs, then run() returns. Any thread; idempotent; a no-op on a
        closed loop."""
        self._c.stop()

    # ------------------------------------------------------------------ timers

    def _timer(self, delay: float, interval: float, fn: Callable[..., object],
               args: Tuple[Any, ...]) -> TimerHandle:
        interval_ns = max(_ns(interval, "interval"), 1) if interval else 0
        t = self._c.timer_start(_ns(delay, "delay"), interval_ns, fn, *args)
        return TimerHandle(t, delay, interval)

    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> TimerHandle:
        """Runs fn(*args) once, no earlier than delay seconds from now; returns a
        TimerHandle. Any thread."""
        return self._timer(delay, 0.0, fn, args)

    def call_every(self, interval: float, fn: Callable[..., object], *args: Any) -> TimerHandle:
        """Runs fn(*args) every interval seconds (the first after one interval; deadlines
        counted from the previous one, missed periods skipped) until cancelled. Any
        thread."""
        if not interval > 0:
            raise ValueError("interval must be > 0 seconds")
        return self._timer(interval, interval, fn, args)

    def time(self) -> float:
        """The loop's clock (CLOCK_MONOTONIC, as its timers use it), in seconds."""
        return self._mod.now_ns() / 1e9

    # ------------------------------------------------------------------ signals

    def add_signal_handler(self, sig: int, callback: Callable[..., object], *args: Any) -> None:
        """Runs callback(*args) on the loop thread after each delivery of signal sig (to any
        thread of the process; deliveries may coalesce), replacing an earlier handler of sig
        on this loop. While a loop watches sig, the signal's previous disposition (Python's
        handler, the default action) does not run; it is put back by
        remove_signal_handler() and at the loop's end. One loop at a time per signal
        (evloop.Error EBUSY). Any thread."""
        sig = int(signal.Signals(sig))
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        with self._io_lock:
            if sig not in self._signals:
                self._signals[sig] = (callback, args)
                try:
                    self._c.signal_start(
                        sig, functools.partial(_dispatch_signal, self._signals, self._report, sig))
                except BaseException:
                    del self._signals[sig]
                    raise
            self._signals[sig] = (callback, args)

    def remove_signal_handler(self, sig: int) -> bool:
        """Stops watching sig: its handler does not start after this returns, and the
        previous disposition is back (from another thread, a moment later). True if a
        handler was set. Any thread."""
        sig = int(signal.Signals(sig))
        with self._io_lock:
            if self._signals.pop(sig, None) is None:
                return False
        self._c.signal_stop(sig)
        return True

    # ------------------------------------------------------------------ fds

    def _add_io(self, slot: int, fd: FileDescriptorLike, fn: Callable[..., object],
                args: Tuple[Any, ...]) -> None:
        n = _fileno(fd)
        if not callable(fn):
            raise TypeError(f"callback must be callable, not {type(fn).__name__}")
        with self._io_lock:
            rw = self._fds.get(n)
            if rw is None:
                rw = self._fds[n] = [None, None]
                rw[slot] = (fn, args)
                try:
                    self._c.io_add(n, _BITS[slot], self._dispatch)
                except BaseException:
                    del self._fds[n]
                    raise
            else:
                if rw[slot] is None:
                    self._c.io_modify(n, READABLE | WRITABLE)
                rw[slot] = (fn, args)

    def _remove_io(self, slot: int, fd: FileDescriptorLike) -> bool:
        n = _fileno(fd)
        with self._io_lock:
            rw = self._fds.get(n)
            if rw is None or rw[slot] is None:
                return False
            rw[slot] = None
            if rw[1 - slot] is not None:
                self._c.io_modify(n, _BITS[1 - slot])
                return True
            del self._fds[n]
        # Outside the lock: from another thread this waits for a callback of the fd that
        # the loop is running, and that callback may add or remove fds itself.
        self._c.io_remove(n)
        return True

    def add_reader(self, fd: FileDescriptorLike, fn: Callable[..., object], *args: Any) -> None:
        """Calls fn(*args) on the loop thread while fd (an int or an object with fileno())
        is readable, hung up or in error; replaces an earlier reader of fd.
        Level-triggered. The fd stays yours: remove it before closing it. Any thread."""
        self._add_io(0, fd, fn, args)

    def add_writer(self, fd: FileDescriptorLike, fn: Callable[..., object], *args: Any) -> None:
        """As add_reader, for writability."""
        self._add_io(1, fd, fn, args)

    def remove_reader(self, fd: FileDescriptorLike) -> bool:
        """Stops watching fd for reading; True if a reader was registered. No reader
        callback for it starts after this returns. Any thread."""
        return self._remove_io(0, fd)

    def remove_writer(self, fd: FileDescriptorLike) -> bool:
        """Stops watching fd for writing; True if a writer was registered."""
        return self._remove_io(1, fd)

    # ------------------------------------------------------------------ sockets
    #
    # The completion operations (evloop_accept, evloop_recv, evloop_send): each call starts
    # one and returns; callback(result, error) runs once on the loop thread when it is done,
    # error None or an OSError (errno ECANCELED after sock_cancel() or stop()). Per socket at
    # most one accept and one recv may be pending, plus any number of sends, done in order;
    # a socket watched with add_reader/add_writer cannot have operations (evloop.Error EBUSY).
    # The socket stays yours: close it once nothing is pending on it. Any thread.

    def _op(self, start: Callable[..., None], sock: FileDescriptorLike,
            callback: Callable[[Any, Optional[OSError]], object], done: Callable[[int], Any],
            *buf: Any) -> None:
        if not callable(callback):
            raise TypeError(f"callback must be callable, not {type(callback).__name__}")
        report = self._report

        def complete(fd: int, res: int) -> None:
            if res < 0:
                _call(report, callback, (None, OSError(-res, os.strerror(-res))))
            else:
                _call(report, callback, (done(res), None))

        start(_fileno(sock), *buf, complete)

    def sock_accept(self, sock: FileDescriptorLike,
                    callback: Callable[[Any, Optional[OSError]], object]) -> None:
        """Accepts one connection on the listening socket sock: callback((conn, address),
        None), conn a non-blocking socket.socket. Call again for the next one."""
        def done(fd: int) -> Tuple[socket.socket, Any]:
            conn = socket.socket(fileno=fd)
            conn.setblocking(False)  # as the fd is; Python's own flag would say blocking
            try:
                return conn, conn.getpeername()
            except OSError:
                return conn, None

        self._op(self._c.accept, sock, callback, done)

    def sock_recv(self, sock: FileDescriptorLike, nbytes: int,
                  callback: Callable[[Optional[bytes], Optional[OSError]], object]) -> None:
        """Receives up to nbytes: callback(data, None), data b"" when the peer has closed."""
        buf = bytearray(nbytes)

        def done(n: int) -> bytes:
            del buf[n:]
            return bytes(buf)

        self._op(self._c.recv, sock, callback, done, buf)

    def sock_recv_into(self, sock: FileDescriptorLike, buf: Any,
                       callback: Callable[[Optional[int], Optional[OSError]], object]) -> None:
        """Receives into buf (a writable buffer, which must not be resized meanwhile):
        callback(nbytes, None), 0 when the peer has closed."""
        self._op(self._c.recv, sock, callback, lambda n: n, buf)

    def sock_sendall(self, sock: FileDescriptorLike, data: Any,
                     callback: Callable[[None, Optional[OSError]], object]) -> None:
        """Sends all of data (a bytes-like object, held until done): callback(None, None)
        once all is sent. Sends on one socket complete in the order they were started."""
        self._op(self._c.send, sock, callback, lambda n: None, data)

    def sock_cancel(self, sock: FileDescriptorLike) -> bool:
        """Cancels the operations pending on sock: each callback gets an OSError (ECANCELED).
        False if none was pending. Any thread."""
        return bool(self._c.op_cancel(_fileno(sock)))

    # ------------------------------------------------------------------ running

    def run(self) -> None:
        """Runs the loop on the calling thread until stop() (from any thread or a callback),
        then runs everything already accepted, releases timers and fds, and returns; the
        loop is then terminated. The GIL is released while the loop waits. On the main
        thread, Ctrl-C stops the loop gracefully and raises KeyboardInterrupt here; a
        KeyboardInterrupt or SystemExit raised by a callback does the same."""
        c = self._c
        wakeup = None
        if threading.current_thread() is threading.main_thread() and not c.closed:
            try:
                wakeup = _SignalWakeup(c.submit_internal, self._mod.check_signals)
            except ValueError:
                pass  # a sub-interpreter: no signal handlers to run anyway
        try:
            c.run()
        finally:
            if wakeup is not None:
                wakeup.close()
            self._forget_if_ended()

    def _forget_if_ended(self) -> None:
        if self._c.closed or _STATES[self._c.state] is State.TERMINATED:
            with self._io_lock:  # the loop has released every fd and signal
                self._fds.clear()
                self._signals.clear()

    def run_once(self, timeout: Optional[float] = None) -> int:
        """Runs one iteration of the loop on this thread (evloop_run_once): what is ready
        (due timers, tasks, microtasks, fd and signal callbacks); if nothing was, waits at
        most timeout seconds (None: until there is work; 0: no wait) and runs what came.
        Returns the number of callbacks run. After stop(), runs what was accepted; the call
        that finds everything run leaves the loop terminated. Ctrl-C on the main thread
        stops the loop gracefully and raises KeyboardInterrupt here. One thread at a time."""
        c = self._c
        ns = -1 if timeout is None else _ns(timeout, "timeout")
        wakeup = None
        if ns != 0 and threading.current_thread() is threading.main_thread() and not c.closed:
            try:
                wakeup = _SignalWakeup(c.submit_internal, self._mod.check_signals)
            except ValueError:
                pass
        try:
            try:
                return int(c.run_once(min(ns, 2**63 - 1)))
            finally:
                if wakeup is not None:
                    wakeup.close()
                self._forget_if_ended()
        except KeyboardInterrupt:
            # Also when Ctrl-C only interrupted the wait and Python raised it on the way out.
            c.stop()
            raise

    def fileno(self) -> int:
        """The loop's backend fd (evloop_backend_fd), to embed a loop driven by run_once()
        in another loop: it polls readable while this loop has work ready; wait on it with
        backend_timeout() as the timeout, then call run_once(0). Never read it. Linux."""
        return int(self._c.backend_fd())

    def backend_timeout(self) -> Optional[float]:
        """How long an outer loop may block before calling run_once(): None (no timer:
        until fileno() is readable), 0.0 (call it now), else seconds until the next timer."""
        ns = int(self._c.backend_timeout_ns())
        return None if ns < 0 else ns / 1e9

    def _thread_main(self) -> None:
        try:
            self.run()
        except BaseException as e:  # noqa: BLE001 - raised again by join()
            self._thread_error = e
        finally:
            self._thread_done.set()

    def run_in_thread(self, name: Optional[str] = None) -> threading.Thread:
        """Starts run() on a new (non-daemon) thread and returns it. Stop it with stop()
        and wait with join(), or leave a ``with`` block: a Ctrl-C in the main thread meanwhile
        stops the loop gracefully (everything accepted runs) before KeyboardInterrupt
        propagates. What run() raises on that thread, join() raises."""
        if self._thread is not None:
            raise RuntimeError("run_in_thread() was already called for this loop")
        self._thread_done = threading.Event()
        self._thread = threading.Thread(target=self._thread_main, name=name or "evloop")
        self._thread.start()
        return self._thread

    def join(self, timeout: Optional[float] = None) -> bool:
        """Waits for the thread of run_in_thread() to end (True), or for timeout seconds
        (False if it still runs); raises what run() raised on it. A KeyboardInterrupt while
        waiting (Ctrl-C) stops the loop, waits for the thread, and is raised again."""
        t = self._thread
        if t is None:
            return True
        # An Event, not Thread.join(): in Python 3.9-3.11 a join() interrupted by Ctrl-C
        # marks the thread as stopped while it still runs (the bpo-45274 branch of
        # Thread._wait_for_tstate_lock finds the lock held by the running thread).
        try:
            if not self._thread_done.wait(timeout):
                return False
        except KeyboardInterrupt:
            self._c.stop()
            self._thread_done.wait()
            t.join()
            raise
        t.join()
        err, self._thread_error = self._thread_error, None
        if err is not None:
            raise err
        return True

    def close(self) -> None:
        """Frees the loop; tasks accepted but never run are run first, on this thread.
        Idempotent. Raises evloop.Error (EBUSY) while run() is in progress."""
        self._c.free()
        self._forget_if_ended()

    def __enter__(self) -> "Loop":
        return self

    def __exit__(self, exc_type: Optional[Type[BaseException]], exc: Optional[BaseException],
                 tb: Optional[TracebackType]) -> None:
        try:
            if self._thread is not None:
                self._c.stop()
                self.join()
        finally:
            # Unless a second Ctrl-C interrupted the wait: then the loop, stopped, ends on
            # its own (non-daemon) thread and is freed with this object.
            if self._thread is None or not self._thread.is_alive():
                self.close()

    # ------------------------------------------------------------------ the rest

    def set_exception_handler(self, handler: Optional[Callable[[BaseException, Any], object]]
                              ) -> None:
        """Sets handler(exc, callback), called on the loop thread when a callback raises an
        Exception; None restores the default (print the traceback to stderr, keep running).
        KeyboardInterrupt and SystemExit are not handled: they stop the loop and run()
        raises them. A handler that raises goes to sys.unraisablehook."""
        if handler is not None and not callable(handler):
            raise TypeError("the exception handler must be callable or None")
        self._handler[0] = handler

    def get_exception_handler(self) -> Optional[Callable[[BaseException, Any], object]]:
        """The handler set by set_exception_handler, or None for the default."""
        return self._handler[0]

    def stats(self) -> Any:
        """The loop's counters (evloop_stats) as a Stats object with read-only fields, every
        field of the C struct (``st.tasks_run``; ``st["tasks_run"]`` and ``st.as_dict()``
        work too)."""
        return self._c.stats()

    @property
    def state(self) -> State:
        """The loop's state now (evloop.State, a str enum)."""
        return _STATES[self._c.state]

    @property
    def backend(self) -> str:
        """The poller in use: "epoll", "io_uring" or "kqueue"."""
        return self._backend

    @property
    def variant(self) -> str:
        """The ingress variant: "arena" or "chunk"."""
        return str(self._mod.VARIANT)

    @property
    def closed(self) -> bool:
        """True after close()."""
        return bool(self._c.closed)

    @property
    def version(self) -> str:
        """The C library's version (evloop_version), also ``evloop.__version__``."""
        return str(self._mod.version())

    def _live_fds(self) -> int:
        return int(self._c._live_fds())

    def __repr__(self) -> str:
        return (f"<evloop.Loop variant={self.variant} backend={self._backend} "
                f"state={self.state.value}{' closed' if self.closed else ''}>")
