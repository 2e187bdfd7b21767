// InternalPriority: while the loop is busy in a callback, 64 external tasks are submitted
// and then one internal task (evloop_submit_internal). When the callback ends, how many
// externals ran before the internal one (counter externals_first; 0 is the goal) and how
// long after the release it ran (ns_per_op, one op = one internal task). libev and libuv
// have one queue: their "internal" task goes through submit (native = 0).
#include "harness.h"

namespace
{

constexpr uint64_t kExternals = 64;

struct Ctx {
    bench::Countdown cd;
    bench::Signal started;
    std::atomic<bool> release{false};
    uint64_t externals_run = 0;   // loop thread only
    uint64_t externals_first = 0; // loop thread, read after cd.done
    uint64_t internal_ran_at = 0; // loop thread, read after cd.done
};

void blocker_task(void *arg)
{
    auto *c = static_cast<Ctx *>(arg);
    c->started.set();
    uint64_t deadline = bench::now_ns() + bench::kWaitLimitNs;
    while (!c->release.load(std::memory_order_acquire) && bench::now_ns() < deadline)
        bench::cpu_relax();
}

void external_task(void *arg)
{
    auto *c = static_cast<Ctx *>(arg);
    c->externals_run++;
    bench::Countdown::task(&c->cd);
}

void internal_task(void *arg)
{
    auto *c = static_cast<Ctx *>(arg);
    c->internal_ran_at = bench::now_ns();
    c->externals_first = c->externals_run;
    bench::Countdown::task(&c->cd);
}

void run(benchmark::State &s, const bench::Target &t)
{
    Ctx c;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    double externals_first = 0;
    uint64_t iterations = 0;
    bench::Measure m(loop);
    for (auto _ : s) {
        c.started.reset();
        c.release.store(false, std::memory_order_relaxed);
        c.cd.arm(kExternals + 1);
        c.externals_run = 0;
        if (loop.submit(blocker_task, &c) < 0 || !c.started.wait_spin()) {
            bench::Measure::fail(s, "blocker did not run");
            break;
        }
        bool ok = bench::submit_many(loop, external_task, &c, kExternals) &&
                  loop.submit_internal(internal_task, &c) == 0;
        uint64_t released = bench::now_ns();
        c.release.store(true, std::memory_order_release);
        if (!ok || !c.cd.done.wait_hybrid()) {
            bench::Measure::fail(s, ok ? "tasks did not all run" : "submit refused");
            break;
        }
        m.iteration(s, c.internal_ran_at - released, 1);
        externals_first += double(c.externals_first);
        iterations++;
    }
    m.finish(s);
    s.counters["externals_first"] = iterations ? externals_first / double(iterations) : 0;
    s.counters["native"] = loop.has_internal() ? 1 : 0;
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("InternalPriority", t, "", run)->MinTime(bench::min_time() * 0.3);
}

} // namespace

BENCH_FAMILY("InternalPriority", register_family);
