"""Type stubs for evloop._arena and evloop._chunk (one extension source, two variants): the
C API of include/evloop.h bound 1:1. Use the evloop package; these modules are its
implementation (evloop/_loop.py builds evloop.Loop over RawLoop)."""

from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

VARIANT: str
VERSION_INFO: Tuple[int, int, int]
BACKENDS: str
READABLE: int
WRITABLE: int
HANGUP: int
ERROR: int

def version() -> str:
    """evloop_version(): "MAJOR.MINOR.PATCH"."""
def ingress() -> str:
    """evloop_ingress(): the variant the linked library was built with."""
def strerror(err: int) -> str:
    """evloop_strerror(err)."""
def now_ns() -> int:
    """evloop_now_ns(): the loops' clock, ns."""
def autotune(max_seconds: float, save: Optional[str] = None) -> Dict[str, Any]:
    """evloop_autotune, with the GIL released; the profile as a dict."""
def check_signals() -> None:
    """PyErr_CheckSignals(): runs the Python signal handlers now (main thread)."""
def write_unraisable(exc: BaseException, obj: Any) -> None:
    """PyErr_WriteUnraisable: exc to sys.unraisablehook."""
def _set_lazy_gil(on: bool) -> None: ...

class Stats:
    """struct evloop_stats as read-only fields (generated from include/evloop.h)."""

    _fields: Tuple[str, ...]
    tasks_run: int
    microtasks_run: int
    timers_fired: int
    io_callbacks: int
    ticks: int
    futex_sleeps: int
    futex_wakes: int
    poller_sleeps: int
    poller_wakes: int
    spin_hits: int
    spin_misses: int
    spin_preemptions: int
    ingress_overflows: int
    batch_budget: int
    spin_ns: int
    backend: str
    ingress: str
    fallback: str
    profile_loaded: bool
    fence: str
    fence_reason: str
    lanes: int
    backend_reason: str
    membarriers: int
    def __getitem__(self, key: str) -> Any: ...
    def as_dict(self) -> Dict[str, Any]: ...

_Task = Union[Callable[[], object], Tuple[Any, ...]]

class Timer:
    """A timer of RawLoop.timer_start; its Python object is the C arg while armed."""

    id: int
    active: bool
    cancelled: bool
    def cancel(self) -> bool: ...
    def again(self, delay_ns: int) -> bool: ...

class RawLoop:
    """One evloop; the C calls."""

    on_error: Optional[Callable[[BaseException, Any], object]]
    def __init__(self, backend: Optional[str] = None, spin_ns: int = -1,
                 batch_budget: int = 0, auto_exit: bool = False,
                 profile: Optional[str] = None, fence: Optional[str] = None) -> None: ...
    def run(self) -> None: ...
    def run_once(self, timeout_ns: int) -> int: ...
    def backend_fd(self) -> int: ...
    def backend_timeout_ns(self) -> int: ...
    def stop(self) -> None: ...
    def free(self) -> None: ...
    @property
    def closed(self) -> bool: ...
    def submit(self, fn: Callable[..., object], *args: Any) -> None: ...
    def submit_internal(self, fn: Callable[..., object], *args: Any) -> None: ...
    def queue_microtask(self, fn: Callable[..., object], *args: Any) -> None: ...
    def submit_batch(self, tasks: Sequence[_Task]) -> None: ...
    def wake(self) -> None: ...
    def timer_start(self, delay_ns: int, interval_ns: int, fn: Callable[..., object],
                    *args: Any) -> Timer: ...
    def signal_start(self, signum: int, fn: Callable[[], object]) -> None: ...
    def signal_stop(self, signum: int) -> bool: ...
    def io_add(self, fd: int, events: int, fn: Callable[[int, int], object]) -> None: ...
    def io_add_native(self, fd: int, events: int) -> None:
        """evloop_io_add with a C callback that only records the readiness (no GIL), for
        take_io() and the asyncio loop's native iteration."""
    def take_io(self) -> List[Tuple[int, int]]:
        """[(fd, revents)] of the io_add_native fds since the last take (emptied)."""
    def io_modify(self, fd: int, events: int) -> None: ...
    def io_remove(self, fd: int) -> bool: ...
    def accept(self, fd: int, fn: Callable[[int, int], object]) -> None: ...
    def recv(self, fd: int, buf: Any, fn: Callable[[int, int], object]) -> None: ...
    def send(self, fd: int, buf: Any, fn: Callable[[int, int], object]) -> None: ...
    def op_cancel(self, fd: int) -> bool: ...
    def on_loop_thread(self) -> bool: ...
    def stats(self) -> Stats: ...
    @property
    def state(self) -> int: ...
    @property
    def backend(self) -> str: ...
    _aio_ops: Any  # a capsule: what _AioCore calls on a RawLoop of this module

# The asyncio loop's native core (src/aio_core.h), in evloop._arena only: the C base of
# evloop.EventLoop (evloop/_aio.py), which drives a RawLoop of either variant.
class _AioCore:
    """The native part of evloop.EventLoop: ready queue, timer heap, iteration."""

    _closed: bool
    _stopping: bool
    _debug: bool
    _thread_id: Optional[int]
    _selector: Any
    _clock_resolution: float
    _timer_cancelled_count: int
    def call_soon(self, callback: Callable[..., object], *args: Any,
                  context: Any = None) -> Any: ...
    def call_soon_threadsafe(self, callback: Callable[..., object], *args: Any,
                             context: Any = None) -> Any: ...
    def call_later(self, delay: float, callback: Callable[..., object], *args: Any,
                   context: Any = None) -> Any: ...
    def call_at(self, when: float, callback: Callable[..., object], *args: Any,
                context: Any = None) -> Any: ...
    def time(self) -> float: ...
    def _run_once(self) -> None: ...
    def _call_soon(self, callback: Callable[..., object], args: Tuple[Any, ...],
                   context: Any) -> Any: ...
    def _add_callback(self, handle: Any) -> None: ...
    def _timer_handle_cancelled(self, handle: Any) -> None: ...
    def _evloop_attach(self, raw: RawLoop, selector: Any, keys: Dict[int, Any],
                       native_io: bool, any_read: int, any_write: int) -> None: ...
    def _evloop_ready_list(self) -> List[Any]: ...
    def _evloop_ready_len(self) -> int: ...
    def _evloop_ready_popleft(self) -> Any: ...
    def _evloop_ready_append(self, handle: Any) -> None: ...
    def _evloop_ready_clear(self) -> None: ...
    def _evloop_timers_list(self) -> List[Any]: ...
    def _evloop_timers_len(self) -> int: ...
    def _evloop_timers_add(self, handle: Any) -> None: ...
    def _evloop_timers_clear(self) -> None: ...
    # src/aio_fds.h: the stdlib's fd registry methods, in C
    def _add_reader(self, fd: Any, callback: Callable[..., object], *args: Any) -> Any: ...
    def _add_writer(self, fd: Any, callback: Callable[..., object], *args: Any) -> Any: ...
    def _remove_reader(self, fd: Any) -> bool: ...
    def _remove_writer(self, fd: Any) -> bool: ...
    # src/aio_sock.h: what sock_recv and sock_sendall run per call, in C
    def _evloop_sock_recv(self, sock: Any, n: int) -> Any: ...
    def _evloop_sock_send(self, sock: Any, data: Any) -> int: ...
    def _sock_recv(self, fut: Any, sock: Any, n: int) -> None: ...
    def _sock_read_done(self, fd: int, fut: Any, handle: Any = None) -> None: ...
    def _ensure_fd_no_transport(self, fd: Any) -> None: ...
    def create_future(self) -> Any: ...
    def get_debug(self) -> bool: ...

def _aio_setup(handle: type, timer_handle: type, callback_failed: Callable[..., object],
               run_debug: Callable[..., object]) -> bool:
    """The stdlib's handle classes and _aio's two helpers; True if handles are made and run
    natively (their layout is the expected one)."""

# The stream socket transport's native methods (src/aio_transport.h), in evloop._arena only:
# the C base of evloop._aio._SocketTransport, in front of the stdlib's _SelectorSocketTransport.
class _AioStreamBase:
    """The native hot methods of evloop's socket transport (reading, and writing at once)."""

    def _read_ready(self) -> None: ...
    def _read_ready__data_received(self) -> None: ...
    def _read_ready__get_buffer(self) -> None: ...
    def write(self, data: Any) -> None: ...

def _aio_transport_setup(stdlib_write: Callable[..., object], cls: type) -> None:
    """The stdlib transport's write, for what the native write leaves to it, and evloop's
    transport class, whose hot attributes are slots."""

def _aio_sock_setup(socket_type: type, future: type, partial: type, weak_value_dict: type,
                    ensure_fd_no_transport: Callable[..., object],
                    sock_recv_callback: Callable[..., object]) -> None:
    """What the socket methods' fast paths make and check, and the stdlib's methods they
    fall back on."""

def _aio_fds_setup(selector_key: type, add_reader: Callable[..., object],
                   add_writer: Callable[..., object], remove_reader: Callable[..., object],
                   remove_writer: Callable[..., object]) -> None:
    """selectors.SelectorKey and the stdlib's four fd registry methods, which the native ones
    fall back on."""

# evloop.bench's kernels (present when built with bench/; see evloop.bench.run)
from typing import Any, Dict

def bench_families() -> List[str]:
    """The benchmark families the kernels know."""
def bench_systems() -> List[str]:
    """The systems this module's kernels can run."""
def bench_probe(system: str, backend: str = "") -> int:
    """0 when system can run with backend here, else a negative errno."""
def bench_run(
    family: str,
    system: str,
    backend: str = "",
    spin_ns: int = -1,
    batch_budget: int = 0,
    iterations: int = 1000,
    max_seconds: float = 0.0,
    shape: str = "",
    producers: int = 0,
    tasks: int = 0,
    batch: int = 0,
    gap_ns: int = 0,
) -> Dict[str, Any]:
    """Runs one kernel with the GIL released; see evloop.bench.run. Zero or empty
    parameters take the family's defaults."""

