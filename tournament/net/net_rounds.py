"""Running the network family: one run (a fresh server, the client against it, the CPU
others used meanwhile), the interleaved rounds with their waits for a quiet machine and
their reruns, and the whole measurement with its metadata."""

import datetime
import os
import re
import resource
import subprocess
import sys
import time

from machine_load import BUSY, cpu_busy_seconds
from net_clients import (FIGURES, client_command, fmt_failures, parse_echo, parse_wrk,
                         run_failures, wrk_version)
from net_report import fmt_us
from net_pyservers import (PY, PY_MODES, PY_SYSTEMS, available_py_systems, case_key,
                           is_pyserver, py_targets)
from net_servers import (Server, check_offload_close, check_server, cpu_of, launch, pinning,
                         raise_fd_limit, ready_timeout)
from net_summary import evaluate_targets, summarize
from net_systems import (ECHO_CLIENT, OFFLOAD, SYSTEMS, available_systems, case_label,
                         is_offload, offload_meta, runs_case)


def children_cpu():
    return cpu_of(resource.getrusage(resource.RUSAGE_CHILDREN))


def self_cpu():
    return cpu_of(resource.getrusage(resource.RUSAGE_SELF))


def run_one(build, system, case, duration, port, pins, wrk):
    """Runs one system on one case (family, connections, message size); returns a dict of its
    figures, with "error" when something failed: then "failures" has what wrk counted, and the
    figures the client printed are kept aside under "discarded", never under their names."""
    command, prefix = launch(build, system, pins)
    echo = case["family"] == "echo"
    run = dict(case, system=system)
    busy0, kids0, self0 = cpu_busy_seconds(), children_cpu(), self_cpu()
    started = time.monotonic()
    srv = Server(command + (["--echo"] if echo else []), port, prefix, ready_timeout(system))
    if not srv.ready or not srv.port:
        _, rc, err = srv.stop()
        run["error"] = f"did not start (exit {rc}): {err.strip()[-300:]}"
        return run
    run["server"] = srv.ready
    client_started = time.monotonic()
    kids1 = children_cpu()
    srv_cpu1 = srv.cpu_seconds()
    client = subprocess.Popen(pins[1] + client_command(build, case, duration, srv.port, wrk),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = client.communicate(timeout=duration + 30)
    except subprocess.TimeoutExpired:
        client.kill()
        out, _ = client.communicate()
        run["error"] = "the client timed out"
    client_s = max(time.monotonic() - client_started, 1e-3)
    srv_cpu2 = srv.cpu_seconds()
    kids2 = children_cpu()  # communicate() reaped the client: its CPU is in here now
    srv_cpu, rc, err = srv.stop()
    elapsed = max(time.monotonic() - started, 1e-3)
    ours = (children_cpu() - kids0) + (self_cpu() - self0)
    run.update(parse_echo(out) if echo else parse_wrk(out))
    run["server_cpu_pct"] = round(100.0 * srv_cpu / client_s, 1) if srv_cpu is not None else None
    run["wrk_cpu_pct"] = round(100.0 * (kids2 - kids1) / client_s, 1)
    run["others_cores"] = round(max(0.0, (cpu_busy_seconds() - busy0 - ours) / elapsed), 3)
    if case["family"] == "pyserver" and srv_cpu1 is not None and srv_cpu2 is not None:
        # The server's CPU while the client ran, without its start-up and shutdown, per
        # request wrk counted (issue 41 asks for CPU per request).
        run["server_cpu_pct"] = round(100.0 * (srv_cpu2 - srv_cpu1) / client_s, 1)
        if run.get("requests"):
            run["cpu_us_per_req"] = round(1e6 * (srv_cpu2 - srv_cpu1) / run["requests"], 2)
    run["server_exit"] = rc
    m = re.search(r"^served (\d+) requests", err, re.M)  # py_server.py
    if m:
        run["server_requests"] = int(m.group(1))
    m = re.search(r"(\d+) requests on (\d+) connections", err)
    if m:
        run["server_requests"], run["server_conns"] = int(m.group(1)), int(m.group(2))
    m = re.search(r"^work pool: (.*)$", err, re.M)  # evloop-pool: evloop_work_stats at exit
    if m:
        run["server_pool"] = m.group(1)
    if rc != 0:
        run["error"] = f"server exited with {rc}: {err.strip()[-300:]}"
    elif client.returncode != 0 or run.get("rps") is None:
        run.setdefault("error", f"the client exited with {client.returncode}: " +
                       out.strip()[-300:])
    bad = run_failures(run)
    if bad:
        run["failures"] = bad
        counted = "wrk counted " + fmt_failures(bad)
        run["error"] = f"{counted}; {run['error']}" if "error" in run else counted
    if "error" in run:
        run["discarded"] = {k: run.pop(k) for k in FIGURES if run.get(k) is not None}
    return run


class Patience:
    """Waiting for a quiet machine and re-running disturbed runs, within a time budget for
    the whole family, so a machine that stays busy delays the report by a bounded time."""

    def __init__(self, quiet_wait, retries, budget):
        self.quiet_wait, self.retries, self.left = quiet_wait, retries, budget

    def wait_for_quiet(self):
        """Waits (up to quiet_wait s, within the budget) until other processes use less
        than BUSY cores; returns the last load seen."""
        limit = min(self.quiet_wait, self.left)
        if limit <= 0:
            return None
        since = time.monotonic()
        while True:
            a = cpu_busy_seconds()
            time.sleep(0.5)
            load = (cpu_busy_seconds() - a) / 0.5
            if load <= BUSY or time.monotonic() - since >= limit:
                break
        self.left -= time.monotonic() - since
        return load


def run_rounds(build, systems, cases, rounds, duration, port, pins, patience, wrk):
    """Every round runs every system on every case once; inside a case the systems' order
    is rotated by one from round to round. A system whose server does not start (its
    backend is not available here) is dropped from later runs. Before each run the machine
    may be waited on, and a run during which other processes used more than BUSY cores is
    run again (patience)."""
    runs, dead = [], {}
    total = rounds * sum(1 for s in systems for c in cases if runs_case(s, c))
    done, t0 = 0, time.monotonic()
    for rnd in range(rounds):
        order = systems[rnd % len(systems):] + systems[:rnd % len(systems)]
        for case in cases:
            for system in order:
                if not runs_case(system, case):
                    continue
                done += 1
                if system in dead:
                    continue
                for attempt in range(patience.retries + 1):
                    patience.wait_for_quiet()
                    since = time.monotonic()
                    run = run_one(build, system, case, duration, port, pins, wrk)
                    if attempt > 0:
                        patience.left -= time.monotonic() - since
                    if (run.get("others_cores") or 0) <= BUSY or "error" in run or \
                            attempt == patience.retries or patience.left <= 0:
                        break
                    print(f"  {system} {case_label(case)}: other processes used "
                          f"{run['others_cores']:.2f} cores meanwhile; running it again",
                          flush=True)
                run["round"] = rnd + 1
                run["attempts"] = attempt + 1
                runs.append(run)
                if "error" in run and run.get("server") is None:
                    dead[system] = run["error"]
                what = (f"ERROR {run['error'][:80]}" if "error" in run else
                        f"{run['rps']:10.0f} /s  p50 {fmt_us(run['p50_us']):>8s}  "
                        f"p99 {fmt_us(run['p99_us']):>8s}  server {run['server_cpu_pct']}% "
                        f"client {run['wrk_cpu_pct']}%  others {run['others_cores']:.2f}" +
                        (f"  {run['cpu_us_per_req']:.1f} us CPU/req"
                         if run.get("cpu_us_per_req") is not None else ""))
                print(f"  [net round {rnd + 1}/{rounds} {done:3d}/{total} "
                      f"{time.monotonic() - t0:4.0f}s] {system:20s} {case_label(case):18s} "
                      f"{what}", flush=True)
    return runs, dead


def measure(args, mode):
    build = args.build
    if os.path.isdir(os.path.join(build, "tournament", "net")):
        build = os.path.join(build, "tournament", "net")
    rounds = args.rounds or mode["rounds"]
    duration = args.duration or mode["duration"]
    conns_list = [int(c) for c in args.conns.split(",") if c]
    families = [f for f in args.families.split(",") if f]
    if set(families) - {"http", "echo", "offload", "pyserver"}:
        sys.exit("--families: http, offload, echo and/or pyserver")
    if "echo" in families and not os.access(os.path.join(build, ECHO_CLIENT), os.X_OK):
        print(f"note: no {ECHO_CLIENT} in {build}; no echo family", flush=True)
        families.remove("echo")
    echo_conns = [int(c) for c in args.echo_conns.split(",") if c]
    echo_sizes = [int(c) for c in args.echo_sizes.split(",") if c]
    cases = [{"family": "http", "conns": c} for c in conns_list] if "http" in families else []
    if "offload" in families:
        cases += [{"family": "offload", "conns": c} for c in conns_list]
    if "echo" in families:
        cases += [{"family": "echo", "conns": c, "size": z} for z in echo_sizes
                  for c in echo_conns]
    py_conns = [int(c) for c in args.py_conns.split(",") if c]
    py_modes = [m for m in args.py_modes.split(",") if m]
    if set(py_modes) - set(PY_MODES):
        sys.exit("--py-modes: keep-alive and/or close")
    if "pyserver" in families:
        cases += [{"family": "pyserver", "conns": c, "close": m == "close"} for m in py_modes
                  for c in py_conns]
    wanted = [s for s in (args.systems.split(",") if args.systems else
                          list(SYSTEMS) + PY_SYSTEMS) if s]
    unknown = [s for s in wanted if s not in SYSTEMS and s not in PY_SYSTEMS]
    if unknown:
        sys.exit(f"unknown system(s) {', '.join(unknown)}; known: "
                 f"{', '.join(list(SYSTEMS) + PY_SYSTEMS)}")
    c_wanted = [s for s in wanted if not is_pyserver(s) and any(runs_case(s, c) for c in cases)]
    systems = available_systems(build, c_wanted)
    if c_wanted and not systems:
        sys.exit(f"no network servers in {build}: build the target net_servers "
                 "(cmake --build BUILD --target net_servers)")
    py_wanted = [s for s in wanted if is_pyserver(s) and any(runs_case(s, c) for c in cases)]
    py_skipped, py_versions = {}, {}
    if py_wanted:
        PY["python"] = args.python
        py_systems, py_skipped, py_versions = available_py_systems(py_wanted)
        systems += py_systems
    if not systems:
        sys.exit("no system runs in these families: see --systems and --families")
    if subprocess.run(["sh", "-c", "command -v wrk"], capture_output=True).returncode != 0:
        sys.exit("no wrk in PATH (Debian: apt-get install wrk)")
    nofile = raise_fd_limit(max(c["conns"] for c in cases) * 2 + 256)
    pins = pinning(args.server_cpu, args.client_cpu)
    OFFLOAD.update(workers=args.offload_workers, work_us=args.offload_work_us,
                   worker_cpus=args.offload_worker_cpus)
    command = os.environ.get("EVLOOP_NET_COMMAND") or " ".join(
        [os.path.relpath(sys.argv[0])] + sys.argv[1:])
    print(f"network family: {len(systems)} systems x {len(cases)} cases "
          f"({', '.join(case_label(c) for c in cases)}) x {rounds} rounds x {duration} s",
          flush=True)
    t0 = time.monotonic()
    dead = {}
    for s in systems:
        why = check_server(build, s, args.port, pins)
        if why:
            print(f"  {s}: protocol check failed: {why}; not measured", flush=True)
            dead[s] = "protocol check: " + why
            continue
        why = check_offload_close(build, s, args.port, pins) if is_offload(s) else None
        if why:
            print(f"  {s}: close-while-at-worker check failed: {why}; not measured", flush=True)
            dead[s] = "close-while-at-worker check: " + why
    if len(dead) == len(systems):
        sys.exit("no server passed the protocol check")
    patience = Patience(args.quiet_wait if args.quiet_wait is not None else mode["quiet_wait"],
                        args.retries if args.retries is not None else mode["retries"],
                        args.patience if args.patience is not None else mode["patience"])
    wrk = {"threads": args.wrk_threads, "timeout": args.wrk_timeout}
    runs, dead2 = run_rounds(build, [s for s in systems if s not in dead], cases,
                             rounds, duration, args.port, pins, patience, wrk)
    dead.update(dead2)
    cells = summarize(runs)
    echo_cells = summarize(runs, "echo")
    offload_cells = summarize(runs, "offload")
    py_cells = summarize(runs, "pyserver")
    py_keys = [case_key(c) for c in cases if c["family"] == "pyserver"]
    # "evloop-arena/io_uring readiness 127.0.0.1:18380" -> without the address.
    servers = {r["system"]: r["server"].rsplit(" ", 1)[0] for r in runs if r.get("server")}
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "elapsed_s": round(time.monotonic() - t0, 1), "command": command,
            "rounds": rounds, "duration": duration, "conns": conns_list,
            "families": families, "echo_conns": echo_conns, "echo_sizes": echo_sizes,
            "systems": [s for s in systems if s not in dead or s in cells or s in echo_cells
                        or s in offload_cells or s in py_cells],
            "dead": dead, "servers": servers, "wrk": wrk_version(), "nofile": nofile,
            "wrk_threads": wrk["threads"], "wrk_timeout": wrk["timeout"],
            "pin_server": pins[0], "pin_client": pins[1]}
    if "offload" in families:
        meta["offload"] = offload_meta(pins)
    if "pyserver" in families:
        meta["pyserver"] = {"python": PY["python"], "versions": py_versions,
                            "conns": py_conns, "modes": py_modes, "keys": py_keys,
                            "not_measured": py_skipped}
    return {"meta": meta, "runs": runs, "cells": cells, "echo_cells": echo_cells,
            "offload_cells": offload_cells, "py_cells": py_cells,
            "py_targets": py_targets(py_cells, py_keys),
            "targets": evaluate_targets(cells, conns_list) if "http" in families else []}
