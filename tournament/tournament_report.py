"""The tournament's figures: benchmark names and metrics, the medians and ratios across
rounds (summary.json), the targets, the adaptive-against-fixed comparison, the tables
and report.md. Reads google-benchmark's JSON; runs nothing (tournament_run.py does).
Python 3 standard library only.
"""
import json
import os
import platform
import re
import statistics
import subprocess
import sys

from net.machine_load import BUSY

# tournament/ (this file is tournament/tournament_report.py): the network family's command
# (tournament/net/run_net.py), whose section joins the report, is found from there.
TOURNAMENT_DIR = os.path.dirname(os.path.abspath(__file__))

# google-benchmark appends these to the name we give; they are not part of our naming.
NAME_SUFFIX = re.compile(r"/(min_time:[0-9.]+|manual_time|real_time|iterations:\d+)")
BASELINES = ["libuv", "libev"]
FLOORS = ["floor-spin", "floor-futex"]
TUNED_TAG = "tuned"  # the harness tags a profile=PATH target "@tuned"
PASS_BAR = 1.10      # issue 5: the adaptive default within 10% of the best fixed setting
# IdleCost figures sit near 0, where "within 10%" means nothing: there the adaptive default
# passes when it burns at most this many more points of a core than the best fixed setting.
IDLE_TIE_PT = 0.2

# The targets (issue 11, which keeps issue 5's latency and idle bars): (label, row, metric,
# kind, bar, baseline[, variant[, baseline row]]). kind "ratio": evloop's median / the
# baseline's <= bar, the baseline read from the same row or from `baseline row` (the batch
# submit is judged against libuv's per-task flood); "backend": the io_uring column / the
# same variant's epoll column <= bar; "absolute": evloop's median itself <= bar. `variant`
# ("arena", "chunk") limits a target to that ingress variant's columns.
TARGETS = [
    ("PingPong (flood), arena, vs libuv", "PingPong", "ns_per_op", "ratio", 0.30, "libuv",
     "arena"),
    ("BurstSubmit (1000), arena, vs libuv", "BurstSubmit", "ns_per_op", "ratio", 0.35,
     "libuv", "arena"),
    ("MultiProducer (10), arena, vs libuv", "MultiProducer", "ns_per_op", "ratio", 0.50,
     "libuv", "arena"),
    ("MultiProducerContention (100), arena, vs libuv", "MultiProducerContention",
     "ns_per_op", "ratio", 0.60, "libuv", "arena"),
    ("BatchSubmit (64 per batch), vs libuv's flood", "BatchSubmit/batch:64", "ns_per_op",
     "ratio", 0.20, "libuv", None, "PingPong"),
    ("PingPong (flood), chunk, vs libuv", "PingPong", "ns_per_op", "ratio", 0.80, "libuv",
     "chunk"),
    # The seeds' Go "mutex + chunk pool" variant: 88 ns per task in its flood (issue 40).
    ("PingPong (flood), chunk, the seeds' 88 ns", "PingPong", "ns_per_op", "absolute", 88.0,
     None, "chunk"),
    ("BurstSubmit (1000), chunk, vs libuv", "BurstSubmit", "ns_per_op", "ratio", 0.80,
     "libuv", "chunk"),
    ("MultiProducer (10), chunk, vs libuv", "MultiProducer", "ns_per_op", "ratio", 0.80,
     "libuv", "chunk"),
    ("PingPongLatency hot, vs libuv", "PingPongLatency/hot", "ns_per_op", "ratio", 0.25,
     "libuv"),
    ("PingPongLatency hot, vs libev", "PingPongLatency/hot", "ns_per_op", "ratio", 0.25,
     "libev"),
    ("PingPongLatency hot, vs the cache-line floor", "PingPongLatency/hot", "ns_per_op",
     "ratio", 1.50, "floor-spin"),
    ("PingPongLatency blocking, vs libuv", "PingPongLatency/blocking", "ns_per_op", "ratio",
     0.10, "libuv"),
    ("PingPongLatency blocking, vs libev", "PingPongLatency/blocking", "ns_per_op", "ratio",
     0.10, "libev"),
    ("PingPongLatency cold, vs libuv", "PingPongLatency/cold", "ns_per_op", "ratio", 1.0,
     "libuv"),
    ("ReadinessRoundTrip, vs libuv", "ReadinessRoundTrip", "ns_per_op", "ratio", 1.0,
     "libuv"),
    ("ReadinessRoundTrip, io_uring vs epoll", "ReadinessRoundTrip", "ns_per_op", "backend",
     1.0, None),
    ("Timers/million, vs libuv", "Timers/million", "ns_per_op", "ratio", 0.7, "libuv"),
    ("IdleCost, % of a core 10-60 ms after work", "IdleCost", "idle_cpu_pct", "absolute",
     2.0, None),
    ("AllocsPerSubmit, heap allocations per submit", "AllocsPerSubmit", "allocs_per_op",
     "absolute", 0.0, None),
]


# ---------------------------------------------------------------- names and metrics

def parse_name(name):
    """'PingPongLatency/evloop-arena/epoll/hot/min_time:0.1/manual_time' ->
    ('PingPongLatency', 'PingPongLatency/hot', 'evloop-arena/epoll')."""
    parts = NAME_SUFFIX.sub("", name).split("/")
    family, system = parts[0], parts[1]
    if system.startswith("evloop") and len(parts) > 2:
        column, rest = system + "/" + parts[2], parts[3:]
    else:
        column, rest = system, parts[2:]
    return family, "/".join([family] + rest), column


def is_evloop(col):
    return col.startswith("evloop")


def is_tagged(col):
    return "@" in col


def tag_of(col):
    """'evloop-arena@budget64/epoll' -> 'budget64'; '' when untagged."""
    system = col.split("/", 1)[0]
    return system.split("@", 1)[1] if "@" in system else ""


def is_tuned(col):
    return tag_of(col) == TUNED_TAG


def is_fixed(col):
    return is_evloop(col) and is_tagged(col) and not is_tuned(col)


def untagged(col):
    """'evloop-arena@budget64/epoll' -> 'evloop-arena/epoll'."""
    system, _, backend = col.partition("/")
    return system.split("@")[0] + ("/" + backend if backend else "")


def short(col):
    return col.replace("evloop-", "")


def metrics_for(row, cols):
    """(counter, label) pairs that judge a row; all lower-is-better."""
    family = row.split("/")[0]
    if family == "IdleCost":
        return [("idle_cpu_pct", "% core, 10-60 ms idle"),
                ("idle_cpu_pct_first10ms", "% core, first 10 ms")]
    if row == "Timers/lateness":
        return [("late_p50_ns", "lateness p50 ns"), ("late_p99_ns", "lateness p99 ns")]
    if family == "AllocsPerSubmit":
        return [("allocs_per_op", "allocs/submit")]
    out = [("ns_per_op", "ns/op")]
    if family == "InternalPriority":
        out.append(("externals_first", "externals run first"))
    if any("p50_ns" in m for m in cols.values()):
        out += [("p50_ns", "p50 ns"), ("p99_ns", "p99 ns")]
    return out


# ---------------------------------------------------------------- aggregation

def load_rounds(paths):
    """-> (data[row][col][metric] = [value per round], errors, context of round 1)."""
    data, errors, context = {}, [], {}
    for path in paths:
        with open(path) as f:
            doc = json.load(f)
        context = context or doc.get("context", {})
        for b in doc.get("benchmarks", []):
            if b.get("run_type", "iteration") != "iteration":
                continue
            _, row, col = parse_name(b["name"])
            if b.get("error_occurred"):
                errors.append((row, col, b.get("error_message", "")))
                continue
            cell = data.setdefault(row, {}).setdefault(col, {})
            for k, v in b.items():
                if isinstance(v, (int, float)) and not isinstance(v, bool):
                    cell.setdefault(k, []).append(float(v))
    return data, errors, context


def median(vals):
    return statistics.median(vals) if vals else None


def spread(vals):
    """(max - min) / |median| across rounds: the noise of one figure."""
    m = median(vals)
    if not vals or not m:
        return None
    return (max(vals) - min(vals)) / abs(m)


# Below these, a figure is noise-level on every system and a ratio would only amplify it.
NEGLIGIBLE = {"idle_cpu_pct": 0.1, "idle_cpu_pct_first10ms": 0.1}
# Judged on their own (the target is 0), never as a ratio to a baseline.
ABSOLUTE = ("allocs_per_op",)


def ratio(a, b, metric=None):
    if a is None or b is None or b <= 0 or a < 0:
        return None
    floor = NEGLIGIBLE.get(metric)
    if floor is not None and a < floor and b < floor:
        return None
    return a / b


def summarize(data):
    """Medians, spreads and ratios, as summary.json holds them."""
    rows = []
    for row in data:
        cols = data[row]
        for metric, label in metrics_for(row, cols):
            med = {c: median(cols[c].get(metric, [])) for c in cols}
            med = {c: v for c, v in med.items() if v is not None}
            if not med:
                continue
            spr = {c: spread(cols[c].get(metric, [])) for c in med}
            ratios = {}
            for c in med:
                if not is_evloop(c) or metric in ABSOLUTE:
                    continue
                ratios[c] = {base: ratio(med[c], med.get(base), metric)
                             for base in BASELINES + FLOORS if base in med}
            rows.append({"row": row, "metric": metric, "label": label, "median": med,
                         "spread": spr, "ratios": ratios})
    return rows


# ---------------------------------------------------------------- formatting

def fmt(v):
    if v is None:
        return "-"
    a = abs(v)
    if 0 < a < 0.005:
        return f"{v:.1e}"  # rare events per op (an allocation in 10^5 submits) stay visible
    if a >= 1e6:
        return f"{v / 1e6:.2f}M"
    if a >= 1e4:
        return f"{v / 1e3:.1f}k"
    if a >= 100:
        return f"{v:.0f}"
    if a >= 10:
        return f"{v:.1f}"
    return f"{v:.2f}"


def fmt_ratio(r, bar=None):
    """bar: a pass bar this ratio is judged against; near it, one more digit shows which
    side it lies on."""
    if r is None:
        return "-"
    if bar is not None and f"{r:.2f}" == f"{bar:.2f}":
        return f"{r:.3f}x"
    return f"{r:.2f}x"


def evloop_columns(summary):
    cols = []
    for s in summary:
        for c in s["median"]:
            if is_evloop(c) and not is_tagged(c) and c not in cols:
                cols.append(c)
    return sorted(cols)


def ratio_table(summary, markdown):
    """Rows: family/metric; columns: libuv, libev medians, then per evloop column its
    median and its ratios to libuv and libev."""
    ecols = evloop_columns(summary)
    head = ["benchmark", "metric", "libuv", "libev"]
    for c in ecols:
        head += [short(c), "/uv", "/ev"]
    lines = []
    for s in summary:
        med = s["median"]
        if s["metric"] in ABSOLUTE:
            continue
        cells = [s["row"], s["label"], fmt(med.get("libuv")), fmt(med.get("libev"))]
        for c in ecols:
            r = s["ratios"].get(c, {})
            cells += [fmt(med.get(c)), fmt_ratio(r.get("libuv")), fmt_ratio(r.get("libev"))]
        lines.append(cells)
    return render(head, lines, markdown)


def floor_table(summary, markdown):
    ecols = evloop_columns(summary)
    head = ["benchmark", "metric"] + FLOORS
    for c in ecols:
        head += [short(c), "/spin", "/futex"]
    lines = []
    for s in summary:
        med = s["median"]
        if not any(f in med for f in FLOORS) or s["metric"] in ABSOLUTE:
            continue
        cells = [s["row"], s["label"]] + [fmt(med.get(f)) for f in FLOORS]
        for c in ecols:
            r = s["ratios"].get(c, {})
            cells += [fmt(med.get(c)), fmt_ratio(r.get("floor-spin")),
                      fmt_ratio(r.get("floor-futex"))]
        lines.append(cells)
    return render(head, lines, markdown) if lines else ""


def sweep_rows(summary, headline=True):
    """Per benchmark row, metric and evloop column that ran at fixed settings: the
    adaptive default, the tuned column, the best fixed setting and adaptive / best.
    headline: the first metric of each row (ns/op mostly; both IdleCost figures);
    otherwise the other metrics."""
    out = []
    seen = set()
    for s in summary:
        first = s["row"] not in seen or s["row"].startswith("IdleCost")
        seen.add(s["row"])
        if first != headline:
            continue
        med, spr = s["median"], s["spread"]
        groups = {}
        for c in med:
            if is_evloop(c) and is_tagged(c):
                groups.setdefault(untagged(c), []).append(c)
        for base, tagged in sorted(groups.items()):
            fixed = [c for c in tagged if is_fixed(c)]
            tuned = next((c for c in tagged if is_tuned(c)), None)
            if base not in med or not (fixed or tuned):
                continue
            best = min(fixed, key=lambda c: med[c]) if fixed else None
            a, b = med[base], (med[best] if best else None)
            r = ratio(a, b)
            tie = IDLE_TIE_PT if s["metric"] in NEGLIGIBLE else None
            negligible = tie is not None and b is not None and a - b <= tie
            ok = negligible or (r is not None and r <= PASS_BAR)
            # A miss by less than the figures' own noise (half the spread across rounds of
            # either) is flagged as such: the best of several noisy medians is biased low.
            noise = max((spr.get(base) or 0), (spr.get(best) or 0) if best else 0) / 2
            out.append({"row": s["row"], "metric": s["metric"], "label": s["label"],
                        "column": base, "adaptive": a,
                        "tuned": med.get(tuned) if tuned else None,
                        "best_fixed": b, "setting": tag_of(best) if best else "-",
                        "adaptive_over_best": r,
                        "points_over_best": a - b if tie is not None and b is not None
                        else None,
                        "tuned_over_best": ratio(med[tuned], b) if tuned else None,
                        "fixed_ran": bool(fixed),
                        "pass": ok, "negligible": negligible and (r is None or r > PASS_BAR),
                        "within_noise": not ok and r is not None and r <= PASS_BAR + noise})
    return out


def sweep_table(rows, markdown):
    """sweep_rows() as a table."""
    with_tuned = any(r["tuned"] is not None for r in rows)
    head = ["benchmark", "metric", "column", "adaptive"]
    head += ["tuned"] if with_tuned else []
    head += ["best fixed", "setting", "adaptive/best"]
    head += ["tuned/best"] if with_tuned else []
    head += [f"<= {PASS_BAR:.2f}"]
    lines = []
    for r in rows:
        mark = "pass" if r["pass"] else ("miss (within noise)" if r["within_noise"] else
                                         ("**miss**" if markdown else "MISS"))
        if r["negligible"]:
            mark = f"pass (within {IDLE_TIE_PT} pt)"
        if not r["fixed_ran"]:
            mark = "-"
        cells = [r["row"], r["label"], short(r["column"]), fmt(r["adaptive"])]
        cells += [fmt(r["tuned"])] if with_tuned else []
        over = fmt_ratio(r["adaptive_over_best"], PASS_BAR)
        if r["points_over_best"] is not None and r["adaptive_over_best"] is None:
            over = f"{r['points_over_best']:+.2f} pt"
        cells += [fmt(r["best_fixed"]), r["setting"], over]
        cells += [fmt_ratio(r["tuned_over_best"], PASS_BAR)] if with_tuned else []
        cells.append(mark)
        lines.append(cells)
    return render(head, lines, markdown) if lines else ""


def target_cells(t, summary_by_key, ecols):
    """{evloop column: value} for one target of TARGETS."""
    label, row, metric, kind, bar, base = t[:6]
    variant = t[6] if len(t) > 6 else None
    base_row = t[7] if len(t) > 7 else row
    s = summary_by_key.get((row, metric))
    b = summary_by_key.get((base_row, metric))
    if not s:
        return {}
    med = s["median"]
    base_med = b["median"] if b else {}
    out = {}
    for c in ecols:
        if c not in med or (variant and not c.startswith(f"evloop-{variant}")):
            continue
        if kind == "ratio":
            out[c] = ratio(med[c], base_med.get(base))
        elif kind == "backend":
            system, _, backend = c.partition("/")
            if backend != "io_uring":
                continue
            out[c] = ratio(med[c], med.get(system + "/epoll"))
        else:
            out[c] = med[c]
    return {c: v for c, v in out.items() if v is not None}


def target_rows(summary):
    """The targets against this run: per target, the figure of every evloop column,
    whether each meets the bar, and the verdict."""
    ecols = evloop_columns(summary)
    by_key = {(s["row"], s["metric"]): s for s in summary}
    rows = []
    for t in TARGETS:
        label, row, metric, kind, bar, base = t[:6]
        cells = target_cells(t, by_key, ecols)
        met = {c: v <= bar for c, v in cells.items()}
        missed = [c for c in cells if not met[c]]
        rows.append({"target": label, "row": row, "metric": metric, "kind": kind, "bar": bar,
                     "baseline": base, "values": cells, "met": met,
                     "verdict": ("not measured" if not cells else
                                 "met" if not missed else "missed"),
                     "missed": missed})
    return rows, ecols


def fmt_target_value(kind, metric, v, bar):
    if kind == "absolute":
        return fmt(v) + ("%" if metric == "idle_cpu_pct" else "")
    return fmt_ratio(v, bar)


def fmt_bar(kind, metric, bar):
    if kind == "absolute":
        return ("= 0" if bar == 0 else "<= " + fmt(bar)) + \
            ("%" if metric == "idle_cpu_pct" else "")
    return f"<= {bar:.2f}x"


def miss_amount(kind, metric, v, bar):
    """How far a figure misses its bar."""
    if kind == "absolute":
        return f"+{v - bar:.2f} pt" if metric == "idle_cpu_pct" else f"+{fmt(v - bar)}"
    return f"+{(v / bar - 1) * 100:.0f}%"


def targets_table(rows, ecols, markdown):
    head = ["target", "bar"] + [short(c) for c in ecols] + ["verdict"]
    lines = []
    for r in rows:
        cells = [r["target"], fmt_bar(r["kind"], r["metric"], r["bar"])]
        for c in ecols:
            v = r["values"].get(c)
            if v is None:
                cells.append("-")
                continue
            text = fmt_target_value(r["kind"], r["metric"], v, r["bar"])
            if not r["met"][c] and r["bar"] != 0:  # against 0 the figure is the miss
                text += " (" + miss_amount(r["kind"], r["metric"], v, r["bar"]) + ")"
            cells.append(text)
        if r["verdict"] == "missed":
            verdict = f"missed in {len(r['missed'])} of {len(r['values'])}"
            verdict = f"**{verdict}**" if markdown else verdict.upper()
        elif r["verdict"] == "met":
            verdict = f"met ({len(r['values'])} of {len(r['values'])})"
        else:
            verdict = r["verdict"]
        cells.append(verdict)
        lines.append(cells)
    return render(head, lines, markdown)


def medians_table(summary, markdown):
    cols = []
    for s in summary:
        for c in s["median"]:
            if c not in cols and not is_tagged(c):
                cols.append(c)
    order = {c: i for i, c in enumerate(sorted(cols, key=lambda c: (not is_evloop(c), c)))}
    cols = sorted(cols, key=order.get)
    head = ["benchmark", "metric"] + [short(c) for c in cols]
    lines = []
    for s in summary:
        cells = [s["row"], s["label"]]
        for c in cols:
            v, sp = s["median"].get(c), s["spread"].get(c)
            cells.append(fmt(v) + (f" ±{sp * 50:.0f}%" if sp is not None and v else ""))
        lines.append(cells)
    return render(head, lines, markdown)


def counters_table(data, markdown):
    """What ns/op alone hides, for the hand-off families: wake syscalls, loop sleeps,
    tasks per drain and loop CPU per op (medians)."""
    keys = [("wakes_per_op", "wakes/op"), ("loop_sleeps_per_op", "sleeps/op"),
            ("tasks_per_drain", "tasks/drain"), ("loop_cpu_ns_per_op", "loop cpu ns/op"),
            ("spin_hits_per_op", "spin hits/op")]
    families = ("PingPong", "PingPongLatency", "MultiProducer", "BurstSubmit",
                "MicroWakeupSyscall", "ReadinessRoundTrip")
    head = ["benchmark", "system"] + [k[1] for k in keys]
    lines = []
    for row in data:
        if row.split("/")[0] not in families:
            continue
        for col in sorted(data[row]):
            if is_tagged(col):
                continue
            cell = data[row][col]
            lines.append([row, short(col)] + [fmt(median(cell.get(k, []))) for k, _ in keys])
    return render(head, lines, markdown)


def render(head, lines, markdown):
    if markdown:
        out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        out += ["| " + " | ".join(str(c) for c in line) + " |" for line in lines]
        return "\n".join(out)
    widths = [max(len(str(x)) for x in col) for col in zip(head, *lines)] if lines else []
    out = ["  ".join(str(h).ljust(w) for h, w in zip(head, widths))]
    out.append("  ".join("-" * w for w in widths))
    out += ["  ".join(str(c).ljust(w) for c, w in zip(line, widths)) for line in lines]
    return "\n".join(out)


# ---------------------------------------------------------------- network family (net/)
# tournament/net/run_net.py writes <out>/net/net.json (tournament_run.run_net_family), and its
# section for this report and its headline beside it.

def net_texts(outdir):
    """(the report's section, the console's headline) of the network family in outdir/net,
    as lists of lines, from the files run_net.py writes beside net.json (it writes them
    again from net.json when a run from before they existed lacks them); ([], []) when
    the family did not run."""
    net = os.path.join(outdir, "net")
    paths = [os.path.join(net, n) for n in ("tournament_section.md", "headline.txt")]
    if not os.path.exists(os.path.join(net, "net.json")):
        return [], []
    if not all(os.path.exists(p) for p in paths):
        subprocess.run([sys.executable, os.path.join(TOURNAMENT_DIR, "net", "run_net.py"),
                        "--from-json", os.path.join(net, "net.json"), "--out", net],
                       stdout=subprocess.DEVNULL, check=False)
    try:
        return tuple(open(p).read().splitlines() for p in paths)
    except OSError as e:
        print(f"warning: no network section: {e}", file=sys.stderr, flush=True)
        return [], []


# ---------------------------------------------------------------- report

def machine_info(context):
    model = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    model = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {"cpu": model, "cpus": context.get("num_cpus", os.cpu_count()),
            "kernel": context.get("kernel", platform.platform()),
            "libuv": context.get("libuv_version", "?"),
            "libev": context.get("libev_version", "?"),
            # The fixed-setting and tuned targets are the sweep's, described with it.
            "targets": ",".join(t for t in context.get("evloop_targets", "").split(",")
                                if not is_tagged(t)),
            "host": context.get("host_name", platform.node())}


def sweep_section(summary, meta):
    """The report's "Adaptive defaults against fixed settings" section, as lines."""
    rows = sweep_rows(summary)
    if not rows:
        return []
    md = ["## Adaptive defaults against fixed settings", ""]
    sw = meta.get("sweep") or {}
    judged = [r for r in rows if r["fixed_ran"]]
    passed = sum(r["pass"] for r in judged)
    def by(r):
        if r["adaptive_over_best"] is None and r["points_over_best"] is not None:
            return f"{r['points_over_best']:+.2f} pt"
        return fmt_ratio(r["adaptive_over_best"], PASS_BAR)

    misses = [f"{r['row']} {short(r['column'])} ({by(r)})"
              for r in judged if not r["pass"] and not r["within_noise"]]
    noisy = sum(not r["pass"] and r["within_noise"] for r in judged)
    md.append("Issue 5: the adaptive default must be within 10% of the best fixed setting "
              "on every family. Every fixed setting ran in the same process and round as "
              "the adaptive column, its order rotated with the others"
              + (f"; the sweep ({sw.get('mode')}): "
                 f"`{';'.join(sw.get('configs', []))}` on {sw.get('backend')}, one knob "
                 "fixed at a time, the other adaptive" if sw.get("configs") else "")
              + "; MicroBatchBudget sweeps its own budgets. One row per benchmark (a family, "
              "or one shape of it) and evloop column, headline metric (ns/op; IdleCost: % "
              "of one core). `setting` names the best fixed one (`spin5000`: a fixed 5 us "
              "spin window; `budget64`: 64 tasks per tick). `tuned`: the adaptive defaults "
              "seeded by the calibration profile below. The best of several medians is "
              "biased low, so a miss smaller than the spread across rounds is marked "
              f"'within noise'. IdleCost figures sit near 0 % of a core: there a difference "
              f"of at most {IDLE_TIE_PT} points passes.")
    md.append("")
    md.append(f"**Adaptive within {(PASS_BAR - 1) * 100:.0f}% of the best fixed setting: "
              f"{passed} of {len(judged)} rows.**" +
              (" Missed: " + ", ".join(misses) + "." if misses else "") +
              (f" {noisy} more missed within noise." if noisy else ""))
    md.append("")
    md.append(sweep_table(rows, True))
    md.append("")
    detail = [r for r in sweep_rows(summary, headline=False)
              if r["row"].startswith("MicroBatchBudget")]
    if detail:
        md.append("MicroBatchBudget, its other metrics (submit-to-run latency percentiles):")
        md.append("")
        md.append(sweep_table(detail, True))
        md.append("")
    prof = meta.get("profile") or {}
    if prof.get("text") is not None:
        md.append("### The calibration profile (tuned column)")
        md.append("")
        md.append(f"`{prof.get('command', '')}`, before round 1:")
        md.append("")
        md.append("```")
        md.append(prof["text"].rstrip("\n"))
        md.append("```")
        md.append("")
    elif prof.get("skipped"):
        md.append(f"No tuned column: {prof['skipped']}.")
        md.append("")
    return md


def write_report(outdir, summary, data, errors, meta, plots):
    md = []
    md.append("# evloop tournament")
    md.append("")
    md.append(f"- date: {meta['date']} ({meta['elapsed_s']:.0f} s)")
    m = meta["machine"]
    md.append(f"- machine: {m['cpu']}, {m['cpus']} CPUs, {m['kernel']}; load average "
              f"{meta['load_before']} before, {meta['load_after']} after")
    md.append(f"- baselines: libuv {m['libuv']}, libev {m['libev']}; targets: {m['targets']}")
    md.append(f"- command: `{meta['command']}`")
    md.append(f"- {meta['rounds']} rounds, --benchmark_min_time={meta['min_time']}, "
              "systems rotated inside every family from round to round")
    loads = meta.get("foreign_load", [])
    if loads:
        worst = max(x[2] for x in loads)
        md.append(f"- other processes on the machine: {statistics.mean(x[2] for x in loads):.2f} "
                  f"cores on average during the runs, {worst:.2f} at worst")
        busy = [f"{fam} (round {rnd}: {c:.2f} cores)" for rnd, fam, c in loads if c > BUSY]
        if busy:
            md.append("- **disturbed** (another process held more than "
                      f"{BUSY} cores even after retries; distrust these): " + ", ".join(busy))
    md.append("")
    md.append("How to read: every figure is the median across rounds; every metric is "
              "lower-is-better, so a ratio below 1.00x means evloop wins. Ratios divide "
              "figures of the same run. `±` is half the spread (max - min) across rounds "
              "relative to the median: figures whose ratios sit inside it are ties. "
              "ns/op is per task for the throughput families and per round trip for the "
              "latency ones (bench/families.cpp says what one op is in each family).")
    md.append("")
    targets, ecols = target_rows(summary)
    md.append("## Targets (issues 5 and 11)")
    md.append("")
    md.append("Each evloop column against the bar: a ratio of medians from this run "
              "(evloop / libuv, evloop / libev, or io_uring / epoll of the same variant), or "
              "the figure itself for IdleCost and AllocsPerSubmit. A figure that misses its "
              "bar shows by how much: by what share it exceeds a ratio bar, by how many "
              "points of a core for IdleCost (measured 10 to 60 ms after the last task), "
              "the allocations per submit themselves for AllocsPerSubmit (counted in every "
              "thread during a steady-state flood)." +
              ("" if meta["rounds"] >= 3 else
               f" **Only {meta['rounds']} round(s): the targets ask for medians of >= 3; "
               "indicative only.**"))
    md.append("")
    md.append(targets_table(targets, ecols, True))
    md.append("")
    md.append("## Ratios: evloop / libuv and evloop / libev")
    md.append("")
    md.append(ratio_table(summary, True))
    md.append("")
    ft = floor_table(summary, True)
    if ft:
        md.append("## Ratios: evloop / the hardware floors")
        md.append("")
        md.append("floor-spin: the loop thread spins on one cache line (a hand-off is a "
                  "cache-line ping-pong); floor-futex: it sleeps on a futex whenever idle "
                  "(a hand-off is a futex wait/wake).")
        md.append("")
        md.append(ft)
        md.append("")
    if meta.get("net"):
        md += net_texts(outdir)[0]
    md += sweep_section(summary, meta)
    md.append("## Medians")
    md.append("")
    md.append(medians_table(summary, True))
    md.append("")
    md.append("## Counters (medians)")
    md.append("")
    md.append(counters_table(data, True))
    md.append("")
    if plots:
        md.append("## Plots")
        md.append("")
        md += [f"![{p}]({p})" for p in plots]
        md.append("")
    if errors:
        md.append("## Errors")
        md.append("")
        md += [f"- round figure missing: {row} {col}: {msg}" for row, col, msg in errors]
        md.append("")
    path = os.path.join(outdir, "report.md")
    with open(path, "w") as f:
        f.write("\n".join(md))
    return path

