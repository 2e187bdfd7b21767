// MicroCASContention: 1, 2, 4, 8, 16 and 32 producer threads submit at once into one
// loop. Only submission is timed (from the first producer starting to the last one
// finishing); that every task ran is checked after the timer stops. One op = one submit.
// The producers live across iterations (ProducerCrew), so thread start-up is not timed.
#include <string>

#include "harness.h"

namespace
{

constexpr uint64_t kTasksPerIteration = 32768;

void run(benchmark::State &s, const bench::Target &t, int producers)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    const uint64_t share = kTasksPerIteration / uint64_t(producers);
    const uint64_t total = share * uint64_t(producers);
    std::atomic<int> refused{0};
    bench::ProducerCrew crew(producers, [&](int) {
        if (!bench::submit_many(loop, bench::Countdown::task, &cd, share))
            refused.fetch_add(1, std::memory_order_relaxed);
    });
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(total);
        uint64_t first = 0, last = 0;
        bool ok = crew.round(&first, &last);
        if (!ok || refused.load()) {
            bench::Measure::fail(s, ok ? "submit refused" : "producers did not finish");
            break;
        }
        if (!cd.done.wait_hybrid()) { // the drain check, untimed
            bench::Measure::fail(s, "tasks did not all run");
            break;
        }
        m.iteration(s, last - first, total);
    }
    m.finish(s);
}

void register_family()
{
    for (int p : {1, 2, 4, 8, 16, 32})
        for (const bench::Target &t : bench::targets(BENCH_CAP_MPSC))
            bench::add("MicroCASContention", t, "producers:" + std::to_string(p),
                       [p](benchmark::State &s, const bench::Target &tt) { run(s, tt, p); })
                ->MinTime(bench::min_time() * 0.5);
}

} // namespace

BENCH_FAMILY("MicroCASContention", register_family);
