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


def test_no_periodic_wakeup_while_run_idles_on_the_main_thread():
    # Ctrl-C is delivered through signal.set_wakeup_fd, not a polling timer: an idle loop
    # on the main thread sleeps through (a few ticks at most, whatever the duration).
    child = textwrap.dedent(
        """
        import threading, time, evloop
        loop = evloop.Loop()
        threading.Timer(0.5, loop.stop).start()
        loop.run()
        print("ticks", loop.stats().ticks, flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    assert int(out.stdout.split()[1]) < 10, out.stdout


def test_the_wakeup_fd_is_restored_after_run():
    child = textwrap.dedent(
        """
        import os, signal, evloop
        r, w = os.pipe()
        os.set_blocking(w, False)
        signal.set_wakeup_fd(w)
        loop = evloop.Loop()
        loop.submit(loop.stop)
        loop.run()
        print("restored", signal.set_wakeup_fd(-1) == w, flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    assert "restored True" in out.stdout


def test_a_wakeup_fd_set_during_run_is_left_in_place():
    child = textwrap.dedent(
        """
        import os, signal, evloop
        r, w = os.pipe()
        os.set_blocking(w, False)
        loop = evloop.Loop()
        loop.submit(signal.set_wakeup_fd, w)  # a callback on the main thread sets its own
        loop.submit(loop.stop)
        loop.run()
        print("kept", signal.set_wakeup_fd(-1) == w, flush=True)
        """
    )
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=20)
    assert out.returncode == 0, out.stderr
    assert "kept True" in out.stdout


# Ctrl-C loses nothing: tasks accepted before and while the Ctrl-C arrives all run, whether
# run() is on the main thread or the loop runs on its own thread (run_in_thread) with the
# main thread in a with block or in join(); then KeyboardInterrupt leaves the program.
LOSSLESS = textwrap.dedent(
    """
    import signal, sys, threading, time
    signal.signal(signal.SIGINT, signal.default_int_handler)
    import evloop
    variant, backend, layout = sys.argv[1:4]
    ran = []
    accepted = [0]

    def slow():  # the tasks queued behind it are still waiting when the Ctrl-C comes
        print("ready", flush=True)
        time.sleep(1.0)  # on the main thread, KeyboardInterrupt is raised here

    def producer():  # submits until the loop refuses: racing the stop
        i = 0
        while True:
            try:
                loop.submit(ran.append, i)
            except evloop.LoopClosedError:
                return
            accepted[0] += 1
            i += 1
            if i % 100 == 0:
                time.sleep(0.001)

    loop = evloop.Loop(backend=backend, variant=variant)
    p = threading.Thread(target=producer)
    try:
        if layout == "main":
            loop.submit(slow)
            p.start()
            loop.run()
        elif layout == "with":
            with loop:
                loop.run_in_thread()
                loop.submit(slow)
                p.start()
                time.sleep(60)
        else:  # join
            loop.run_in_thread()
            loop.submit(slow)
            p.start()
            loop.join()
    finally:
        p.join()
        print("accepted", accepted[0], "ran", len(ran), "ordered", ran == sorted(ran),
              "state", loop.state, flush=True)
    print("no KeyboardInterrupt", flush=True)
    """
)


@pytest.mark.parametrize("layout", ["main", "with", "join"])
@pytest.mark.parametrize("variant,backend", COMBOS, ids=COMBO_IDS)
def test_ctrl_c_runs_every_accepted_task_then_raises(variant, backend, layout):
    p = subprocess.Popen([sys.executable, "-c", LOSSLESS, variant, backend, layout],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = p.stdout.readline().strip()
        assert line == "ready", (line, p.stderr.read())
        time.sleep(0.2)
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    assert "KeyboardInterrupt" in err, (out, err)
    assert "no KeyboardInterrupt" not in out
    assert p.returncode != 0
    words = out.split()
    accepted, ran = int(words[words.index("accepted") + 1]), int(words[words.index("ran") + 1])
    assert accepted > 0 and ran == accepted, out
    assert "ordered True" in out and "state terminated" in out, out
