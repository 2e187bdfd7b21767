"""Runs tornado's own test suite as `python -m tornado.test.runtests` does (its main(): the
same warnings-as-errors, options, and stray-output accounting), recording each test's
outcome to the JSON file named by $EVLOOP_APPS_RESULTS:

  {test id: {"outcome": passed|failed|error|skipped|xfailed|xpassed, "longrepr": text,
             "noise": "N log records, M bytes to stderr" (only when the test made some)}}

runtests.main() fails the whole run when anything logged at INFO or above or wrote to
stderr outside the runner; that check becomes the pseudo-test "tornado.test.runtests:quiet"
here, and "noise" says which tests made the output (as far as it happened while they ran).

  python tornado_suite.py                 # the whole suite (runtests.TEST_MODULES)
  python tornado_suite.py ID [ID ...]     # those test ids only (the rerun of failures)
"""

import json
import logging
import os
import signal
import sys
import traceback
import unittest

import tornado.test.runtests as runtests

RESULTS = os.environ.get("EVLOOP_APPS_RESULTS", "")
QUIET_ID = "tornado.test.runtests:quiet"
results = {}
_noise_in_tests = [0, 0]  # log records and stderr bytes made while a test ran
_current = [""]  # the id of the test running

all = runtests.all  # noqa: A001 -- unittest.main(defaultTest="all") looks it up in __main__


def _log_counter():
    for handler in logging.getLogger().handlers:
        for f in handler.filters:
            if isinstance(f, runtests.LogCounter):
                return f
    return None


def _noise():
    """(log records at INFO and above, bytes written to stderr) so far, as runtests counts."""
    c = _log_counter()
    logged = c.info_count + c.warning_count + c.error_count if c is not None else 0
    return logged, getattr(sys.stderr, "byte_count", 0)


def _text(err):
    return "".join(traceback.format_exception(*err))[-4000:] if err else ""


class RecordingResult(unittest.TextTestResult):
    def _set(self, test, outcome, text=""):
        tid = test.id()
        prev = results.get(tid)
        # the worst outcome of a test and its subtests wins
        if prev is not None and prev["outcome"] in ("failed", "error"):
            return
        results[tid] = {"outcome": outcome, "longrepr": text}

    def startTest(self, test):
        _current[0] = test.id()
        self._noise_before = _noise()
        super().startTest(test)

    def stopTest(self, test):
        super().stopTest(test)
        logged, written = (a - b for a, b in zip(_noise(), self._noise_before))
        _noise_in_tests[0] += logged
        _noise_in_tests[1] += written
        if (logged or written) and test.id() in results:
            results[test.id()]["noise"] = "%d log records, %d bytes to stderr" % (
                logged, written)

    def addSuccess(self, test):
        super().addSuccess(test)
        self._set(test, "passed")

    def addFailure(self, test, err):
        super().addFailure(test, err)
        self._set(test, "failed", _text(err))

    def addError(self, test, err):
        super().addError(test, err)
        if isinstance(test, unittest.TestCase):
            self._set(test, "error", _text(err))
        else:  # a class or module fixture (setUpClass, ...): no test id of its own
            results[str(test)] = {"outcome": "error", "longrepr": _text(err)}

    def addSkip(self, test, reason):
        if reason != runtests.ABT_SKIP_MESSAGE:  # tornado's abstract base tests: not tests
            super().addSkip(test, reason)
            self._set(test, "skipped", reason)

    def addExpectedFailure(self, test, err):
        super().addExpectedFailure(test, err)
        self._set(test, "xfailed", _text(err))

    def addUnexpectedSuccess(self, test):
        super().addUnexpectedSuccess(test)
        self._set(test, "xpassed")

    def addSubTest(self, test, subtest, err):
        super().addSubTest(test, subtest, err)
        if err is not None:
            failed = issubclass(err[0], test.failureException)
            self._set(test, "failed" if failed else "error", str(subtest) + "\n" + _text(err))


_tornado_runner_factory = runtests.test_runner_factory


def runner_factory(stderr):
    base = _tornado_runner_factory(stderr)  # tornado's runner, our result class

    class Runner(base):
        def __init__(self, *args, **kwargs):
            super().__init__(*args, **kwargs)
            self.resultclass = RecordingResult

    return Runner


def write_results():
    if RESULTS:
        with open(RESULTS, "w") as f:
            json.dump(results, f, indent=0, sort_keys=True)


def on_sigterm(signum, frame):
    """run.sh's time limit (timeout(1) sends SIGTERM): the test running is the one that hung."""
    if _current[0]:
        results[_current[0]] = {"outcome": "error", "longrepr": "".join(
            traceback.format_stack(frame)[-12:]) + "killed: the suite ran past its time "
            "limit while this test ran (the stack above)"}
    write_results()
    os._exit(124)


def main():
    signal.signal(signal.SIGTERM, on_sigterm)
    runtests.test_runner_factory = runner_factory
    code = 0
    try:
        runtests.main()
    except SystemExit as e:
        code = e.code
    # main() exits 1 after the tests when there was stray output (and 1 when a test
    # failed); the stray output on its own is the pseudo-test.
    logged, written = _noise()
    if logged or written:
        # "attributed": all of it was made while some test ran (rerunning those reruns it)
        attributed = _noise_in_tests == [logged, written]
        results[QUIET_ID] = {"outcome": "failed", "attributed": attributed, "longrepr":
                             "logged %d records at INFO or above and wrote %d bytes to "
                             "stderr outside the runner%s" % (
                                 logged, written, "" if attributed else
                                 ", some of it between tests")}
    else:
        results[QUIET_ID] = {"outcome": "passed", "longrepr": ""}
    write_results()
    sys.exit(code)


if __name__ == "__main__":
    main()
