"""CPython's own asyncio tests against an event loop: the conformance harness of evloop's
asyncio loop (issue 19).

Two suites:

- ``mixins``: the loop-implementation test classes of ``test.test_asyncio`` (the concrete
  epoll/selector classes built on ``EventLoopTestsMixin``, ``SubprocessTestsMixin``,
  ``BaseSockTestsMixin``, ``BaseStartServer``, ``BaseTestBufferedProtocol``, the sendfile
  mixins, ``BaseStartTLS`` and ``SubprocessMixin``), subclassed so that their
  ``create_event_loop``/``new_loop`` return the loop under test;
- ``library``: the library-level modules (``test_streams``, ``test_tasks``, ...) with the
  default policy's loop factory pointed at the loop under test, so ``asyncio.new_event_loop``
  and ``asyncio.run`` make that loop.

Every test runs alone in its own process, forked from a parent that has imported the test
modules but made no loop and started no thread, in a fresh working folder (the tests'
``TESTFN`` is a relative path), with a timeout: a test that does not end in time is killed
and counted as a hang. With ``--loop evloop`` the harness also checks that the test made
an evloop loop (``noloop`` otherwise), so a patch that missed cannot pass as conformance.

    python asyncio_conformance.py --loop evloop                 # mixins, table on stdout
    python asyncio_conformance.py --loop stock --suite library --json /tmp/stock.json
    python asyncio_conformance.py --loop uvloop -j 2 --timeout 60

Exit status: 0 when it ran (whatever the results), 2 when ``test.test_asyncio`` or the
loop's package is missing. The pytest module test_asyncio_conformance.py reads the JSON.
"""

from __future__ import annotations

import argparse
import importlib
import io
import json
import os
import re
import select
import shutil
import signal
import sys
import tempfile
import time
import traceback
import unittest
import warnings
from typing import Any, Callable, Dict, List, Optional, Tuple

# (module, the concrete stock classes to run, first one that exists in this Python)
MIXIN_CLASSES: List[Tuple[str, Tuple[str, ...]]] = [
    ("test_events", ("EPollEventLoopTests",)),           # EventLoopTestsMixin, SubprocessTestsMixin
    ("test_sock_lowlevel", ("EPollEventLoopTests",)),    # BaseSockTestsMixin
    ("test_server", ("SelectorStartServerTests",)),      # BaseStartServer
    ("test_buffered_proto", ("BufferedProtocolSelectorTests",)),  # BaseTestBufferedProtocol
    ("test_sendfile", ("EPollEventLoopTests",)),         # SendfileMixin, SockSendfileMixin
    ("test_sslproto", ("SelectorStartTLSTests",)),       # BaseStartTLS
    ("test_subprocess", ("SubprocessThreadedWatcherTests",)),  # SubprocessMixin
]

LIBRARY_MODULES = [
    "test_streams", "test_tasks", "test_locks", "test_queues", "test_taskgroups",
    "test_timeouts", "test_waitfor", "test_runners", "test_ssl", "test_futures",
    "test_futures2", "test_pep492", "test_context", "test_threads", "test_protocols",
]

LOOPS = ("evloop", "stock", "uvloop")


_LOOP_CLASSES: Dict[str, Optional[type]] = {}


def loop_class(name: str) -> Optional[type]:
    """The loop class the default policy makes for --loop name (None: the stock one); one
    class per name for the process, so that the children count on the class the tests use."""
    if name not in _LOOP_CLASSES:
        _LOOP_CLASSES[name] = _make_loop_class(name)
    return _LOOP_CLASSES[name]


def _make_loop_class(name: str) -> Optional[type]:
    if name == "evloop":
        import evloop

        class CountedEventLoop(evloop.EventLoop):  # type: ignore[misc,valid-type]
            made = 0

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                CountedEventLoop.made += 1
                super().__init__(*args, **kwargs)

        return CountedEventLoop
    if name == "uvloop":
        import uvloop

        class ShimmedUvloop(uvloop.Loop):  # type: ignore[misc,valid-type]
            # The suite's close_loop helper (test_utils.TestCase) reads this private stdlib
            # attribute, which uvloop lacks; None makes it skip the executor shutdown, so
            # that the tests measure uvloop and not that helper.
            _default_executor = None
            made = 0

            def __init__(self, *args: Any, **kwargs: Any) -> None:
                ShimmedUvloop.made += 1
                super().__init__(*args, **kwargs)

        return ShimmedUvloop
    return None


def patch_policy(cls: Optional[type]) -> None:
    """Points the default policy class's loop factory at cls: asyncio.new_event_loop(),
    asyncio.run() and asyncio.Runner then make it."""
    if cls is None:
        return
    import asyncio

    policy_cls = type(asyncio.get_event_loop_policy())
    for c in {policy_cls, asyncio.DefaultEventLoopPolicy}:
        c._loop_factory = cls


def collect(suite: str, loop: str, pattern: Optional[str]) -> Dict[str, unittest.TestCase]:
    """test id -> test case, for the suite, with the loop under test plugged in."""
    loader = unittest.TestLoader()
    cls = loop_class(loop)
    tests: Dict[str, unittest.TestCase] = {}

    def add(s: unittest.TestSuite) -> None:
        for t in s:
            if isinstance(t, unittest.TestSuite):
                add(t)
            else:  # an import failure (unittest's _FailedTest) counts as a failure
                tests[t.id()] = t

    if suite == "mixins":
        for modname, names in MIXIN_CLASSES:
            mod = importlib.import_module("test.test_asyncio." + modname)
            base = next((getattr(mod, n) for n in names if hasattr(mod, n)), None)
            if base is None:
                continue
            if cls is not None:
                def create_event_loop(self: Any, _cls: type = cls) -> Any:
                    return _cls()

                # same class name: test ids read the same for every loop
                base = type(base.__name__, (base,), {
                    "create_event_loop": create_event_loop, "new_loop": create_event_loop,
                    "__module__": base.__module__, "__qualname__": base.__qualname__})
            add(loader.loadTestsFromTestCase(base))
    else:
        for modname in LIBRARY_MODULES:
            try:
                mod = importlib.import_module("test.test_asyncio." + modname)
            except ImportError:
                continue  # not in this Python (test_taskgroups before 3.11, ...)
            add(loader.loadTestsFromModule(mod))
    if pattern:
        rx = re.compile(pattern)
        tests = {k: v for k, v in tests.items() if rx.search(k)}
    return tests


class _Outcome(unittest.TestResult):
    def __init__(self) -> None:
        super().__init__()
        self.status = "pass"
        self.detail = ""

    def _set(self, status: str, detail: str) -> None:
        if self.status in ("pass", "skip"):
            self.status, self.detail = status, detail

    def addError(self, test: Any, err: Any) -> None:
        super().addError(test, err)
        self._set("error", self._exc_info_to_string(err, test))

    def addFailure(self, test: Any, err: Any) -> None:
        super().addFailure(test, err)
        self._set("fail", self._exc_info_to_string(err, test))

    def addSkip(self, test: Any, reason: str) -> None:
        super().addSkip(test, reason)
        if self.status == "pass":
            self.status, self.detail = "skip", reason

    def addExpectedFailure(self, test: Any, err: Any) -> None:
        super().addExpectedFailure(test, err)

    def addUnexpectedSuccess(self, test: Any) -> None:
        super().addUnexpectedSuccess(test)
        self._set("fail", "unexpected success")

    def addSubTest(self, test: Any, subtest: Any, err: Any) -> None:
        super().addSubTest(test, subtest, err)
        if err is not None:
            failure = issubclass(err[0], test.failureException)
            self._set("fail" if failure else "error", self._exc_info_to_string(err, test))


def child(test: unittest.TestCase, loop: str, wfd: int, workdir: str, strict: bool) -> None:
    """In the forked process: run one test, write its outcome as JSON to wfd, exit. strict:
    a test that passes without making a loop of the kind under test is "noloop"."""
    code = 0
    try:
        os.chdir(workdir)
        log = os.open("output.txt", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        os.close(log)
        sys.stdout = io.TextIOWrapper(os.fdopen(1, "wb", 0), write_through=True)
        sys.stderr = io.TextIOWrapper(os.fdopen(2, "wb", 0), write_through=True)
        cls = loop_class(loop)
        patch_policy(cls)
        warnings.simplefilter("default")
        result = _Outcome()
        unittest.TestSuite([test]).run(result)
        status, detail = result.status, result.detail
        made = getattr(cls, "made", None)
        if status == "pass" and made == 0 and strict:
            status, detail = "noloop", "the test made no loop of the kind under test"
        out = {"status": status, "detail": detail[-4000:], "loops": made}
    except BaseException:  # noqa: BLE001 - reported to the parent
        out = {"status": "error", "detail": traceback.format_exc()[-4000:]}
        code = 1
    try:
        data = json.dumps(out).encode()
        while data:
            data = data[os.write(wfd, data):]
    finally:
        os._exit(code)


def run_all(tests: Dict[str, unittest.TestCase], loop: str, jobs: int, timeout: float,
            strict: bool, progress: Callable[[str, Dict[str, Any]], None]) -> Dict[str, Dict[str, Any]]:
    """Forks one process per test, at most `jobs` at once; each killed after `timeout` s."""
    pending = list(tests.items())
    running: Dict[int, Tuple[str, int, float, str, bytearray]] = {}  # rfd -> (id, pid, t0, dir, buf)
    results: Dict[str, Dict[str, Any]] = {}
    base = tempfile.mkdtemp(prefix="evloop-conf-")
    try:
        while pending or running:
            while pending and len(running) < jobs:
                tid, test = pending.pop(0)
                workdir = tempfile.mkdtemp(dir=base)
                r, w = os.pipe()
                sys.stdout.flush()
                sys.stderr.flush()
                pid = os.fork()
                if pid == 0:
                    os.close(r)
                    child(test, loop, w, workdir, strict)
                os.close(w)
                running[r] = (tid, pid, time.monotonic(), workdir, bytearray())
            now = time.monotonic()
            wait = min(t0 + timeout for (_, _, t0, _, _) in running.values()) - now
            rl, _, _ = select.select(list(running), [], [], max(0.0, min(wait, 1.0)))
            for r in rl:
                chunk = os.read(r, 65536)
                if chunk:
                    running[r][4].extend(chunk)
                    continue
                tid, pid, t0, workdir, buf = running.pop(r)
                os.close(r)
                _, st = os.waitpid(pid, 0)
                try:
                    res = json.loads(bytes(buf).decode())
                except ValueError:
                    sig = os.WTERMSIG(st) if os.WIFSIGNALED(st) else 0
                    res = {"status": "crash", "detail": f"exit status {st} (signal {sig})"}
                res["seconds"] = round(time.monotonic() - t0, 3)
                if res["status"] not in ("pass", "skip"):
                    res["output"] = _tail(os.path.join(workdir, "output.txt"))
                shutil.rmtree(workdir, ignore_errors=True)
                results[tid] = res
                progress(tid, res)
            now = time.monotonic()
            for r, (tid, pid, t0, workdir, buf) in list(running.items()):
                if now - t0 > timeout:
                    os.kill(pid, signal.SIGKILL)
                    os.waitpid(pid, 0)
                    os.close(r)
                    del running[r]
                    res = {"status": "hang", "detail": f"killed after {timeout} s",
                           "seconds": round(now - t0, 3),
                           "output": _tail(os.path.join(workdir, "output.txt"))}
                    shutil.rmtree(workdir, ignore_errors=True)
                    results[tid] = res
                    progress(tid, res)
    finally:
        shutil.rmtree(base, ignore_errors=True)
    return results


def _tail(path: str, n: int = 3000) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - n))
            return f.read().decode(errors="replace")
    except OSError:
        return ""


def summarize(results: Dict[str, Dict[str, Any]]) -> Dict[str, int]:
    counts: Dict[str, int] = {}
    for r in results.values():
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    return counts


def main(argv: Optional[List[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--loop", choices=LOOPS, default="evloop")
    ap.add_argument("--suite", choices=("mixins", "library"), default="mixins")
    ap.add_argument("-j", "--jobs", type=int, default=max(1, min(os.cpu_count() or 1, 4)))
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per test")
    ap.add_argument("--filter", help="regex on test ids")
    ap.add_argument("--tests", help="a file of test ids to run, one a line")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args(argv)
    try:
        import test.test_asyncio  # noqa: F401
        from test.test_asyncio import utils  # noqa: F401
    except ImportError as e:
        print(f"asyncio_conformance: no test.test_asyncio in this Python: {e}", file=sys.stderr)
        return 2
    try:
        loop_class(args.loop)
    except ImportError as e:
        print(f"asyncio_conformance: --loop {args.loop}: {e}", file=sys.stderr)
        return 2
    # the test modules' import-time warnings (deprecated child watchers) are not results
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        tests = collect(args.suite, args.loop, args.filter)
    if args.tests:
        with open(args.tests) as f:
            wanted = {line.strip() for line in f if line.strip()}
        tests = {k: v for k, v in tests.items() if k in wanted}

    def progress(tid: str, res: Dict[str, Any]) -> None:
        if args.verbose or res["status"] not in ("pass", "skip"):
            print(f"{res['status']:6} {res['seconds']:7.2f}s {tid}", flush=True)

    t0 = time.monotonic()
    # The mixins always make the loop under test; many library-level tests run on the
    # suite's own test double (test_utils.TestLoop) or on no loop at all, so there a pass
    # without one is a pass, and the summary says how many ran on the loop under test.
    results = run_all(tests, args.loop, args.jobs, args.timeout, args.suite == "mixins", progress)
    counts = summarize(results)
    wall = time.monotonic() - t0
    on_loop = sum(1 for r in results.values() if r["status"] == "pass" and r.get("loops"))
    print(f"{args.loop} {args.suite} (Python {sys.version.split()[0]}): {len(results)} tests, "
          + ", ".join(f"{k} {v}" for k, v in sorted(counts.items()))
          + (f" ({on_loop} of the passes made a {args.loop} loop)" if args.loop != "stock" else "")
          + f"; {wall:.1f} s")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"loop": args.loop, "suite": args.suite, "python": sys.version,
                       "counts": counts, "seconds": wall, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
