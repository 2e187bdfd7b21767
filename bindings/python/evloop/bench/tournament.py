"""The evloop tournament from Python: ``python -m evloop.bench.tournament``.

The tournament's code is the driver's, tournament/tournament.py and the modules beside it,
which the package carries as ``evloop.bench._kit`` (installed from tournament/ at build
time; in a source checkout they are loaded from tournament/ directly). Two ways to run it:

- with the google-benchmark binary (``--bench PATH``, ``$EVLOOP_BENCH``, else
  ``build/bench/evloop_bench`` (the README's build folder, configured with
  ``-DEVLOOP_BUILD_BENCH=ON``) or ``build-bench/bench/evloop_bench`` (as
  ``tournament/run.sh`` builds it) under the current folder): exactly the driver's
  run, evloop against libuv, libev and the hardware floors; every other argument goes to
  the driver (``--rounds``, ``--quick``, ``--filter``, ...).
- otherwise (or with ``--in-process``): the same rounds, rotation, medians, ratios and
  report, with the figures measured in this process by :mod:`evloop.bench`'s C kernels:
  evloop in both variants on every backend that starts here (plus fixed settings from
  ``--configs`` / ``$EVLOOP_BENCH_EVLOOP_CONFIGS``) and the hardware floors. libev and
  libuv are not in the Python package, so their columns stay empty; the floor ratios and
  the adaptive-vs-fixed table are there.

Everything is written under ``--out``, by default ``evloop-tournament/latest`` (or
``quick``) in the current folder; never into the installed package.

    python -m evloop.bench.tournament --in-process --quick
    python -m evloop.bench.tournament --in-process --rounds 3 --configs 'spin=0;budget=64'
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import re
import sys
from types import ModuleType
from typing import Dict, List, Optional, Tuple

import evloop
from evloop import bench


def load_driver() -> ModuleType:
    """tournament/tournament.py: the copy installed with the package, else the checkout's."""
    try:
        return importlib.import_module("evloop.bench._kit.tournament")
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    for base in (os.getcwd(), os.path.join(here, "..", "..", "..", "..")):
        kit = os.path.abspath(os.path.join(base, "tournament"))
        if os.path.exists(os.path.join(kit, "tournament.py")):
            # The checkout's tournament/ stands in for the installed evloop.bench._kit, so
            # the modules import each other the same way (relatively) in both.
            pkg = ModuleType("evloop.bench._kit")
            pkg.__path__ = [kit]
            sys.modules["evloop.bench._kit"] = pkg
            return importlib.import_module("evloop.bench._kit.tournament")
    raise SystemExit(f"{PROG}: the benchmark driver (tournament/tournament.py) is not "
                     "in this installation")


PROG = "python -m evloop.bench.tournament"
# Where a checkout builds the benchmark binary, under the current folder: the README's
# build folder first, then tournament/run.sh's.
BENCH_BUILDS = (os.path.join("build", "bench", "evloop_bench"),
                os.path.join("build-bench", "bench", "evloop_bench"))


def find_bench_binary(explicit: Optional[str]) -> Optional[str]:
    """The evloop_bench to run: --bench (which must exist), $EVLOOP_BENCH, or one of
    BENCH_BUILDS under the current folder; None for an in-process run."""
    if explicit:
        if not os.access(explicit, os.X_OK):
            raise SystemExit(f"{PROG}: --bench {explicit}: not an executable file")
        return os.path.abspath(explicit)
    for cand in (os.environ.get("EVLOOP_BENCH"),) + BENCH_BUILDS:
        if cand and os.access(cand, os.X_OK):
            return os.path.abspath(cand)
    return None


def default_out(quick: bool) -> str:
    return os.path.join(os.getcwd(), "evloop-tournament", "quick" if quick else "latest")


# ---------------------------------------------------------------- the in-process run

# (family row as evloop_bench names it, bench.run family, parameters, floors too?)
ROWS: List[Tuple[str, str, Dict[str, object], bool]] = [
    ("PingPongLatency", "PingPongLatency", {"shape": "hot"}, True),
    ("PingPongLatency", "PingPongLatency", {"shape": "cold"}, True),
    ("PingPongLatency", "PingPongLatency", {"shape": "blocking"}, True),
    ("PingPong", "PingPong", {}, False),
    ("BurstSubmit", "BurstSubmit", {}, False),
    ("MultiProducer", "MultiProducer", {"producers": 10}, False),
    ("MultiProducerContention", "MultiProducer", {"producers": 100}, False),
    ("MicrotaskRoundTrip", "MicrotaskRoundTrip", {}, False),
    ("ReadinessRoundTrip", "ReadinessRoundTrip", {}, False),
]


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


def run_in_process(args: argparse.Namespace) -> List[str]:
    """Runs the rounds; returns the round JSON files (google-benchmark's format)."""
    configs = parse_configs(args.configs or os.environ.get("EVLOOP_BENCH_EVLOOP_CONFIGS", ""))
    tgts = targets(configs)
    flt = re.compile(args.filter) if args.filter else None
    paths = []
    names = []
    for r in range(1, args.rounds + 1):
        rdir = os.path.join(args.out, f"round-{r}")
        os.makedirs(rdir, exist_ok=True)
        for row, family, params, floors in ROWS:
            entries = []
            rot = (r - 1) % len(tgts)
            for t in tgts[rot:] + tgts[:rot]:
                if t["system"] != "evloop" and not floors:
                    continue
                kw = dict(t)
                res_name = None
                try:
                    res = bench.run(family, max_seconds=args.min_time,
                                    iterations=10_000_000, **params, **kw)  # type: ignore[arg-type]
                    entry = res.as_benchmark_json()
                except (RuntimeError, ValueError) as e:
                    entry = {"name": f"{family}/{t['system']}", "run_type": "iteration",
                             "error_occurred": True, "error_message": str(e)}
                # the row name as evloop_bench has it (MultiProducerContention, ...)
                entry["name"] = row + entry["name"][len(family):]
                res_name = entry["name"]
                if flt and not flt.search(res_name):
                    continue
                entries.append(entry)
                if r == 1:
                    names.append(res_name)
                if not args.quiet:
                    print(f"round {r}: {res_name}: "
                          f"{entry.get('ns_per_op', float('nan')):.0f} ns/op", flush=True)
            if not entries:
                continue
            suffix = f"-{params['shape']}" if "shape" in params else ""
            path = os.path.join(rdir, f"{row}{suffix}.json")
            doc = {"context": {"date": datetime.datetime.now().astimezone().isoformat(),
                               "host_name": platform.node(), "num_cpus": os.cpu_count(),
                               "kernel": f"{platform.system()} {platform.release()}",
                               "libuv_version": "not run (in-process)",
                               "libev_version": "not run (in-process)",
                               "evloop_targets": ",".join(sorted(set(names))),
                               "executable": PROG + " --in-process"},
                   "benchmarks": entries}
            with open(path, "w") as f:
                json.dump(doc, f, indent=1)
            paths.append(path)
    return paths


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(
        prog=PROG,
        description="The evloop tournament from Python (tournament/tournament.py's code).",
        epilog="Other arguments go to tournament/tournament.py when the bench binary is used.")
    ap.add_argument("--bench", help="path to evloop_bench (the google-benchmark binary); "
                    "default $EVLOOP_BENCH, else " + " or ".join(BENCH_BUILDS) +
                    " under the current folder, else an in-process run")
    ap.add_argument("--in-process", action="store_true",
                    help="measure with evloop.bench's kernels in this process")
    ap.add_argument("--quick", action="store_true",
                    default=os.environ.get("EVLOOP_BENCH_QUICK", "") not in ("", "0"))
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--min-time", type=float, default=None,
                    help="seconds per benchmark and round (default 0.3, quick 0.02)")
    ap.add_argument("--filter", default="", help="regex on benchmark names")
    ap.add_argument("--configs", default="", help="extra fixed evloop settings, "
                    "';'-separated ('spin=0;budget=64')")
    ap.add_argument("--out", help="results folder (default evloop-tournament/latest or "
                                  "evloop-tournament/quick under the current folder); "
                                  "nothing is written elsewhere")
    ap.add_argument("--quiet", action="store_true")
    ap.add_argument("--asyncio", action="store_true",
                    help="the asyncio families instead (evloop's asyncio loop beside uvloop "
                    "and the stock loop: evloop.bench.aio; --rounds, --filter, --out, "
                    "--clock cpu)")
    args, rest = ap.parse_known_args(argv)
    if args.asyncio:
        from evloop.bench import aio

        return aio.main(["--rounds", str(args.rounds), "--filter", args.filter]
                        + (["--out", args.out] if args.out else []) + rest)

    driver = load_driver()
    binary = None if args.in_process else find_bench_binary(args.bench)
    # The driver's own default folder is beside its file: in the installed package.
    args.out = os.path.abspath(args.out or default_out(args.quick))
    # The report shows the command; the driver would show its own file's name.
    os.environ.setdefault("EVLOOP_TOURNAMENT_COMMAND",
                          " ".join([PROG] + list(sys.argv[1:] if argv is None else argv)))
    if binary:
        sys.argv = [PROG, "--bench", binary, "--rounds", str(args.rounds), "--out",
                    args.out] + (["--quick"] if args.quick else []) + \
                   (["--filter", args.filter] if args.filter else []) + \
                   (["--min-time", str(args.min_time)] if args.min_time else []) + rest
        return int(driver.main() or 0)

    if rest:
        ap.error(f"unknown arguments for an in-process run: {rest}")
    if args.min_time is None:
        args.min_time = 0.02 if args.quick else 0.3
    os.makedirs(args.out, exist_ok=True)
    print(f"evloop tournament (in-process, evloop.bench kernels): {args.rounds} rounds, "
          f"{args.min_time}s per benchmark, into {args.out}", flush=True)
    paths = run_in_process(args)
    if not paths:
        print(f"{PROG}: nothing ran (check --filter)", file=sys.stderr)
        return 1
    sys.argv = [PROG, "--from-json", *paths, "--out", args.out] + \
        (["--quick"] if args.quick else [])
    return int(driver.main() or 0)


if __name__ == "__main__":
    sys.exit(main())
