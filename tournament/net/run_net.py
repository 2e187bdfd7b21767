#!/usr/bin/env python3
"""The network family of the evloop tournament: HTTP/1.1 keep-alive "hello" servers driven by wrk.

One server per system (tournament/net/server_*.c, all around the same connection logic,
http_conn.c): evloop readiness per backend, evloop completion operations per backend (when
built), libev ev_io and libuv uv_tcp streams. Each round runs every system at every
connection count once, the order of systems rotated from round to round, each run a fresh
server pinned to one CPU (taskset -c 1) and `wrk -t1 -cN -dSs --timeout 2s --latency` pinned
to another (taskset -c 0). Reported per system and connection count: the median req/s across
rounds with its min-max spread, the medians of wrk's p50 and p99 latency, the ratios to libev
and libuv, and the issue's targets met or missed. Here higher req/s is better: a req/s ratio
above 1.00x means evloop wins; a p99 ratio below 1.00x means evloop wins. A run in which wrk
counted a socket error (connect, read, write, timeout) or a non-2xx response has failed: the
report gives its counts, never its req/s, and its system reads "failed" at that connection
count instead of a figure; the exit status is then 1.

The offload family (--families offload) runs the offload servers the same way: each request's
work on worker threads, the reply posted back to the loop thread (tournament/net/README.md).

The pyserver family (--families pyserver) runs real Python servers the same way: uvicorn with
httptools, uvicorn with h11 and aiohttp's web server, each on evloop's asyncio loop, uvloop,
rloop and the stock loop, under the Python that --python names, with keep-alive and with
Connection: close; reported with the server's CPU per request and ratios against uvloop.

Writes into --out: net.json (every run and the medians), report.md and plots/net.png (and
plots/net_offload.png, plots/net_echo.png with those families) when matplotlib is
importable. Python 3 standard library only; matplotlib optional. tournament/tournament.py
runs this (--net-build) and puts its section into its report.

This file is the command line; the parts, one job each: net_systems.py (what runs),
net_servers.py (the server processes and their checks), net_clients.py (wrk and
echo_client: command lines and output), net_rounds.py (runs, rounds, the measurement),
net_summary.py (medians, ratios, targets), net_report.py (the markdown section),
net_plots.py (the PNGs); net_pyservers.py (the pyserver family's systems) and py_server.py
(its server, run by --python).
"""
import argparse
import json
import os
import sys

from machine_load import BUSY
from net_clients import fmt_failures, run_failures
from net_plots import make_offload_plot, make_plot, make_py_plot
from net_pyservers import PY_BASELINE, PY_SYSTEMS, py_targets
from net_report import failed_runs, headline, offload_headline, py_headline, section
from net_rounds import measure  # noqa: E402
from net_summary import evaluate_targets, summarize  # noqa: E402
from net_systems import FULL, OFFLOAD_BASELINES, QUICK, SYSTEMS, case_label  # noqa: E402


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build-bench"),
                    help="CMake build folder (with -DEVLOOP_BUILD_BENCH=ON), or its "
                         "tournament/net")
    ap.add_argument("--quick", action="store_true",
                    default=os.environ.get("EVLOOP_BENCH_QUICK", "") not in ("", "0"),
                    help="1 round x 1 s: a smoke run (also EVLOOP_BENCH_QUICK=1)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 5, quick 1)")
    ap.add_argument("--duration", type=int, help="seconds per wrk run (default 3, quick 1)")
    ap.add_argument("--conns", default="10,200,1000", help="HTTP: connection counts")
    ap.add_argument("--families", default="http",
                    help="http (wrk against the HTTP servers), offload (wrk against the offload "
                         "servers: workers post the replies back), echo (echo_client against "
                         "the same servers with --echo) and/or pyserver (wrk against uvicorn "
                         "and aiohttp on each asyncio loop, net_pyservers.py): default http")
    ap.add_argument("--echo-conns", default="1,100", help="echo: connection counts")
    ap.add_argument("--echo-sizes", default="1,4096", help="echo: message sizes, bytes")
    ap.add_argument("--systems", default="",
                    help="comma-separated (default: all of the families run), of: " +
                         ", ".join(list(SYSTEMS) + PY_SYSTEMS))
    ap.add_argument("--python", default=sys.executable,
                    help="pyserver: the Python that runs the servers, with evloop and the "
                         "servers and loops installed (default: this one, " +
                         sys.executable + ")")
    ap.add_argument("--py-conns", default="100", help="pyserver: connection counts")
    ap.add_argument("--py-modes", default="keep-alive,close",
                    help="pyserver: keep-alive and/or close (wrk sends Connection: close)")
    ap.add_argument("--port", type=int, default=0,
                    help="the servers' port (default 0: a free one each run)")
    ap.add_argument("--quiet-wait", type=float,
                    help="seconds to wait before each run for other processes to go below "
                         f"{BUSY} cores (default 10, quick 0)")
    ap.add_argument("--retries", type=int,
                    help="runs again a run disturbed by other processes, up to N times "
                         "(default 1, quick 0)")
    ap.add_argument("--patience", type=float,
                    help="seconds the whole family may spend waiting for quiet and running "
                         "disturbed runs again (default 240, quick 0)")
    ap.add_argument("--wrk-threads", type=int, default=1,
                    help="wrk's threads (-t), all on the client's CPU (default 1)")
    ap.add_argument("--wrk-timeout", type=int, default=2,
                    help="seconds after which wrk counts a request as timed out (default 2); "
                         "a run with a timeout fails")
    ap.add_argument("--offload-workers", type=int, default=2,
                    help="offload: worker threads per server (default 2)")
    ap.add_argument("--offload-work-us", type=int, default=2,
                    help="offload: busy work per request on a worker, us (default 2)")
    ap.add_argument("--offload-worker-cpus",
                    help="offload: the workers' CPUs, a taskset list (default: the server's "
                         "CPU, beside the loop thread)")
    ap.add_argument("--server-cpu", type=int, default=1)
    ap.add_argument("--client-cpu", type=int, default=0)
    ap.add_argument("--out", help="results folder (default tournament/results/net, or "
                                  "tournament/results/net-quick with --quick; net-pyservers "
                                  "and net-pyservers-quick for --families pyserver)")
    ap.add_argument("--from-json", help="only rebuild the report from this net.json")
    args = ap.parse_args()

    mode = QUICK if args.quick else FULL
    # The pyserver family alone writes a folder of its own, so it never replaces the C
    # servers' report.
    name = "net-pyservers" if args.families == "pyserver" else "net"
    outdir = args.out or os.path.join(os.path.dirname(here), "results",
                                      name + ("-quick" if args.quick else ""))
    os.makedirs(outdir, exist_ok=True)
    if args.from_json:
        with open(args.from_json) as f:
            summary = json.load(f)
        # From the runs again, so a file from before failed runs were told apart reads as now.
        meta, runs = summary["meta"], summary["runs"]
        summary["cells"], summary["echo_cells"] = summarize(runs), summarize(runs, "echo")
        summary["offload_cells"] = summarize(runs, "offload")
        summary["py_cells"] = summarize(runs, "pyserver")
        summary["py_targets"] = py_targets(summary["py_cells"],
                                           meta.get("pyserver", {}).get("keys", []))
        summary["targets"] = (evaluate_targets(summary["cells"], meta["conns"])
                              if "http" in meta.get("families", ["http"]) else [])
    else:
        summary = measure(args, mode)
    summary["plot"] = make_plot(summary, outdir)
    summary["offload_plot"] = make_offload_plot(summary, outdir)
    summary["py_plot"] = make_py_plot(summary, outdir)
    with open(os.path.join(outdir, "net.json"), "w") as f:
        json.dump(summary, f, indent=1)
    report = os.path.join(outdir, "report.md")
    with open(report, "w") as f:
        f.write("\n".join(["# evloop network family", ""] + section(summary, "", "##")))
    # The same section and headline for the tournament's report (tournament_report.py), which
    # sits one folder up: its plots are under net/.
    with open(os.path.join(outdir, "tournament_section.md"), "w") as f:
        f.write("\n".join(section(summary, "net/", "##")) + "\n")
    with open(os.path.join(outdir, "headline.txt"), "w") as f:
        f.write("\n".join(headline(summary)) + "\n")
    if summary["cells"]:
        print("\nreq/s, evloop / libev and evloop / libuv (medians):")
        print("\n".join(headline(summary)))
    if summary.get("offload_cells"):
        print("offload family, req/s over " + ", ".join(OFFLOAD_BASELINES) + " (medians):")
        print("\n".join(offload_headline(summary)))
    if summary.get("py_cells"):
        print(f"pyserver family, req/s over {PY_BASELINE}'s (medians; {PY_BASELINE}'s "
              "figure in brackets):")
        print("\n".join(py_headline(summary)))
    missed = [t for t in summary["targets"] if t["met"] is False]
    failing = sum(1 for t in summary["targets"] if t.get("failed"))
    if summary["targets"]:
        print(f"targets: {sum(1 for t in summary['targets'] if t['met'])} met, {len(missed)} "
              f"missed, {failing} with failed runs, "
              f"{sum(1 for t in summary['targets'] if t['met'] is None and not t.get('failed'))} "
              "not run")
    if summary.get("py_targets"):
        pt = summary["py_targets"]
        print(f"pyserver target (evloop >= 1.0x uvloop): {sum(1 for t in pt if t['met'])} met, "
              f"{sum(1 for t in pt if t['met'] is False)} missed, "
              f"{sum(1 for t in pt if t.get('failed'))} with failed runs, "
              f"{sum(1 for t in pt if t['met'] is None and not t.get('failed'))} not run")
    failed = failed_runs(summary)
    if failed:
        print(f"FAILED: {len(failed)} of {len(summary['runs'])} runs (timeouts, socket errors, "
              "non-2xx responses or a server that failed):")
        for r in failed:
            print(f"  round {r.get('round', '?')} {r['system']} {case_label(r)}: "
                  f"{r.get('error') or 'wrk counted ' + fmt_failures(run_failures(r))}")
    print(f"report: {report}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
