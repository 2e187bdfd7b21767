"""Type stubs for evloop._arena and evloop._chunk (one extension source, two variants): the
C API of include/evloop.h bound 1:1. Use the evloop package; these modules are its
implementation (evloop/_loop.py builds evloop.Loop over RawLoop; the asyncio loop's native
core, evloop._asyncio_core, drives a RawLoop of either through its _aio_ops)."""

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
    _aio_ops: Any  # a capsule: what evloop._asyncio_core calls on a RawLoop of this module

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

