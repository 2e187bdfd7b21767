// PingPongLatency: one task at a time, the producer waiting for it to run before the next.
// One op = one round trip (submit -> task runs -> producer sees it), three ways:
//   hot       the producer spins on the flag the task sets, then resubmits at once;
//   cold      as hot, after an untimed 50 us busy gap, so the loop has gone idle;
//   blocking  the producer sleeps on a futex that the task wakes (both sides may sleep).
// Counters p50_ns / p99_ns of the round trips; the floors run here too.
#include <algorithm>

#include "harness.h"

namespace
{

enum class Mode { hot, cold, blocking };

constexpr uint64_t kColdGapNs = 50000;

void run(benchmark::State &s, const bench::Target &t, Mode mode)
{
    bench::Signal sig;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(mode == Mode::hot ? 2000 : 200);
    bench::Samples samples;
    samples.reserve(size_t(std::min<int64_t>(s.max_iterations, 4000000)));
    bench::Measure m(loop);
    for (auto _ : s) {
        if (mode == Mode::cold)
            bench::spin_for_ns(kColdGapNs);
        sig.reset();
        uint64_t t0 = bench::now_ns();
        if (loop.submit(bench::set_signal_task, &sig) < 0) {
            bench::Measure::fail(s, "submit refused");
            break;
        }
        bool ok = mode == Mode::blocking ? sig.wait_block() : sig.wait_spin();
        uint64_t dt = bench::now_ns() - t0;
        if (!ok) {
            bench::Measure::fail(s, "task did not run");
            break;
        }
        samples.add(int64_t(dt));
        m.iteration(s, dt, 1);
    }
    samples.report(s);
    m.finish(s);
}

void register_family()
{
    const struct {
        const char *name;
        Mode mode;
        double time_scale; // the cold gap is untimed: keep its wall time in check
    } modes[] = {
        {"hot", Mode::hot, 1.0}, {"cold", Mode::cold, 0.3}, {"blocking", Mode::blocking, 0.5}};
    for (const auto &md : modes) {
        Mode mode = md.mode;
        for (const bench::Target &t : bench::targets(0, true))
            bench::add("PingPongLatency", t, md.name,
                       [mode](benchmark::State &s, const bench::Target &tt) { run(s, tt, mode); })
                ->MinTime(bench::min_time() * md.time_scale);
    }
}

} // namespace

BENCH_FAMILY("PingPongLatency", register_family);
