// MicrotaskRoundTrip: the hot round trip of PingPongLatency, with the task queued as a
// microtask from the producer thread. libev and libuv have no microtasks: they run the
// same round trip through their only cross-thread path (counter native = 0).
#include <algorithm>

#include "harness.h"

namespace
{

void run(benchmark::State &s, const bench::Target &t)
{
    bench::Signal sig;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(1000);
    bench::Samples samples;
    samples.reserve(size_t(std::min<int64_t>(s.max_iterations, 4000000)));
    bench::Measure m(loop);
    for (auto _ : s) {
        sig.reset();
        uint64_t t0 = bench::now_ns();
        if (loop.queue_microtask(bench::set_signal_task, &sig) < 0) {
            bench::Measure::fail(s, "microtask refused");
            break;
        }
        if (!sig.wait_spin()) {
            bench::Measure::fail(s, "microtask did not run");
            break;
        }
        uint64_t dt = bench::now_ns() - t0;
        samples.add(int64_t(dt));
        m.iteration(s, dt, 1);
    }
    samples.report(s);
    m.finish(s);
    s.counters["native"] = loop.has_microtask() ? 1 : 0;
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("MicrotaskRoundTrip", t, "", run);
}

} // namespace

BENCH_FAMILY("MicrotaskRoundTrip", register_family);
