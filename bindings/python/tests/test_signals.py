"""Ctrl-C: a real SIGINT sent to a subprocess whose main thread blocks in run()."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import evloop
from conftest import COMBOS, COMBO_IDS

CHILD = textwrap.dedent(
    """
    import os, signal, sys, time
    # A shell's background job may inherit SIGINT ignored; Python then keeps it ignored.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import evloop
    variant, backend, mode = sys.argv[1:4]
    loop = evloop.Loop(backend=backend, variant=variant)
    ran = []
    if mode == "busy":            # a Python callback that never returns by itself
        def spin():
            while True:
                pass
        loop.submit(spin)
    elif mode == "fd":            # the loop sleeps in the poller, not on the futex
        r, w = os.pipe()
        loop.add_reader(r, lambda: None)
    elif mode == "timer":         # the loop sleeps with a far timer deadline
        loop.call_later(3600, lambda: None)
    loop.call_every(3600, lambda: None)
    print("ready", flush=True)
    try:
        loop.run()
    except KeyboardInterrupt:
        print("KeyboardInterrupt", loop.state, flush=True)
        sys.exit(3)
    print("run returned", flush=True)
    """
)


def run_child(variant: str, backend: str, mode: str) -> tuple:
    env = dict(os.environ)
    p = subprocess.Popen([sys.executable, "-c", CHILD, variant, backend, mode],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        line = p.stdout.readline().strip()
        assert line == "ready", (line, p.stderr.read())
        time.sleep(0.2)  # let the loop go to sleep (or into the callback)
        t0 = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        return p.returncode, time.monotonic() - t0, out, err
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()


@pytest.mark.parametrize("mode", ["idle", "busy", "fd", "timer"])
@pytest.mark.parametrize("variant,backend", COMBOS, ids=COMBO_IDS)
def test_ctrl_c_stops_run_and_raises_keyboard_interrupt_promptly(variant, backend, mode):
    rc, elapsed, out, err = run_child(variant, backend, mode)
    assert rc == 3, (out, err)
    assert "KeyboardInterrupt terminated" in out
    assert elapsed < 5.0  # the check runs every 50 ms; generous for a loaded machine


def test_python_signal_handlers_run_while_the_loop_sleeps():
    child = textwrap.dedent(
        """
        import os, signal, evloop
        loop = evloop.Loop()
        signal.signal(signal.SIGUSR1, lambda s, f: loop.stop())
        loop.call_later(0.05, os.kill, os.getpid(), signal.SIGUSR1)
        loop.run()
        print("stopped by the handler", flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    assert "stopped by the handler" in out.stdout


def test_no_signal_check_when_run_is_not_on_the_main_thread(running):
    import threading

    done = threading.Event()
    running.loop.call_later(0.12, done.set)
    assert done.wait(20)
    assert running.loop.stats()["py_signal_checks"] == 0
