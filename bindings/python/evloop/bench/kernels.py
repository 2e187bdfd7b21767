"""bench/'s benchmark kernels, callable from Python with their parameters.

Each call creates a loop of the chosen system on its own (C) thread, runs the family's
kernel for ``iterations`` timed iterations with the GIL released, and returns a
:class:`Result` with one sample per iteration (the iteration's ns for the latency
families, where an iteration is one round trip or chain; its ns per op for the others) and
the counters the benchmark suite reports. The kernels are bench/'s own (bench/kit/kernels/):
the google-benchmark binary runs the same code, with the same ops, waits and warm-ups. No
Python runs between the first and the last timestamp, so a script can sweep a parameter
(spin window, batch budget, producers, ...) and get the C figures::

    from evloop import bench
    for spin in (0, 2000, 20000, -1):
        r = bench.run("PingPongLatency", shape="cold", spin_ns=spin, iterations=5000)
        print(spin, r.p50, r.p99)

The families are :func:`families`, each with its :func:`shapes` (and :func:`floors`), read from the
kernels' own registration (``BENCH_KERNEL`` in bench/kit/kernels/*.cpp); what each measures
and what its op is: bench/README.md and the header of its kernel file. A parameter left
``None`` takes the family's value in the benchmark suite: ``tasks`` (a flood's, a burst's,
all producers' together), ``producers``, ``burst`` (BurstSubmit's and MicroBatchBudget's tasks
per iteration), ``batch`` (BatchSubmit's tasks per batch call), ``gap_ns``
(PingPongLatency/cold's untimed gap), ``shape``.

Systems: ``"evloop"`` (with ``variant``, ``backend``, ``spin_ns``, ``batch_budget``) and
the hardware floors ``"floor-spin"`` and ``"floor-futex"`` (one producer only).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional

from . import _kernels

__all__ = ["Result", "run", "name", "families", "shapes", "floors", "systems",
           "DEFAULT_ITERATIONS"]

_VARIANTS = ("arena", "chunk")

#: Iterations per family when none is given: about a second or less here (a family it does
#: not list runs 100).
DEFAULT_ITERATIONS: Dict[str, int] = {
    "PingPongLatency": 20000,
    "PingPong": 20,
    "BurstSubmit": 500,
    "BatchSubmit": 20,
    "MultiProducer": 10,
    "MultiProducerContention": 10,
    "MicrotaskRoundTrip": 20000,
    "ReadinessRoundTrip": 10000,
    "SubmitInternalChain": 5000,
    "InternalPriority": 2000,
    "MicroBatchBudget": 500,
    "MicroCASContention": 50,
    "MicroWakeupSyscall": 1000,
    "Timers": 3,
    "AllocPressure": 20,
    "IdleCost": 10,
}

# The families whose `burst` is their tasks per iteration.
_BURST_FAMILIES = ("BurstSubmit", "MicroBatchBudget")


def families() -> List[str]:
    """The families :func:`run` knows."""
    return list(_kernels.families())


def shapes(family: str) -> List[str]:
    """The shapes of family, in the order its kernel registers them; ``[]`` when it has
    none. Raises ValueError for an unknown family."""
    return list(_kernels.spec(family)["shapes"])


def floors(family: str) -> bool:
    """Whether the hardware floors run family (as its kernel registers): the other
    families' kernels need what only a loop has. Raises ValueError for an unknown family."""
    return bool(_kernels.spec(family)["floors"])


def systems() -> List[str]:
    """``["evloop", "floor-spin", "floor-futex"]``."""
    return ["evloop", "floor-spin", "floor-futex"]


@dataclass
class Result:
    """What one :func:`run` measured.

    ``samples`` are one per iteration: its ns for the latency families
    (``per_op_samples`` True: an iteration is one round trip, or one chain), else its ns
    per op. ``counters`` holds what the benchmark suite reports: ``ns_per_op`` (timed ns /
    ops), ``p10_ns`` .. ``p999_ns``, ``min_ns``, ``max_ns`` (over the samples, unless the
    family reports its own, as MicroBatchBudget's per-task latencies), ``wakes_per_op``,
    ``loop_sleeps_per_op``, ``tasks_per_drain``, ``loop_cpu_ns_per_op``,
    ``cpu_ns_per_op``, for evloop ``spin_hits_per_op``, ``budget_end``, ``spin_ns_end``,
    and the family's own (``native``, ``externals_first``, ``late_p50_ns``, ...).
    ``name`` is the benchmark suite's: ``Family/system[@tag][/backend][/shape]``."""

    family: str
    name: str
    system: str
    variant: Optional[str]
    backend: str
    params: Dict[str, Any]
    iterations: int
    ops: int
    timed_ns: int
    per_op_samples: bool
    samples: List[int] = field(repr=False)
    counters: Dict[str, float] = field(repr=False)
    error: str = ""
    label: str = ""

    @property
    def ns_per_op(self) -> float:
        return float(self.counters["ns_per_op"])

    @property
    def p50(self) -> float:
        return self.percentile(50)

    @property
    def p99(self) -> float:
        return self.percentile(99)

    @property
    def mean(self) -> float:
        return statistics.fmean(self.samples) if self.samples else float("nan")

    def percentile(self, q: float) -> float:
        """The q-th percentile (0..100) of the samples (nearest rank)."""
        if not self.samples:
            return float("nan")
        s = sorted(self.samples)
        return float(s[int(q / 100 * (len(s) - 1) + 0.5)])

    def as_benchmark_json(self) -> Dict[str, Any]:
        """This result as one entry of google-benchmark's JSON (as evloop_bench writes
        it), for the tournament's report (evloop.bench.tournament)."""
        d: Dict[str, Any] = {"name": self.name, "run_name": self.name, "run_type": "iteration",
                             "iterations": self.iterations,
                             "real_time": self.timed_ns / max(self.iterations, 1) / 1e3,
                             "time_unit": "us"}
        d.update({k: float(v) for k, v in self.counters.items()})
        if self.label:
            d["label"] = self.label
        if self.error:
            d["error_occurred"] = True
            d["error_message"] = self.error
        return d


def run(
    family: str,
    *,
    system: str = "evloop",
    variant: str = "arena",
    backend: Optional[str] = None,
    iterations: Optional[int] = None,
    spin_ns: int = -1,
    batch_budget: int = 0,
    producers: Optional[int] = None,
    tasks: Optional[int] = None,
    burst: Optional[int] = None,
    batch: Optional[int] = None,
    shape: Optional[str] = None,
    gap_ns: Optional[int] = None,
    max_seconds: float = 0.0,
) -> Result:
    """Runs one benchmark kernel in C and returns its samples and counters.

    - family: one of :func:`families`.
    - system: ``"evloop"`` or a floor (``"floor-spin"``, ``"floor-futex"``).
    - variant, backend, spin_ns, batch_budget: the evloop loop's configuration (as
      ``evloop.Loop``); backend ``None`` is "auto".
    - iterations: timed iterations (ops for latency families, rounds for throughput
      ones); default :data:`DEFAULT_ITERATIONS`. max_seconds > 0 stops earlier.
    - producers, tasks, burst (BurstSubmit's and MicroBatchBudget's tasks per
      iteration), batch (BatchSubmit), shape, gap_ns (PingPongLatency/cold): the
      family's parameters; ``None`` is the benchmark suite's value.

    Raises ValueError for unknown names and RuntimeError when the kernel cannot start
    (a shape the family does not have, a backend that cannot start) or fails before its
    first iteration (a later failure is in ``Result.error``).
    """
    args = _c_arguments(family, system=system, variant=variant, backend=backend,
                        spin_ns=spin_ns, batch_budget=batch_budget, producers=producers,
                        tasks=tasks, burst=burst, batch=batch, shape=shape, gap_ns=gap_ns)
    if iterations is None:
        iterations = DEFAULT_ITERATIONS.get(family, 100)
    if iterations < 1:
        raise ValueError("iterations must be >= 1")
    d = _kernels.run(**args, iterations=iterations, max_seconds=max_seconds)
    params: Dict[str, Any] = {"spin_ns": spin_ns, "batch_budget": batch_budget,
                              **{k: v for k, v in d["params"].items() if v not in ("", 0)}}
    return Result(family=family, name=d["name"], system=d["system"],
                  variant=variant if system == "evloop" else None, backend=d["backend"],
                  params=params, iterations=d["iterations"], ops=d["ops"],
                  timed_ns=d["timed_ns"], per_op_samples=d["per_op_samples"],
                  samples=d["samples"], counters=dict(d["counters"]), error=d["error"],
                  label=d["label"])


def name(family: str, **kwargs: Any) -> str:
    """The ``Result.name`` that :func:`run` with these arguments (but ``iterations`` and
    ``max_seconds``) gives, without running anything (with ``backend`` None a run names the
    backend that started instead). Raises as :func:`run` does for a bad argument."""
    return _kernels.name(**_c_arguments(family, **kwargs))


def _c_arguments(family: str, *, system: str = "evloop", variant: str = "arena",
                 backend: Optional[str] = None, spin_ns: int = -1, batch_budget: int = 0,
                 producers: Optional[int] = None, tasks: Optional[int] = None,
                 burst: Optional[int] = None, batch: Optional[int] = None,
                 shape: Optional[str] = None, gap_ns: Optional[int] = None) -> Dict[str, Any]:
    """run()'s arguments checked and spelled as the extension module takes them."""
    if variant not in _VARIANTS:
        raise ValueError(f"unknown variant {variant!r}")
    if family not in _kernels.families():
        raise ValueError(f"unknown family {family!r}: expected one of {families()}")
    if system == "evloop":
        cname = f"evloop-{variant}"
    elif system in ("floor-spin", "floor-futex"):
        cname = system
        if backend is not None or spin_ns != -1 or batch_budget != 0:
            raise ValueError("backend, spin_ns and batch_budget apply to evloop only")
    else:
        raise ValueError(f"unknown system {system!r}: expected one of {systems()}")
    if batch_budget < 0:
        raise ValueError("batch_budget must be >= 0")
    if family in _BURST_FAMILIES and burst is not None:
        tasks = burst
    given = {"producers": producers, "tasks": tasks, "batch": batch, "gap_ns": gap_ns}
    for k, v in given.items():
        if v is not None and v < 1:
            raise ValueError(f"{k} must be >= 1")
    return {"family": family, "system": cname, "backend": backend or "", "spin_ns": spin_ns,
            "batch_budget": batch_budget, "shape": shape or "",
            **{k: v for k, v in given.items() if v is not None}}
