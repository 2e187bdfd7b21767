"""The network family's section of a report, in markdown: the HTTP, offload and echo
tables, the targets, the failed runs, and the one-line headlines the tournament prints."""

import statistics

from machine_load import BUSY
from net_clients import fmt_failures, run_failures
from net_pyservers import PY_BASELINE, PY_LOOPS, PY_SERVERS
from net_summary import cell_failed, med, ratio, run_failed
from net_systems import BASELINES, OFFLOAD_BASELINES, case_label


def fmt_cell_failed(f):
    """"2 of 5 runs failed: 117 timeouts" for a cell's "failed" entry."""
    return f"{f['runs']} of {f['of']} runs failed: {fmt_failures(f)}"


def fmt_us(v):
    if v is None:
        return "-"
    return f"{v / 1000:.2f} ms" if v >= 1000 else f"{v:.0f} us"


def fmt_rps(v):
    return "-" if v is None else f"{v / 1000:.1f}k"


def fmt_x(v):
    return "-" if v is None else f"{v:.2f}x"


def table(head, rows):
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return lines


def rps_row(cells, s, conns, baselines, is_own):
    """The table row of system s at a connection count, with its req/s over each baseline's
    ("" where is_own(s, b)), and whether the cell failed; (None, False) when it has no
    figure."""
    st = cells.get(s, {}).get(str(conns))
    if st and st.get("failed"):
        return ([conns, f"`{s}`", "**failed**", fmt_cell_failed(st["failed"])] + ["-"] * 3 +
                ["" if is_own(s, b) else "-" for b in baselines]), True
    if not st or not st.get("rps"):
        return None, False
    rps = st["rps"]
    half = (rps["max"] - rps["min"]) / 2 / rps["median"] * 100 if rps["median"] else 0
    cpu = st.get("server_cpu_pct")
    return ([conns, f"`{s}`", fmt_rps(rps["median"]),
             f"{fmt_rps(rps['min'])}-{fmt_rps(rps['max'])} (±{half:.0f}%)",
             fmt_us(st["p50_us"]["median"] if st.get("p50_us") else None),
             fmt_us(st["p99_us"]["median"] if st.get("p99_us") else None),
             f"{cpu['median']:.0f}%" if cpu else "-"] +
            [fmt_x(ratio(rps["median"], med(cells, b, conns, "rps")))
             if not is_own(s, b) else "" for b in baselines]), False


def results_rows(cells, systems, conns_list):
    rows = []
    for conns in conns_list:
        for s in systems:
            row, failed = rps_row(cells, s, conns, BASELINES, str.startswith)
            if row is None:
                continue
            if failed:
                row.append("" if s == "libuv" else "-")
            else:
                row.append(fmt_x(ratio(med(cells, s, conns, "p99_us"),
                                       med(cells, "libuv", conns, "p99_us")))
                           if s != "libuv" else "")
            rows.append(row)
    return rows


def verdict(t):
    if t.get("failed"):
        return "**failed runs**"
    if t["value"] is None:
        return "not run"
    if t["met"]:
        return f"{fmt_x(t['value'])} met"
    noise = ", within the spread" if t.get("within_spread") else ""
    if t["kind"] == "rps":
        return (f"{fmt_x(t['value'])} **missed** ({(1 - t['value'] / t['bar']) * 100:.0f}% "
                f"short{noise})")
    return f"{fmt_x(t['value'])} **missed** ({(t['value'] / t['bar'] - 1) * 100:.0f}% over{noise})"


def targets_rows(targets, conns_list):
    """One row per target, one cell per connection count."""
    rows, index = [], {}
    for t in targets:
        if t["target"] not in index:
            index[t["target"]] = len(rows)
            rows.append([t["target"]] + [""] * len(conns_list))
        rows[index[t["target"]]][1 + conns_list.index(t["conns"])] = verdict(t)
    return rows


def section(summary, img_prefix="", level="##"):
    """The report's markdown lines for one summary (net.json), plots linked under
    img_prefix (so the tournament's report, one folder up, can embed them)."""
    meta, cells = summary["meta"], summary["cells"]
    systems, conns_list = meta["systems"], meta["conns"]
    md = [f"{level} Network family: HTTP/1.1 keep-alive \"hello\" (wrk)", ""]
    md.append(f"- {meta['date']}, `{meta['command']}`: {meta['rounds']} interleaved rounds "
              f"x {meta['duration']} s per run; `wrk -t{meta.get('wrk_threads', 1)} -cN "
              f"-d{meta['duration']}s{wrk_timeout_arg(meta)} --latency` "
              f"({meta.get('wrk', 'wrk')}) pinned with `{' '.join(meta['pin_client']) or 'no'}"
              f"`, each server fresh per run, pinned with "
              f"`{' '.join(meta['pin_server']) or 'no'}`; fd limit {meta['nofile']}")
    servers = meta.get("servers", {})
    if servers:
        md.append("- the servers as they announced themselves: " +
                  ", ".join(f"`{s}`: {servers[s]}" for s in systems if s in servers))
    loads = [r.get("others_cores") or 0 for r in summary["runs"] if "error" not in r]
    if loads:
        busy = [r for r in summary["runs"]
                if "error" not in r and (r.get("others_cores") or 0) > BUSY]
        again = sum(1 for r in summary["runs"] if r.get("attempts", 1) > 1)
        md.append(f"- other processes on the machine: {statistics.mean(loads):.2f} cores on "
                  f"average during the runs, {max(loads):.2f} at worst" +
                  (f"; {again} runs disturbed (> {BUSY} cores) were run again" if again else "")
                  + (f"; **{len(busy)} of {len(loads)} runs disturbed** (> {BUSY} cores), "
                     "kept: distrust their figures" if busy else ""))
    if meta["rounds"] < 5:
        md.append(f"- **{meta['rounds']} round(s) only: the family asks for >= 5; "
                  "indicative only.**")
    for s, why in sorted(meta.get("dead", {}).items()):
        md.append(f"- `{s}` did not run: {why}")
    md.append("")
    c_cells = cells or summary.get("echo_cells") or summary.get("offload_cells")
    md.append("Every server shares `tournament/net/http_conn.c` (count requests ending at "
              "\"\\r\\n\\r\\n\", pipelining allowed; one canned 2xx response each). The "
              "readiness servers (evloop, libev) accept until EAGAIN, read until EAGAIN or a "
              "short read (as libuv does inside uv_read_start), write the responses and watch "
              "for writability only while output is pending; the completion-ops server keeps "
              "one operation in flight per connection (recv, then send). Higher req/s is better: "
              "a req/s ratio above 1.00x means the row beats the baseline; for `p99 / libuv` "
              "below 1.00x is better. req/s is the median across rounds with its min-max; "
              "p50 and p99 are medians of wrk's per-run percentiles; server CPU is the "
              "server's CPU time over the run's wall time (near 100%: the server is the "
              "bottleneck; lower: wrk, on its one CPU, is).")
    if not c_cells:  # only the Python servers ran: the paragraph above is not about them
        md = md[:-1]
    md.append("")
    if cells:
        md += http_tables(summary, img_prefix, level)
    md += echo_section(summary, img_prefix, level)
    md += offload_section(summary, img_prefix, level)
    md += py_section(summary, img_prefix, level)
    errs = failed_runs(summary)
    if errs:
        md.append(f"{level}# Failed runs")
        md.append("")
        md.append(f"{len(errs)} of {len(summary['runs'])} runs failed. A run fails when its "
                  "server did not stop cleanly, its client did not finish, or wrk counted a socket "
                  "error (connect, read, write, timeout: no answer within wrk's timeout) or a "
                  "non-2xx response; its req/s and latency are not reported, and its system and "
                  "connection count read \"failed\" above.")
        md.append("")
        md += [f"- round {r.get('round', '?')} `{r['system']}` {case_label(r)}: "
               f"{r.get('error') or 'wrk counted ' + fmt_failures(run_failures(r))}"
               for r in errs]
        md.append("")
    return md


def failed_runs(summary):
    """The failed runs of servers that started (a server that did not is listed as such)."""
    dead = summary["meta"].get("dead", {})
    return [r for r in summary["runs"] if run_failed(r) and r["system"] not in dead]


def wrk_timeout_arg(meta):
    return f" --timeout {meta['wrk_timeout']}s" if meta.get("wrk_timeout") else ""


def http_tables(summary, img_prefix, level):
    meta, cells = summary["meta"], summary["cells"]
    systems, conns_list = meta["systems"], meta["conns"]
    md = table(["conns", "system", "req/s", "min-max", "p50", "p99", "server CPU",
                "/ libev", "/ libuv", "p99 / libuv"],
               results_rows(cells, systems, conns_list))
    md.append("")
    md.append(f"{level}# Targets (issue 12)")
    md.append("")
    md.append("Ratios of medians from this run: req/s of the row's system over the "
              "reference's (at least the bar), or p99 over libuv's (at most 1.00x). \"within "
              "the spread\": the miss is smaller than half the min-max spread across rounds "
              "of either figure, relative to its median.")
    md.append("")
    md += table(["target"] + [f"{c} conns" for c in conns_list],
                targets_rows(summary["targets"], conns_list))
    md.append("")
    if summary.get("plot"):
        md.append(f"![network family]({img_prefix}{summary['plot']})")
        md.append("")
    return md


def ratio_lines(cells, meta, baselines, label):
    """Text lines: each measured system's req/s over each baseline's per connection count,
    after label(system)."""
    lines = []
    for s in meta["systems"]:
        if s in baselines or s not in cells:
            continue
        parts = []
        for conns in meta["conns"]:
            if cell_failed(cells, s, conns):
                parts.append(f"c={conns}: FAILED ({fmt_cell_failed(cell_failed(cells, s, conns))})")
                continue
            parts.append(f"c={conns}: " + " / ".join(
                fmt_x(ratio(med(cells, s, conns, "rps"), med(cells, b, conns, "rps")))
                for b in baselines))
        lines.append(label(s) + "   ".join(parts))
    return lines


def headline(summary):
    """Text lines: the evloop systems' req/s ratios to libev and libuv per connection count."""
    return ratio_lines(summary["cells"], summary["meta"], BASELINES,
                       lambda s: f"  {s:20s} (vs libev / libuv) ")


def echo_keys(meta):
    return [f"{z}x{c}" for z in meta.get("echo_sizes", []) for c in meta.get("echo_conns", [])]


def echo_label(key):
    size, conns = key.split("x")
    return f"{size} B, {conns} conn{'s' if conns != '1' else ''}"


def echo_section(summary, img_prefix, level):
    cells, meta = summary.get("echo_cells") or {}, summary["meta"]
    systems = [s for s in meta["systems"] if s in cells]
    if not systems:
        return []
    md = [f"{level}# Echo family (tournament/net/echo_client.c)", ""]
    md.append("The same servers started with `--echo` (the connection logic queues the input "
              "itself), against `echo_client` pinned like wrk: per connection one message of "
              "the size given in flight, the next sent once all of it has come back. "
              "Messages/s: median across rounds with min-max; p50/p99: medians of the "
              "per-run round-trip percentiles. Higher messages/s is better.")
    md.append("")
    rows = []
    for key in echo_keys(meta):
        for s in systems:
            st = cells[s].get(key)
            if st and st.get("failed"):
                rows.append([echo_label(key), f"`{s}`", "**failed**", fmt_cell_failed(st["failed"])]
                            + ["-"] * 3 + ["" if s.startswith(b) else "-" for b in BASELINES])
                continue
            if not st or not st.get("rps"):
                continue
            rps = st["rps"]
            ratios = [fmt_x(ratio(rps["median"], (cells.get(b, {}).get(key, {}).get("rps") or
                                                  {}).get("median")))
                      if not s.startswith(b) else "" for b in BASELINES]
            rows.append([echo_label(key), f"`{s}`", fmt_rps(rps["median"]),
                         f"{fmt_rps(rps['min'])}-{fmt_rps(rps['max'])}",
                         fmt_us(st["p50_us"]["median"] if st.get("p50_us") else None),
                         fmt_us(st["p99_us"]["median"] if st.get("p99_us") else None),
                         f"{st['server_cpu_pct']['median']:.0f}%"
                         if st.get("server_cpu_pct") else "-"] + ratios)
    md += table(["case", "system", "msgs/s", "min-max", "p50", "p99", "server CPU",
                 "/ libev", "/ libuv"], rows)
    md.append("")
    if summary.get("echo_plot"):
        md.append(f"![echo family]({img_prefix}{summary['echo_plot']})")
        md.append("")
    return md


def offload_rows(cells, systems, conns_list):
    rows = []
    for conns in conns_list:
        for s in systems:
            row, _ = rps_row(cells, s, conns, OFFLOAD_BASELINES, lambda s, b: s == b)
            if row is not None:
                rows.append(row)
    return rows


def offload_section(summary, img_prefix, level):
    cells, meta = summary.get("offload_cells") or {}, summary["meta"]
    systems = [s for s in meta["systems"] if s in cells]
    if not systems:
        return []
    off = meta.get("offload", {})
    md = [f"{level}# Offload family: HTTP/1.1 keep-alive, the work on worker threads (wrk)", ""]
    md.append(f"The same connection logic and wrk as above, but each complete request goes to "
              f"a pool of {off.get('workers', '?')} worker threads "
              f"(`tournament/net/worker_pool.c`, "
              f"the same code for every system but two that use their library's own pool: "
              f"evloop-pool, evloop's work pool (`evloop_work_submit`, default spin); "
              f"libuv-queue-work, libuv's with UV_THREADPOOL_SIZE={off.get('workers', '?')}) "
              f"that busy-loops {off.get('work_us', '?')} us per request on the clock, and the "
              "reply comes back to the loop thread, which writes it: `evloop_submit`; a locked "
              "list and `ev_async_send` (libev) or `uv_async_send` (libuv); the done callback "
              "of `evloop_work_submit`; `uv_queue_work`'s after-work callback. One job per "
              "connection at a time. Loop thread on CPU "
              f"{off.get('loop_cpu') or '(unpinned)'}, workers on CPU(s) "
              f"{off.get('worker_cpus') or '(unpinned)'}. Before measuring, each server "
              "passed the protocol check and a close-while-at-worker check (clients that "
              "close, some with a reset, while their request is at a worker). Ratios: req/s "
              "over " + ", ".join(f"`{b}`'s" for b in OFFLOAD_BASELINES[:-1]) +
              f" and `{OFFLOAD_BASELINES[-1]}`'s.")
    md.append("")
    md += table(["conns", "system", "req/s", "min-max", "p50", "p99", "server CPU"] +
                [f"/ {b}" for b in OFFLOAD_BASELINES],
                offload_rows(cells, systems, meta["conns"]))
    md.append("")
    if summary.get("offload_plot"):
        md.append(f"![offload family]({img_prefix}{summary['offload_plot']})")
        md.append("")
    return md


def offload_headline(summary):
    return ratio_lines(summary.get("offload_cells") or {}, summary["meta"], OFFLOAD_BASELINES,
                       lambda s: f"  {s:28s} ")


def fmt_spread(st, fmt):
    """"12.3k-14.0k (±6%)" for a metric's stats."""
    half = (st["max"] - st["min"]) / 2 / st["median"] * 100 if st["median"] else 0
    return f"{fmt(st['min'])}-{fmt(st['max'])} (±{half:.0f}%)"


def py_rows(cells, keys):
    rows = []
    for key in keys:
        mode, conns = key.split("/")
        for server in PY_SERVERS:
            base = f"{server}/{PY_BASELINE}"
            base_rps = med(cells, base, key, "rps")
            base_cpu = med(cells, base, key, "cpu_us_per_req")
            for loop in PY_LOOPS:
                s = f"{server}/{loop}"
                st = cells.get(s, {}).get(key)
                if not st:
                    continue
                if st.get("failed"):
                    rows.append([mode, conns, server, f"`{loop}`", "**failed**",
                                 fmt_cell_failed(st["failed"])] + ["-"] * 6)
                    continue
                own = s == base
                cpu = st.get("cpu_us_per_req")
                rows.append([
                    mode, conns, server, f"`{loop}`", fmt_rps(st["rps"]["median"]),
                    fmt_spread(st["rps"], fmt_rps),
                    fmt_us(st["p50_us"]["median"] if st.get("p50_us") else None),
                    fmt_us(st["p99_us"]["median"] if st.get("p99_us") else None),
                    f"{st['server_cpu_pct']['median']:.0f}%" if st.get("server_cpu_pct") else "-",
                    (f"{cpu['median']:.1f} ({cpu['min']:.1f}-{cpu['max']:.1f})" if cpu else "-"),
                    "" if own else (f"{fmt_x(ratio(st['rps']['median'], base_rps))} "
                                    f"(of {fmt_rps(base_rps)})" if base_rps else "-"),
                    "" if own else (f"{fmt_x(ratio(cpu['median'], base_cpu))} "
                                    f"(of {base_cpu:.1f})" if cpu and base_cpu else "-")])
    return rows


def py_section(summary, img_prefix, level):
    """The pyserver family: uvicorn (httptools, h11) and aiohttp on each asyncio loop."""
    cells, meta = summary.get("py_cells") or {}, summary["meta"]
    py = meta.get("pyserver") or {}
    if not cells and not py.get("not_measured"):
        return []
    keys = py.get("keys") or []
    md = [f"{level}# Real Python servers on each asyncio loop (pyserver family, wrk)", ""]
    vers = py.get("versions") or {}
    md.append(f"`tournament/net/py_server.py` under `{py.get('python', '?')}` (Python "
              f"{vers.get('python', '?')}; " +
              ", ".join(f"{k} {v}" for k, v in sorted(vers.items()) if k != "python") +
              "): uvicorn with its httptools parser and with its h11 parser (a bare ASGI "
              "app), and aiohttp's web server (one GET route), each answering \"hello\" on "
              "the loop named, a fresh process per run pinned like the C servers. "
              "Keep-alive: wrk's connections stay open; close: wrk sends `Connection: close`, "
              "so every request is a new connection (accept, parse, answer, close). req/s: "
              "median across rounds, min-max and half the spread; p50 and p99: medians of "
              "wrk's; server CPU: the server's CPU time (/proc/PID/stat, user + system) "
              "while wrk ran, over the run's wall time; CPU/request: that CPU time over the "
              "requests wrk counted, us, median (min-max). Ratios are of medians against "
              f"{PY_BASELINE} on the same server and case, {PY_BASELINE}'s figure beside "
              "them: req/s above 1.00x and CPU/request below 1.00x favour the row.")
    md.append("")
    for s, why in sorted(py.get("not_measured", {}).items()):
        md.append(f"- `{s}` not measured: {why}")
    if py.get("not_measured"):
        md.append("")
    if cells:
        md += table(["mode", "conns", "server", "loop", "req/s", "min-max", "p50", "p99",
                     "server CPU", "CPU/request, us", f"req/s / {PY_BASELINE}",
                     f"CPU/request / {PY_BASELINE}"], py_rows(cells, keys))
        md.append("")
    if summary.get("py_targets"):
        md.append(f"{level}# Target (issue 41): evloop >= 1.0x uvloop in req/s")
        md.append("")
        md += table(["target"] + keys, targets_rows(summary["py_targets"], keys))
        md.append("")
    if summary.get("py_plot"):
        md.append(f"![pyserver family]({img_prefix}{summary['py_plot']})")
        md.append("")
    return md


def py_headline(summary):
    """Text lines: every loop's req/s over uvloop's per server and case, uvloop's figure in
    brackets."""
    cells, meta = summary.get("py_cells") or {}, summary["meta"]
    keys = (meta.get("pyserver") or {}).get("keys") or []
    lines = []
    for server in PY_SERVERS:
        base = f"{server}/{PY_BASELINE}"
        for loop in PY_LOOPS:
            s = f"{server}/{loop}"
            if s == base or s not in cells:
                continue
            parts = []
            for key in keys:
                if cell_failed(cells, s, key) or cell_failed(cells, base, key):
                    parts.append(f"{key}: FAILED")
                    continue
                b = med(cells, base, key, "rps")
                parts.append(f"{key}: {fmt_x(ratio(med(cells, s, key, 'rps'), b))} "
                             f"({fmt_rps(b)})")
            lines.append(f"  {s:28s} " + "   ".join(parts))
    return lines
