// BurstSubmit: bursts of 1000 submits from one producer, waiting (spinning) for each burst
// to run before the next. One op = one task.
#include "harness.h"

namespace
{

constexpr uint64_t kBurst = 1000;

void run(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(kBurst);
        uint64_t t0 = bench::now_ns();
        if (!bench::submit_many(loop, bench::Countdown::task, &cd, kBurst)) {
            bench::Measure::fail(s, "submit refused");
            break;
        }
        if (!cd.done.wait_spin()) {
            bench::Measure::fail(s, "tasks did not all run");
            break;
        }
        m.iteration(s, bench::now_ns() - t0, kBurst);
    }
    m.finish(s);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("BurstSubmit", t, "", run);
}

} // namespace

BENCH_FAMILY("BurstSubmit", register_family);
