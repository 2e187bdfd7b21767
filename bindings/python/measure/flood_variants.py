"""Variant against variant on the flood: arena and chunk ingress, same process, same run.

Runs the C kernels PingPong (one producer floods 100k tasks per round) and MultiProducer
(N producer threads) for both ingress variants on each backend, alternating the variants
from round to round, and prints ns per task (median across rounds, and the spread) and
the ratio chunk / arena. No Python runs in the timed path.

    python bindings/python/measure/flood_variants.py [--rounds 5] [--producers 1,10,100]
"""

from __future__ import annotations

import argparse
import statistics
import sys
from typing import Dict, List, Tuple

import evloop
from evloop import bench


def main(argv: List[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--iterations", type=int, default=5, help="flood rounds per run")
    ap.add_argument("--tasks", type=int, default=100000, help="tasks per flood round")
    ap.add_argument("--producers", default="1,10,100",
                    help="producer counts (1 = PingPong, else MultiProducer)")
    ap.add_argument("--backends", default=",".join(evloop.backends()))
    ap.add_argument("--budget", type=int, default=0, help="fixed batch budget (0 adaptive)")
    args = ap.parse_args(argv)

    variants = evloop.variants()
    cases = [(b, int(p)) for b in args.backends.split(",") for p in args.producers.split(",")]
    res: Dict[Tuple[str, int, str], List[float]] = {}
    for r in range(args.rounds):
        for backend, producers in cases:
            order = variants if r % 2 == 0 else variants[::-1]
            for v in order:
                family = "PingPong" if producers == 1 else "MultiProducer"
                out = bench.run(family, variant=v, backend=backend, producers=producers,
                                tasks=args.tasks, iterations=args.iterations,
                                batch_budget=args.budget)
                res.setdefault((backend, producers, v), []).append(out.ns_per_op)

    print(f"# ns per task, median of {args.rounds} rounds (± half the spread); "
          f"{args.tasks} tasks per flood round, budget "
          f"{'adaptive' if not args.budget else args.budget}")
    print(f"{'backend':<10} {'producers':>9} " +
          " ".join(f"{v:>16}" for v in variants) + f" {'chunk/arena':>12}")
    for backend, producers in cases:
        cells = []
        meds = {}
        for v in variants:
            xs = res[(backend, producers, v)]
            m = statistics.median(xs)
            meds[v] = m
            cells.append(f"{m:>9.1f} ±{(max(xs) - min(xs)) / 2:>5.1f}")
        ratio = meds["chunk"] / meds["arena"] if meds.get("arena") else float("nan")
        print(f"{backend:<10} {producers:>9} " + " ".join(f"{c:>16}" for c in cells) +
              f" {ratio:>11.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
