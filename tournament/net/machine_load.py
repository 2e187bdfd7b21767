"""How busy the machine is: the CPU other processes use while a benchmark runs.

Shared by the network family (run_net.py, beside it) and the tournament
(tournament/tournament_run.py, which imports it as net.machine_load, one folder up): both wait for a quiet machine, measure what other processes used
during a run, and run a disturbed run again. On a 2-core machine a spinning benchmark is
set by whatever else holds a core. Linux /proc only; Python 3 standard library.
"""
import os
import resource
import time

BUSY = 0.3  # cores used by other processes above which a run counts as disturbed


def cpu_busy_seconds():
    """Busy CPU seconds of the whole machine so far, from /proc/stat."""
    try:
        with open("/proc/stat") as f:
            fields = [int(x) for x in f.readline().split()[1:]]
    except OSError:
        return 0.0
    user, nice, system, idle, iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    return (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")


def children_cpu_seconds():
    """CPU seconds (user + system) of this process's waited-for children so far."""
    ru = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ru.ru_utime + ru.ru_stime


def foreign_load(seconds=1.0):
    """Cores kept busy by other processes, sampled while nothing of ours runs."""
    a = cpu_busy_seconds()
    time.sleep(seconds)
    return (cpu_busy_seconds() - a) / seconds
