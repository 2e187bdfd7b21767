// IdleCost: what the loop burns once work stops. Each iteration floods 1000 tasks, waits
// for them, then the producer sleeps 10 ms and 50 ms more while the loop thread's CPU
// clock is read (the per-thread form of getrusage). Counters:
//   idle_cpu_pct            % of one core the loop used from 10 ms to 60 ms after work
//   idle_cpu_pct_first10ms  the same for the first 10 ms (spinning, decay)
//   ns_per_op               loop CPU ns per ms of idleness (10..60 ms); one op = 1 ms
//   loop_wakeups_per_s      times the loop thread woke per second of idleness
#include <time.h>

#include "harness.h"

namespace
{

constexpr uint64_t kTasks = 1000;
constexpr uint64_t kFirstNs = 10000000;
constexpr uint64_t kRestNs = 50000000;

void sleep_ns(uint64_t ns)
{
    timespec ts{time_t(ns / 1000000000u), long(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

void run(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    double first_cpu = 0, first_wall = 0, rest_cpu = 0, rest_wall = 0, rest_sleeps = 0;
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(kTasks);
        if (!bench::submit_many(loop, bench::Countdown::task, &cd, kTasks) ||
            !cd.done.wait_spin()) {
            bench::Measure::fail(s, "tasks did not all run");
            break;
        }
        // The window opens the moment the last task has run: a loop that spins before
        // sleeping spends that spin inside the first window.
        uint64_t a_wall = bench::now_ns(), a_cpu = loop.loop_cpu_ns();
        sleep_ns(kFirstNs);
        bench::Snapshot b = loop.snapshot();
        sleep_ns(kRestNs);
        bench::Snapshot c = loop.snapshot();
        first_cpu += double(b.loop_cpu_ns - a_cpu);
        first_wall += double(b.wall_ns - a_wall);
        rest_cpu += double(c.loop_cpu_ns - b.loop_cpu_ns);
        rest_wall += double(c.wall_ns - b.wall_ns);
        rest_sleeps += double(c.loop_sleeps - b.loop_sleeps);
        m.iteration(s, c.wall_ns - b.wall_ns, (c.wall_ns - b.wall_ns) / 1000000);
    }
    m.finish(s);
    if (rest_wall > 0) {
        s.counters["idle_cpu_pct"] = 100.0 * rest_cpu / rest_wall;
        s.counters["idle_cpu_pct_first10ms"] = 100.0 * first_cpu / first_wall;
        s.counters["ns_per_op"] = rest_cpu / (rest_wall / 1e6);
        s.counters["loop_wakeups_per_s"] = rest_sleeps / (rest_wall / 1e9);
    }
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("IdleCost", t, "", run)->MinTime(bench::min_time() * 0.5);
}

} // namespace

BENCH_FAMILY("IdleCost", register_family);
