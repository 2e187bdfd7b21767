"""Type stubs for evloop (the package's public API)."""

import enum
import os
import threading
from types import TracebackType
from typing import Any, Callable, Dict, List, Optional, Protocol, Sequence, Tuple, Type, Union

from ._arena import Stats as Stats

__version__: str
READABLE: int
WRITABLE: int

class _HasFileno(Protocol):
    def fileno(self) -> int: ...

FileDescriptorLike = Union[int, _HasFileno]
ExceptionHandler = Callable[[BaseException, Any], object]

class Error(OSError):
    """An error returned by the evloop C library; ``errno`` is kept."""

class LoopClosedError(Error):
    """The loop is stopping, terminated or closed (errno ESHUTDOWN)."""

class State(str, enum.Enum):
    """A loop's state; compares equal to its lower-case name."""

    AWAKE = "awake"
    RUNNING = "running"
    SLEEPING = "sleeping"
    TERMINATING = "terminating"
    TERMINATED = "terminated"

def default_exception_handler(exc: BaseException, callback: Any) -> None:
    """Prints the callback and the traceback to sys.stderr."""

def backends() -> List[str]:
    """The pollers that start on this machine, best first."""

def variants() -> List[str]:
    """The ingress variants in this package: ["arena", "chunk"]."""

def now_ns() -> int:
    """The loops' clock (evloop_now_ns, CLOCK_MONOTONIC) in ns."""

_PathLike = Union[str, "os.PathLike[str]"]

def autotune(max_seconds: float = 2.0, save: Optional[_PathLike] = None) -> Dict[str, Any]:
    """Calibrates this machine (evloop_autotune) and returns the profile as a dict with the
    keys of the profile file; saves it at save if given."""

class TimerHandle:
    """A timer started by Loop.call_later or Loop.call_every."""

    def cancel(self) -> bool:
        """Cancels the timer; True if this call stopped it. Any thread."""
    def cancelled(self) -> bool:
        """True once cancelled (or the loop ended before it fired)."""
    def restart(self, delay: Optional[float] = None) -> bool:
        """Next firing delay seconds from now; False if no longer armed."""
    @property
    def active(self) -> bool:
        """True while the timer may still fire."""
    @property
    def periodic(self) -> bool:
        """True for call_every timers."""
    @property
    def interval(self) -> float:
        """The delay (call_later) or interval (call_every) in seconds."""

_Task = Union[Callable[[], object], Tuple[Any, ...]]

class Loop:
    """An evloop event loop; see help(evloop.Loop)."""

    def __init__(
        self,
        backend: Optional[str] = None,
        variant: Optional[str] = None,
        spin_ns: int = -1,
        batch_budget: int = 0,
        profile: Optional[_PathLike] = None,
        fence: Optional[str] = None,
    ) -> None: ...
    def submit(self, fn: Callable[..., object], *args: Any) -> None:
        """Queues fn(*args) to run on the loop thread. Any thread."""
    def submit_internal(self, fn: Callable[..., object], *args: Any) -> None:
        """Like submit(), but before external tasks still waiting. Any thread."""
    def queue_microtask(self, fn: Callable[..., object], *args: Any) -> None:
        """Runs fn(*args) right after the callback now running. Any thread."""
    def submit_batch(self, tasks: Sequence[_Task]) -> None:
        """Queues callables or tuples (fn, *args) at once, in order; all or none."""
    def call_later(self, delay: float, fn: Callable[..., object], *args: Any) -> TimerHandle:
        """Runs fn(*args) once, no earlier than delay seconds from now. Any thread."""
    def call_every(self, interval: float, fn: Callable[..., object], *args: Any) -> TimerHandle:
        """Runs fn(*args) every interval seconds until cancelled. Any thread."""
    def time(self) -> float:
        """The loop's clock in seconds."""
    def add_signal_handler(self, sig: int, callback: Callable[..., object], *args: Any) -> None:
        """Runs callback(*args) on the loop thread after each delivery of sig."""
    def remove_signal_handler(self, sig: int) -> bool:
        """Stops watching sig; True if a handler was set."""
    def add_reader(self, fd: FileDescriptorLike, fn: Callable[..., object], *args: Any) -> None:
        """Calls fn(*args) while fd is readable (level-triggered). Any thread."""
    def add_writer(self, fd: FileDescriptorLike, fn: Callable[..., object], *args: Any) -> None:
        """Calls fn(*args) while fd is writable (level-triggered). Any thread."""
    def remove_reader(self, fd: FileDescriptorLike) -> bool:
        """Stops watching fd for reading; True if a reader was registered."""
    def remove_writer(self, fd: FileDescriptorLike) -> bool:
        """Stops watching fd for writing; True if a writer was registered."""
    def sock_accept(self, sock: FileDescriptorLike,
                    callback: Callable[[Any, Optional[OSError]], object]) -> None:
        """Accepts one connection: callback((conn, address), None) or (None, error)."""
    def sock_recv(self, sock: FileDescriptorLike, nbytes: int,
                  callback: Callable[[Optional[bytes], Optional[OSError]], object]) -> None:
        """Receives up to nbytes: callback(data, None), b"" at EOF; or (None, error)."""
    def sock_recv_into(self, sock: FileDescriptorLike, buf: Any,
                       callback: Callable[[Optional[int], Optional[OSError]], object]) -> None:
        """Receives into buf: callback(nbytes, None) or (None, error)."""
    def sock_sendall(self, sock: FileDescriptorLike, data: Any,
                     callback: Callable[[None, Optional[OSError]], object]) -> None:
        """Sends all of data: callback(None, None) or (None, error)."""
    def sock_cancel(self, sock: FileDescriptorLike) -> bool:
        """Cancels the operations pending on sock (ECANCELED); False if none was."""
    def run(self) -> None:
        """Runs the loop on this thread until stop(); Ctrl-C on the main thread stops it."""
    def run_once(self, timeout: Optional[float] = None) -> int:
        """One iteration: runs what is ready, else waits at most timeout; the count run."""
    def fileno(self) -> int:
        """The backend fd, for embedding in another loop (readable: call run_once(0))."""
    def backend_timeout(self) -> Optional[float]:
        """How long an outer loop may block before run_once(): None, 0.0 or seconds."""
    def run_in_thread(self, name: Optional[str] = None) -> threading.Thread:
        """Starts run() on a new thread."""
    def join(self, timeout: Optional[float] = None) -> bool:
        """Waits for the thread of run_in_thread(); Ctrl-C stops the loop gracefully."""
    def stop(self) -> None:
        """Graceful stop: refuse new work, run what was accepted. Any thread."""
    def close(self) -> None:
        """Frees the loop (runs tasks still queued first). Idempotent."""
    @property
    def closed(self) -> bool:
        """True after close()."""
    def set_exception_handler(self, handler: Optional[ExceptionHandler]) -> None:
        """handler(exc, callback) for exceptions raised by callbacks; None: the default."""
    def get_exception_handler(self) -> Optional[ExceptionHandler]:
        """The handler set, or None for the default."""
    def stats(self) -> Stats:
        """The loop's counters (evloop_stats), read-only fields."""
    @property
    def state(self) -> State:
        """The loop's state now."""
    @property
    def backend(self) -> str:
        """The poller in use: "epoll", "io_uring" or "kqueue"."""
    @property
    def variant(self) -> str:
        """The ingress variant: "arena" or "chunk"."""
    @property
    def version(self) -> str:
        """The C library's version (evloop_version)."""
    def __enter__(self) -> "Loop": ...
    def __exit__(
        self,
        exc_type: Optional[Type[BaseException]],
        exc: Optional[BaseException],
        tb: Optional[TracebackType],
    ) -> None: ...

# ---- asyncio (evloop/_aio.py) ----
import asyncio as _asyncio
from typing import Coroutine, TypeVar

_T = TypeVar("_T")

class EventLoop(_asyncio.SelectorEventLoop):
    """asyncio's selector event loop on evloop: the ready queue, timers and iteration native
    (evloop._arena._AioCore), fds and the wait in evloop, the cross-thread wake-up through
    evloop's lane submit."""

    def __init__(self, *, backend: Optional[str] = ..., variant: Optional[str] = ...,
                 spin_ns: int = ..., fence: Optional[str] = ...) -> None: ...
    @property
    def evloop_backend(self) -> str: ...
    def evloop_stats(self) -> Stats: ...

class EventLoopPolicy(_asyncio.DefaultEventLoopPolicy):
    """asyncio's default policy, making evloop loops."""

def new_event_loop(*, backend: Optional[str] = ..., variant: Optional[str] = ...,
                   spin_ns: int = ..., fence: Optional[str] = ...) -> EventLoop: ...
def run(main: Coroutine[Any, Any, _T], *, debug: Optional[bool] = ..., **loop_kwargs: Any) -> _T: ...
def install() -> None: ...
