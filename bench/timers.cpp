// Timers, two shapes, the timers started on the loop thread (libev and libuv timers are
// loop-thread only; evloop's are started the same way for a like-for-like comparison).
//   million   1,000,000 one-shot timers with deadlines spread pseudo-randomly over
//             1..16 ms (libuv rounds each up to its millisecond), started in one go and
//             all fired; one op = one timer (start + fire). The field's "million timers";
//             starting them takes longer than the spread, so this measures the timer
//             structure, not the wait. Counter start_ns_per_timer: the start phase alone.
//   lateness  100 timers per iteration at whole-millisecond delays 1..20 ms on an
//             otherwise idle loop; p50 / p99 of (fire time - requested deadline), signed
//             (libuv computes deadlines from its cached millisecond clock, so it can fire
//             early); ns_per_op is the mean lateness.
#include <string>
#include <vector>

#include "harness.h"

namespace
{

constexpr size_t kMillion = 1000000;
constexpr size_t kLateTimers = 100;

uint64_t mix(uint64_t x) // splitmix64: a fixed pseudo-random spread
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

void run_million(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    std::vector<uint64_t> delays(kMillion);
    for (size_t i = 0; i < kMillion; i++)
        delays[i] = 1000000 + mix(i) % 15000000;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    const bench_system *sys = loop.sys();
    loop.warm_up(100);
    double start_ns = 0;
    uint64_t timers = 0;
    bench::Measure m(loop);
    for (auto _ : s) {
        int r = 0;
        if (!loop.call([&](bench_loop *l) { r = sys->timers_reserve(l, kMillion); }) || r < 0) {
            bench::Measure::fail(s, "timers_reserve failed");
            break;
        }
        cd.arm(kMillion);
        uint64_t started_at = 0;
        uint64_t t0 = bench::now_ns();
        bool ok = loop.call([&](bench_loop *l) {
            for (size_t i = 0; i < kMillion && r == 0; i++)
                r = sys->timer_start(l, delays[i], bench::Countdown::task, &cd);
            started_at = bench::now_ns();
        });
        if (!ok || r < 0) {
            bench::Measure::fail(s, "timer_start failed: " + std::to_string(r));
            break;
        }
        if (!cd.done.wait_block()) {
            bench::Measure::fail(s, "timers did not all fire");
            break;
        }
        m.iteration(s, bench::now_ns() - t0, kMillion);
        start_ns += double(started_at - t0);
        timers += kMillion;
    }
    m.finish(s);
    if (timers)
        s.counters["start_ns_per_timer"] = start_ns / double(timers);
}

struct LateTimer {
    uint64_t deadline;
    uint64_t fired;
    bench::Countdown *cd;
};

void late_timer_task(void *arg)
{
    auto *lt = static_cast<LateTimer *>(arg);
    lt->fired = bench::now_ns();
    bench::Countdown::task(lt->cd);
}

void run_lateness(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    std::vector<LateTimer> recs(kLateTimers, LateTimer{0, 0, &cd});
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    const bench_system *sys = loop.sys();
    loop.warm_up(100);
    bench::Samples samples;
    double late_sum = 0;
    bench::Measure m(loop);
    for (auto _ : s) {
        int r = 0;
        cd.arm(kLateTimers);
        uint64_t t0 = bench::now_ns();
        bool ok = loop.call([&](bench_loop *l) {
            r = sys->timers_reserve(l, kLateTimers);
            for (size_t i = 0; i < kLateTimers && r == 0; i++) {
                uint64_t delay = (1 + i % 20) * 1000000ull;
                recs[i].deadline = bench::now_ns() + delay;
                r = sys->timer_start(l, delay, late_timer_task, &recs[i]);
            }
        });
        if (!ok || r < 0) {
            bench::Measure::fail(s, "timer_start failed: " + std::to_string(r));
            break;
        }
        if (!cd.done.wait_block()) {
            bench::Measure::fail(s, "timers did not all fire");
            break;
        }
        m.iteration(s, bench::now_ns() - t0, kLateTimers);
        for (const LateTimer &lt : recs) {
            int64_t late = int64_t(lt.fired) - int64_t(lt.deadline);
            samples.add(late);
            late_sum += double(late);
        }
    }
    m.finish(s);
    samples.report(s, "late_", true);
    if (samples.size())
        s.counters["ns_per_op"] = late_sum / double(samples.size());
}

void register_family()
{
    for (const bench::Target &t : bench::targets(BENCH_CAP_TIMERS))
        bench::add("Timers", t, "million", run_million);
    for (const bench::Target &t : bench::targets(BENCH_CAP_TIMERS))
        bench::add("Timers", t, "lateness", run_lateness);
}

} // namespace

BENCH_FAMILY("Timers", register_family);
