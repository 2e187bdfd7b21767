"""evloop.bench (the C kernels), python -m evloop.bench.tournament, the examples and the
measurement tools, each run small: they must work, never be timed here (no assertion on
speed)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

import evloop
from evloop import bench
from conftest import COMBOS, COMBO_IDS

EXAMPLES = os.path.join(os.path.dirname(__file__), "..", "examples")
MEASURE = os.path.join(os.path.dirname(__file__), "..", "measure")


def test_the_loop_modules_carry_no_benchmark_code():
    for mod in (evloop._arena, evloop._chunk):
        assert [n for n in dir(mod) if "bench" in n.lower()] == [], mod.__name__


def test_every_benchmark_module_lives_in_the_experiment_subpackage():
    pkg = os.path.dirname(os.path.abspath(evloop.__file__))
    outside = sorted(n for n in os.listdir(pkg) if "bench" in n or "tournament" in n)
    assert outside == ["bench"]
    files = os.listdir(os.path.join(pkg, "bench"))
    assert {"kernels.py", "tournament.py", "aio.py"} <= set(files)
    assert "_kit" not in files  # tournament/ stays in the checkout
    assert any(n.startswith("_kernels.") and n.endswith(".so") for n in files)
    assert bench.run.__module__ == "evloop.bench.kernels"


def test_families_and_systems():
    assert set(bench.families()) >= {"PingPongLatency", "PingPong", "BurstSubmit",
                                      "MultiProducer", "MicrotaskRoundTrip",
                                      "ReadinessRoundTrip"}
    assert bench.systems() == ["evloop", "floor-spin", "floor-futex"]
    assert bench.shapes("Timers") == ["million", "lateness"] and bench.shapes("PingPong")
    assert bench.shapes("BurstSubmit") == [] and not bench.floors("BurstSubmit")
    assert bench.floors("PingPongLatency")


@pytest.mark.parametrize("variant,backend", COMBOS, ids=COMBO_IDS)
@pytest.mark.parametrize("family,kw", [
    ("PingPongLatency", {"shape": "hot", "iterations": 200}),
    ("PingPongLatency", {"shape": "cold", "iterations": 50, "gap_ns": 10000}),
    ("PingPongLatency", {"shape": "blocking", "iterations": 50}),
    ("PingPong", {"iterations": 2, "tasks": 10000}),
    ("BurstSubmit", {"iterations": 5}),
    ("MultiProducer", {"iterations": 2, "producers": 4, "tasks": 10000}),
    ("MicrotaskRoundTrip", {"iterations": 200}),
    ("ReadinessRoundTrip", {"iterations": 100}),
    ("ReadinessRoundTrip", {"shape": "silent", "iterations": 100}),
    ("ReadinessRoundTrip", {"shape": "sporadic", "iterations": 100}),
])
def test_every_family_runs_on_every_variant_and_backend(variant, backend, family, kw):
    r = bench.run(family, variant=variant, backend=backend, **kw)
    assert r.error == ""
    assert r.backend == backend
    assert r.iterations == kw["iterations"]
    assert len(r.samples) == r.iterations
    assert all(s >= 0 for s in r.samples)
    assert r.ns_per_op > 0
    for k in ("p50_ns", "p99_ns", "wakes_per_op", "tasks_per_drain", "spin_hits_per_op"):
        assert k in r.counters
    assert r.name.startswith(f"{family}/evloop-{variant}/{backend}")
    if family == "MultiProducer":
        assert r.ops == kw["iterations"] * kw["tasks"]


def test_fixed_settings_reach_the_loop():
    r = bench.run("PingPong", spin_ns=0, batch_budget=64, iterations=2, tasks=5000)
    assert r.counters["spin_ns_end"] == 0
    assert r.counters["budget_end"] == 64
    assert "@budget64-spin0/" in r.name


@pytest.mark.parametrize("system", ["floor-spin", "floor-futex"])
def test_floors_run_latency(system):
    r = bench.run("PingPongLatency", system=system, iterations=100)
    assert r.error == "" and len(r.samples) == 100
    assert r.name == f"PingPongLatency/{system}/hot"
    with pytest.raises(RuntimeError):
        bench.run("MultiProducer", system=system, iterations=1)


def test_bad_parameters_raise():
    with pytest.raises(ValueError):
        bench.run("NoSuchFamily")
    with pytest.raises(ValueError):
        bench.run("PingPong", system="libuv")
    with pytest.raises(ValueError):
        bench.run("PingPong", variant="x")
    with pytest.raises(ValueError):
        bench.run("PingPong", iterations=0)
    with pytest.raises(RuntimeError):
        bench.run("PingPongLatency", shape="lukewarm", iterations=1)
    with pytest.raises(RuntimeError):
        bench.run("PingPong", backend="kqueue" if "kqueue" not in evloop.backends() else "x",
                  iterations=1)


def test_max_seconds_bounds_a_run():
    r = bench.run("PingPongLatency", iterations=10**9, max_seconds=0.05)
    assert 0 < r.iterations < 10**9


def test_benchmark_json_has_the_suite_shape():
    r = bench.run("PingPongLatency", iterations=100, shape="cold", gap_ns=1000)
    d = r.as_benchmark_json()
    assert d["name"] == r.name and d["run_type"] == "iteration"
    assert d["ns_per_op"] == pytest.approx(r.ns_per_op)


def run_script(path, *args, timeout=300):
    p = subprocess.run([sys.executable, path, *args], capture_output=True, text=True,
                       timeout=timeout)
    assert p.returncode == 0, p.stdout + p.stderr
    return p.stdout


def test_example_echo_server_and_client_run():
    server = subprocess.Popen([sys.executable, "-u", os.path.join(EXAMPLES, "echo_server.py"),
                               "--port", "0"], stdout=subprocess.PIPE, text=True)
    try:
        line = server.stdout.readline()
        assert line.startswith("listening on 127.0.0.1:"), line
        port = line.split()[2].rsplit(":", 1)[1]
        out = run_script(os.path.join(EXAMPLES, "echo_client.py"), "--port", port,
                         "--connections", "2", "--messages", "50", timeout=60)
        assert out.startswith("100 echoes of 1024 B over 2 connections"), out
    finally:
        server.send_signal(signal.SIGINT)  # Ctrl-C: the server stops and exits 0
        assert server.wait(timeout=30) == 0
        server.stdout.close()


def test_example_worker_pool_runs():
    out = run_script(os.path.join(EXAMPLES, "worker_pool.py"), "--jobs", "300")
    assert out.startswith("300 results on the loop thread"), out


def test_example_drive_from_asyncio_runs():
    out = run_script(os.path.join(EXAMPLES, "drive_from_asyncio.py"))
    assert "evloop ran 1000 tasks from another thread" in out, out


def test_example_experiment_runs():
    out = run_script(os.path.join(EXAMPLES, "experiment.py"), "--rounds", "1",
                     "--iterations", "50", "--gap-ns", "2000")
    assert "adaptive" in out and "chunk" in out


def test_measure_flood_variants_runs():
    out = run_script(os.path.join(MEASURE, "flood_variants.py"), "--rounds", "1",
                     "--iterations", "1", "--tasks", "5000", "--producers", "1,4")
    assert "chunk/arena" in out


def test_measure_roundtrip_runs():
    out = run_script(os.path.join(MEASURE, "roundtrip.py"), "--n", "200", "--rounds", "1",
                     "--flood", "2000")
    assert "evloop-arena" in out and "asyncio" in out
