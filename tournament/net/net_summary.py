"""From runs to cells: per system and case the median of the rounds with its spread, a
cell failed when one of its runs did, the ratios, and the issue's targets met or missed."""

import statistics

from net_clients import run_failures
from net_pyservers import case_key
from net_systems import TARGETS


def stats(vals):
    vals = [v for v in vals if v is not None]
    if not vals:
        return None
    return {"median": statistics.median(vals), "min": min(vals), "max": max(vals),
            "n": len(vals)}


def cell_key(run):
    """The key of a run's cell: the connection count (http), or "SIZExCONNS" (echo)."""
    if run.get("family") == "echo":
        return f"{run['size']}x{run['conns']}"
    if run.get("family") == "pyserver":
        return case_key(run)
    return str(run["conns"])


def run_failed(run):
    return "error" in run or bool(run_failures(run))


def summarize(runs, family="http"):
    """{system: {key: cell}} over the family's runs; the key is cell_key()'s. A cell whose runs
    all passed is {metric: {median, min, max, n}}. A cell with a failed run has no figure at
    all, only "failed": {"runs": failed runs, "of": runs, kind: count...}, the kinds of
    run_failures() summed over its runs, "other" counting runs that failed otherwise."""
    cells, failed = {}, {}
    for r in runs:
        if r.get("family", "http") != family:
            continue
        key = (r["system"], cell_key(r))
        if run_failed(r):
            f = failed.setdefault(key, {"runs": 0})
            f["runs"] += 1
            for k, v in (run_failures(r) or {"other": 1}).items():
                f[k] = f.get(k, 0) + v
            continue
        c = cells.setdefault(r["system"], {}).setdefault(key[1], {})
        for k in ("rps", "p50_us", "p99_us", "server_cpu_pct", "wrk_cpu_pct"):
            c.setdefault(k, []).append(r.get(k))
        if r.get("cpu_us_per_req") is not None:  # the pyserver family's
            c.setdefault("cpu_us_per_req", []).append(r["cpu_us_per_req"])
    out = {s: {n: {k: stats(v) for k, v in m.items()} for n, m in by.items()}
           for s, by in cells.items()}
    for (s, n), f in failed.items():
        clean = len(cells.get(s, {}).get(n, {}).get("rps", []))
        out.setdefault(s, {})[n] = {"failed": dict(f, of=f["runs"] + clean)}
    return out


def cell_failed(cells, system, key):
    """The "failed" entry of a cell (see summarize()), or None."""
    return cells.get(system, {}).get(str(key), {}).get("failed")


def med(cells, system, conns, metric):
    st = cells.get(system, {}).get(str(conns), {}).get(metric)
    return st["median"] if st else None


def half_spread(cells, system, conns, metric):
    st = cells.get(system, {}).get(str(conns), {}).get(metric)
    return (st["max"] - st["min"]) / 2 / st["median"] if st and st["median"] else 0.0


def ratio(a, b):
    return a / b if a is not None and b else None


def evaluate_targets(cells, conns_list):
    out = []
    for label, system, ref, only, kind, bar in TARGETS:
        for conns in conns_list:
            if only and conns not in only:
                continue
            metric = "rps" if kind == "rps" else "p99_us"
            ran = str(conns) in cells.get(system, {})
            failed = bool(cell_failed(cells, system, conns) or
                          (ran and cell_failed(cells, ref, conns)))
            v = ratio(med(cells, system, conns, metric), med(cells, ref, conns, metric))
            met = None if v is None else (v >= bar if kind == "rps" else v <= bar)
            # A miss smaller than the wider relative spread (half of max - min) of the two
            # figures is within the noise of this run.
            noise = max(half_spread(cells, system, conns, metric),
                        half_spread(cells, ref, conns, metric))
            out.append({"target": label, "system": system, "reference": ref,
                        "conns": conns, "kind": kind, "bar": bar, "value": v, "met": met,
                        "failed": failed,
                        "within_spread": bool(v is not None and not met and
                                              abs(v / bar - 1) <= noise)})
    return out
