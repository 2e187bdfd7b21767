// MultiProducer (10 producer threads) and MultiProducerContention (100): the producers are
// started inside the timed region, each submits its share back to back, and the time runs
// until every task has run. One op = one task.
#include <thread>
#include <vector>

#include "harness.h"

namespace
{

constexpr uint64_t kTotalTasks = 100000;

void run(benchmark::State &s, const bench::Target &t, int producers)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    const uint64_t share = kTotalTasks / uint64_t(producers);
    const uint64_t total = share * uint64_t(producers);
    std::vector<std::thread> threads;
    threads.reserve(size_t(producers));
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(total);
        std::atomic<int> refused{0};
        uint64_t t0 = bench::now_ns();
        for (int p = 0; p < producers; p++)
            threads.emplace_back([&] {
                if (!bench::submit_many(loop, bench::Countdown::task, &cd, share))
                    refused.fetch_add(1, std::memory_order_relaxed);
            });
        bool ok = cd.done.wait_block();
        uint64_t dt = bench::now_ns() - t0;
        for (std::thread &th : threads)
            th.join();
        threads.clear();
        if (refused.load() || !ok) {
            bench::Measure::fail(s, refused.load() ? "submit refused" : "tasks did not all run");
            break;
        }
        m.iteration(s, dt, total);
    }
    m.finish(s);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(BENCH_CAP_MPSC))
        bench::add("MultiProducer", t, "",
                   [](benchmark::State &s, const bench::Target &tt) { run(s, tt, 10); });
    for (const bench::Target &t : bench::targets(BENCH_CAP_MPSC))
        bench::add("MultiProducerContention", t, "",
                   [](benchmark::State &s, const bench::Target &tt) { run(s, tt, 100); });
}

} // namespace

BENCH_FAMILY("MultiProducer", register_family);
