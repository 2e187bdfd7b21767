"""The network family's systems: which server binary runs each, the families and cases
they take part in, the offload servers' settings, the run modes (full, quick) and the
issue's targets."""

import os
import sys

from net_pyservers import is_pyserver


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
    "offload/evloop-pool/epoll": ("net_server_evloop_pool", ["--backend", "epoll"],
                                  "evloop readiness, the library's pool: evloop_work_submit"),
    "offload/evloop-pool/io_uring": ("net_server_evloop_pool", ["--backend", "io_uring"],
                                     "evloop readiness, the library's pool: "
                                     "evloop_work_submit"),
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
    if case.get("family") == "pyserver":
        return f"py {'close' if case.get('close') else 'keep-alive'} c={case['conns']}"
    if case.get("family") == "offload":
        return f"offload c={case['conns']}"
    if case.get("family") == "echo":
        return f"echo {case['size']} B x{case['conns']}"
    return f"http c={case['conns']}"


# The offload servers' settings, from the command line (measure() fills it in).
OFFLOAD = {"workers": 2, "work_us": 2, "worker_cpus": None}


OFFLOAD_BASELINES = ["offload/libev", "offload/libuv", "offload/libuv-queue-work"]


def is_offload(system):
    return system.startswith("offload/")


def runs_case(system, case):
    """Whether system runs in case's family: the offload servers in the offload family
    only, the Python servers (net_pyservers.py) in the pyserver family only, the others in
    the http and echo families."""
    if is_pyserver(system) or case.get("family") == "pyserver":
        return is_pyserver(system) and case.get("family") == "pyserver"
    return is_offload(system) == (case.get("family") == "offload")


def offload_placement(pins):
    """An offload server's CPU options: its loop thread on the server's CPU, its workers on
    --offload-worker-cpus (default: that same CPU); none when pinning is off. The server
    places its threads itself (taskset would pin the workers with the loop)."""
    if not pins[0]:
        return []
    cpu = pins[0][-1]
    return ["--loop-cpu", cpu, "--worker-cpus", OFFLOAD["worker_cpus"] or cpu]


def offload_meta(pins):
    place = offload_placement(pins)
    return {"workers": OFFLOAD["workers"], "work_us": OFFLOAD["work_us"],
            "loop_cpu": place[1] if place else None,
            "worker_cpus": place[3] if place else None}
