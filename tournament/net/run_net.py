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

Writes into --out: net.json (every run and the medians), report.md and plots/net.png (and
plots/net_offload.png, plots/net_echo.png with those families) when matplotlib is importable. Python 3 standard library only; matplotlib optional.
tournament/tournament.py runs this (--net-build) and puts its section into its report.
"""
import argparse
import datetime
import json
import os
import re
import resource
import selectors
import signal
import statistics
import subprocess
import sys
import tempfile
import time

# The machine-load helpers, shared with the tournament (tournament/machine_load.py).
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from machine_load import BUSY, cpu_busy_seconds  # noqa: E402

# name: (binary, arguments, what it is). The evloop servers take the backend by name.
SYSTEMS = {
    "evloop/epoll": ("net_server_evloop", ["--backend", "epoll"], "evloop readiness"),
    "evloop/io_uring": ("net_server_evloop", ["--backend", "io_uring"], "evloop readiness"),
    "evloop/auto": ("net_server_evloop", ["--backend", "auto"], "evloop readiness"),
    "evloop-ops/epoll": ("net_server_evloop_ops", ["--backend", "epoll"],
                         "evloop completion ops"),
    "evloop-ops/io_uring": ("net_server_evloop_ops", ["--backend", "io_uring"],
                            "evloop completion ops"),
    "libev": ("net_server_libev", [], "libev ev_io"),
    "libuv": ("net_server_libuv", [], "libuv uv_tcp streams"),
    # The offload family (offload_* below): the work of each request on worker threads,
    # the reply posted back to the loop thread.
    "offload/evloop/epoll": ("net_server_evloop_offload", ["--backend", "epoll"],
                             "evloop readiness, workers post with evloop_submit"),
    "offload/evloop/io_uring": ("net_server_evloop_offload", ["--backend", "io_uring"],
                                "evloop readiness, workers post with evloop_submit"),
    "offload/libev": ("net_server_libev_offload", [],
                      "libev ev_io, workers post with a locked list + ev_async_send"),
    "offload/libuv": ("net_server_libuv_offload", [],
                      "libuv uv_tcp, workers post with a locked list + uv_async_send"),
    "offload/libuv-queue-work": ("net_server_libuv_queue_work", [],
                                 "libuv uv_tcp, libuv's pool: uv_queue_work"),
}
ECHO_CLIENT = "net_echo_client"
BASELINES = ["libev", "libuv"]
QUICK = {"rounds": 1, "duration": 1, "quiet_wait": 0, "retries": 0, "patience": 0}
FULL = {"rounds": 5, "duration": 3, "quiet_wait": 10, "retries": 1, "patience": 240}
WRK_ERRORS = ("connect", "read", "write", "timeout")  # wrk's "Socket errors" line, in order
FIGURES = ("rps", "p50_us", "p99_us")  # what a failed run never reports

# The targets: (label, system, reference, conns or None for all, kind, bar).
# kind "rps": system's median req/s / reference's >= bar; "p99": system's median p99 /
# reference's <= bar.
TARGETS = [
    ("readiness epoll >= 1.0x libev", "evloop/epoll", "libev", None, "rps", 1.0),
    ("readiness epoll >= 1.0x libuv", "evloop/epoll", "libuv", None, "rps", 1.0),
    ("readiness auto >= 1.0x libev", "evloop/auto", "libev", None, "rps", 1.0),
    ("readiness auto >= 1.0x libuv", "evloop/auto", "libuv", None, "rps", 1.0),
    ("readiness io_uring >= readiness epoll", "evloop/io_uring", "evloop/epoll", None, "rps",
     1.0),
    ("ops io_uring >= 1.25x readiness epoll", "evloop-ops/io_uring", "evloop/epoll",
     (200, 1000), "rps", 1.25),
    ("ops epoll >= 0.95x readiness epoll", "evloop-ops/epoll", "evloop/epoll", None, "rps",
     0.95),
] + [(f"{s} p99 <= libuv's", s, "libuv", None, "p99", 1.0)
     for s in SYSTEMS if s.startswith("evloop")]


# ---------------------------------------------------------------- machine

def raise_fd_limit(need):
    """1000 connections need more than the usual soft limit of 1024 fds (wrk and server
    inherit ours)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = need if hard == resource.RLIM_INFINITY else min(need, hard)
    if soft != resource.RLIM_INFINITY and soft < want:
        resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
    return resource.getrlimit(resource.RLIMIT_NOFILE)[0]


def pinning(server_cpu, client_cpu):
    """taskset prefixes for the server and wrk, or empty ones when the CPUs are not ours."""
    try:
        mine = os.sched_getaffinity(0)
    except AttributeError:
        mine = set()
    if server_cpu in mine and client_cpu in mine and server_cpu != client_cpu and \
            subprocess.run(["taskset", "-c", str(server_cpu), "true"]).returncode == 0:
        return (["taskset", "-c", str(server_cpu)], ["taskset", "-c", str(client_cpu)])
    print(f"warning: cannot pin to CPUs {server_cpu} and {client_cpu}; running unpinned",
          file=sys.stderr, flush=True)
    return [], []


def wait_reap(pid, timeout):
    """Waits for pid up to timeout seconds; returns (status, rusage) or None."""
    deadline = time.monotonic() + timeout
    while True:
        wpid, status, ru = os.wait4(pid, os.WNOHANG)
        if wpid == pid:
            return status, ru
        if time.monotonic() >= deadline:
            return None
        time.sleep(0.01)


def cpu_of(ru):
    return ru.ru_utime + ru.ru_stime


# ---------------------------------------------------------------- one run

class Server:
    """One server process: started pinned, "ready" awaited, stopped with SIGTERM."""

    def __init__(self, binary, args, port, prefix):
        self.err = tempfile.TemporaryFile(mode="w+")
        self.proc = subprocess.Popen(prefix + [binary, "--port", str(port)] + args,
                                     stdout=subprocess.PIPE, stderr=self.err, text=True)
        self.port = None
        self.ready = self._wait_ready(10.0)

    def _wait_ready(self, timeout):
        sel = selectors.DefaultSelector()
        sel.register(self.proc.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if not sel.select(deadline - time.monotonic()):
                break
            line = self.proc.stdout.readline()
            if not line:
                break  # exited
            if line.startswith("ready"):
                # "ready <what> 127.0.0.1:<port>": the port is the one it got (--port 0).
                m = re.search(r":(\d+)\s*$", line)
                self.port = int(m.group(1)) if m else None
                return line.split(None, 1)[1].strip() if " " in line else "ready"
        return None

    def stop(self):
        """SIGTERM, then the server's CPU seconds, exit status and stderr."""
        if self.proc.poll() is not None:
            ru = None  # it had exited already (and poll() reaped it)
        else:
            self.proc.send_signal(signal.SIGTERM)
            got = wait_reap(self.proc.pid, 10.0)
            if got is None:
                self.proc.kill()
                got = wait_reap(self.proc.pid, 5.0)
            status, ru = got if got else (None, None)
            self.proc.returncode = os.waitstatus_to_exitcode(status) if got else -9
        self.err.seek(0)
        text = self.err.read()
        self.err.close()
        self.proc.stdout.close()
        return (cpu_of(ru) if ru else None), self.proc.returncode, text


UNIT = {"ns": 1e-3, "us": 1.0, "ms": 1e3, "s": 1e6, "m": 60e6, "h": 3600e6}


def to_us(text):
    m = re.match(r"([0-9.]+)([a-z]+)", text)
    return float(m.group(1)) * UNIT[m.group(2)] if m and m.group(2) in UNIT else None


def parse_wrk(out):
    """req/s, p50 and p99 (us), requests, socket errors and non-2xx from wrk --latency."""
    r = {}
    m = re.search(r"^Requests/sec:\s+([0-9.]+)", out, re.M)
    r["rps"] = float(m.group(1)) if m else None
    for pct, key in (("50", "p50_us"), ("99", "p99_us")):
        m = re.search(rf"^\s+{pct}%\s+(\S+)", out, re.M)
        r[key] = to_us(m.group(1)) if m else None
    m = re.search(r"^\s+(\d+) requests in", out, re.M)
    r["requests"] = int(m.group(1)) if m else None
    m = re.search(r"Socket errors: connect (\d+), read (\d+), write (\d+), timeout (\d+)", out)
    r["wrk_errors"] = dict(zip(WRK_ERRORS, (int(x) for x in m.groups()))) if m else {}
    r["socket_errors"] = sum(r["wrk_errors"].values())
    m = re.search(r"Non-2xx or 3xx responses: (\d+)", out)
    r["non_2xx"] = int(m.group(1)) if m else 0
    return r


def run_failures(run):
    """What the client counted against a run: {kind: count} of wrk's socket errors (connect,
    read, write, timeout) and non-2xx responses that are not 0; {} for a clean run. (A net.json
    written before the kinds were kept has only their sum, "socket_errors".)"""
    counts = dict(run.get("wrk_errors") or {})
    if not counts and run.get("socket_errors"):
        counts["socket"] = run["socket_errors"]
    counts["non_2xx"] = run.get("non_2xx") or 0
    return {k: v for k, v in counts.items() if v}


FAILURE_NAMES = {"connect": "connect errors", "read": "read errors", "write": "write errors",
                 "timeout": "timeouts", "socket": "socket errors", "non_2xx": "non-2xx responses",
                 "other": "other failures"}


def fmt_failures(counts):
    """"117 timeouts, 2 read errors" for counts such as run_failures() returns."""
    return ", ".join(f"{v} {FAILURE_NAMES.get(k, k)}" for k, v in counts.items()
                     if k not in ("runs", "of"))


def children_cpu():
    return cpu_of(resource.getrusage(resource.RUSAGE_CHILDREN))


def self_cpu():
    return cpu_of(resource.getrusage(resource.RUSAGE_SELF))


def parse_echo(out):
    """messages/s (as rps), p50 and p99 (us) from echo_client's line."""
    m = re.search(r"messages (\d+) per_s ([0-9.]+) p50_us ([0-9.]+) p99_us ([0-9.]+)", out)
    if not m:
        return {"rps": None}
    return {"requests": int(m.group(1)), "rps": float(m.group(2)),
            "p50_us": float(m.group(3)), "p99_us": float(m.group(4))}


def client_command(build, case, duration, port, wrk):
    if case["family"] == "echo":
        return [os.path.join(build, ECHO_CLIENT), "--port", str(port), "--conns",
                str(case["conns"]), "--size", str(case["size"]), "--duration", str(duration)]
    return ["wrk", f"-t{wrk['threads']}", f"-c{case['conns']}", f"-d{duration}s",
            "--timeout", f"{wrk['timeout']}s", "--latency", f"http://127.0.0.1:{port}/"]


def run_one(build, system, case, duration, port, pins, wrk):
    """Runs one system on one case (family, connections, message size); returns a dict of its
    figures, with "error" when something failed: then "failures" has what wrk counted, and the
    figures the client printed are kept aside under "discarded", never under their names."""
    binary, args, prefix = launch(system, pins)
    echo = case["family"] == "echo"
    run = dict(case, system=system)
    busy0, kids0, self0 = cpu_busy_seconds(), children_cpu(), self_cpu()
    started = time.monotonic()
    srv = Server(os.path.join(build, binary), args + (["--echo"] if echo else []), port,
                 prefix)
    if not srv.ready or not srv.port:
        _, rc, err = srv.stop()
        run["error"] = f"did not start (exit {rc}): {err.strip()[-300:]}"
        return run
    run["server"] = srv.ready
    client_started = time.monotonic()
    kids1 = children_cpu()
    client = subprocess.Popen(pins[1] + client_command(build, case, duration, srv.port, wrk),
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        out, _ = client.communicate(timeout=duration + 30)
    except subprocess.TimeoutExpired:
        client.kill()
        out, _ = client.communicate()
        run["error"] = "the client timed out"
    client_s = max(time.monotonic() - client_started, 1e-3)
    kids2 = children_cpu()  # communicate() reaped the client: its CPU is in here now
    srv_cpu, rc, err = srv.stop()
    elapsed = max(time.monotonic() - started, 1e-3)
    ours = (children_cpu() - kids0) + (self_cpu() - self0)
    run.update(parse_echo(out) if echo else parse_wrk(out))
    run["server_cpu_pct"] = round(100.0 * srv_cpu / client_s, 1) if srv_cpu is not None else None
    run["wrk_cpu_pct"] = round(100.0 * (kids2 - kids1) / client_s, 1)
    run["others_cores"] = round(max(0.0, (cpu_busy_seconds() - busy0 - ours) / elapsed), 3)
    run["server_exit"] = rc
    m = re.search(r"(\d+) requests on (\d+) connections", err)
    if m:
        run["server_requests"], run["server_conns"] = int(m.group(1)), int(m.group(2))
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


# ---------------------------------------------------------------- protocol check

def check_server(build, system, port, pins):
    """Before measuring: a server must answer pipelined requests split at odd places, and
    a request cut in two only once whole. Returns None or what went wrong."""
    import socket
    binary, args, prefix = launch(system, pins)
    srv = Server(os.path.join(build, binary), args, port, prefix)
    if not srv.ready or not srv.port:
        _, rc, err = srv.stop()
        return f"did not start (exit {rc}): {err.strip()[-300:]}"
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    pieces = [req * 2 + req[:7], req[7:] + req[:-1], b"\n" + req[:-2], b"\r", b"\n"]
    why = None
    try:
        with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
            got = b""
            for i, piece in enumerate(pieces):
                sock.sendall(piece)
                want = [2, 3, 4, 4, 5][i]
                deadline = time.monotonic() + 5
                while got.count(b"hello") < want and time.monotonic() < deadline:
                    chunk = sock.recv(65536)
                    if not chunk:
                        break
                    got += chunk
                if got.count(b"hello") != want or not got.startswith(b"HTTP/1.1 200 "):
                    why = f"after piece {i + 1}: {got.count(b'hello')} responses, not {want}"
                    break
            if why is None:
                sock.settimeout(0.2)
                try:
                    extra = sock.recv(65536)
                except socket.timeout:
                    extra = b""
                if extra:
                    why = f"{len(extra)} bytes beyond the 5 responses"
    except OSError as e:
        why = f"socket: {e}"
    _, rc, err = srv.stop()
    if why is None and rc != 0:
        why = f"exited with {rc} on SIGTERM: {err.strip()[-300:]}"
    return why


# ---------------------------------------------------------------- rounds

def available_systems(build, wanted):
    out = []
    for s in wanted:
        if s not in SYSTEMS:
            sys.exit(f"unknown system {s}; known: {', '.join(SYSTEMS)}")
        if os.access(os.path.join(build, SYSTEMS[s][0]), os.X_OK):
            out.append(s)
        else:
            print(f"note: {s}: no {SYSTEMS[s][0]} in {build}; skipped", flush=True)
    return out


def case_label(case):
    if case.get("family") == "offload":
        return f"offload c={case['conns']}"
    if case.get("family") == "echo":
        return f"echo {case['size']} B x{case['conns']}"
    return f"http c={case['conns']}"


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
                        f"client {run['wrk_cpu_pct']}%  others {run['others_cores']:.2f}")
                print(f"  [net round {rnd + 1}/{rounds} {done:3d}/{total} "
                      f"{time.monotonic() - t0:4.0f}s] {system:20s} {case_label(case):18s} "
                      f"{what}", flush=True)
    return runs, dead


def stats(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals)}


def cell_key(run):
    """The key of a run's cell: the connection count (http), or "SIZExCONNS" (echo)."""
    if run.get("family") == "echo":
        return f"{run['size']}x{run['conns']}"
    return str(run["conns"])


def run_failed(run):
    return "error" in run or bool(run_failures(run))


def summarize(runs, family="http"):
    """{system: {key: cell}} over the family's runs; the key is cell_key()'s. A cell whose runs
    all passed is {metric: {median, min, max, n}}. A cell with a failed run has no figure at
    all, only "failed": {"runs": failed runs, "of": runs, kind: count...}, the kinds of
    run_failures() summed over its runs, "other" counting runs that failed otherwise."""
    cells, failed = {}, {}
    for r in runs:
        if r.get("family", "http") != family:
            continue
        key = (r["system"], cell_key(r))
        if run_failed(r):
            f = failed.setdefault(key, {"runs": 0})
            f["runs"] += 1
            for k, v in (run_failures(r) or {"other": 1}).items():
                f[k] = f.get(k, 0) + v
            continue
        c = cells.setdefault(r["system"], {}).setdefault(key[1], {})
        for k in ("rps", "p50_us", "p99_us", "server_cpu_pct", "wrk_cpu_pct"):
            c.setdefault(k, []).append(r.get(k))
    out = {s: {n: {k: stats(v) for k, v in m.items()} for n, m in by.items()}
           for s, by in cells.items()}
    for (s, n), f in failed.items():
        clean = len(cells.get(s, {}).get(n, {}).get("rps", []))
        out.setdefault(s, {})[n] = {"failed": dict(f, of=f["runs"] + clean)}
    return out


def cell_failed(cells, system, key):
    """The "failed" entry of a cell (see summarize()), or None."""
    return cells.get(system, {}).get(str(key), {}).get("failed")


def fmt_cell_failed(f):
    """"2 of 5 runs failed: 117 timeouts" for a cell's "failed" entry."""
    return f"{f['runs']} of {f['of']} runs failed: {fmt_failures(f)}"


def med(cells, system, conns, metric):
    st = cells.get(system, {}).get(str(conns), {}).get(metric)
    return st["median"] if st else None


def half_spread(cells, system, conns, metric):
    st = cells.get(system, {}).get(str(conns), {}).get(metric)
    return (st["max"] - st["min"]) / 2 / st["median"] if st and st["median"] else 0.0


def ratio(a, b):
    return a / b if a is not None and b else None


def evaluate_targets(cells, conns_list):
    out = []
    for label, system, ref, only, kind, bar in TARGETS:
        for conns in conns_list:
            if only and conns not in only:
                continue
            metric = "rps" if kind == "rps" else "p99_us"
            ran = str(conns) in cells.get(system, {})
            failed = bool(cell_failed(cells, system, conns) or
                          (ran and cell_failed(cells, ref, conns)))
            v = ratio(med(cells, system, conns, metric), med(cells, ref, conns, metric))
            met = None if v is None else (v >= bar if kind == "rps" else v <= bar)
            # A miss smaller than the wider relative spread (half of max - min) of the two
            # figures is within the noise of this run.
            noise = max(half_spread(cells, system, conns, metric),
                        half_spread(cells, ref, conns, metric))
            out.append({"target": label, "system": system, "reference": ref,
                        "conns": conns, "kind": kind, "bar": bar, "value": v, "met": met,
                        "failed": failed,
                        "within_spread": bool(v is not None and not met and
                                              abs(v / bar - 1) <= noise)})
    return out


# ---------------------------------------------------------------- report

def fmt_us(v):
    if v is None:
        return "-"
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} us"


def fmt_rps(v):
    return "-" if v is None else f"{v / 1000:.1f}k"


def fmt_x(v):
    return "-" if v is None else f"{v:.2f}x"


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def rps_row(cells, s, conns, baselines, is_own):
    """The table row of system s at a connection count, with its req/s over each baseline's
    ("" where is_own(s, b)), and whether the cell failed; (None, False) when it has no
    figure."""
    st = cells.get(s, {}).get(str(conns))
    if st and st.get("failed"):
        return ([conns, f"`{s}`", "**failed**", fmt_cell_failed(st["failed"])] + ["-"] * 3 +
                ["" if is_own(s, b) else "-" for b in baselines]), True
    if not st or not st.get("rps"):
        return None, False
    rps = st["rps"]
    half = (rps["max"] - rps["min"]) / 2 / rps["median"] * 100 if rps["median"] else 0
    cpu = st.get("server_cpu_pct")
    return ([conns, f"`{s}`", fmt_rps(rps["median"]),
             f"{fmt_rps(rps['min'])}-{fmt_rps(rps['max'])} (±{half:.0f}%)",
             fmt_us(st["p50_us"]["median"] if st.get("p50_us") else None),
             fmt_us(st["p99_us"]["median"] if st.get("p99_us") else None),
             f"{cpu['median']:.0f}%" if cpu else "-"] +
            [fmt_x(ratio(rps["median"], med(cells, b, conns, "rps")))
             if not is_own(s, b) else "" for b in baselines]), False


def results_rows(cells, systems, conns_list):
    rows = []
    for conns in conns_list:
        for s in systems:
            row, failed = rps_row(cells, s, conns, BASELINES, str.startswith)
            if row is None:
                continue
            if failed:
                row.append("" if s == "libuv" else "-")
            else:
                row.append(fmt_x(ratio(med(cells, s, conns, "p99_us"),
                                       med(cells, "libuv", conns, "p99_us")))
                           if s != "libuv" else "")
            rows.append(row)
    return rows


def verdict(t):
    if t.get("failed"):
        return "**failed runs**"
    if t["value"] is None:
        return "not run"
    if t["met"]:
        return f"{fmt_x(t['value'])} met"
    noise = ", within the spread" if t.get("within_spread") else ""
    if t["kind"] == "rps":
        return (f"{fmt_x(t['value'])} **missed** ({(1 - t['value'] / t['bar']) * 100:.0f}% "
                f"short{noise})")
    return f"{fmt_x(t['value'])} **missed** ({(t['value'] / t['bar'] - 1) * 100:.0f}% over{noise})"


def targets_rows(targets, conns_list):
    """One row per target, one cell per connection count."""
    rows, index = [], {}
    for t in targets:
        if t["target"] not in index:
            index[t["target"]] = len(rows)
            rows.append([t["target"]] + [""] * len(conns_list))
        rows[index[t["target"]]][1 + conns_list.index(t["conns"])] = verdict(t)
    return rows


def section(summary, img_prefix="", level="##"):
    """The report's markdown lines for one summary (net.json), plots linked under
    img_prefix (so the tournament's report, one folder up, can embed them)."""
    meta, cells = summary["meta"], summary["cells"]
    systems, conns_list = meta["systems"], meta["conns"]
    md = [f"{level} Network family: HTTP/1.1 keep-alive \"hello\" (wrk)", ""]
    md.append(f"- {meta['date']}, `{meta['command']}`: {meta['rounds']} interleaved rounds "
              f"x {meta['duration']} s per run; `wrk -t{meta.get('wrk_threads', 1)} -cN "
              f"-d{meta['duration']}s{wrk_timeout_arg(meta)} --latency` "
              f"({meta.get('wrk', 'wrk')}) pinned with `{' '.join(meta['pin_client']) or 'no'}"
              f"`, each server fresh per run, pinned with "
              f"`{' '.join(meta['pin_server']) or 'no'}`; fd limit {meta['nofile']}")
    servers = meta.get("servers", {})
    if servers:
        md.append("- the servers as they announced themselves: " +
                  ", ".join(f"`{s}`: {servers[s]}" for s in systems if s in servers))
    loads = [r.get("others_cores") or 0 for r in summary["runs"] if "error" not in r]
    if loads:
        busy = [r for r in summary["runs"]
                if "error" not in r and (r.get("others_cores") or 0) > BUSY]
        again = sum(1 for r in summary["runs"] if r.get("attempts", 1) > 1)
        md.append(f"- other processes on the machine: {statistics.mean(loads):.2f} cores on "
                  f"average during the runs, {max(loads):.2f} at worst" +
                  (f"; {again} runs disturbed (> {BUSY} cores) were run again" if again else "")
                  + (f"; **{len(busy)} of {len(loads)} runs disturbed** (> {BUSY} cores), "
                     "kept: distrust their figures" if busy else ""))
    if meta["rounds"] < 5:
        md.append(f"- **{meta['rounds']} round(s) only: the family asks for >= 5; "
                  "indicative only.**")
    for s, why in sorted(meta.get("dead", {}).items()):
        md.append(f"- `{s}` did not run: {why}")
    md.append("")
    md.append("Every server shares `tournament/net/http_conn.c` (count requests ending at "
              "\"\\r\\n\\r\\n\", pipelining allowed; one canned 2xx response each). The "
              "readiness servers (evloop, libev) accept until EAGAIN, read until EAGAIN or a "
              "short read (as libuv does inside uv_read_start), write the responses and watch "
              "for writability only while output is pending; the completion-ops server keeps "
              "one operation in flight per connection (recv, then send). Higher req/s is better: "
              "a req/s ratio above 1.00x means the row beats the baseline; for `p99 / libuv` "
              "below 1.00x is better. req/s is the median across rounds with its min-max; "
              "p50 and p99 are medians of wrk's per-run percentiles; server CPU is the "
              "server's CPU time over the run's wall time (near 100%: the server is the "
              "bottleneck; lower: wrk, on its one CPU, is).")
    md.append("")
    if cells:
        md += http_tables(summary, img_prefix, level)
    md += echo_section(summary, img_prefix, level)
    md += offload_section(summary, img_prefix, level)
    errs = failed_runs(summary)
    if errs:
        md.append(f"{level}# Failed runs")
        md.append("")
        md.append(f"{len(errs)} of {len(summary['runs'])} runs failed. A run fails when its "
                  "server did not stop cleanly, its client did not finish, or wrk counted a socket "
                  "error (connect, read, write, timeout: no answer within wrk's timeout) or a "
                  "non-2xx response; its req/s and latency are not reported, and its system and "
                  "connection count read \"failed\" above.")
        md.append("")
        md += [f"- round {r.get('round', '?')} `{r['system']}` {case_label(r)}: "
               f"{r.get('error') or 'wrk counted ' + fmt_failures(run_failures(r))}"
               for r in errs]
        md.append("")
    return md


def failed_runs(summary):
    """The failed runs of servers that started (a server that did not is listed as such)."""
    dead = summary["meta"].get("dead", {})
    return [r for r in summary["runs"] if run_failed(r) and r["system"] not in dead]


def wrk_timeout_arg(meta):
    return f" --timeout {meta['wrk_timeout']}s" if meta.get("wrk_timeout") else ""


def http_tables(summary, img_prefix, level):
    meta, cells = summary["meta"], summary["cells"]
    systems, conns_list = meta["systems"], meta["conns"]
    md = table(["conns", "system", "req/s", "min-max", "p50", "p99", "server CPU",
                "/ libev", "/ libuv", "p99 / libuv"],
               results_rows(cells, systems, conns_list))
    md.append("")
    md.append(f"{level}# Targets (issue 12)")
    md.append("")
    md.append("Ratios of medians from this run: req/s of the row's system over the "
              "reference's (at least the bar), or p99 over libuv's (at most 1.00x). \"within "
              "the spread\": the miss is smaller than half the min-max spread across rounds "
              "of either figure, relative to its median.")
    md.append("")
    md += table(["target"] + [f"{c} conns" for c in conns_list],
                targets_rows(summary["targets"], conns_list))
    md.append("")
    if summary.get("plot"):
        md.append(f"![network family]({img_prefix}{summary['plot']})")
        md.append("")
    return md


def ratio_lines(cells, meta, baselines, label):
    """Text lines: each measured system's req/s over each baseline's per connection count,
    after label(system)."""
    lines = []
    for s in meta["systems"]:
        if s in baselines or s not in cells:
            continue
        parts = []
        for conns in meta["conns"]:
            if cell_failed(cells, s, conns):
                parts.append(f"c={conns}: FAILED ({fmt_cell_failed(cell_failed(cells, s, conns))})")
                continue
            parts.append(f"c={conns}: " + " / ".join(
                fmt_x(ratio(med(cells, s, conns, "rps"), med(cells, b, conns, "rps")))
                for b in baselines))
        lines.append(label(s) + "   ".join(parts))
    return lines


def headline(summary):
    """Text lines: the evloop systems' req/s ratios to libev and libuv per connection count."""
    return ratio_lines(summary["cells"], summary["meta"], BASELINES,
                       lambda s: f"  {s:20s} (vs libev / libuv) ")


def import_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print(f"plot skipped: {sys.executable} cannot import matplotlib "
              "(Debian: apt-get install python3-matplotlib)", flush=True)
        return None


def bars(plt, cells, systems, keys, labels, titles, path):
    """Throughput bars (median, min-max) and latency bars (p50 solid, p99 pale) per key; a
    cell with a failed run gets the word "failed" in place of its bars."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / len(systems)
    palette = plt.get_cmap("tab10")
    any_failed = any_bar = False
    handles = []
    for i, s in enumerate(systems):
        colour = palette(list(SYSTEMS).index(s) % 10)  # one colour per system in every plot
        xs, ys, lo, hi, p50, p99 = [], [], [], [], [], []
        for k, key in enumerate(keys):
            st = cells[s].get(key, {})
            if st.get("failed"):
                any_failed = True
                for ax in (ax1, ax2):  # y in axes fraction: the latency axis is logarithmic
                    ax.text(k + i * width, 0.01, "failed", transform=ax.get_xaxis_transform(),
                            rotation=90, ha="center", va="bottom", fontsize=7,
                            fontweight="bold", color=colour)
                continue
            if not st.get("rps"):
                continue
            xs.append(k + i * width)
            ys.append(st["rps"]["median"])
            lo.append(st["rps"]["median"] - st["rps"]["min"])
            hi.append(st["rps"]["max"] - st["rps"]["median"])
            p50.append(st["p50_us"]["median"] if st.get("p50_us") else 0)
            p99.append(st["p99_us"]["median"] if st.get("p99_us") else 0)
        any_bar = any_bar or any(v > 0 for v in p50 + p99)
        ax1.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=colour)
        ax2.bar(xs, p99, width, color=colour, alpha=0.35)
        ax2.bar(xs, p50, width, color=colour)
        handles.append(plt.Rectangle((0, 0), 1, 1, color=colour, label=s))  # bars or not
    for ax in (ax1, ax2):
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(keys))])
        ax.set_xticklabels(labels)
        ax.set_xlim(-width, len(keys) - 0.2)  # every slot, with bars or "failed" in it
    ax1.set_ylabel(titles[0] + " (median, min-max bars)")
    ax1.set_title(titles[1])
    ax1.legend(handles=handles, fontsize=8)
    if any_bar:  # a logarithmic axis needs a positive value (none when every cell failed)
        ax2.set_yscale("log")
    ax2.set_ylabel("latency, us")
    ax2.set_title(titles[2])
    fig.suptitle(titles[3] + ("; \"failed\": a run had timeouts or errors, no figure"
                              if any_failed else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def make_plot(summary, outdir):
    """plots/net.png (and plots/net_echo.png with the echo family); returns the first's path
    relative to outdir, or None."""
    cells, meta = summary["cells"], summary["meta"]
    echo = summary.get("echo_cells") or {}
    http_systems = [s for s in meta["systems"] if s in cells]
    echo_systems = [s for s in meta["systems"] if s in echo]
    if not http_systems and not echo_systems:
        return None
    plt = import_pyplot()
    if not plt:
        return None
    pdir = os.path.join(outdir, "plots")
    os.makedirs(pdir, exist_ok=True)
    rounds = f"{meta['rounds']} rounds x {meta['duration']} s"
    if echo_systems:
        keys = echo_keys(meta)
        bars(plt, echo, echo_systems, keys, [echo_label(k) for k in keys],
             ("messages per second", "echo round trips per second (higher is better)",
              "round trip: p50 (solid) and p99 (pale), lower is better",
              f"echo family, {rounds}"), os.path.join(pdir, "net_echo.png"))
        summary["echo_plot"] = "plots/net_echo.png"
    if not http_systems:
        return None
    conns_list = meta["conns"]
    bars(plt, cells, http_systems, [str(c) for c in conns_list],
         [f"{c} connections" for c in conns_list],
         ("requests per second", "HTTP/1.1 keep-alive throughput (higher is better)",
          "wrk latency: p50 (solid) and p99 (pale), lower is better",
          f"network family, {rounds}"), os.path.join(pdir, "net.png"))
    return "plots/net.png"


def echo_keys(meta):
    return [f"{z}x{c}" for z in meta.get("echo_sizes", []) for c in meta.get("echo_conns", [])]


def echo_label(key):
    size, conns = key.split("x")
    return f"{size} B, {conns} conn{'s' if conns != '1' else ''}"


def echo_section(summary, img_prefix, level):
    cells, meta = summary.get("echo_cells") or {}, summary["meta"]
    systems = [s for s in meta["systems"] if s in cells]
    if not systems:
        return []
    md = [f"{level}# Echo family (tournament/net/echo_client.c)", ""]
    md.append("The same servers started with `--echo` (the connection logic queues the input "
              "itself), against `echo_client` pinned like wrk: per connection one message of "
              "the size given in flight, the next sent once all of it has come back. "
              "Messages/s: median across rounds with min-max; p50/p99: medians of the "
              "per-run round-trip percentiles. Higher messages/s is better.")
    md.append("")
    rows = []
    for key in echo_keys(meta):
        for s in systems:
            st = cells[s].get(key)
            if st and st.get("failed"):
                rows.append([echo_label(key), f"`{s}`", "**failed**", fmt_cell_failed(st["failed"])]
                            + ["-"] * 3 + ["" if s.startswith(b) else "-" for b in BASELINES])
                continue
            if not st or not st.get("rps"):
                continue
            rps = st["rps"]
            ratios = [fmt_x(ratio(rps["median"], (cells.get(b, {}).get(key, {}).get("rps") or
                                                  {}).get("median")))
                      if not s.startswith(b) else "" for b in BASELINES]
            rows.append([echo_label(key), f"`{s}`", fmt_rps(rps["median"]),
                         f"{fmt_rps(rps['min'])}-{fmt_rps(rps['max'])}",
                         fmt_us(st["p50_us"]["median"] if st.get("p50_us") else None),
                         fmt_us(st["p99_us"]["median"] if st.get("p99_us") else None),
                         f"{st['server_cpu_pct']['median']:.0f}%"
                         if st.get("server_cpu_pct") else "-"] + ratios)
    md += table(["case", "system", "msgs/s", "min-max", "p50", "p99", "server CPU",
                 "/ libev", "/ libuv"], rows)
    md.append("")
    if summary.get("echo_plot"):
        md.append(f"![echo family]({img_prefix}{summary['echo_plot']})")
        md.append("")
    return md


# ---------------------------------------------------------------- offload family

# The offload servers' settings, from the command line (measure() fills it in).
OFFLOAD = {"workers": 2, "work_us": 2, "worker_cpus": None}
OFFLOAD_BASELINES = ["offload/libev", "offload/libuv"]
# The close-while-at-worker check: work long enough that every request is still at a worker
# when its client has closed, on this many connections.
CLOSE_CHECK_WORK_US = 20000
CLOSE_CHECK_CONNS = 16


def is_offload(system):
    return system.startswith("offload/")


def runs_case(system, case):
    """Whether system runs in case's family: the offload servers in the offload family
    only, the others in the http and echo families."""
    return is_offload(system) == (case.get("family") == "offload")


def offload_placement(pins):
    """An offload server's CPU options: its loop thread on the server's CPU, its workers on
    --offload-worker-cpus (default: that same CPU); none when pinning is off. The server
    places its threads itself (taskset would pin the workers with the loop)."""
    if not pins[0]:
        return []
    cpu = pins[0][-1]
    return ["--loop-cpu", cpu, "--worker-cpus", OFFLOAD["worker_cpus"] or cpu]


def launch(system, pins, work_us=None):
    """(binary, arguments, command prefix) that start system's server."""
    binary, args, _ = SYSTEMS[system]
    if not is_offload(system):
        return binary, args, pins[0]
    work = OFFLOAD["work_us"] if work_us is None else work_us
    return (binary, args + ["--workers", str(OFFLOAD["workers"]), "--work-us", str(work)] +
            offload_placement(pins), [])


def offload_meta(pins):
    place = offload_placement(pins)
    return {"workers": OFFLOAD["workers"], "work_us": OFFLOAD["work_us"],
            "loop_cpu": place[1] if place else None,
            "worker_cpus": place[3] if place else None}


def check_offload_close(build, system, port, pins):
    """Before measuring an offload server: clients that send a request and close (half of
    them with a reset) while the request is at a worker (each takes CLOSE_CHECK_WORK_US),
    then a fresh connection that must be answered, then SIGTERM while one more request is at
    a worker: the server must exit 0 and have freed every connection (it counts the
    requests of a connection when it frees it). Returns None or what went wrong."""
    import socket
    import struct
    binary, args, prefix = launch(system, pins, CLOSE_CHECK_WORK_US)
    srv = Server(os.path.join(build, binary), args, port, prefix)
    if not srv.ready or not srv.port:
        _, rc, err = srv.stop()
        return f"did not start (exit {rc}): {err.strip()[-300:]}"
    req = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n"
    why, sure, sent, last = None, 0, 0, None
    try:
        for i in range(CLOSE_CHECK_CONNS):
            with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as sock:
                n = 1 + i % 2
                sock.sendall(req * n)
                sent += n
                if i % 4 >= 2:  # a reset: the server may find the error before the data
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                    struct.pack("ii", 1, 0))
                else:
                    sure += n
        with socket.create_connection(("127.0.0.1", srv.port), timeout=10) as sock:
            sock.sendall(req)
            got = b""
            while got.count(b"hello") < 1:
                chunk = sock.recv(65536)
                if not chunk:
                    break
                got += chunk
            if got.count(b"hello") != 1:
                why = f"a connection opened after the closed ones got {got!r:.80}"
        sure += 1
        sent += 1
        # One more, whose request is at a worker (or queued) when SIGTERM comes.
        last = socket.create_connection(("127.0.0.1", srv.port), timeout=5)
        last.sendall(req)
        sent += 1
        time.sleep(0.005)
    except OSError as e:
        why = f"socket: {e}"
    _, rc, err = srv.stop()
    if last:
        last.close()
    if rc != 0:  # a sanitizer's report, say: it explains a socket error too
        san = re.search(r"^.*ERROR: \w+Sanitizer.*$", err, re.M)
        why = ((why + "; server " if why else "") + f"exited with {rc}: " +
               (san.group(0) if san else err.strip()[-300:]))
    m = re.search(r"(\d+) requests on (\d+) connections", err)
    conns = (CLOSE_CHECK_CONNS + 1, CLOSE_CHECK_CONNS + 2)  # the last may not be accepted yet
    if why is None and not m:
        why = f"no request count at exit: {err.strip()[-300:]}"
    elif why is None and not (sure <= int(m.group(1)) <= sent and int(m.group(2)) in conns):
        why = (f"freed connections counted {m.group(1)} requests on {m.group(2)} connections, "
               f"not {sure}-{sent} on {conns[0]}-{conns[1]}")
    return why


def offload_rows(cells, systems, conns_list):
    rows = []
    for conns in conns_list:
        for s in systems:
            row, _ = rps_row(cells, s, conns, OFFLOAD_BASELINES, lambda s, b: s == b)
            if row is not None:
                rows.append(row)
    return rows


def offload_section(summary, img_prefix, level):
    cells, meta = summary.get("offload_cells") or {}, summary["meta"]
    systems = [s for s in meta["systems"] if s in cells]
    if not systems:
        return []
    off = meta.get("offload", {})
    md = [f"{level}# Offload family: HTTP/1.1 keep-alive, the work on worker threads (wrk)", ""]
    md.append(f"The same connection logic and wrk as above, but each complete request goes to "
              f"a pool of {off.get('workers', '?')} worker threads (`tournament/net/worker_pool.c`, "
              f"the same code for every system; libuv-queue-work: libuv's own pool with "
              f"UV_THREADPOOL_SIZE={off.get('workers', '?')}) that busy-loops "
              f"{off.get('work_us', '?')} us per request on the clock, and the reply comes back "
              "to the loop thread, which writes it: `evloop_submit`; a locked list and "
              "`ev_async_send` (libev) or `uv_async_send` (libuv); `uv_queue_work`'s "
              "after-work callback. One job per connection at a time. Loop thread on CPU "
              f"{off.get('loop_cpu') or '(unpinned)'}, workers on CPU(s) "
              f"{off.get('worker_cpus') or '(unpinned)'}. Before measuring, each server "
              "passed the protocol check and a close-while-at-worker check (clients that "
              "close, some with a reset, while their request is at a worker). Ratios: req/s "
              "over `offload/libev`'s and `offload/libuv`'s.")
    md.append("")
    md += table(["conns", "system", "req/s", "min-max", "p50", "p99", "server CPU",
                 "/ offload/libev", "/ offload/libuv"],
                offload_rows(cells, systems, meta["conns"]))
    md.append("")
    if summary.get("offload_plot"):
        md.append(f"![offload family]({img_prefix}{summary['offload_plot']})")
        md.append("")
    return md


def offload_headline(summary):
    return ratio_lines(summary.get("offload_cells") or {}, summary["meta"], OFFLOAD_BASELINES,
                       lambda s: f"  {s:26s} ")


def make_offload_plot(summary, outdir):
    """plots/net_offload.png; its path relative to outdir, or None."""
    cells, meta = summary.get("offload_cells") or {}, summary["meta"]
    systems = [s for s in meta["systems"] if s in cells]
    if not systems:
        return None
    plt = import_pyplot()
    if not plt:
        return None
    os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
    off = meta.get("offload", {})
    conns_list = meta["conns"]
    bars(plt, cells, systems, [str(c) for c in conns_list],
         [f"{c} connections" for c in conns_list],
         ("requests per second", "offload: HTTP keep-alive, replies posted by workers "
          "(higher is better)", "wrk latency: p50 (solid) and p99 (pale), lower is better",
          f"offload family, {off.get('workers', '?')} workers x {off.get('work_us', '?')} us "
          f"per request, {meta['rounds']} rounds x {meta['duration']} s"),
         os.path.join(outdir, "plots", "net_offload.png"))
    return "plots/net_offload.png"


# ---------------------------------------------------------------- main

def wrk_version():
    try:
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"wrk (\S+)", out)
    return "wrk " + m.group(1) if m else "wrk"


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    root = os.path.dirname(os.path.dirname(here))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default=os.path.join(root, "build-bench"),
                    help="CMake build folder (with -DEVLOOP_BUILD_BENCH=ON), or its tournament/net")
    ap.add_argument("--quick", action="store_true",
                    default=os.environ.get("EVLOOP_BENCH_QUICK", "") not in ("", "0"),
                    help="1 round x 1 s: a smoke run (also EVLOOP_BENCH_QUICK=1)")
    ap.add_argument("--rounds", type=int, help="interleaved rounds (default 5, quick 1)")
    ap.add_argument("--duration", type=int, help="seconds per wrk run (default 3, quick 1)")
    ap.add_argument("--conns", default="10,200,1000", help="HTTP: connection counts")
    ap.add_argument("--families", default="http",
                    help="http (wrk against the HTTP servers), offload (wrk against the offload "
                         "servers: workers post the replies back) and/or echo (echo_client against "
                         "the same servers with --echo): default http")
    ap.add_argument("--echo-conns", default="1,100", help="echo: connection counts")
    ap.add_argument("--echo-sizes", default="1,4096", help="echo: message sizes, bytes")
    ap.add_argument("--systems", default=",".join(SYSTEMS),
                    help="comma-separated, of: " + ", ".join(SYSTEMS))
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
                                  "tournament/results/net-quick with --quick)")
    ap.add_argument("--from-json", help="only rebuild the report from this net.json")
    args = ap.parse_args()

    mode = QUICK if args.quick else FULL
    outdir = args.out or os.path.join(os.path.dirname(here), "results",
                                      "net-quick" if args.quick else "net")
    os.makedirs(outdir, exist_ok=True)
    if args.from_json:
        with open(args.from_json) as f:
            summary = json.load(f)
        # From the runs again, so a file from before failed runs were told apart reads as now.
        meta, runs = summary["meta"], summary["runs"]
        summary["cells"], summary["echo_cells"] = summarize(runs), summarize(runs, "echo")
        summary["offload_cells"] = summarize(runs, "offload")
        summary["targets"] = (evaluate_targets(summary["cells"], meta["conns"])
                              if "http" in meta.get("families", ["http"]) else [])
    else:
        summary = measure(args, mode)
    summary["plot"] = make_plot(summary, outdir)
    summary["offload_plot"] = make_offload_plot(summary, outdir)
    with open(os.path.join(outdir, "net.json"), "w") as f:
        json.dump(summary, f, indent=1)
    report = os.path.join(outdir, "report.md")
    with open(report, "w") as f:
        f.write("\n".join(["# evloop network family", ""] + section(summary, "", "##")))
    print("\nreq/s, evloop / libev and evloop / libuv (medians):")
    print("\n".join(headline(summary)))
    if summary.get("offload_cells"):
        print("offload family, req/s over offload/libev and offload/libuv (medians):")
        print("\n".join(offload_headline(summary)))
    missed = [t for t in summary["targets"] if t["met"] is False]
    failing = sum(1 for t in summary["targets"] if t.get("failed"))
    print(f"targets: {sum(1 for t in summary['targets'] if t['met'])} met, {len(missed)} "
          f"missed, {failing} with failed runs, "
          f"{sum(1 for t in summary['targets'] if t['met'] is None and not t.get('failed'))} "
          "not run")
    failed = failed_runs(summary)
    if failed:
        print(f"FAILED: {len(failed)} of {len(summary['runs'])} runs (timeouts, socket errors, "
              "non-2xx responses or a server that failed):")
        for r in failed:
            print(f"  round {r.get('round', '?')} {r['system']} {case_label(r)}: "
                  f"{r.get('error') or 'wrk counted ' + fmt_failures(run_failures(r))}")
    print(f"report: {report}")
    return 1 if failed else 0


def measure(args, mode):
    build = args.build
    if os.path.isdir(os.path.join(build, "tournament", "net")):
        build = os.path.join(build, "tournament", "net")
    rounds = args.rounds or mode["rounds"]
    duration = args.duration or mode["duration"]
    conns_list = [int(c) for c in args.conns.split(",") if c]
    families = [f for f in args.families.split(",") if f]
    if set(families) - {"http", "echo", "offload"}:
        sys.exit("--families: http, offload and/or echo")
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
    systems = available_systems(build, [s for s in args.systems.split(",")
                                         if s and any(runs_case(s, c) for c in cases)])
    if not systems:
        sys.exit(f"no network servers in {build}: build the target net_servers "
                 "(cmake --build BUILD --target net_servers)")
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
    # "evloop-arena/io_uring readiness 127.0.0.1:18380" -> without the address.
    servers = {r["system"]: r["server"].rsplit(" ", 1)[0] for r in runs if r.get("server")}
    meta = {"date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
            "elapsed_s": round(time.monotonic() - t0, 1), "command": command,
            "rounds": rounds, "duration": duration, "conns": conns_list,
            "families": families, "echo_conns": echo_conns, "echo_sizes": echo_sizes,
            "systems": [s for s in systems if s not in dead or s in cells or s in echo_cells
                        or s in offload_cells],
            "dead": dead, "servers": servers, "wrk": wrk_version(), "nofile": nofile,
            "wrk_threads": wrk["threads"], "wrk_timeout": wrk["timeout"],
            "pin_server": pins[0], "pin_client": pins[1]}
    if "offload" in families:
        meta["offload"] = offload_meta(pins)
    return {"meta": meta, "runs": runs, "cells": cells, "echo_cells": echo_cells,
            "offload_cells": offload_cells,
            "targets": evaluate_targets(cells, conns_list) if "http" in families else []}


if __name__ == "__main__":
    sys.exit(main())
