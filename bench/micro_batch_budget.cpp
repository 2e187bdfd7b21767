// MicroBatchBudget: how the external batch budget shapes throughput and latency.
//   Throughput/burst:B  bursts of B submits, wait (spinning) for each; one op = one task.
//   Latency/burst:B     the same bursts, every task stamped at submit: p50 / p99 of
//                       submit-to-run per task; ns_per_op is the mean of those.
//   Continuous          4 producers stream tasks at once; one op = one task, with the
//                       per-task submit-to-run p50 / p99.
// evloop runs with its adaptive budget and, on its first backend, with fixed budgets
// (evloop-arena@budget64/epoll ...), so the adaptive one is judged against them.
#include <algorithm>
#include <string>
#include <vector>

#include "harness.h"

namespace
{

const std::vector<unsigned> kFixedBudgets = {16, 64, 256, 4096};
constexpr int kContinuousProducers = 4;
constexpr uint64_t kContinuousShare = 8192;

struct Stamp {
    uint64_t submitted;
    uint64_t latency;
    bench::Countdown *cd;
};

void stamp_task(void *arg)
{
    auto *st = static_cast<Stamp *>(arg);
    st->latency = bench::now_ns() - st->submitted;
    bench::Countdown::task(st->cd);
}

void run_throughput(benchmark::State &s, const bench::Target &t, uint64_t burst)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(burst);
        uint64_t t0 = bench::now_ns();
        if (!bench::submit_many(loop, bench::Countdown::task, &cd, burst)) {
            bench::Measure::fail(s, "submit refused");
            break;
        }
        if (!cd.done.wait_spin()) {
            bench::Measure::fail(s, "tasks did not all run");
            break;
        }
        m.iteration(s, bench::now_ns() - t0, burst);
    }
    m.finish(s);
}

void run_latency(benchmark::State &s, const bench::Target &t, uint64_t burst)
{
    bench::Countdown cd;
    std::vector<Stamp> stamps(burst, Stamp{0, 0, &cd});
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    bench::Samples samples;
    double latency_sum = 0;
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(burst);
        uint64_t t0 = bench::now_ns();
        bool ok = true;
        for (Stamp &st : stamps) {
            st.submitted = bench::now_ns();
            if (loop.submit(stamp_task, &st) < 0) {
                ok = false;
                break;
            }
        }
        if (!ok || !cd.done.wait_spin()) {
            bench::Measure::fail(s, ok ? "tasks did not all run" : "submit refused");
            break;
        }
        m.iteration(s, bench::now_ns() - t0, burst);
        for (const Stamp &st : stamps) {
            samples.add(int64_t(st.latency));
            latency_sum += double(st.latency);
        }
    }
    m.finish(s);
    samples.report(s);
    if (samples.size())
        s.counters["ns_per_op"] = latency_sum / double(samples.size());
}

void run_continuous(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    std::vector<std::vector<Stamp>> stamps(kContinuousProducers,
                                           std::vector<Stamp>(kContinuousShare, Stamp{0, 0, &cd}));
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    std::atomic<int> refused{0};
    bench::ProducerCrew crew(kContinuousProducers, [&](int p) {
        for (Stamp &st : stamps[size_t(p)]) {
            st.submitted = bench::now_ns();
            if (loop.submit(stamp_task, &st) < 0) {
                refused.fetch_add(1, std::memory_order_relaxed);
                return;
            }
        }
    });
    const uint64_t total = kContinuousShare * kContinuousProducers;
    bench::Samples samples;
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(total);
        uint64_t first = 0, last = 0;
        bool ok = crew.round(&first, &last) && !refused.load();
        if (!ok || !cd.done.wait_block()) {
            bench::Measure::fail(s, ok ? "tasks did not all run" : "submit refused");
            break;
        }
        // Timed from the first submit to the last task run.
        uint64_t end = 0;
        for (const auto &v : stamps)
            for (const Stamp &st : v) {
                samples.add(int64_t(st.latency));
                end = std::max(end, st.submitted + st.latency);
            }
        m.iteration(s, end - first, total);
    }
    m.finish(s);
    samples.report(s);
}

void register_family()
{
    std::vector<bench::Target> all = bench::targets(BENCH_CAP_MPSC);
    for (const bench::Target &t : bench::evloop_budget_targets(kFixedBudgets))
        all.push_back(t);
    for (uint64_t b : {64, 256, 1024, 4096}) {
        std::string p = "burst:" + std::to_string(b);
        for (const bench::Target &t : all)
            bench::add(
                "MicroBatchBudget", t, "Throughput/" + p,
                [b](benchmark::State &s, const bench::Target &tt) { run_throughput(s, tt, b); })
                ->MinTime(bench::min_time() * 0.5);
        for (const bench::Target &t : all)
            bench::add("MicroBatchBudget", t, "Latency/" + p,
                       [b](benchmark::State &s, const bench::Target &tt) { run_latency(s, tt, b); })
                ->MinTime(bench::min_time() * 0.5);
    }
    for (const bench::Target &t : all)
        bench::add("MicroBatchBudget", t, "Continuous", run_continuous)
            ->MinTime(bench::min_time() * 0.5);
}

} // namespace

BENCH_FAMILY("MicroBatchBudget", register_family);
