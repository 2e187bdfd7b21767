"""Hostile-input fuzzer of evloop's asyncio loop, against the stock selector loop (issue 39).

``generate(seed)`` makes a scenario: a list of steps, each an asyncio loop API call with
hostile arguments or a misuse (NaN, infinite, huge, negative and non-numeric delays and
``when``s; callbacks that raise, stop, close or re-enter the loop; bad contexts; closed, reused
and bogus fds; odd buffers; calls from an executor job; debug mode), or a run of the loop.
A scenario runs in a worker process (``--worker LOOP``), once per loop, and the worker
answers with what each step gave: the exception type each call raised (or "ok"), for a run
what escaped it and the exception types the exception handler saw, and at the end whether the
loop still works (a call_soon, a call_later(0) and a sleep round trip). The parent compares
evloop's answer with the stock loop's, and reports a crash (the worker died: a signal, an
abort), a hang (no answer before the deadline) or a divergence that KNOWN_DIVERGENCES does not
explain; each report comes shrunk (steps dropped while it still fails) with the command that
replays it.

  python hostile.py --seeds N [--start S] [--dev] [--malloc-debug] [--jobs J]
  python hostile.py --replay SEED [--dev] [--malloc-debug]
  python hostile.py --steps JSON [--dev] [--malloc-debug]

A worker runs many scenarios one after the other (a process per scenario would cost more
than the scenario); a scenario only touches the fds it made, so one cannot disturb the next,
and after a crash or a hang the parent starts a fresh worker for the rest.
"""

from __future__ import annotations

import array
import asyncio
import contextvars
import json
import os
import random
import select
import socket
import subprocess
import sys
import tempfile
import threading
import time
from decimal import Decimal
from fractions import Fraction
from typing import Any, Dict, List, Optional, Tuple

DEADLINE = 20.0  # seconds a worker may take over one scenario before it counts as a hang
RUN_LIMIT = 2.0  # seconds a run step may take inside the worker before it is stopped
HERE = os.path.dirname(os.path.abspath(__file__))

# KNOWN_DIVERGENCES: documented differences between the loops (docs/asyncio.md, "Known
# differences from the stock loop"); compare() knows each and does not report it.
KNOWN_DIVERGENCES = {
    "convert-at-call": (
        "call_at/call_later convert when (or time() + delay) to a float at the call: a when "
        "that is not a float (str, complex, None, 10**400, a Decimal) raises there on evloop or "
        "is a plain float from then on, where the stock loop stores the object and fails later "
        "(a heap comparison in a later call, or the iteration's timeout). From the first "
        "difference on, the stock loop holds that object, so the rest is not compared."),
    "nan-timer": (
        "A timer at NaN runs at once on evloop; on the stock loop it runs when heapq's sifts "
        "leave it at the head, later or never, and can hold back timers below it. After one was "
        "accepted, what runs (run steps, the final round trip) is not compared; each call's "
        "outcome still is."),
}

# ------------------------------------------------------------------------------ the values

# Delays and whens, by name (the scenario is JSON: values are named, made in the worker).
# "rel:" ones are added to loop.time() (for call_at; for call_later they are huge delays).
# Every time is either due at once or far away (an hour or more), never a few milliseconds
# ahead: whether such a timer fires within a run step would be the clock's choice, on both
# loops. So call_later never gets True (one second).
TIMES = ["0", "0.0", "-1", "-1e300", "1e300", "inf", "-inf", "nan", "floatnan", "true",
         "false", "dec", "decnan", "frac", "str", "complex", "big", "-big", "none", "2**63",
         "denormal", "rel:3600", "rel:0", "rel:-0.5"]
NAN_TIMES = {"nan", "floatnan"}
NON_FLOAT_TIMES = {"dec", "decnan", "str", "complex", "big", "-big", "none"}


class FloatSub(float):
    """A float subclass: the loop must not trust its type to be exactly float."""


def time_value(name: str, loop: Any) -> Any:
    if name.startswith("rel:"):
        return loop.time() + float(name[4:])
    return {
        "0": 0, "0.0": 0.0, "-1": -1, "-1e300": -1e300, "1e300": 1e300,
        "inf": float("inf"), "-inf": float("-inf"), "nan": float("nan"),
        "floatnan": FloatSub("nan"), "true": True, "false": False,
        "dec": Decimal("-0.001"), "decnan": Decimal("NaN"), "frac": Fraction(-1, 3),
        "str": "0.001", "complex": 1j, "big": 10**400, "-big": -10**400, "none": None,
        "2**63": 2**63, "denormal": 5e-324,
    }[name]


CALLBACKS = ["ok", "raise", "kbi", "sysexit", "base", "cancelled", "stop", "close", "nested",
             "forever", "notcallable", "coroutinefn", "reschedule"]
CONTEXTS = ["default", "copy", "none", "int", "dict", "object", "context_cls"]
FDS = ["sock", "num", "closed", "reused", "-1", "huge", "toobig", "float", "file",
       "fileno_raises", "fileno_str", "fileno_neg", "str"]
BUFFERS = ["bytes", "empty", "bytearray", "mv_int", "mv_readonly", "mv_strided", "mv_empty",
           "str", "none", "int", "array_d"]
RECV_N = ["1", "0", "-1", "2**62", "2**63", "float", "none", "true"]
JOBS = ["threadsafe", "call_soon", "stop", "close", "raise", "call_later", "ok"]


def _bad_fileno(result: Any) -> Any:
    class BadFileno:
        def fileno(self) -> Any:
            if isinstance(result, BaseException):
                raise result
            return result
    return BadFileno()


# ------------------------------------------------------------------------------ the generator


def generate(seed: int) -> List[list]:
    """A scenario: 1 to 12 steps, each a JSON list [op, args...]. The loop starts in debug
    mode in a fifth of them."""
    rng = random.Random(seed)
    steps: List[list] = []
    if rng.random() < 0.2:
        steps.append(["debug", True])
    for _ in range(rng.randint(1, 12)):
        steps.append(_step(rng))
    return steps


def _cb(rng: random.Random) -> str:
    return rng.choice(CALLBACKS)


def _step(rng: random.Random) -> list:
    r = rng.random()
    kw = rng.random() < 0.3
    ctx = rng.choice(CONTEXTS) if rng.random() < 0.3 else "default"
    if r < 0.15:
        return ["call_soon", _cb(rng), kw, ctx]
    if r < 0.25:
        return ["call_soon_threadsafe", _cb(rng), kw, ctx]
    if r < 0.40:
        return ["call_later", rng.choice([t for t in TIMES if t != "true"]), _cb(rng), kw, ctx]
    if r < 0.52:
        return ["call_at", rng.choice(TIMES), _cb(rng), kw, ctx]
    if r < 0.64:
        return ["run", rng.choice(["sleep0", "sleep", "stop_soon", "later0"])]
    if r < 0.72:
        return ["fd", rng.choice(["add_reader", "add_writer", "remove_reader", "remove_writer"]),
                rng.choice(FDS), _cb(rng)]
    if r < 0.80:
        return ["sock", rng.choice(["sock_recv", "sock_recv_into", "sock_sendall"]),
                rng.choice(["ok", "closed", "notsock", "dgram", "blocking"]),
                rng.choice(BUFFERS), rng.choice(RECV_N)]
    if r < 0.85:
        return ["write", rng.choice(BUFFERS), rng.choice(["open", "closing"])]
    if r < 0.91:
        return ["executor", rng.choice(JOBS)]
    if r < 0.93:
        return ["shutdown_executor", rng.randint(1, 2)]
    if r < 0.96:
        return ["debug", rng.random() < 0.5]
    if r < 0.98:
        return ["stop"]
    return ["close"]


# ------------------------------------------------------------------------------ the worker


def make_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "stock":
        return asyncio.SelectorEventLoop()
    if kind == "uvloop":
        import uvloop  # optional: only with --uvloop
        return uvloop.new_event_loop()
    import evloop
    return evloop.new_event_loop()


class _Custom(BaseException):
    """A BaseException that is neither SystemExit nor KeyboardInterrupt: asyncio's handle
    gives it to the exception handler, as it does an Exception."""


class Scenario:
    """One scenario on one loop: runs the steps and records what each gave."""

    def __init__(self, kind: str, steps: List[list]) -> None:
        self.loop = make_loop(kind)
        self.steps = steps
        self.events: List[str] = []
        self.closers: List[Any] = []
        self.loop.set_exception_handler(self._handler)

    def _handler(self, loop: Any, ctx: dict) -> None:
        exc = ctx.get("exception")
        # "exception was never retrieved" is reported when the collector frees the future:
        # its time is the collector's, not the loop's.
        if exc is not None and "never retrieved" not in ctx.get("message", ""):
            self.events.append("handler:" + type(exc).__name__)

    # --- callbacks

    def callback(self, kind: str, tag: str) -> Any:
        loop = self.loop

        def cb() -> None:
            self.events.append("ran:" + tag)
            if kind == "raise":
                raise ValueError(tag)
            if kind == "kbi":
                raise KeyboardInterrupt(tag)
            if kind == "sysexit":
                raise SystemExit(tag)
            if kind == "base":
                raise _Custom(tag)
            if kind == "cancelled":
                raise asyncio.CancelledError(tag)
            if kind == "stop":
                loop.stop()
            elif kind == "close":
                loop.close()
            elif kind == "nested":
                loop.run_until_complete(asyncio.sleep(0))
            elif kind == "forever":
                loop.run_forever()
            elif kind == "reschedule":
                loop.call_soon(self.events.append, "ran:" + tag + "+")

        if kind == "notcallable":
            return 42
        if kind == "coroutinefn":
            async def coro() -> None:
                self.events.append("ran:" + tag)
            return coro
        return cb

    def context(self, kind: str) -> Tuple[bool, Any]:
        """(pass it?, the context)"""
        return {
            "default": (False, None), "copy": (True, contextvars.copy_context()),
            "none": (True, None), "int": (True, 42), "dict": (True, {}),
            "object": (True, object()), "context_cls": (True, contextvars.Context),
        }[kind]

    def schedule(self, fn: Any, head: list, cb: Any, kw: bool, ctx: str) -> Any:
        give, c = self.context(ctx)
        kwargs: Dict[str, Any] = {"context": c} if give else {}
        if kw:
            names = {"call_later": ["delay"], "call_at": ["when"]}.get(fn.__name__, [])
            kwargs.update(zip(names, head))
            kwargs["callback"] = cb
            return fn(**kwargs)
        return fn(*head, cb, **kwargs)

    # --- fds and sockets

    def pair(self, blocking: bool = False) -> Tuple[socket.socket, socket.socket]:
        a, b = socket.socketpair()
        a.setblocking(blocking)
        b.setblocking(False)
        self.closers += [a, b]
        return a, b

    def fd_arg(self, kind: str) -> Any:
        if kind in ("sock", "num"):
            a, _ = self.pair()
            return a if kind == "sock" else a.fileno()
        if kind == "closed":
            a, _ = self.pair()
            n = a.fileno()
            a.close()
            return n
        if kind == "reused":
            # Registered, closed without being removed, and a new socket on the same number.
            a, _ = self.pair()
            n = a.fileno()
            try:
                self.loop.add_reader(n, lambda: None)
            except BaseException:  # noqa: BLE001 - a closed loop refuses: the call below too
                pass
            a.close()
            c, _ = self.pair()
            return c.fileno() if c.fileno() == n else c
        if kind == "file":
            f = tempfile.TemporaryFile()
            self.closers.append(f)
            return f
        return {"-1": -1, "huge": 2**31 - 1, "toobig": 10**20, "float": 3.0, "str": "3",
                "fileno_raises": _bad_fileno(ValueError("bad")),
                "fileno_str": _bad_fileno("x"), "fileno_neg": _bad_fileno(-5)}[kind]

    def buffer(self, kind: str, for_recv: bool) -> Any:
        if kind == "bytes":
            return b"xyzw"
        if kind == "empty":
            return bytearray() if for_recv else b""
        if kind == "bytearray":
            return bytearray(4)
        if kind == "mv_int":
            return memoryview(array.array("i", [1, 2]))
        if kind == "mv_readonly":
            return memoryview(b"abcd")
        if kind == "mv_strided":
            return memoryview(bytearray(8))[::2]
        if kind == "mv_empty":
            return memoryview(bytearray())
        if kind == "array_d":
            return array.array("d", [1.0])
        return {"str": "abcd", "none": None, "int": 4}[kind]

    def recv_n(self, kind: str) -> Any:
        return {"1": 1, "0": 0, "-1": -1, "2**62": 2**62, "2**63": 2**63, "float": 1.0,
                "none": None, "true": True}[kind]

    # --- running the loop, with a limit so that a stuck loop is seen, not waited for

    def run(self, aw: Any) -> str:
        loop = self.loop
        timer = threading.Timer(RUN_LIMIT, self._unstick)
        timer.daemon = True
        self.stuck = False
        timer.start()
        task = None
        try:
            task = asyncio.ensure_future(aw, loop=loop)
            loop.run_until_complete(task)
            return "ok"
        except BaseException as e:  # noqa: BLE001 - KeyboardInterrupt/SystemExit compared too
            if task is None and asyncio.iscoroutine(aw):
                aw.close()  # never started: a closed loop
            return "stuck" if self.stuck else type(e).__name__
        finally:
            timer.cancel()
            # A run that ended early leaves its task pending: cancelled, it ends in the next
            # run on both loops alike; one that ended with an exception is retrieved here, so
            # that the collector's report of it does not come at the collector's time.
            if task is not None:
                if not task.done():
                    task.cancel()
                elif not task.cancelled():
                    task.exception()

    def _unstick(self) -> None:
        self.stuck = True
        try:
            self.loop.call_soon_threadsafe(self.loop.stop)
        except BaseException:  # noqa: BLE001 - closed meanwhile
            pass

    # --- the steps

    def step(self, i: int, s: list) -> Any:
        """What step i gave: "ok", an exception type name, or for a run (result, events)."""
        loop, op = self.loop, s[0]
        tag = str(i)
        self.events = []
        try:
            if op in ("call_soon", "call_soon_threadsafe"):
                self.schedule(getattr(loop, op), [], self.callback(s[1], tag), s[2], s[3])
            elif op in ("call_later", "call_at"):
                self.schedule(getattr(loop, op), [time_value(s[1], loop)],
                              self.callback(s[2], tag), s[3], s[4])
            elif op == "run":
                return self.run_step(s[1])
            elif op == "fd":
                fd = self.fd_arg(s[2])
                fn = getattr(loop, s[1])
                if s[1].startswith("add"):
                    fn(fd, self.callback(s[3], tag))
                else:
                    return repr(fn(fd))
            elif op == "sock":
                return self.sock_step(s[1], s[2], s[3], s[4])
            elif op == "write":
                return self.write_step(s[1], s[2])
            elif op == "executor":
                return self.executor_step(s[1], tag)
            elif op == "shutdown_executor":
                out = [self.run(loop.shutdown_default_executor()) for _ in range(s[1])]
                # Ended early, the stock loop's shutdown thread goes on and settles its future
                # whenever it is done: what follows depends on that thread's timing.
                return "racy" if out[0] == "RuntimeError" else out
            elif op == "debug":
                loop.set_debug(s[1])
            elif op == "stop":
                loop.stop()
            elif op == "close":
                loop.close()
            elif op == "_abort":  # never generated: the harness's own test of its crash report
                os.abort()
            elif op == "_hang":  # never generated: the same for a hang
                time.sleep(3600)
        except BaseException as e:  # noqa: BLE001 - the outcome is the type
            return type(e).__name__
        return "ok"

    def run_step(self, how: str) -> Any:
        loop = self.loop
        if how == "sleep0":
            got = self.run(asyncio.sleep(0))
        elif how == "sleep":
            got = self.run(asyncio.sleep(0.002))
        elif how == "later0":
            async def later0() -> None:
                f = loop.create_future()
                loop.call_later(0, f.set_result, None)
                await f
            got = self.run(later0())
        else:
            try:
                loop.call_soon(loop.stop)
            except BaseException as e:  # noqa: BLE001
                return type(e).__name__
            got = self.run_forever()
        return [got, sorted(set(self.events))]

    def run_forever(self) -> str:
        timer = threading.Timer(RUN_LIMIT, self._unstick)
        timer.daemon = True
        self.stuck = False
        timer.start()
        try:
            self.loop.run_forever()
            return "stuck" if self.stuck else "ok"
        except BaseException as e:  # noqa: BLE001
            return type(e).__name__
        finally:
            timer.cancel()

    def sock_step(self, method: str, kind: str, buf: str, n: str) -> Any:
        loop = self.loop
        if kind == "blocking" and not loop.get_debug():
            # A blocking socket blocks the stock loop itself (checked only in debug mode;
            # docs/asyncio.md): not a scenario to compare outside debug mode.
            kind = "ok"
        if kind == "dgram":
            a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)
            a.setblocking(False)
            self.closers += [a, b]
        else:
            a, b = self.pair(blocking=kind == "blocking")
        b.send(b"data")  # something to read, so that a recv completes at once
        sock: Any = a
        if kind == "closed":
            a.close()
        elif kind == "notsock":
            sock = a.fileno()
        if method == "sock_recv":
            coro = loop.sock_recv(sock, self.recv_n(n))
        elif method == "sock_recv_into":
            coro = loop.sock_recv_into(sock, self.buffer(buf, True))
        else:
            coro = loop.sock_sendall(sock, self.buffer(buf, False))
        return self.run(asyncio.wait_for(coro, RUN_LIMIT / 2))

    def write_step(self, buf: str, state: str) -> Any:
        loop = self.loop
        a, b = self.pair()

        async def make() -> Any:
            tr, _ = await loop.create_connection(asyncio.Protocol, sock=a)
            return tr
        try:
            tr = loop.run_until_complete(make())
        except BaseException as e:  # noqa: BLE001 - a closed loop, a stopped one
            return "connect:" + type(e).__name__
        self.closers.append(tr)
        if state == "closing":
            tr.close()
        try:
            tr.write(self.buffer(buf, False))
            out = "ok"
        except BaseException as e:  # noqa: BLE001
            out = type(e).__name__
        return [out, self.run(asyncio.sleep(0))]

    def executor_step(self, job: str, tag: str) -> Any:
        loop = self.loop
        cb = self.callback("ok", tag)

        ended = threading.Event()
        submitted: List[Any] = []

        def work() -> str:
            try:
                return job_body()
            finally:
                ended.set()

        def job_body() -> str:
            if job == "threadsafe":
                loop.call_soon_threadsafe(cb)
            elif job == "call_soon":
                loop.call_soon(cb)  # the wrong thread: refused in debug mode
            elif job == "call_later":
                loop.call_later(0, cb)
            elif job == "stop":
                loop.stop()
            elif job == "close":
                loop.close()  # while the loop runs: refused
            elif job == "raise":
                raise ValueError(tag)
            return "done"

        async def wait() -> Any:
            # Submitted from inside the running loop: a job that starts before the loop runs
            # would see a loop that is not running (close() succeeds, call_soon is not
            # checked), and whether it does would be the scheduler's choice.
            try:
                fut = loop.run_in_executor(None, work)
            except BaseException as e:  # noqa: BLE001
                return "submit:" + type(e).__name__
            submitted.append(fut)
            try:
                return await asyncio.wait_for(fut, RUN_LIMIT / 2)
            except BaseException as e:  # noqa: BLE001
                return type(e).__name__
        res = self.run_until_result(wait())
        if res == "RacyRun" and not submitted:
            return "not run"  # a closed loop, a pending stop(): nothing went to the pool
        if res == "RacyRun":
            # The loop stopped (a pending stop(), a KeyboardInterrupt) before the job's result
            # came back: whether the job saw the loop running, and so what its call did, is
            # the thread scheduler's choice, on both loops. Nothing from here on is compared.
            ended.wait(RUN_LIMIT)
            return "racy"
        if job == "stop":
            # The job's stop() races with the future's completion on both loops: the run
            # ends either way; only that the loop works afterwards is compared.
            res = "-"
        return res

    def run_until_result(self, coro: Any) -> Any:
        box: List[Any] = []

        async def keep() -> None:
            box.append(await coro)
        got = self.run(keep())
        return box[0] if box else "RacyRun"

    # --- the end

    def probe(self) -> List[str]:
        """Whether the loop still works: a call_soon, a call_later(0), a sleep round trip."""
        loop = self.loop
        if loop.is_closed():
            return ["closed"]
        out = []
        for how in ("soon", "later0", "sleep"):
            async def trip(how: str = how) -> None:
                if how == "sleep":
                    await asyncio.sleep(0.001)
                    return
                f = loop.create_future()
                if how == "soon":
                    loop.call_soon(f.set_result, None)
                else:
                    loop.call_later(0, f.set_result, None)
                await f
            # A stop() left pending by the scenario ends the first run at once: once more.
            got = self.run(trip())
            if got == "RuntimeError":
                got = self.run(trip())
            out.append(how + ":" + got)
        return out

    def play(self) -> List[Any]:
        out = [self.step(i, s) for i, s in enumerate(self.steps)]
        out.append(self.probe())
        return out

    def close(self) -> None:
        for c in self.closers:
            try:
                c.close()
            except BaseException:  # noqa: BLE001
                pass
        try:
            if not self.loop.is_running():
                self.loop.close()
        except BaseException:  # noqa: BLE001
            pass


def worker(kind: str) -> int:
    """Reads a scenario (a JSON list of steps) per line, answers a JSON line per scenario."""
    for line in sys.stdin:
        steps = json.loads(line)
        sc = Scenario(kind, steps)
        try:
            out = sc.play()
        finally:
            sc.close()
        sys.stdout.write(json.dumps(out) + "\n")
        sys.stdout.flush()
    return 0


# ------------------------------------------------------------------------------ the runner


def child_env(dev: bool, malloc_debug: bool) -> Tuple[List[str], Dict[str, str]]:
    env = dict(os.environ)
    args = [sys.executable]
    if dev:
        args += ["-X", "dev"]
    if malloc_debug:
        env["PYTHONMALLOC"] = "debug"
    env["PYTHONFAULTHANDLER"] = "1"  # a crash prints its Python stack to the report
    return args, env


class Worker:
    """A worker process for one loop kind; restarted after a crash or a hang."""

    def __init__(self, kind: str, dev: bool, malloc_debug: bool) -> None:
        self.kind, self.dev, self.malloc_debug = kind, dev, malloc_debug
        self.proc: Optional[subprocess.Popen] = None

    def start(self) -> None:
        args, env = child_env(self.dev, self.malloc_debug)
        self.err = tempfile.TemporaryFile()
        self.proc = subprocess.Popen(args + [os.path.join(HERE, "hostile.py"), "--worker",
                                             self.kind], stdin=subprocess.PIPE,
                                     stdout=subprocess.PIPE, stderr=self.err, cwd=HERE,
                                     env=env)
        self.buf = b""

    def ask(self, steps: List[list], deadline: float = DEADLINE) -> Tuple[str, Any]:
        """("ok", outcome), ("crash", (returncode, stderr tail)) or ("hang", stderr tail)."""
        if self.proc is None or self.proc.poll() is not None:
            self.start()
        p = self.proc
        assert p is not None and p.stdin is not None and p.stdout is not None
        try:
            p.stdin.write((json.dumps(steps) + "\n").encode())
            p.stdin.flush()
        except BrokenPipeError:
            pass
        end = time.monotonic() + deadline
        fd = p.stdout.fileno()
        while b"\n" not in self.buf:
            left = end - time.monotonic()
            if left <= 0:
                self.stop()
                return "hang", self.stderr_tail()
            r, _, _ = select.select([fd], [], [], left)
            if r:
                chunk = os.read(fd, 65536)
                if not chunk:
                    rc = p.wait()
                    self.proc = None
                    return "crash", (rc, self.stderr_tail())
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        return "ok", json.loads(line)

    def stderr_tail(self) -> str:
        self.err.seek(0)
        return self.err.read().decode(errors="replace")[-3000:]

    def stop(self) -> None:
        if self.proc is not None:
            if self.proc.poll() is None:
                self.proc.kill()
            self.proc.wait()
            self.proc = None


# ------------------------------------------------------------------------------ the comparator


def _accepted_timer(s: list, got: Any, kinds: set) -> bool:
    return s[0] in ("call_later", "call_at") and s[1] in kinds and got == "ok"


def compare(steps: List[list], stock: List[Any], ours: List[Any]) -> Optional[str]:
    """None when the outcomes agree up to KNOWN_DIVERGENCES, else what differs."""
    nan = False
    timers = [t for t in steps if t[0] in ("call_later", "call_at")]
    non_float = any(t[1] in NON_FLOAT_TIMES for t in timers)
    for i, s in enumerate(steps):
        a, b = stock[i], ours[i]
        if _accepted_timer(s, a, NAN_TIMES) or _accepted_timer(s, b, NAN_TIMES):
            nan = True
        if a == b and a != "racy":
            continue
        if "racy" in (a, b):
            return None  # timing decides the rest, on both loops: see executor_step
        if nan and (s[0] == "run" or s[0] in ("sock", "write", "executor",
                                              "shutdown_executor")):
            continue  # nan-timer: what runs differs; calls are compared
        if any(t[0] in ("call_later", "call_at") and t[1] in NON_FLOAT_TIMES
               for t in steps[:i + 1]):
            return None  # convert-at-call: the stock loop holds a non-float when from here
        return f"step {i} {s!r}: stock {a!r}, evloop {b!r}"
    if stock[-1] != ours[-1] and not nan and not non_float:
        return f"probe: stock {stock[-1]!r}, evloop {ours[-1]!r}"
    return None


class Result:
    def __init__(self, seed: Optional[int], steps: List[list], kind: str, detail: Any,
                 flags: str) -> None:
        self.seed, self.steps, self.kind, self.detail, self.flags = (seed, steps, kind,
                                                                    detail, flags)

    def replay(self) -> str:
        base = f"python {os.path.join(HERE, 'hostile.py')}{self.flags}"
        return f"{base} --steps '{json.dumps(self.steps)}'"

    def report(self) -> str:
        head = f"seed {self.seed}: {self.kind}" if self.seed is not None else self.kind
        lines = [head, f"  steps: {json.dumps(self.steps)}", f"  detail: {self.detail}",
                 f"  replay: {self.replay()}"]
        return "\n".join(lines)


def flags_of(dev: bool, malloc_debug: bool) -> str:
    return (" --dev" if dev else "") + (" --malloc-debug" if malloc_debug else "")


def check(steps: List[list], pair: Tuple[Worker, Worker], seed: Optional[int] = None,
          deadline: float = DEADLINE) -> Optional[Result]:
    """Runs steps on both loops; a Result when evloop crashed, hung or diverged."""
    stock_w, ours_w = pair
    flags = flags_of(ours_w.dev, ours_w.malloc_debug)
    how, ours = ours_w.ask(steps, deadline)
    if how != "ok":
        return Result(seed, steps, how, ours, flags)
    how, stock = stock_w.ask(steps, deadline)
    if how != "ok":
        # The stock loop's own crash or hang is not ours to report, but says the scenario
        # is one the harness should not make.
        return Result(seed, steps, "stock-" + how, stock, flags)
    d = compare(steps, stock, ours)
    return Result(seed, steps, "divergence", d, flags) if d else None


def shrink(res: Result, budget_s: float = 60.0, deadline: float = 10.0) -> Result:
    """Drops steps (in chunks, then one by one) while the same kind of failure remains. Each
    try runs in fresh workers."""
    end = time.monotonic() + budget_s
    steps, best = list(res.steps), res
    dev, md = " --dev" in res.flags, " --malloc-debug" in res.flags
    chunk = max(1, len(steps) // 2)
    while chunk >= 1 and time.monotonic() < end:
        i = 0
        while i < len(steps) and time.monotonic() < end:
            cand = steps[:i] + steps[i + chunk:]
            pair = (Worker("stock", dev, md), Worker("evloop", dev, md))
            try:
                got = check(cand, pair, res.seed, deadline) if cand else None
            finally:
                for w in pair:
                    w.stop()
            if got is not None and got.kind == res.kind:
                steps, best = cand, got
            else:
                i += chunk
        chunk //= 2
    return best


def run_seeds(seeds: List[int], dev: bool, malloc_debug: bool, jobs: int = 1,
              shrink_s: float = 60.0, progress: bool = False) -> List[Result]:
    """Runs each seed's scenario on both loops, jobs worker pairs at once; the failures,
    shrunk (within shrink_s seconds each)."""
    todo = list(seeds)
    lock = threading.Lock()
    failed: List[Result] = []
    done = [0]

    def lane() -> None:
        pair = (Worker("stock", dev, malloc_debug), Worker("evloop", dev, malloc_debug))
        try:
            while True:
                with lock:
                    if not todo:
                        return
                    seed = todo.pop(0)
                res = check(generate(seed), pair, seed)
                with lock:
                    done[0] += 1
                    if res is not None:
                        failed.append(res)
                    if progress and done[0] % 200 == 0:
                        print(f"  {done[0]}/{len(seeds)} scenarios, {len(failed)} failing",
                              file=sys.stderr, flush=True)
        finally:
            for w in pair:
                w.stop()

    lanes = [threading.Thread(target=lane) for _ in range(max(1, jobs))]
    for t in lanes:
        t.start()
    for t in lanes:
        t.join()
    failed.sort(key=lambda r: r.seed if r.seed is not None else -1)
    if shrink_s > 0:
        failed = [shrink(r, shrink_s) if r.kind in ("crash", "hang", "divergence") else r
                  for r in failed]
    return failed


def main(argv: List[str]) -> int:
    import argparse

    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seeds", type=int, help="how many scenarios")
    ap.add_argument("--start", type=int, default=0, help="the first seed")
    ap.add_argument("--replay", type=int, help="one seed, shown step by step")
    ap.add_argument("--steps", help="a JSON list of steps, as a report prints them")
    ap.add_argument("--dev", action="store_true", help="workers under -X dev")
    ap.add_argument("--malloc-debug", action="store_true", help="PYTHONMALLOC=debug")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--shrink-s", type=float, default=60.0)
    ap.add_argument("--uvloop", action="store_true", help="with --replay/--steps: uvloop too")
    ap.add_argument("--worker", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.worker:
        return worker(a.worker)
    if a.replay is not None or a.steps:
        steps = generate(a.replay) if a.steps is None else json.loads(a.steps)
        print("steps:\n" + "\n".join(f"  {i:2d} {s!r}" for i, s in enumerate(steps)))
        kinds = ["stock", "evloop"] + (["uvloop"] if a.uvloop else [])
        outs = {}
        for k in kinds:
            w = Worker(k, a.dev, a.malloc_debug)
            outs[k] = w.ask(steps)
            w.stop()
            print(f"{k}: {outs[k]}")
        if outs["evloop"][0] != "ok":
            print(f"evloop: {outs['evloop'][0]}")
            return 1
        if outs["stock"][0] != "ok":
            print(f"stock loop: {outs['stock'][0]}")
            return 1
        d = compare(steps, outs["stock"][1], outs["evloop"][1])
        print("divergence: " + d if d else "same outcome on both loops (up to the known "
                                           "divergences)")
        return 1 if d else 0
    if a.seeds is None:
        ap.error("--seeds, --replay or --steps")
    t0 = time.monotonic()
    failed = run_seeds(list(range(a.start, a.start + a.seeds)), a.dev, a.malloc_debug,
                       a.jobs, a.shrink_s, progress=True)
    kinds: Dict[str, int] = {}
    for r in failed:
        kinds[r.kind] = kinds.get(r.kind, 0) + 1
    print(f"{a.seeds} scenarios (seeds {a.start}..{a.start + a.seeds - 1}"
          f"{flags_of(a.dev, a.malloc_debug)}) in {time.monotonic() - t0:.0f} s: "
          f"{len(failed)} failing {kinds}")
    for r in failed:
        print(r.report())
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
