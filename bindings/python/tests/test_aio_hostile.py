"""Hostile-input fuzzing of evloop's asyncio loop against the stock loop (hostile.py): seeded
scenarios of loop API calls with hostile arguments and misuse, each in worker processes on
both loops, plainly, under -X dev and under PYTHONMALLOC=debug. Fails on a crash, a hang or a
divergence that hostile.KNOWN_DIVERGENCES does not explain, with the shrunk scenario and the
command that replays it.

Environment:
  EVLOOP_HOSTILE_SEEDS  how many scenarios in the plain run (default DEFAULT_SEEDS); the -X dev
                        and PYTHONMALLOC=debug runs take a quarter of that each
  EVLOOP_HOSTILE_START  the first seed (default 0)
The long run by hand: python hostile.py --seeds 5000 --jobs 2 [--dev] [--malloc-debug].
"""

from __future__ import annotations

import os

import pytest

import hostile

DEFAULT_SEEDS = 400


def _run(count: int, start: int, dev: bool, malloc_debug: bool) -> None:
    failed = hostile.run_seeds(list(range(start, start + count)), dev, malloc_debug, jobs=2,
                               shrink_s=20.0)
    assert not failed, f"{len(failed)} of {count} scenarios failed:\n" + \
        "\n".join(r.report() for r in failed)


def _count(share: int = 1) -> int:
    return max(1, int(os.environ.get("EVLOOP_HOSTILE_SEEDS", DEFAULT_SEEDS)) // share)


def _start() -> int:
    return int(os.environ.get("EVLOOP_HOSTILE_START", "0"))


def test_hostile_scenarios_agree_with_the_stock_loop():
    _run(_count(), _start(), dev=False, malloc_debug=False)


def test_hostile_scenarios_agree_under_dev_mode():
    # Other seeds than the plain run's: more scenarios seen per suite run.
    _run(_count(4), _start() + 1_000_000, dev=True, malloc_debug=False)


def test_hostile_scenarios_agree_under_the_debug_allocator():
    _run(_count(4), _start() + 2_000_000, dev=False, malloc_debug=True)


@pytest.mark.parametrize("op,kind", [("_abort", "crash"), ("_hang", "hang")])
def test_the_harness_reports_a_crash_and_a_hang_with_a_shrunk_reproducer(op, kind):
    steps = [["call_soon", "ok", False, "default"], [op], ["run", "sleep0"]]
    pair = (hostile.Worker("stock", False, False), hostile.Worker("evloop", False, False))
    try:
        res = hostile.check(steps, pair, deadline=3.0)
    finally:
        for w in pair:
            w.stop()
    assert res is not None and res.kind == kind
    small = hostile.shrink(res, budget_s=60.0, deadline=3.0)
    assert small.steps == [[op]] and "--steps" in small.replay()


def test_the_comparator_knows_each_documented_divergence_and_nothing_more():
    """Each KNOWN_DIVERGENCES entry is a difference the loops still show (if one stops
    differing, its entry can go), and an undocumented difference is reported."""
    def both(steps):
        out = []
        for k in ("stock", "evloop"):
            w = hostile.Worker(k, False, False)
            try:
                how, got = w.ask(steps)
            finally:
                w.stop()
            assert how == "ok", got
            out.append(got)
        return out

    # convert-at-call: a str when fails at the call on evloop, later on the stock loop.
    steps = [["call_at", "str", "ok", False, "default"], ["run", "sleep0"]]
    stock, ours = both(steps)
    assert stock[0] == "ok" and ours[0] == "TypeError"
    assert hostile.compare(steps, stock, ours) is None
    # nan-timer: a NaN timer scheduled behind a far one runs at once on evloop only (the
    # stock loop's heap leaves it below the far one).
    steps = [["call_at", "rel:3600", "ok", False, "default"],
             ["call_at", "nan", "ok", False, "default"], ["run", "sleep0"]]
    stock, ours = both(steps)
    assert stock[2] != ours[2]
    assert hostile.compare(steps, stock, ours) is None
    # Anything else is reported.
    steps = [["call_soon", "ok", False, "default"], ["run", "sleep0"]]
    stock, _ = both(steps)
    forged = list(stock)
    forged[0] = "TypeError"
    assert hostile.compare(steps, stock, forged) is not None
    assert set(hostile.KNOWN_DIVERGENCES) == {"convert-at-call", "nan-timer"}


def test_the_generator_makes_every_kind_of_step():
    ops, times, cbs, fds = set(), set(), set(), set()
    for seed in range(500):
        for s in hostile.generate(seed):
            ops.add(s[0])
            if s[0] in ("call_later", "call_at"):
                times.add(s[1])
            if s[0] == "fd":
                fds.add(s[2])
            if s[0].startswith("call_"):
                cbs.add(s[-3])
    assert ops == {"call_soon", "call_soon_threadsafe", "call_later", "call_at", "run", "fd",
                   "sock", "write", "executor", "shutdown_executor", "debug", "stop", "close"}
    assert times == set(hostile.TIMES) and fds == set(hostile.FDS)
    assert cbs == set(hostile.CALLBACKS)
