// PingPong (the flood): one producer submits kTasks tasks back to back, then waits once
// until all ran, spinning (so its own wake-up never enters the figure). One op = one task;
// ns_per_op is the hand-off throughput of one producer.
#include "harness.h"

namespace
{

constexpr uint64_t kTasks = 100000;

void run(benchmark::State &s, const bench::Target &t)
{
    bench::run_submit_batches(s, t, kTasks);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("PingPong", t, "", run);
}

} // namespace

BENCH_FAMILY("PingPong", register_family);
