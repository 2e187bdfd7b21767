"""tournament/net's pyserver family (issue 41) keeps running: its quickest mode (one round,
one second per run) with uvicorn and httptools on evloop's asyncio loop and on the stock loop,
with keep-alive and with Connection: close, under this Python. Each run must give a figure
(no wrk error, the server stopped cleanly) and the report its section. Never asserts on speed.

Skips, saying why, without wrk, without uvicorn or httptools, or where the tournament folder is
not beside these tests (a copy of them outside the repository, as tests/packaging makes).
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

RUN_NET = Path(__file__).resolve().parents[3] / "tournament" / "net" / "run_net.py"
SYSTEMS = ["uvicorn-httptools/evloop", "uvicorn-httptools/asyncio"]


def test_the_pyserver_family_runs_on_evloop_and_the_stock_loop(tmp_path):
    if not RUN_NET.exists():
        pytest.skip(f"no {RUN_NET}: these tests run outside the repository")
    if shutil.which("wrk") is None:
        pytest.skip("wrk is not installed (Debian: apt-get install wrk)")
    for module in ("uvicorn", "httptools"):
        pytest.importorskip(module, reason=f"{module} is not installed (pip install '.[test]')")
    p = subprocess.run([sys.executable, str(RUN_NET), "--families", "pyserver", "--quick",
                        "--python", sys.executable, "--systems", ",".join(SYSTEMS),
                        "--py-conns", "10", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=300)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    summary = json.loads((tmp_path / "net.json").read_text())
    assert summary["meta"]["dead"] == {}
    for system in SYSTEMS:
        for key in ("keep-alive/10", "close/10"):
            cell = summary["py_cells"][system][key]
            assert "failed" not in cell, (system, key, cell)
            assert cell["rps"]["median"] > 0
            assert cell["cpu_us_per_req"]["median"] > 0
    runs = [r for r in summary["runs"] if r["family"] == "pyserver"]
    assert len(runs) == 4
    assert all(r["server_exit"] == 0 and r["server_requests"] >= r["requests"] for r in runs)
    assert "evloop._aio.EventLoop" in summary["meta"]["servers"]["uvicorn-httptools/evloop"]
    report = (tmp_path / "report.md").read_text()
    assert "Real Python servers on each asyncio loop" in report
