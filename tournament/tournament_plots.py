"""The tournament's plots (plots/*.png): latency, latency distributions, throughput, the
batch-budget curves and CAS contention, from the medians of the rounds. Needs
matplotlib (Debian: python3-matplotlib); without it the report simply has no plots.
"""
import os
import sys

from tournament_report import FLOORS, is_evloop, is_tagged, median, short


def make_plots(data, summary, outdir):
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print(f"plots skipped: {sys.executable} cannot import matplotlib "
              "(Debian: apt-get install python3-matplotlib)", flush=True)
        return []
    # One colour per system in every plot.
    palette = plt.get_cmap("tab20")
    # Untagged columns first, so the sweep's fixed settings do not shift their colours.
    every = sorted({c for r in data for c in data[r]},
                   key=lambda c: (is_tagged(c), not is_evloop(c), c))
    colour = {c: palette(i % 20) for i, c in enumerate(every)}

    def color(c):
        return colour.get(c, "black")

    pdir = os.path.join(outdir, "plots")
    os.makedirs(pdir, exist_ok=True)
    written = []

    def cols_of(rows, with_tagged=False):
        cols = []
        for r in rows:
            for c in data.get(r, {}):
                if c not in cols and (with_tagged or not is_tagged(c)):
                    cols.append(c)
        return sorted(cols, key=lambda c: (not is_evloop(c), c))

    def grouped_bars(rows, metrics, title, ylabel, path, log=True):
        rows = [r for r in rows if r in data]
        if not rows:
            return
        cols = cols_of(rows)
        fig, ax = plt.subplots(figsize=(max(8, 1.6 * len(rows) * max(1, len(cols)) / 4), 5))
        width = 0.8 / max(1, len(cols))
        for i, c in enumerate(cols):
            for j, (metric, alpha) in enumerate(metrics):
                xs, ys = [], []
                for k, r in enumerate(rows):
                    v = median(data[r].get(c, {}).get(metric, []))
                    if v is not None and v > 0:
                        xs.append(k + i * width)
                        ys.append(v)
                ax.bar(xs, ys, width, alpha=alpha, color=color(c),
                       label=short(c) if j == 0 else None)
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(rows))])
        ax.set_xticklabels([r.replace("/", "\n", 1) for r in rows], fontsize=8)
        if log:
            ax.set_yscale("log")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.legend(fontsize=7, ncol=2)
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, path), dpi=110)
        plt.close(fig)
        written.append(os.path.join("plots", path))

    latency_rows = ["PingPongLatency/hot", "PingPongLatency/cold", "PingPongLatency/blocking",
                    "MicrotaskRoundTrip", "ReadinessRoundTrip", "MicroWakeupSyscall/Sleeping",
                    "SubmitInternalChain"]
    grouped_bars(latency_rows, [("p99_ns", 0.35), ("p50_ns", 1.0)],
                 "Round-trip latency: p50 (solid) and p99 (pale)", "ns", "latency.png")
    # Latency distributions: the percentiles each latency benchmark reports, per system.
    pcts = [("min_ns", "min"), ("p10_ns", "p10"), ("p50_ns", "p50"), ("p90_ns", "p90"),
            ("p99_ns", "p99"), ("p999_ns", "p99.9")]
    dist_rows = [r for r in latency_rows + ["MicroBatchBudget/Continuous", "InternalPriority"]
                 if r in data and any("p10_ns" in m for m in data[r].values())]
    if dist_rows:
        ncols = 3
        nrows = (len(dist_rows) + ncols - 1) // ncols
        fig, axes = plt.subplots(nrows, ncols, figsize=(16, 4.2 * nrows), squeeze=False)
        for ax, r in zip([a for row in axes for a in row], dist_rows):
            for i, c in enumerate(cols_of([r])):
                pts = [(k, median(data[r][c].get(m, []))) for k, (m, _) in enumerate(pcts)]
                pts = [(k, v) for k, v in pts if v is not None and v > 0]
                style = ":" if c in FLOORS else "-"
                ax.plot([k for k, _ in pts], [v for _, v in pts], style, marker="o",
                        label=short(c), color=color(c))
            ax.set_xticks(range(len(pcts)))
            ax.set_xticklabels([label for _, label in pcts])
            ax.set_yscale("log")
            ax.set_ylabel("ns")
            ax.set_title(r)
            ax.legend(fontsize=7)
        for ax in [a for row in axes for a in row][len(dist_rows):]:
            ax.axis("off")
        fig.suptitle("Latency distributions (percentiles of per-op times, medians of rounds)")
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, "latency_distributions.png"), dpi=100)
        plt.close(fig)
        written.append("plots/latency_distributions.png")

    throughput_rows = ["PingPong", "BurstSubmit", "MultiProducer", "MultiProducerContention",
                       "AllocPressure", "MicroWakeupSyscall/RapidSubmit",
                       "MicroWakeupSyscall/Running", "MicroWakeupSyscall/Burst",
                       "Timers/million"]
    grouped_bars(throughput_rows, [("ns_per_op", 1.0)], "ns per task (lower is better)",
                 "ns per op", "throughput.png")

    # Batch-budget curves: x = burst size, one line per column (fixed budgets included).
    bursts = sorted({int(r.rsplit(":", 1)[1]) for r in data
                     if r.startswith("MicroBatchBudget/Throughput/burst:")})
    if bursts:
        fig, axes = plt.subplots(1, 3, figsize=(16, 5))
        panels = [("Throughput", "ns_per_op", "ns per task"),
                  ("SubmitToRun", "p50_ns", "submit-to-run p50 ns"),
                  ("SubmitToRun", "p99_ns", "submit-to-run p99 ns")]
        for ax, (kind, metric, ylabel) in zip(axes, panels):
            rows = [f"MicroBatchBudget/{kind}/burst:{b}" for b in bursts]
            for i, c in enumerate(cols_of(rows, with_tagged=True)):
                xs, ys = [], []
                for b, r in zip(bursts, rows):
                    v = median(data.get(r, {}).get(c, {}).get(metric, []))
                    if v is not None and v > 0:
                        xs.append(b)
                        ys.append(v)
                style = "--" if is_tagged(c) else "-"
                ax.plot(xs, ys, style, marker="o", label=short(c), color=color(c))
            ax.set_xscale("log", base=2)
            ax.set_yscale("log")
            ax.set_xlabel("burst size")
            ax.set_ylabel(ylabel)
            ax.set_title(f"MicroBatchBudget {kind}")
        axes[0].legend(fontsize=6)
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, "batch_budget.png"), dpi=110)
        plt.close(fig)
        written.append("plots/batch_budget.png")

    producers = sorted({int(r.rsplit(":", 1)[1]) for r in data
                        if r.startswith("MicroCASContention/producers:")})
    if producers:
        fig, ax = plt.subplots(figsize=(8, 5))
        rows = [f"MicroCASContention/producers:{p}" for p in producers]
        for i, c in enumerate(cols_of(rows)):
            pts = [(p, median(data[r].get(c, {}).get("ns_per_op", [])))
                   for p, r in zip(producers, rows) if r in data]
            pts = [(p, v) for p, v in pts if v]
            ax.plot([p for p, _ in pts], [v for _, v in pts], marker="o", label=short(c),
                    color=color(c))
        ax.set_xscale("log", base=2)
        ax.set_xlabel("producer threads")
        ax.set_ylabel("ns per submit")
        ax.set_title("MicroCASContention: submission cost under contention")
        ax.legend(fontsize=8)
        fig.tight_layout()
        fig.savefig(os.path.join(pdir, "cas_contention.png"), dpi=110)
        plt.close(fig)
        written.append("plots/cas_contention.png")
    return written

