"""Type stubs for evloop._arena and evloop._chunk (one extension source, two variants).
Use the evloop package; these modules are its implementation."""

from typing import Any, Dict, List, Optional

from . import Loop as Loop, TimerHandle as TimerHandle

VARIANT: str

def ingress() -> str:
    """The variant the linked library was built with."""
def compiled_backends() -> List[str]:
    """The pollers compiled into this build."""
def probe_backend(name: str) -> int:
    """0 when a loop with this backend starts here, else the negative errno."""
def strerror(err: int) -> str:
    """evloop_strerror(err)."""
def now_ns() -> int:
    """The loop's monotonic clock in ns."""
def autotune(max_seconds: float = 2.0, save: Optional[str] = None) -> Dict[str, Any]:
    """evloop_autotune: calibrates this machine; the profile as a dict."""
def _set_lazy_gil(on: bool) -> None: ...

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
