"""python -m evloop.bench.tournament: the grid it runs (the kernels' registration), where it
writes, what its --help calls it, and that tournament/tournament.py makes a report of what it
writes (when the checkout is at hand)."""

from __future__ import annotations

import glob
import os
import subprocess
import sys

import pytest

import evloop
from evloop import bench
from evloop.bench import tournament

PACKAGE_DIR = os.path.dirname(os.path.abspath(evloop.__file__))
DRIVER = os.path.join(os.path.dirname(__file__), "..", "..", "..", "tournament", "tournament.py")


def run_module(cwd, *args):
    return subprocess.run([sys.executable, "-m", "evloop.bench.tournament", *args],
                          capture_output=True, text=True, timeout=300, cwd=str(cwd))


def test_help_names_the_module_command():
    p = run_module(os.getcwd(), "--help")
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: python -m evloop.bench.tournament")
    assert "tournament.py [" not in p.stdout


def test_the_grid_is_every_family_and_shape_the_kernels_register():
    cells = [(c["family"], c["shape"]) for c in tournament.grid()]
    assert len(cells) == len(set(cells))
    assert {f for f, _ in cells} == set(bench.families())
    for family in bench.families():
        assert [s for f, s in cells if f == family] == (bench.shapes(family) or [""])
    assert bench.shapes("PingPongLatency") == ["hot", "cold", "blocking"]


@pytest.mark.parametrize("kw", [{"variant": "chunk", "backend": "epoll", "shape": "cold"},
                                {"system": "floor-spin", "shape": "hot"}])
def test_a_name_is_the_one_the_run_gives(kw):
    r = bench.run("PingPongLatency", iterations=3, **kw)
    assert bench.name("PingPongLatency", **kw) == r.name


def test_an_unknown_argument_is_an_error(tmp_path):
    p = run_module(tmp_path, "--bench", "build/bench/evloop_bench")
    assert p.returncode == 2
    assert "unrecognized arguments: --bench" in p.stderr


def test_a_run_writes_round_json_and_a_table_only_under_the_current_folder(tmp_path):
    before = sorted(os.listdir(PACKAGE_DIR))
    p = run_module(tmp_path, "--quick", "--rounds", "1", "--min-time", "0.005", "--quiet",
                   "--filter", "PingPongLatency/.*/hot")
    assert p.returncode == 0, p.stdout + p.stderr
    out = tmp_path / "evloop-tournament" / "quick"
    assert [os.path.basename(f) for f in glob.glob(str(out / "round-1" / "*.json"))] == \
        ["PingPongLatency-hot.json"]
    table = (out / "table.txt").read_text()
    assert "PingPongLatency/evloop-arena/epoll/hot" in table
    assert "PingPongLatency/floor-spin/hot" in table
    assert "cold" not in table
    assert sorted(os.listdir(PACKAGE_DIR)) == before
    if not os.path.exists(DRIVER):
        pytest.skip("no checkout here: tournament/tournament.py makes the report")
    r = subprocess.run([sys.executable, DRIVER, "--from-json",
                        *glob.glob(str(out / "round-1" / "*.json")), "--out", str(out)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "PingPongLatency" in (out / "report.md").read_text()
