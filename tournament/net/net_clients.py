"""The load generators of the network family: wrk's and echo_client's command lines, and
reading their output (requests per second, latencies, socket errors and non-2xx replies)
into a run's figures."""

import os
import re
import subprocess

from net_systems import ECHO_CLIENT


WRK_ERRORS = ("connect", "read", "write", "timeout")  # wrk's "Socket errors" line, in order


FIGURES = ("rps", "p50_us", "p99_us", "cpu_us_per_req")  # what a failed run never reports


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
    # Connection: close (the pyserver family's close mode): the server closes each connection
    # after its response, and wrk opens a new one for the next request.
    close = ["-H", "Connection: close"] if case.get("close") else []
    return ["wrk", f"-t{wrk['threads']}", f"-c{case['conns']}", f"-d{duration}s",
            "--timeout", f"{wrk['timeout']}s", "--latency"] + close + \
        [f"http://127.0.0.1:{port}/"]


def wrk_version():
    try:
        out = subprocess.run(["wrk", "-v"], capture_output=True, text=True).stdout
    except OSError:
        return None
    m = re.search(r"wrk (\S+)", out)
    return "wrk " + m.group(1) if m else "wrk"
