"""The network family's plots (plots/net.png, plots/net_offload.png, plots/net_pyservers.png)
when matplotlib is importable; without it, none and a note."""

import os
import sys

from net_pyservers import PY_LOOPS, PY_SERVERS
from net_report import echo_keys, echo_label
from net_systems import SYSTEMS


def import_pyplot():
    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        return plt
    except ImportError:
        print(f"plot skipped: {sys.executable} cannot import matplotlib "
              "(Debian: apt-get install python3-matplotlib)", flush=True)
        return None


def bars(plt, cells, systems, keys, labels, titles, path):
    """Throughput bars (median, min-max) and latency bars (p50 solid, p99 pale) per key; a
    cell with a failed run gets the word "failed" in place of its bars."""
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(14, 5))
    width = 0.8 / len(systems)
    palette = plt.get_cmap("tab10")
    any_failed = any_bar = False
    handles = []
    for i, s in enumerate(systems):
        colour = palette(list(SYSTEMS).index(s) % 10)  # one colour per system in every plot
        xs, ys, lo, hi, p50, p99 = [], [], [], [], [], []
        for k, key in enumerate(keys):
            st = cells[s].get(key, {})
            if st.get("failed"):
                any_failed = True
                for ax in (ax1, ax2):  # y in axes fraction: the latency axis is logarithmic
                    ax.text(k + i * width, 0.01, "failed", transform=ax.get_xaxis_transform(),
                            rotation=90, ha="center", va="bottom", fontsize=7,
                            fontweight="bold", color=colour)
                continue
            if not st.get("rps"):
                continue
            xs.append(k + i * width)
            ys.append(st["rps"]["median"])
            lo.append(st["rps"]["median"] - st["rps"]["min"])
            hi.append(st["rps"]["max"] - st["rps"]["median"])
            p50.append(st["p50_us"]["median"] if st.get("p50_us") else 0)
            p99.append(st["p99_us"]["median"] if st.get("p99_us") else 0)
        any_bar = any_bar or any(v > 0 for v in p50 + p99)
        ax1.bar(xs, ys, width, yerr=[lo, hi], capsize=2, color=colour)
        ax2.bar(xs, p99, width, color=colour, alpha=0.35)
        ax2.bar(xs, p50, width, color=colour)
        handles.append(plt.Rectangle((0, 0), 1, 1, color=colour, label=s))  # bars or not
    for ax in (ax1, ax2):
        ax.set_xticks([k + 0.4 - width / 2 for k in range(len(keys))])
        ax.set_xticklabels(labels)
        ax.set_xlim(-width, len(keys) - 0.2)  # every slot, with bars or "failed" in it
    ax1.set_ylabel(titles[0] + " (median, min-max bars)")
    ax1.set_title(titles[1])
    ax1.legend(handles=handles, fontsize=8)
    if any_bar:  # a logarithmic axis needs a positive value (none when every cell failed)
        ax2.set_yscale("log")
    ax2.set_ylabel("latency, us")
    ax2.set_title(titles[2])
    fig.suptitle(titles[3] + ("; \"failed\": a run had timeouts or errors, no figure"
                              if any_failed else ""))
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def make_plot(summary, outdir):
    """plots/net.png (and plots/net_echo.png with the echo family); returns the first's path
    relative to outdir, or None."""
    cells, meta = summary["cells"], summary["meta"]
    echo = summary.get("echo_cells") or {}
    http_systems = [s for s in meta["systems"] if s in cells]
    echo_systems = [s for s in meta["systems"] if s in echo]
    if not http_systems and not echo_systems:
        return None
    plt = import_pyplot()
    if not plt:
        return None
    pdir = os.path.join(outdir, "plots")
    os.makedirs(pdir, exist_ok=True)
    rounds = f"{meta['rounds']} rounds x {meta['duration']} s"
    if echo_systems:
        keys = echo_keys(meta)
        bars(plt, echo, echo_systems, keys, [echo_label(k) for k in keys],
             ("messages per second", "echo round trips per second (higher is better)",
              "round trip: p50 (solid) and p99 (pale), lower is better",
              f"echo family, {rounds}"), os.path.join(pdir, "net_echo.png"))
        summary["echo_plot"] = "plots/net_echo.png"
    if not http_systems:
        return None
    conns_list = meta["conns"]
    bars(plt, cells, http_systems, [str(c) for c in conns_list],
         [f"{c} connections" for c in conns_list],
         ("requests per second", "HTTP/1.1 keep-alive throughput (higher is better)",
          "wrk latency: p50 (solid) and p99 (pale), lower is better",
          f"network family, {rounds}"), os.path.join(pdir, "net.png"))
    return "plots/net.png"


def make_offload_plot(summary, outdir):
    """plots/net_offload.png; its path relative to outdir, or None."""
    cells, meta = summary.get("offload_cells") or {}, summary["meta"]
    systems = [s for s in meta["systems"] if s in cells]
    if not systems:
        return None
    plt = import_pyplot()
    if not plt:
        return None
    os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
    off = meta.get("offload", {})
    conns_list = meta["conns"]
    bars(plt, cells, systems, [str(c) for c in conns_list],
         [f"{c} connections" for c in conns_list],
         ("requests per second", "offload: HTTP keep-alive, replies posted by workers "
          "(higher is better)", "wrk latency: p50 (solid) and p99 (pale), lower is better",
          f"offload family, {off.get('workers', '?')} workers x {off.get('work_us', '?')} us "
          f"per request, {meta['rounds']} rounds x {meta['duration']} s"),
         os.path.join(outdir, "plots", "net_offload.png"))
    return "plots/net_offload.png"


def make_py_plot(summary, outdir):
    """plots/net_pyservers.png: per server and case, req/s (median, min-max) and the server's
    CPU per request, one bar per loop; its path relative to outdir, or None."""
    cells, meta = summary.get("py_cells") or {}, summary["meta"]
    keys = (meta.get("pyserver") or {}).get("keys") or []
    groups = [(server, key) for key in keys for server in PY_SERVERS
              if any(f"{server}/{loop}" in cells for loop in PY_LOOPS)]
    if not groups:
        return None
    plt = import_pyplot()
    if not plt:
        return None
    os.makedirs(os.path.join(outdir, "plots"), exist_ok=True)
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(max(8, 1.6 * len(groups)), 8))
    width = 0.8 / len(PY_LOOPS)
    palette = plt.get_cmap("tab10")
    for i, loop in enumerate(PY_LOOPS):
        xs, rps, lo, hi, cpu = [], [], [], [], []
        for g, (server, key) in enumerate(groups):
            st = cells.get(f"{server}/{loop}", {}).get(key, {})
            x = g + i * width
            if st.get("failed"):
                for ax in (ax1, ax2):
                    ax.text(x, 0.01, "failed", transform=ax.get_xaxis_transform(),
                            rotation=90, ha="center", va="bottom", fontsize=7,
                            color=palette(i))
                continue
            if not st.get("rps"):
                continue
            r = st["rps"]
            xs.append(x)
            rps.append(r["median"])
            lo.append(r["median"] - r["min"])
            hi.append(r["max"] - r["median"])
            cpu.append(st["cpu_us_per_req"]["median"] if st.get("cpu_us_per_req") else 0)
        ax1.bar(xs, rps, width, yerr=[lo, hi], capsize=2, color=palette(i), label=loop)
        ax2.bar(xs, cpu, width, color=palette(i), label=loop)
    labels = [f"{server}\n{key.replace('/', ', c=')}" for server, key in groups]
    for ax in (ax1, ax2):
        ax.set_xticks([g + 0.4 - width / 2 for g in range(len(groups))])
        ax.set_xticklabels(labels, fontsize=8)
        ax.legend(fontsize=8)
    ax1.set_ylabel("requests per second\n(median, min-max bars)")
    ax1.set_title("real Python servers on each asyncio loop, under wrk (higher is better)")
    ax2.set_ylabel("server CPU per request, us\n(median)")
    ax2.set_title("the server's CPU time per request while wrk ran (lower is better)")
    fig.suptitle(f"pyserver family, {meta['rounds']} rounds x {meta['duration']} s")
    fig.tight_layout()
    fig.savefig(os.path.join(outdir, "plots", "net_pyservers.png"), dpi=110)
    plt.close(fig)
    return "plots/net_pyservers.png"
