"""Type stubs for evloop.bench._kernels: bench/'s benchmark kernels (the API is
evloop.bench.run)."""

from typing import Any, Dict, List

def families() -> List[str]:
    """The benchmark families the kernels know."""
def spec(family: str) -> Dict[str, Any]:
    """The family as its kernel registers it: its shapes ([] for none), whether the floors
    run it."""
def systems() -> List[str]:
    """The systems the kernels can run: evloop-arena, evloop-chunk and the floors."""
def probe(system: str, backend: str = "") -> int:
    """0 when system can run with backend here, else a negative errno."""
def name(family: str, system: str, **kwargs: Any) -> str:
    """The benchmark's name as run() with these arguments gives it, without running it
    (run()'s arguments but iterations and max_seconds)."""
def run(
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
