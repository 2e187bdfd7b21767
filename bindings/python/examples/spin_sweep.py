"""Spin-window sweep: how the spin before sleeping changes the hand-off latency.

For each spin window (fixed ns, and -1 = adaptive) runs the C kernel PingPongLatency
(shape cold by default: the producer pauses 50 us between round trips, so the loop has
gone idle and its spin decides whether the next task costs a futex wake) and plots p50
and p99 against the window. Rounds alternate the windows so that a noisy moment on a
shared machine is shared. matplotlib draws a PNG when importable; otherwise a text plot.

    python bindings/python/examples/spin_sweep.py [--shape cold] [--variant arena]
           [--backend epoll] [--iterations 3000] [--rounds 3] [--out spin_sweep.png]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Dict, List

from evloop import bench

WINDOWS = [0, 1000, 2000, 5000, 10000, 20000, 50000, 100000, -1]


def text_plot(rows: List[tuple], width: int = 50) -> str:
    """Horizontal bars on a log-free linear scale of the largest p99."""
    top = max(r[2] for r in rows) or 1
    out = [f"{'spin ns':>9} {'p50 us':>8} {'p99 us':>8}  p50 '#', p99 '-'"]
    for label, p50, p99 in rows:
        a = int(round(p50 / top * width))
        b = int(round(p99 / top * width))
        out.append(f"{label:>9} {p50 / 1e3:>8.2f} {p99 / 1e3:>8.2f}  {'#' * a}{'-' * max(0, b - a)}")
    return "\n".join(out)


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--shape", default="cold", choices=["hot", "cold", "blocking"])
    ap.add_argument("--variant", default="arena", choices=["arena", "chunk"])
    ap.add_argument("--backend", default=None)
    ap.add_argument("--iterations", type=int, default=3000, help="round trips per point")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--windows", default=",".join(map(str, WINDOWS)),
                    help="comma-separated spin windows in ns (-1: adaptive)")
    ap.add_argument("--out", default="spin_sweep.png", help="PNG path (with matplotlib)")
    ap.add_argument("--text", action="store_true", help="text plot even with matplotlib")
    args = ap.parse_args(argv)

    windows = [int(w) for w in args.windows.split(",")]
    p50: Dict[int, List[float]] = {w: [] for w in windows}
    p99: Dict[int, List[float]] = {w: [] for w in windows}
    backend = None
    for r in range(args.rounds):
        order = windows[r % len(windows):] + windows[: r % len(windows)]
        for w in order:
            res = bench.run("PingPongLatency", variant=args.variant, backend=args.backend,
                            shape=args.shape, spin_ns=w, iterations=args.iterations)
            backend = res.backend
            p50[w].append(res.p50)
            p99[w].append(res.p99)
    rows = [("adaptive" if w == -1 else str(w), statistics.median(p50[w]),
             statistics.median(p99[w])) for w in windows]
    title = (f"PingPongLatency/{args.shape}, evloop-{args.variant}/{backend}: "
             f"median of {args.rounds} rounds x {args.iterations} round trips")
    print(title)
    print(text_plot(rows))

    if not args.text:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError:
            print("(matplotlib not installed: text plot only)")
            return 0
        fixed = [(w, row) for w, row in zip(windows, rows) if w >= 0]
        xs = [max(w, 100) for w, _ in fixed]  # 0 drawn at 100 ns on the log axis
        fig, ax = plt.subplots(figsize=(7, 4))
        ax.plot(xs, [row[1] / 1e3 for _, row in fixed], "o-", label="p50")
        ax.plot(xs, [row[2] / 1e3 for _, row in fixed], "s--", label="p99")
        for w, row in zip(windows, rows):
            if w == -1:
                ax.axhline(row[1] / 1e3, color="C0", lw=0.8, ls=":", label="adaptive p50")
                ax.axhline(row[2] / 1e3, color="C1", lw=0.8, ls=":", label="adaptive p99")
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("spin window, ns (0 drawn at 100)")
        ax.set_ylabel("round trip, us")
        ax.set_title(title, fontsize=8)
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(args.out, dpi=120)
        print(f"plot: {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
