"""An experiment with evloop's benchmark subpackage (evloop.bench): how the spin window before
the loop sleeps changes the latency of a hand-off to an idle loop, for both ingress variants.

The C kernel PingPongLatency, shape "cold", pauses between round trips so that the loop has
gone idle: a spin window longer than the pause catches the next task without a wake syscall.
Rounds alternate the settings, so a noisy moment of a shared machine lands on all of them.

    python experiment.py --rounds 3 --iterations 3000
"""

import argparse
import statistics

from evloop import bench

WINDOWS = [0, 5000, 20000, 100000, -1]  # ns; -1 = adaptive (the default)


def main() -> None:
    ap = argparse.ArgumentParser(description="Spin window against hand-off latency.")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iterations", type=int, default=3000, help="round trips per run")
    ap.add_argument("--gap-ns", type=int, default=50000, help="pause between round trips")
    args = ap.parse_args()

    p50 = {}  # (variant, window) -> p50 of each round
    for _ in range(args.rounds):
        for variant in ("arena", "chunk"):
            for spin in WINDOWS:
                r = bench.run("PingPongLatency", shape="cold", variant=variant, spin_ns=spin,
                              gap_ns=args.gap_ns, iterations=args.iterations)
                p50.setdefault((variant, spin), []).append(r.p50)

    print(f"PingPongLatency/cold, {args.gap_ns} ns between round trips; median of "
          f"{args.rounds} rounds (range)")
    print(f"{'variant':8} {'spin ns':>9} {'p50 us':>8}   range")
    for (variant, spin), xs in p50.items():
        label = "adaptive" if spin < 0 else str(spin)
        print(f"{variant:8} {label:>9} {statistics.median(xs) / 1e3:8.2f}   "
              f"{min(xs) / 1e3:.2f}-{max(xs) / 1e3:.2f}")


if __name__ == "__main__":
    main()
