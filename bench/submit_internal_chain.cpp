// SubmitInternalChain: the producer submits hop 1 with evloop_submit_internal; every hop,
// running on the loop thread, submits the next one the same way; hop 32 signals the
// producer, who spins. One op = one hop; p50 / p99 are of whole chains. libev and libuv
// hop through submit (native = 0).
#include <algorithm>

#include "harness.h"

namespace
{

constexpr int kHops = 32;

struct Chain {
    bench::Loop *loop;
    int hops_left;
    bool refused;
    bench::Signal done;
};

void hop_task(void *arg)
{
    auto *c = static_cast<Chain *>(arg);
    if (--c->hops_left == 0) {
        c->done.set();
        return;
    }
    if (c->loop->submit_internal(hop_task, c) < 0) {
        c->refused = true;
        c->done.set();
    }
}

void run(benchmark::State &s, const bench::Target &t)
{
    Chain c{nullptr, 0, false, {}};
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    c.loop = &loop;
    loop.warm_up(100);
    bench::Samples samples;
    samples.reserve(size_t(std::min<int64_t>(s.max_iterations, 4000000)));
    bench::Measure m(loop);
    for (auto _ : s) {
        c.hops_left = kHops;
        c.done.reset();
        uint64_t t0 = bench::now_ns();
        if (loop.submit_internal(hop_task, &c) < 0 || !c.done.wait_spin() || c.refused) {
            bench::Measure::fail(s, "chain broken");
            break;
        }
        uint64_t dt = bench::now_ns() - t0;
        samples.add(int64_t(dt));
        m.iteration(s, dt, kHops);
    }
    samples.report(s);
    m.finish(s);
    s.counters["native"] = loop.has_internal() ? 1 : 0;
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("SubmitInternalChain", t, "", run);
}

} // namespace

BENCH_FAMILY("SubmitInternalChain", register_family);
