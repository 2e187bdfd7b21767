"""python -m evloop.bench.tournament: where it looks for the benchmark binary, where it writes,
and what its --help calls it. The driver itself (tournament/tournament.py) is replaced by a
stand-in that records its command line, except in the in-process run at the end."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import types

import pytest

import evloop
from evloop.bench import tournament

PACKAGE_DIR = os.path.dirname(os.path.abspath(evloop.__file__))


def fake_binary(path):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)
    return path


@pytest.fixture
def driver(monkeypatch, tmp_path):
    """A stand-in for tournament/tournament.py: records sys.argv when main() runs."""
    seen = {}

    def main():
        seen["argv"] = list(sys.argv)
        return 0

    monkeypatch.setattr(tournament, "load_driver", lambda: types.SimpleNamespace(main=main))
    monkeypatch.delenv("EVLOOP_BENCH", raising=False)
    monkeypatch.setenv("EVLOOP_TOURNAMENT_COMMAND", "test")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "argv", list(sys.argv))  # main() replaces it for the driver
    return seen


def test_help_names_the_module_command():
    p = subprocess.run([sys.executable, "-m", "evloop.bench.tournament", "--help"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert p.stdout.startswith("usage: python -m evloop.bench.tournament")
    assert "tournament.py [" not in p.stdout
    assert "build/bench/evloop_bench" in p.stdout


@pytest.mark.parametrize("build", ["build", "build-bench"])
def test_the_binary_is_found_in_the_readme_build_folder_and_run_tournament_s(driver, tmp_path,
                                                                                build):
    binary = fake_binary(str(tmp_path / build / "bench" / "evloop_bench"))
    assert tournament.main(["--quick", "--rounds", "1"]) == 0
    argv = driver["argv"]
    assert argv[argv.index("--bench") + 1] == binary
    assert argv[argv.index("--out") + 1] == str(tmp_path / "evloop-tournament" / "quick")


def test_the_readme_build_folder_comes_first(driver, tmp_path):
    first = fake_binary(str(tmp_path / "build" / "bench" / "evloop_bench"))
    fake_binary(str(tmp_path / "build-bench" / "bench" / "evloop_bench"))
    assert tournament.main([]) == 0
    argv = driver["argv"]
    assert argv[argv.index("--bench") + 1] == first
    assert argv[argv.index("--out") + 1] == str(tmp_path / "evloop-tournament" / "latest")


def test_an_explicit_binary_and_out_folder_are_taken(driver, tmp_path, monkeypatch):
    binary = fake_binary(str(tmp_path / "elsewhere" / "evloop_bench"))
    monkeypatch.setenv("EVLOOP_BENCH", "/nonexistent/evloop_bench")
    assert tournament.main(["--bench", binary, "--out", "res", "--sweep", "lite"]) == 0
    argv = driver["argv"]
    assert argv[0] == "python -m evloop.bench.tournament"
    assert argv[argv.index("--bench") + 1] == binary
    assert argv[argv.index("--out") + 1] == str(tmp_path / "res")
    assert argv[-2:] == ["--sweep", "lite"]  # other arguments go to the driver


def test_evloop_bench_variable_is_honoured(driver, tmp_path, monkeypatch):
    binary = fake_binary(str(tmp_path / "b" / "evloop_bench"))
    monkeypatch.setenv("EVLOOP_BENCH", binary)
    assert tournament.main([]) == 0
    assert driver["argv"][driver["argv"].index("--bench") + 1] == binary


def test_a_missing_explicit_binary_is_an_error(driver, tmp_path):
    with pytest.raises(SystemExit) as ei:
        tournament.main(["--bench", str(tmp_path / "missing")])
    assert "not an executable" in str(ei.value)
    assert "argv" not in driver


def test_an_in_process_run_writes_only_under_the_current_folder(tmp_path):
    before = sorted(os.listdir(PACKAGE_DIR))
    p = subprocess.run([sys.executable, "-m", "evloop.bench.tournament", "--in-process", "--quick",
                        "--rounds", "1", "--min-time", "0.005", "--quiet",
                        "--filter", "PingPongLatency/.*/hot"],
                       capture_output=True, text=True, timeout=300, cwd=str(tmp_path))
    assert p.returncode == 0, p.stdout + p.stderr
    out = tmp_path / "evloop-tournament" / "quick"
    assert (out / "report.md").exists() and (out / "summary.json").exists()
    assert "python -m evloop.bench.tournament" in (out / "report.md").read_text()
    assert sorted(os.listdir(PACKAGE_DIR)) == before
