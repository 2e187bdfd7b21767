"""Running the tournament: the families of evloop_bench planned into one process each,
rounds with the systems rotated, waits for a quiet machine and re-runs of disturbed
families, the calibration before round 1 (evloop_autotune), and the network family
(tournament/net/run_net.py). Writes round-N/<Family>.json and .txt; the figures are
tournament_report.py's. Python 3 standard library only.
"""
import os
import re
import subprocess
import sys
import time

from net.machine_load import BUSY, children_cpu_seconds, cpu_busy_seconds, foreign_load
from tournament_report import parse_name

# tournament/ (this file is tournament/tournament_run.py): tournament/net/run_net.py is found from
# there.
TOURNAMENT_DIR = os.path.dirname(os.path.abspath(__file__))

# The sweep: fixed evloop settings run beside the adaptive defaults, one knob at a time
# (the other stays adaptive), on one backend (the knobs live above the poller), in the
# families where the knobs matter: every hand-off family, and IdleCost (a fixed spin costs
# idle CPU). MicroBatchBudget sweeps budgets itself; MicroCASContention measures the
# producers' side only.
SWEEPS = {
    "full": ["spin=0", "spin=5000", "spin=20000", "spin=50000",
             "budget=64", "budget=256", "budget=1024", "budget=4096"],
    "lite": ["spin=0", "spin=50000", "budget=64", "budget=4096"],
    "none": [],
}
SWEEP_FAMILIES = ("AllocPressure", "BurstSubmit", "IdleCost", "InternalPriority",
                  "MicroWakeupSyscall", "MicrotaskRoundTrip", "MultiProducer",
                  "MultiProducerContention", "PingPong", "PingPongLatency",
                  "ReadinessRoundTrip", "SubmitInternalChain", "Timers")
SWEEP_BACKEND = "epoll"


# ---------------------------------------------------------------- running

def list_tests(bench, flt, min_time, env_extra=None):
    # The same min time as the runs: google-benchmark puts it into some names.
    cmd = [bench, "--benchmark_list_tests=true", f"--benchmark_min_time={min_time}"]
    if flt:
        cmd.append("--benchmark_filter=" + flt)
    env = dict(os.environ, **(env_extra or {}))
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env=env).stdout
    return [line for line in out.splitlines() if line.strip()]


def evloop_configs_env(extra):
    """The EVLOOP_BENCH_EVLOOP_CONFIGS that adds extra to what the user set, if any."""
    cfgs = [c for c in os.environ.get("EVLOOP_BENCH_EVLOOP_CONFIGS", "").split(";") if c]
    return {"EVLOOP_BENCH_EVLOOP_CONFIGS": ";".join(cfgs + extra)} if extra else {}


def plan_families(bench, flt, min_time, sweep_configs, backend):
    """{family: (test names, environment to add, whether the filter must name the tests)}
    in the order the binary runs them. The sweep families run with sweep_configs (fixed
    settings, the profile) as well; what those add is kept on backend only."""
    plain = families_of(list_tests(bench, flt, min_time))
    env = evloop_configs_env(sweep_configs)
    swept = families_of(list_tests(bench, flt, min_time, env)) if env else {}
    plan = {}
    for family, names in plain.items():
        if family in SWEEP_FAMILIES and family in swept:
            base = set(names)
            keep = [n for n in swept[family]
                    if n in base or parse_name(n)[2].endswith("/" + backend)]
            plan[family] = (keep, env, bool(flt) or len(keep) != len(swept[family]))
        else:
            plan[family] = (names, {}, bool(flt))
    return plan


def families_of(tests):
    """{family: [test names]} in the order the binary runs them."""
    out = {}
    for t in tests:
        out.setdefault(t.split("/", 1)[0], []).append(t)
    return out


def family_regex(family, names, enumerate_names):
    """The --benchmark_filter for one family. google-benchmark's regexes are POSIX
    extended (no lookahead), so a user filter, or the sweep's backend, is applied by
    naming the tests kept."""
    if not enumerate_names:
        return f"^{family}/"
    ere = re.compile(r"([.\[\]()*+?{}|^$\\])")
    return "^(" + "|".join(ere.sub(r"\\\1", n) for n in names) + ")$"


class Progress:
    def __init__(self, rounds, total):
        self.rounds, self.total, self.done = rounds, total, 0
        self.started = time.monotonic()

    def line(self, rnd, text):
        elapsed = time.monotonic() - self.started
        print(f"  [round {rnd}/{self.rounds} {self.done:4d}/{self.total} {elapsed:5.0f}s] {text}",
              flush=True)


def run_family(bench, family, regex, rnd, min_time, rdir, progress, env_extra):
    """Runs one family in its own process; returns (json path or None, cores other
    processes used meanwhile, benchmarks run)."""
    json_path = os.path.join(rdir, f"{family}.json")
    log_path = os.path.join(rdir, f"{family}.txt")
    cmd = [bench, f"--benchmark_min_time={min_time}", f"--benchmark_out={json_path}",
           "--benchmark_out_format=json", "--benchmark_format=console",
           "--benchmark_color=false", "--benchmark_filter=" + regex]
    env = dict(os.environ, EVLOOP_BENCH_ROTATE=str(rnd - 1), **env_extra)
    started = time.monotonic()
    busy0, ours0 = cpu_busy_seconds(), children_cpu_seconds()
    ns_re = re.compile(r"ns_per_op=(\S+)")
    count = 0
    with open(log_path, "w") as log:
        # stdbuf: the console reporter writes through stdio, which a pipe would buffer.
        stdbuf = ["stdbuf", "-oL"] if shutil_which("stdbuf") else []
        proc = subprocess.Popen(stdbuf + cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                text=True, env=env, bufsize=1)
        for line in proc.stdout:
            log.write(line)
            first = line.split(" ", 1)[0]
            if "/" not in first or first.startswith("-"):
                continue
            count += 1
            progress.done += 1
            _, row, col = parse_name(first)
            m = ns_re.search(line)
            what = ("ERROR " + line.split("ERROR OCCURRED:", 1)[1].strip()
                    if "ERROR OCCURRED" in line else (m.group(1) + " ns/op" if m else ""))
            progress.line(rnd, f"{row[:44]:44s} {col[:30]:30s} {what}")
        rc = proc.wait()
    elapsed = max(time.monotonic() - started, 1e-3)
    others = ((cpu_busy_seconds() - busy0) - (children_cpu_seconds() - ours0)) / elapsed
    if rc != 0:
        print(f"evloop_bench exited with {rc} on {family}, round {rnd}; see {log_path}",
              file=sys.stderr)
    return (json_path if os.path.exists(json_path) else None), max(others, 0.0), count


def run_round(bench, rnd, plan, min_time, outdir, progress, quiet_wait, retries):
    """One round: every family in turn, each in a fresh process. A family during which
    other processes used more than BUSY cores is run again (up to retries times): on a
    2-core machine their load, not the loop, would set its figures."""
    rdir = os.path.join(outdir, f"round-{rnd}")
    os.makedirs(rdir, exist_ok=True)
    paths, loads = [], []
    for family, (names, env_extra, enumerate_names) in plan.items():
        regex = family_regex(family, names, enumerate_names)
        for attempt in range(retries + 1):
            wait_for_quiet(quiet_wait)
            before = progress.done
            since = time.monotonic()
            path, others, _ = run_family(bench, family, regex, rnd, min_time, rdir, progress,
                                         env_extra)
            if attempt > 0:
                PATIENCE.spend(since)
            if others <= BUSY or attempt == retries or PATIENCE.left <= 0:
                break
            progress.done = before
            progress.line(rnd, f"{family}: other processes used {others:.2f} cores "
                               "meanwhile; running it again")
        if path:
            paths.append(path)
        loads.append((rnd, family, others))
        if others > BUSY:
            progress.line(rnd, f"{family}: still busy ({others:.2f} cores elsewhere); kept, "
                               "flagged in the report")
    return paths, loads


# ---------------------------------------------------------------- a quiet machine

class Patience:
    """How long the whole run may spend waiting for quiet and re-running disturbed
    families, so a machine that stays busy delays the report by a bounded time."""
    def __init__(self, seconds):
        self.left = seconds

    def spend(self, since):
        self.left -= time.monotonic() - since


PATIENCE = Patience(0)


def wait_for_quiet(limit_s, threshold=BUSY):
    """Waits up to limit_s (and within the run's patience) for other processes to use
    less than threshold cores; returns the load seen last. Spinning benchmarks on a
    2-core machine are meaningless while something else holds a core: the scheduler, not
    the loop, sets the figures then."""
    limit_s = min(limit_s, PATIENCE.left)
    if limit_s <= 0:
        return 0.0
    since = time.monotonic()
    deadline = since + limit_s
    load = foreign_load(0.5)
    while load > threshold and time.monotonic() < deadline:
        print(f"  machine busy: other processes use {load:.2f} cores; waiting "
              f"(up to {deadline - time.monotonic():.0f}s more)", flush=True)
        time.sleep(4)
        load = foreign_load(1.0)
    PATIENCE.spend(since)
    return load


def shutil_which(name):
    for d in os.environ.get("PATH", "").split(os.pathsep):
        p = os.path.join(d, name)
        if os.path.isfile(p) and os.access(p, os.X_OK):
            return p
    return None


# ---------------------------------------------------------------- the tuned column

def calibrate(cli, seconds, outdir):
    """Runs evloop_autotune once; returns the profile's description for meta, with
    "config" (the EVLOOP_BENCH_EVLOOP_CONFIGS entry) when there is a profile, or
    "skipped" (why) when there is none: the tournament goes on without a tuned column."""
    path = os.path.join(os.path.abspath(outdir), "profile.txt")
    if os.path.exists(path):
        os.remove(path)  # a stale profile must not pass for this run's
    cmd = [cli, "--seconds", f"{seconds:g}", "--out", path]
    command = " ".join([os.path.basename(cli)] + cmd[1:-1] + [os.path.basename(path)])

    def skip(why):
        print(f"warning: {why}; no tuned column", file=sys.stderr, flush=True)
        return {"skipped": why, "command": command}

    if not os.access(cli, os.X_OK):
        return skip(f"no evloop_autotune at {cli}")
    if any(ch in path for ch in ",;="):
        return skip(f"the profile path {path} holds one of , ; = (EVLOOP_BENCH_EVLOOP_CONFIGS "
                    "separators)")
    print(f"calibrating: {command}", flush=True)
    try:
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60 + 10 * seconds)
    except (OSError, subprocess.TimeoutExpired) as e:
        return skip(f"evloop_autotune failed: {e}")
    if r.returncode != 0 or not os.path.exists(path):
        tail = (r.stderr or r.stdout).strip().splitlines()[-1:] or [""]
        return skip(f"evloop_autotune exited with {r.returncode} {tail[0]}".strip())
    with open(path) as f:
        text = f.read()
    return {"path": path, "text": text, "command": command, "config": f"profile={path}"}


# ---------------------------------------------------------------- network family (tournament/net)
# The HTTP servers under wrk are not google-benchmark families: tournament/net/run_net.py runs
# them (after the rounds, with --net-build) into <out>/net/, and its section joins the report.

def run_net_family(build, outdir, quick, options):
    """Runs tournament/net/run_net.py into outdir/net; returns True when it wrote net.json."""
    netdir = os.path.join(outdir, "net")
    stale = os.path.join(netdir, "net.json")
    if os.path.exists(stale):
        os.remove(stale)  # an old run's figures must not pass for this run's
    cmd = [sys.executable, os.path.join(TOURNAMENT_DIR, "net", "run_net.py"), "--build", build,
           "--out", netdir] + (["--quick"] if quick else []) + options
    print(f"network family: {' '.join(cmd[1:])}", flush=True)
    env = dict(os.environ, EVLOOP_NET_COMMAND="tournament/net/run_net.py " + " ".join(
        (["--quick"] if quick else []) + options) + " (from the tournament)")
    try:
        rc = subprocess.run(cmd, env=env, timeout=3600).returncode
    except (OSError, subprocess.TimeoutExpired) as e:
        print(f"warning: the network family failed: {e}", file=sys.stderr, flush=True)
        return False
    if rc != 0:
        print(f"warning: tournament/net/run_net.py exited with {rc}", file=sys.stderr, flush=True)
    return os.path.exists(stale)

