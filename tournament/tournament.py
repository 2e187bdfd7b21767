#!/usr/bin/env python3
"""The evloop tournament: evloop against libuv, libev and the hardware floors.

Runs bench/evloop_bench (every family, every system) for several rounds, each round in a
fresh process with the order of systems inside each family rotated, so slow drift of a
shared machine lands on every system alike. Per benchmark and metric it takes the median
across rounds and divides evloop's by libuv's, libev's and the floors' from the same run.
Every metric is lower-is-better, so a ratio below 1 means evloop wins.

Each family runs in its own process; a family during which other processes kept more than
0.3 cores busy is run again (the machine is shared, and on 2 cores their load, not the
loop, would set the figures). Writes into the results folder: round-N/<Family>.json
(google-benchmark's JSON, untouched) and .txt (its console log), summary.json (medians,
spreads, ratios), report.md, and plots/*.png when matplotlib is importable. Prints the
ratio table at the end.

Beside the adaptive defaults, the hand-off families also run evloop at fixed settings (the
sweep, --sweep) and seeded by a calibration profile (the tuned column: evloop_autotune runs
once before round 1), in the same process and round as the adaptive columns; the report
compares them, and opens with the targets (issues 5 and 11), met or missed.

Python 3.11 standard library only; matplotlib is optional (Debian: python3-matplotlib).
Usually started by tournament/run.sh, which also installs and builds.
"""
import argparse
import datetime
import json
import os
import sys
import time

import tournament_plots as plots
import tournament_report as report
import tournament_run as run
from net.machine_load import BUSY

# tournament/: this file is tournament/tournament.py; the results, tournament/net and the
# default build folder (build-bench at the top of the checkout) are found from there.
TOURNAMENT_DIR = os.path.dirname(os.path.abspath(__file__))

QUICK = {"rounds": 3, "min_time": 0.01, "sweep": "lite", "autotune_s": 0.5}
FULL = {"rounds": 5, "min_time": 0.15, "sweep": "full", "autotune_s": 2.0}
# --short (tournament/run.sh's default): the headline families only, three rounds, no
# sweep, no calibration, short waits for quiet: a few minutes on two cores.
SHORT = {"rounds": 3, "min_time": 0.05, "sweep": "none", "autotune_s": 2.0,
         "filter": "^(PingPong|BurstSubmit|MultiProducer|PingPongLatency|ReadinessRoundTrip|"
                   "Timers)/",
         "tuned": False, "quiet_wait": 10, "retries": 1, "patience": 60}


def previous_meta(paths):
    """The meta of the summary.json beside the round folders of paths, or {}."""
    first = os.path.dirname(os.path.abspath(paths[0])) if paths else ""
    for d in (os.path.dirname(first), first):
        try:
            with open(os.path.join(d, "summary.json")) as f:
                return json.load(f).get("meta", {})
        except (OSError, ValueError):
            continue
    return {}


def loadavg():
    try:
        with open("/proc/loadavg") as f:
            return " ".join(f.read().split()[:3])
    except OSError:
        return "?"


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--bench", default=os.path.join(os.path.dirname(TOURNAMENT_DIR), "build-bench",
                                                    "bench", "evloop_bench"),
                    help="path to evloop_bench")
    ap.add_argument("--quick", action="store_true",
                    default=os.environ.get("EVLOOP_BENCH_QUICK", "") not in ("", "0"),
                    help="tiny min time: a smoke run (also EVLOOP_BENCH_QUICK=1)")
    ap.add_argument("--short", action="store_true",
                    help="the headline families (PingPong, BurstSubmit, MultiProducer, "
                         "PingPongLatency, ReadinessRoundTrip, Timers), 3 rounds at min time "
                         "0.05, no sweep, no tuned column: tournament/run.sh's default; "
                         "results in tournament/results/short")
    ap.add_argument("--rounds", type=int, help="rounds (>= 3 for a tournament)")
    ap.add_argument("--min-time", type=float, help="--benchmark_min_time per benchmark")
    ap.add_argument("--filter", default="", help="--benchmark_filter regex")
    ap.add_argument("--out", help="results folder (default tournament/results/latest; "
                                  "tournament/results/short with --short, tournament/results/quick "
                                  "with --quick)")
    ap.add_argument("--quiet-wait", type=float,
                    help="seconds to wait before each family for other processes to go "
                         "below 0.3 cores (default 60, short 10, quick 0)")
    ap.add_argument("--retries", type=int, default=None,
                    help="runs again a family disturbed by other processes, up to N times "
                         "(default 2, short 1, quick 0)")
    ap.add_argument("--patience", type=float, default=None,
                    help="seconds the whole run may spend waiting for quiet and re-running "
                         "disturbed families (default 480, short 60, quick 0)")
    ap.add_argument("--sweep", choices=sorted(run.SWEEPS),
                    help="fixed evloop settings run beside the adaptive defaults in the "
                         "hand-off families: full (spin 0/5/20/50 us, budget "
                         "64/256/1024/4096), lite (the extremes), none (default full, "
                         "quick lite)")
    ap.add_argument("--autotune", help="evloop_autotune, run once before round 1 for the "
                                       "tuned column (default: tools/evloop_autotune in "
                                       "--bench's build folder; the column is skipped with "
                                       "a warning when it is missing)")
    ap.add_argument("--autotune-seconds", type=float,
                    help="its --seconds (default 2, quick 0.5)")
    ap.add_argument("--no-tuned", action="store_true", help="no tuned column")
    ap.add_argument("--net-build", help="CMake build folder holding tournament/net's servers "
                                        "(target net_servers): runs the network family "
                                        "(tournament/net/run_net.py) after the rounds")
    ap.add_argument("--net-options", default="",
                    help="more options for run_net.py, as one word: "
                         "--net-options='--rounds 5 --duration 5'")
    ap.add_argument("--from-json", nargs="*", help="only rebuild the report from these "
                                                   "round JSON files")
    return ap.parse_args()


def settle(args):
    """Fills what args leave to the mode (quick, short or full): waits, retries, patience,
    filter, tuned column, sweep, calibration, rounds, min time, results folder; and the
    command that the report shows."""
    mode = QUICK if args.quick else SHORT if args.short else FULL
    if args.quiet_wait is None:
        args.quiet_wait = 0 if args.quick else mode.get("quiet_wait", 60)
    if args.retries is None:
        args.retries = 0 if args.quick else mode.get("retries", 2)
    if args.patience is None:
        args.patience = 0 if args.quick else mode.get("patience", 480)
    args.filter = args.filter or mode.get("filter", "")
    args.no_tuned = args.no_tuned or not mode.get("tuned", True)
    args.sweep = args.sweep or mode["sweep"]
    args.autotune_seconds = args.autotune_seconds or mode["autotune_s"]
    # The build folder of --bench (BUILD/bench/evloop_bench) builds the CLI as
    # BUILD/tools/evloop_autotune.
    args.autotune = args.autotune or os.path.join(
        os.path.dirname(os.path.dirname(os.path.abspath(args.bench))), "tools",
        "evloop_autotune")
    args.rounds = args.rounds or mode["rounds"]
    args.min_time = args.min_time or mode["min_time"]
    args.out = args.out or os.path.join(
        TOURNAMENT_DIR, "results", "quick" if args.quick else "short" if args.short else "latest")
    # run_tournament.sh passes the command the user typed.
    command = os.environ.get("EVLOOP_TOURNAMENT_COMMAND") or " ".join(
        [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    if os.environ.get("EVLOOP_BENCH_QUICK") not in (None, "", "0") and \
            "EVLOOP_BENCH_QUICK" not in command:
        command = "EVLOOP_BENCH_QUICK=1 " + command
    return command


def measure(args, profile_meta):
    """The calibration and the rounds; returns (round JSON paths, per family and round the
    cores other processes used, profile_meta)."""
    if not os.access(args.bench, os.X_OK):
        sys.exit(f"no evloop_bench at {args.bench}: build with -DEVLOOP_BUILD_BENCH=ON "
                 "(tournament/run.sh does it all)")
    extra = list(run.SWEEPS[args.sweep])
    if not args.no_tuned:
        run.wait_for_quiet(args.quiet_wait)
        profile_meta = run.calibrate(args.autotune, args.autotune_seconds, args.out)
        if "config" in profile_meta:
            extra.append(profile_meta["config"])
    plan = run.plan_families(args.bench, args.filter, args.min_time, extra, run.SWEEP_BACKEND)
    if "config" in profile_meta and not any(
            report.is_tuned(report.parse_name(n)[2])
            for names, _, _ in plan.values() for n in names):
        print(f"warning: evloop_bench made no @{report.TUNED_TAG} target of "
              f"'{profile_meta['config']}' (no profile= key in this build?); "
              "no tuned column", file=sys.stderr, flush=True)
        profile_meta["skipped"] = "evloop_bench ignored the profile= setting"
    ntests = sum(len(names) for names, _, _ in plan.values())
    print(f"evloop tournament: {ntests} benchmarks in {len(plan)} families x "
          f"{args.rounds} rounds, min time {args.min_time}s, sweep {args.sweep}, into "
          f"{args.out}", flush=True)
    progress = run.Progress(args.rounds, ntests * args.rounds)
    paths, foreign = [], []
    for r in range(1, args.rounds + 1):
        p, loads = run.run_round(args.bench, r, plan, args.min_time, args.out, progress,
                                 args.quiet_wait, args.retries)
        paths += p
        foreign += loads
    if not paths:
        sys.exit("no round produced results")
    return paths, foreign, profile_meta


def print_summary(summary, errors, foreign, nrounds, report_path, outdir, net_ran):
    """The console's end of a run: the ratio, target, sweep and floor tables, warnings, the
    network family's headline."""
    print()
    print("evloop / libuv and evloop / libev (medians of "
          f"{nrounds} rounds; below 1.00x evloop wins):")
    print(report.ratio_table(summary, False))
    print()
    print("targets (issues 5 and 11):")
    print(report.targets_table(*report.target_rows(summary), False))
    srows = [r for r in report.sweep_rows(summary) if r["fixed_ran"]]
    if srows:
        print()
        print(f"adaptive within {(report.PASS_BAR - 1) * 100:.0f}% of the best fixed setting: "
              f"{sum(r['pass'] for r in srows)} of {len(srows)} rows (see the report)")
    ft = report.floor_table(summary, False)
    if ft:
        print()
        print("evloop / hardware floors:")
        print(ft)
    busy = [f"{fam}@{rnd}" for rnd, fam, c in foreign if c > BUSY]
    if busy:
        print(f"\nwarning: other processes used more than {BUSY} cores during {busy}; "
              "spinning benchmarks are then set by the scheduler, not the loop")
    if errors:
        print(f"\n{len(errors)} benchmark runs reported errors; see {report_path}")
    net_headline = report.net_texts(outdir)[1] if net_ran else []
    if net_headline:
        print()
        print("network family, req/s evloop / libev and evloop / libuv (above 1.00x evloop wins):")
        print("\n".join(net_headline))
    print(f"\nreport: {report_path}")


def main():
    args = parse_args()
    command = settle(args)
    run.PATIENCE.left = args.patience
    outdir = args.out
    os.makedirs(outdir, exist_ok=True)

    started = time.monotonic()
    load_before = loadavg()
    foreign = []  # (round, family, cores other processes used during it)
    sweep_meta = {"mode": args.sweep, "configs": run.SWEEPS[args.sweep],
                  "backend": run.SWEEP_BACKEND, "families": list(run.SWEEP_FAMILIES)}
    profile_meta = {"skipped": "--no-tuned"} if args.no_tuned else {}
    if args.from_json:
        paths = args.from_json
        # What the run that wrote these files swept and calibrated, from its summary.json.
        old = previous_meta(paths)
        sweep_meta = old.get("sweep", {})
        profile_meta = old.get("profile", {})
    else:
        paths, foreign, profile_meta = measure(args, profile_meta)
    net_ran = False
    if args.net_build and not args.from_json:
        run.wait_for_quiet(args.quiet_wait)
        net_ran = run.run_net_family(args.net_build, outdir, args.quick,
                                     args.net_options.split())
    elif args.from_json:
        net_ran = os.path.exists(os.path.join(outdir, "net", "net.json"))

    # A round is a round-N folder of per-family files (or a lone JSON file of a whole run).
    nrounds = len({os.path.dirname(os.path.abspath(p))
                   if os.path.basename(os.path.dirname(os.path.abspath(p))).startswith("round-")
                   else p for p in paths})
    data, errors, context = report.load_rounds(paths)
    summary = report.summarize(data)
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "elapsed_s": time.monotonic() - started, "machine": report.machine_info(context),
            "load_before": load_before, "load_after": loadavg(), "command": command,
            "rounds": nrounds, "min_time": args.min_time, "foreign_load": foreign,
            "sweep": sweep_meta, "profile": profile_meta, "net": net_ran}
    plot_paths = plots.make_plots(data, summary, outdir)
    targets, _ = report.target_rows(summary)
    with open(os.path.join(outdir, "summary.json"), "w") as f:
        json.dump({"meta": meta, "rows": summary, "targets": targets,
                   "sweep": report.sweep_rows(summary), "errors": errors}, f, indent=1)
    report_path = report.write_report(outdir, summary, data, errors, meta, plot_paths)
    print_summary(summary, errors, foreign, nrounds, report_path, outdir, net_ran)
    return 0


if __name__ == "__main__":
    sys.exit(main())
