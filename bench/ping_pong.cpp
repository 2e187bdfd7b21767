// PingPong (the flood): one producer submits kTasks tasks back to back, then waits once
// until all ran, spinning (so its own wake-up never enters the figure). One op = one task;
// ns_per_op is the hand-off throughput of one producer.
#include "harness.h"

namespace
{

constexpr uint64_t kTasks = 100000;

void run(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd; // declared before the loop, so it outlives every task
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(kTasks);
        uint64_t t0 = bench::now_ns();
        if (!bench::submit_many(loop, bench::Countdown::task, &cd, kTasks)) {
            bench::Measure::fail(s, "submit refused");
            break;
        }
        if (!cd.done.wait_spin()) {
            bench::Measure::fail(s, "tasks did not all run");
            break;
        }
        m.iteration(s, bench::now_ns() - t0, kTasks);
    }
    m.finish(s);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("PingPong", t, "", run);
}

} // namespace

BENCH_FAMILY("PingPong", register_family);
