"""tests/apps/run.sh's report: compares each suite's per-test outcomes on the stock asyncio
loop and on evloop's, and checks from the loop counts which loop really ran.

  python compare.py rerun-plan RUN_DIR SUITE     # what to run again, one a line
  python compare.py report RUN_DIR SUITE...      # the summary; exit 1 if evloop does worse

RUN_DIR/SUITE/LOOP/ (LOOP: stock, evloop) holds results.json (first run), rerun.json (the
rerun, if any), counts/ and counts-rerun/ (loops-PID.json, from tests/apps/hook/
sitecustomize.py); RUN_DIR/SUITE/version the suite's version. The modules (tornado) or files
(anyio) of the tests that failed on one loop only are run once more on both loops, back to
back (final_outcomes says what the reruns decide). Exit 1 when, for a suite,
evloop passes fewer tests than the stock loop, a test that passes on the stock loop does
not pass on evloop (or is missing there), or the loop counts do not show evloop loops in
the evloop run and none in the stock run. Only stdlib: it runs on the venv's Python.
"""

import glob
import json
import os
import sys

LOOPS = ("stock", "evloop")
GOOD = ("passed", "xfailed", "skipped")  # outcomes that are not a failure
BAD = ("failed", "error", "xpassed", "missing")
QUIET_ID = "tornado.test.runtests:quiet"  # tornado_suite.py's pseudo-test


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def failed(r):
    return r is not None and r["outcome"] in ("failed", "error")


def one_sided(mine, other):
    """The ids that failed in this loop's first run and not in the other loop's: the only
    ones a rerun may change (a test failing on both loops stays failing on both)."""
    ids = {t for t, r in mine.items() if failed(r) and not failed(other.get(t))}
    if QUIET_ID in ids:
        # tornado's stray-output check is rerun with the tests that made the output, when
        # all of it was theirs; otherwise it stays failed.
        ids.discard(QUIET_ID)
        noisy = {t for t, r in mine.items() if "noise" in r}
        if mine[QUIET_ID].get("attributed") and noisy:
            ids |= noisy | {QUIET_ID}
    return ids


def selector(suite, tid):
    """What reruns a test in its context: its module (tornado) or file (anyio), so that a
    failure that depends on the tests before it in the module still shows."""
    if suite == "anyio":
        return tid.split("::")[0]
    if "(" in tid:  # a class fixture: "setUpClass (tornado.test.x_test.SomeTest)"
        tid = tid[tid.index("(") + 1:].rstrip(")")
    parts = tid.split(".")
    if parts[:2] == ["tornado", "test"]:
        return ".".join(parts[:3])
    return ".".join(parts[:2]) + ".doctests"  # a doctest: runtests loads the module's


def rerun_plan(run_dir, suite):
    """The modules or files to run again on both loops: those of the one-sided failures."""
    first = [load(os.path.join(run_dir, suite, loop, "results.json")) or {} for loop in LOOPS]
    ids = one_sided(first[0], first[1]) | one_sided(first[1], first[0])
    return sorted({selector(suite, t) for t in ids if t != QUIET_ID})


def final_outcomes(first, rerun):
    """{loop: {id: (outcome, how)}} from the first runs and the reruns ({loop: results}).
    A one-sided failure's outcome on the loop that failed is the rerun's when that passed
    (how "rerun": flaky), else the first run's (how "twice"); if the rerun failed on the
    other loop too, that loop's outcome is that failure (how "when rerun"): it is then a
    failure on both loops, as a machine too loaded for a test's timing makes it."""
    out = {loop: {t: (r["outcome"], "") for t, r in first[loop].items()} for loop in LOOPS}
    for i, bad in enumerate(LOOPS):
        good = LOOPS[1 - i]
        for tid in one_sided(first[bad], first[good]):
            again = rerun[bad].get(tid)
            if again is None:
                continue  # not run again (a doctest, a class fixture): the first run's
            if not failed(again):
                out[bad][tid] = (again["outcome"], "rerun")
                continue
            out[bad][tid] = (first[bad][tid]["outcome"], "twice")
            other = rerun[good].get(tid)
            if failed(other):
                out[good][tid] = (other["outcome"], "when rerun")
    return out


def loop_counts(counts_dir):
    total, procs = {}, 0
    for path in glob.glob(os.path.join(counts_dir, "loops-*.json")):
        data = load(path)
        if not data:
            continue
        procs += 1
        for name, n in data["loops"].items():
            total[name] = total.get(name, 0) + n
    return total, procs


def is_evloop(name):
    return name.split(".")[0] == "evloop"


def excerpt(text, lines=14):
    text = (text or "").rstrip()
    return "\n".join("      | " + ln for ln in text.splitlines()[-lines:])


def tally(final):
    keys = ("passed", "failed", "error", "skipped", "xfailed", "xpassed")
    t = {k: 0 for k in keys}
    for outcome, _ in final.values():
        t[outcome] = t.get(outcome, 0) + 1
    t["rerun"] = sum(1 for o, how in final.values() if how == "rerun")
    return t


def report_suite(run_dir, suite):
    """Prints one suite's summary; returns (ok, summary dict)."""
    ok = True
    problems = []
    data = {}
    for loop in LOOPS:
        d = os.path.join(run_dir, suite, loop)
        first = load(os.path.join(d, "results.json")) or {}
        counts, procs = loop_counts(os.path.join(d, "counts"))
        rerun_counts, _ = loop_counts(os.path.join(d, "counts-rerun"))
        data[loop] = {"first": first, "rerun": load(os.path.join(d, "rerun.json")) or {},
                      "counts": counts, "procs": procs, "rerun_counts": rerun_counts}
        if not first:
            problems.append("%s: no results on the %s loop (the run crashed or timed out: "
                            "see %s/log)" % (suite, loop, d))
    finals = final_outcomes({loop: data[loop]["first"] for loop in LOOPS},
                            {loop: data[loop]["rerun"] for loop in LOOPS})
    for loop in LOOPS:
        data[loop]["final"] = finals[loop]
    try:
        with open(os.path.join(run_dir, suite, "version")) as f:
            version = f.read().strip()
    except OSError:
        version = "?"

    print("=== %s %s" % (suite, version))
    print("  %-7s %7s %7s %6s %8s %8s %8s %20s" % (
        "loop", "passed", "failed", "error", "skipped", "xfailed", "xpassed",
        "passed on rerun"))
    tallies = {}
    for loop in LOOPS:
        t = tallies[loop] = tally(data[loop]["final"])
        print("  %-7s %7d %7d %6d %8d %8d %8d %20d" % (
            loop, t["passed"], t["failed"], t["error"], t["skipped"], t["xfailed"],
            t["xpassed"], t["rerun"]))

    # Which loop ran: the classes of the loops created, in every process of the run.
    for loop in LOOPS:
        counts, procs = data[loop]["counts"], data[loop]["procs"]
        shown = ", ".join("%s %d" % kv for kv in sorted(counts.items(), key=lambda kv: -kv[1]))
        print("  loops created, %s run (%d processes): %s" % (loop, procs, shown or "none"))
        for what, c in (("run", counts), ("rerun", data[loop]["rerun_counts"])):
            ours = sum(n for name, n in c.items() if is_evloop(name))
            total = sum(c.values())
            if what == "rerun" and not total:
                continue  # no rerun, or one of tests that make no loop
            if loop == "stock" and (ours or not total):
                problems.append("%s: the stock %s created %d evloop loops of %d" % (
                    suite, what, ours, total))
            # The evloop run may create a few stock loops where a test asks for one by
            # name or installs a policy of its own; the suite must have run on evloop's.
            if loop == "evloop" and (not ours or ours < 0.9 * total):
                problems.append("%s: the evloop %s created %d evloop loops of %d" % (
                    suite, what, ours, total))

    s, e = data["stock"]["final"], data["evloop"]["final"]
    worse, better, both = [], [], []
    for tid in sorted(set(s) | set(e)):
        so, sh = s.get(tid, ("missing", ""))
        eo, eh = e.get(tid, ("missing", ""))
        if so in ("passed", "xfailed") and eo not in ("passed", "xfailed"):
            worse.append(tid)  # also a pass that evloop skips or never ran
        elif so == "skipped" and eo in ("failed", "error", "xpassed"):
            worse.append(tid)
        elif so in BAD and eo in GOOD:
            better.append(tid)
        elif so in BAD and eo in BAD:
            both.append(tid)

    def describe(tid):
        parts = []
        for loop in LOOPS:
            outcome, how = data[loop]["final"].get(tid, ("missing", ""))
            parts.append("%s %s%s" % (loop, outcome, " (%s)" % how if how else ""))
        return ", ".join(parts)

    def why(loop, tid):
        r = data[loop]["rerun"].get(tid) or data[loop]["first"].get(tid) or {}
        text = r.get("longrepr", "")
        if "noise" in r:
            text += "\n(stray output while it ran: %s)" % r["noise"]
        return text

    print("  worse on evloop (passes on stock, not on evloop): %d" % len(worse))
    for tid in worse:
        print("    %s: %s" % (tid, describe(tid)))
        print(excerpt(why("evloop", tid)))
    if better:
        print("  better on evloop (fails on stock, passes on evloop): %d" % len(better))
        for tid in better:
            print("    %s: %s" % (tid, describe(tid)))
    if both:
        print("  failing on both loops (environment; not counted against evloop): %d" %
              len(both))
        for tid in both:
            first_line = (why("evloop", tid).strip().splitlines() or [""])[-1][:110]
            print("    %s: %s: %s" % (tid, describe(tid), first_line))
    for loop in LOOPS:
        flaky = sorted(t for t, (_, how) in data[loop]["final"].items() if how == "rerun")
        if flaky:
            print("  flaky on %s (failed in the full run, passed when its module ran again): %d" % (
                loop, len(flaky)))
            for tid in flaky:
                first_line = (data[loop]["first"][tid].get("longrepr", "").strip()
                              .splitlines() or [""])[-1][:110]
                print("    %s: %s" % (tid, first_line))

    if tallies["evloop"]["passed"] < tallies["stock"]["passed"]:
        problems.append("%s: evloop passes %d tests, the stock loop %d" % (
            suite, tallies["evloop"]["passed"], tallies["stock"]["passed"]))
    if worse:
        problems.append("%s: %d tests pass on the stock loop and not on evloop" % (
            suite, len(worse)))
    for p in problems:
        print("  FAIL: " + p)
    ok = not problems
    summary = {
        "version": version, "ok": ok, "problems": problems,
        "tally": tallies, "worse": worse, "better": better, "both": both,
        "loops": {loop: data[loop]["counts"] for loop in LOOPS},
        "passing": {loop: sorted(t for t, (o, _) in data[loop]["final"].items()
                                 if o == "passed") for loop in LOOPS},
        "flaky": {loop: sorted(t for t, (_, h) in data[loop]["final"].items() if h == "rerun")
                  for loop in LOOPS},
    }
    return ok, summary


def main(argv):
    if len(argv) == 4 and argv[1] == "rerun-plan":
        for sel in rerun_plan(argv[2], argv[3]):
            print(sel)
        return 0
    if len(argv) >= 4 and argv[1] == "report":
        run_dir, suites = argv[2], argv[3:]
        ok, summaries = True, {}
        for suite in suites:
            suite_ok, summaries[suite] = report_suite(run_dir, suite)
            ok = ok and suite_ok
        with open(os.path.join(run_dir, "summary.json"), "w") as f:
            json.dump(summaries, f, indent=1, sort_keys=True)
        print("=== %s: evloop %s the stock loop (details: %s)" % (
            "OK" if ok else "FAIL", "does as well as" if ok else "does worse than",
            os.path.join(run_dir, "summary.json")))
        return 0 if ok else 1
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
