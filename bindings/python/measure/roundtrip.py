"""Round trip of a hand-off from another Python thread, for evloop, asyncio and uvloop.

A loop runs on its own thread. The main thread submits a callback to it (evloop:
Loop.submit; asyncio and uvloop: call_soon_threadsafe) and waits until the callback has
put a token into a queue.SimpleQueue; the time from just before the submit to just after
the token arrives is one round trip. The same queue and the same waiting are used for
every system, so the differences are the loops' own. Rounds alternate between systems so
that a noisy moment on a shared machine does not fall on one system only.

Also measured (flood): N callbacks submitted back to back from the main thread, timed
until the last has run: the per-task cost when the loop is busy. And (batch, evloop only)
the same N callbacks handed over with Loop.submit_batch, --batch at a time (one list of
the same callable, built once). The last lines compare with uvloop, against the targets
of issue 14: flood <= 0.5x uvloop's, batch <= 0.3x, round-trip p50 <= 1.0x.

    python bindings/python/measure/roundtrip.py [--n 20000] [--rounds 5] [--flood 200000]

uvloop is optional (pip install uvloop); without it its rows are skipped.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import platform
import queue
import statistics
import sys
import threading
import time
from typing import Any, Callable, Dict, List, Optional

import evloop

uvloop: Optional[Any]
try:
    import uvloop
except ImportError:  # pragma: no cover - optional
    uvloop = None

Submit = Callable[[Callable[[], None]], Any]


class Subject:
    """A loop on its own thread with a thread-safe submit(fn)."""

    name: str

    def start(self) -> None:
        raise NotImplementedError

    def submitter(self) -> Submit:
        """The thread-safe submit function itself (looked up once, outside the timing)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError


class EvloopSubject(Subject):
    def __init__(self, variant: str, spin_ns: int = -1, eager_gil: bool = False):
        self.name = f"evloop-{variant}" + ("" if spin_ns == -1 else f"@spin{spin_ns}") + \
            ("@eagergil" if eager_gil else "")
        self.loop = evloop.Loop(variant=variant, spin_ns=spin_ns)
        # eager: the GIL released after every callback instead of once per batch (the
        # binding's default; a module-wide testing switch, set only while this one runs)
        self.eager_gil = eager_gil

    def measuring(self, on: bool) -> None:
        if self.eager_gil:
            getattr(evloop, "_" + self.loop.variant)._set_lazy_gil(not on)

    def start(self) -> None:
        self.loop.run_in_thread()

    def submitter(self) -> Submit:
        return self.loop.submit

    def close(self) -> None:
        self.loop.stop()
        self.loop.join()
        self.loop.close()


class AsyncioSubject(Subject):
    def __init__(self, name: str, new_loop: Callable[[], asyncio.AbstractEventLoop]):
        self.name = name
        self.loop = new_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def submitter(self) -> Submit:
        return self.loop.call_soon_threadsafe

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


def make_subjects(with_spin0: bool, with_eager: bool) -> List[Subject]:
    subjects: List[Subject] = [EvloopSubject("arena"), EvloopSubject("chunk")]
    if with_spin0:
        subjects.append(EvloopSubject("arena", spin_ns=0))
    if with_eager:
        subjects.append(EvloopSubject("arena", eager_gil=True))
    subjects.append(AsyncioSubject("asyncio", asyncio.new_event_loop))
    if uvloop is not None:
        subjects.append(AsyncioSubject("uvloop", uvloop.new_event_loop))
    return subjects


def round_trips(subject: Subject, n: int) -> List[int]:
    """n round trips; per-op ns."""
    q: "queue.SimpleQueue[None]" = queue.SimpleQueue()
    put = q.put
    get = q.get
    submit = subject.submitter()

    def reply() -> None:
        put(None)

    clock = time.perf_counter_ns
    out = [0] * n
    for i in range(n):
        t0 = clock()
        submit(reply)
        get()
        out[i] = clock() - t0
    return out


def flood(subject: Subject, n: int) -> float:
    """ns per task for n tasks submitted back to back, until the last has run."""
    done = threading.Event()
    count = [0]

    def task() -> None:
        count[0] += 1
        if count[0] == n:
            done.set()

    submit = subject.submitter()
    t0 = time.perf_counter_ns()
    for _ in range(n):
        submit(task)
    done.wait()
    return (time.perf_counter_ns() - t0) / n


def batch_flood(subject: Subject, n: int, batch: int) -> Optional[float]:
    """ns per task for n tasks handed over batch at a time (evloop's submit_batch)."""
    if not isinstance(subject, EvloopSubject):
        return None
    done = threading.Event()
    count = [0]

    def task() -> None:
        count[0] += 1
        if count[0] == n:
            done.set()

    submit_batch = subject.loop.submit_batch
    tasks = [task] * batch
    t0 = time.perf_counter_ns()
    for _ in range(n // batch):
        submit_batch(tasks)
    submit_batch(tasks[: n % batch])
    done.wait()
    return (time.perf_counter_ns() - t0) / n


def pct(v: List[int], p: float) -> float:
    s = sorted(v)
    return s[min(len(s) - 1, int(p / 100 * len(s)))]


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=20000, help="round trips per system per round")
    ap.add_argument("--rounds", type=int, default=5, help="rounds (systems alternate)")
    ap.add_argument("--flood", type=int, default=200000, help="tasks per flood run (0: skip)")
    ap.add_argument("--batch", type=int, default=1000,
                    help="tasks per submit_batch call in the batch flood (0: skip)")
    ap.add_argument("--spin0", action="store_true", help="also evloop-arena with spin_ns=0")
    ap.add_argument("--eager-gil", action="store_true",
                    help="also evloop-arena releasing the GIL after every callback")
    args = ap.parse_args(argv)

    subjects = make_subjects(args.spin0, args.eager_gil)
    for s in subjects:
        s.start()
    lat: Dict[str, List[int]] = {s.name: [] for s in subjects}
    fl: Dict[str, List[float]] = {s.name: [] for s in subjects}
    bfl: Dict[str, List[float]] = {s.name: [] for s in subjects}
    gc.disable()
    try:
        for s in subjects:  # warm-up
            round_trips(s, min(2000, args.n))
        for r in range(args.rounds):
            order = subjects[r % len(subjects):] + subjects[: r % len(subjects)]
            for s in order:
                if isinstance(s, EvloopSubject):
                    s.measuring(True)
                lat[s.name] += round_trips(s, args.n)
                if args.flood:
                    fl[s.name].append(flood(s, args.flood))
                    b = batch_flood(s, args.flood, args.batch) if args.batch else None
                    if b is not None:
                        bfl[s.name].append(b)
                if isinstance(s, EvloopSubject):
                    s.measuring(False)
    finally:
        gc.enable()
        for s in subjects:
            s.close()

    print(f"# python {platform.python_version()}, {platform.machine()}, "
          f"{platform.system()} {platform.release()}, evloop backends {evloop.backends()}, "
          f"uvloop {getattr(uvloop, '__version__', 'missing')}")
    print(f"# {args.rounds} rounds x {args.n} round trips; flood {args.flood} tasks per round"
          f"; batch: submit_batch of {args.batch}; flood and batch: median of the rounds "
          "[min-max]")
    hdr = f"{'system':<22} {'rt p50 us':>10} {'rt p90 us':>10} {'rt p99 us':>10} {'rt mean us':>11}"
    if args.flood:
        hdr += f" {'flood ns/task':>20} {'batch ns/task':>18}"
    print(hdr)

    def spread(v: List[float]) -> str:
        return f"{statistics.median(v):.0f} [{min(v):.0f}-{max(v):.0f}]" if v else "-"

    for s in subjects:
        v = lat[s.name]
        line = (f"{s.name:<22} {pct(v, 50) / 1e3:>10.2f} {pct(v, 90) / 1e3:>10.2f} "
                f"{pct(v, 99) / 1e3:>10.2f} {statistics.fmean(v) / 1e3:>11.2f}")
        if args.flood:
            line += f" {spread(fl[s.name]):>20} {spread(bfl[s.name]):>18}"
        print(line)
    if "uvloop" in lat:
        uv_p50, uv_flood = pct(lat["uvloop"], 50), statistics.median(fl["uvloop"] or [0])
        print("# against uvloop (targets: flood <= 0.50, batch <= 0.30, rt p50 <= 1.00):")
        for s in subjects:
            if not isinstance(s, EvloopSubject):
                continue
            parts = [f"rt p50 {pct(lat[s.name], 50) / uv_p50:.2f}"]
            if args.flood and uv_flood:
                parts.append(f"flood {statistics.median(fl[s.name]) / uv_flood:.2f}")
                if bfl[s.name]:
                    parts.append(f"batch {statistics.median(bfl[s.name]) / uv_flood:.2f}")
            print(f"#   {s.name:<22} " + ", ".join(parts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
