"""The tournament's measurement from Python: ``python -m evloop.bench.tournament``.

Runs every family and shape the benchmark kernels register (:func:`evloop.bench.families`,
:func:`evloop.bench.shapes`) in this process for several rounds, evloop in both variants on
every backend that starts here (plus fixed settings from ``--configs`` /
``$EVLOOP_BENCH_EVLOOP_CONFIGS``) and the hardware floors where the family's kernel
registers them, the order of those rotated from round to round. libev and libuv are not
in the package.

Writes under ``--out`` (by default ``evloop-tournament/latest``, or ``quick``, in the current
folder; never into the installed package) ``round-N/<Family>[-<shape>].json``, the JSON the
benchmark binary writes (google-benchmark's), and ``table.txt``, the plain table it also
prints: per benchmark, the median ns/op across rounds and its spread. The report, ratios,
targets and plots are the checkout's (tournament/README.md)::

    python -m evloop.bench.tournament --quick --filter PingPongLatency
    tournament/tournament.py --from-json evloop-tournament/quick/round-*/*.json \\
        --out evloop-tournament/quick
"""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import re
import statistics
import sys
from typing import Dict, List, Optional

import evloop
from evloop import bench

PROG = "python -m evloop.bench.tournament"


def grid() -> List[Dict[str, object]]:
    """Every family and shape as the kernels register them (shape "" for none), and whether
    the floors run it."""
    return [{"family": f, "shape": s, "floors": bench.floors(f)}
            for f in bench.families() for s in bench.shapes(f) or [""]]


def parse_configs(text: str) -> List[Dict[str, int]]:
    """'budget=64;spin=0;budget=256,spin=20000' -> fixed settings (bench's syntax)."""
    out = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        cfg = {"spin_ns": -1, "batch_budget": 0}
        for kv in part.split(","):
            k, _, v = kv.partition("=")
            if k == "budget":
                cfg["batch_budget"] = int(v)
            elif k == "spin":
                cfg["spin_ns"] = int(v)
            else:
                raise SystemExit(f"{PROG}: bad config {part!r}")
        out.append(cfg)
    return out


def targets(configs: List[Dict[str, int]]) -> List[Dict[str, object]]:
    out: List[Dict[str, object]] = []
    for variant in evloop.variants():
        for backend in evloop.backends():
            for cfg in [{"spin_ns": -1, "batch_budget": 0}] + configs:
                out.append({"system": "evloop", "variant": variant, "backend": backend, **cfg})
    out.append({"system": "floor-spin"})
    out.append({"system": "floor-futex"})
    return out


def measure(cell: Dict[str, object], target: Dict[str, object], min_time: float, flt):
    """One benchmark as an entry of google-benchmark's JSON; None where flt leaves it out
    or the family's kernel does not run the floors."""
    if target["system"] != "evloop" and not cell["floors"]:
        return None
    kw = dict(target, shape=cell["shape"] or None)
    name = bench.name(cell["family"], **kw)  # type: ignore[arg-type]
    if flt and not flt.search(name):
        return None
    try:
        res = bench.run(cell["family"], max_seconds=min_time, iterations=10_000_000,
                        **kw)  # type: ignore[arg-type]
    except RuntimeError as e:
        return {"name": name, "run_type": "iteration", "error_occurred": True,
                "error_message": str(e)}
    return res.as_benchmark_json()


def run_round(args, rnd: int, tgts, cells: List[Dict[str, object]]) -> List[str]:
    """Round rnd: every cell against every target, the targets rotated; returns the JSON
    files written."""
    rdir = os.path.join(args.out, f"round-{rnd}")
    os.makedirs(rdir, exist_ok=True)
    flt = re.compile(args.filter) if args.filter else None
    rot = (rnd - 1) % len(tgts)
    paths = []
    for cell in cells:
        entries = []
        for t in tgts[rot:] + tgts[:rot]:
            entry = measure(cell, t, args.min_time, flt)
            if entry is None:
                continue
            entries.append(entry)
            if not args.quiet:
                print(f"round {rnd}: {entry['name']}: "
                      f"{entry.get('ns_per_op', float('nan')):.0f} ns/op", flush=True)
        if not entries:
            continue
        suffix = f"-{cell['shape']}" if cell["shape"] else ""
        path = os.path.join(rdir, f"{cell['family']}{suffix}.json")
        context = {"date": datetime.datetime.now().astimezone().isoformat(),
                   "host_name": platform.node(), "num_cpus": os.cpu_count(),
                   "kernel": f"{platform.system()} {platform.release()}",
                   "libuv_version": "not run (in-process)",
                   "libev_version": "not run (in-process)",
                   "evloop_targets": ",".join(sorted({e["name"] for e in entries})),
                   "executable": PROG}
        with open(path, "w") as f:
            json.dump({"context": context, "benchmarks": entries}, f, indent=1)
        paths.append(path)
    return paths


def table(paths: List[str]) -> str:
    """Per benchmark, the median ns/op across the rounds of paths and its min-max."""
    runs: Dict[str, List[float]] = {}
    for path in paths:
        with open(path) as f:
            for e in json.load(f)["benchmarks"]:
                if not e.get("error_occurred"):
                    runs.setdefault(e["name"], []).append(float(e["ns_per_op"]))
    width = max((len(n) for n in runs), default=9)
    lines = [f"{'benchmark':<{width}}  {'ns/op':>12}  {'min-max':>21}  rounds"]
    for name in sorted(runs):
        v = runs[name]
        lines.append(f"{name:<{width}}  {statistics.median(v):12.1f}  "
                     f"{min(v):10.1f}-{max(v):<10.1f}  {len(v)}")
    return "\n".join(lines)


def parse_args(argv: Optional[List[str]]):
    ap = argparse.ArgumentParser(
        prog=PROG, description="The tournament's rounds measured in this process by "
        "evloop.bench's kernels: round JSON and a table; the report is tournament/'s.")
    ap.add_argument("--quick", action="store_true",
                    default=os.environ.get("EVLOOP_BENCH_QUICK", "") not in ("", "0"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=None,
                    help="seconds per benchmark and round (default 0.3, quick 0.02)")
    ap.add_argument("--filter", default="", help="regex on benchmark names")
    ap.add_argument("--configs", default="", help="extra fixed evloop settings, "
                    "';'-separated ('spin=0;budget=64')")
    ap.add_argument("--out", help="results folder (default evloop-tournament/latest or "
                                  "evloop-tournament/quick under the current folder)")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--asyncio", action="store_true",
                    help="the asyncio families instead (evloop's asyncio loop beside uvloop "
                    "and the stock loop: evloop.bench.aio; --rounds, --filter, --out, "
                    "--clock cpu)")
    return ap, ap.parse_known_args(argv)


def main(argv: Optional[List[str]] = None) -> int:
    ap, (args, rest) = parse_args(argv)
    if args.asyncio:
        from evloop.bench import aio

        return aio.main(["--rounds", str(args.rounds), "--filter", args.filter]
                        + (["--out", args.out] if args.out else []) + rest)
    if rest:
        ap.error(f"unrecognized arguments: {' '.join(rest)}")
    args.out = os.path.abspath(args.out or os.path.join(
        "evloop-tournament", "quick" if args.quick else "latest"))
    if args.min_time is None:
        args.min_time = 0.02 if args.quick else 0.3
    tgts = targets(parse_configs(args.configs or
                                 os.environ.get("EVLOOP_BENCH_EVLOOP_CONFIGS", "")))
    print(f"evloop tournament (in-process, evloop.bench kernels): {args.rounds} rounds, "
          f"{args.min_time}s per benchmark, into {args.out}", flush=True)
    paths: List[str] = []
    for rnd in range(1, args.rounds + 1):
        paths += run_round(args, rnd, tgts, grid())
    if not paths:
        print(f"{PROG}: nothing ran (check --filter)", file=sys.stderr)
        return 1
    text = table(paths)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    print(text)
    print(f"\nround JSON: {args.out}/round-*/; the report from a checkout: "
          f"tournament/tournament.py --from-json {args.out}/round-*/*.json --out {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
