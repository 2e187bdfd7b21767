// AllocsPerSubmit: heap allocations per submitted task in a steady-state flood. One
// producer floods kTasks tasks and waits (spinning) until all ran. Warm-up first: floods
// whose tasks all queue up behind a task that holds the loop until the last submit, so
// every queue, arena or chunk cache has grown to a whole flood's backlog (the most a
// measured flood can reach) before counting starts. While a measured flood runs, every
// allocation of the process is counted (alloc_count.c interposes malloc and friends;
// glibc only). One op = one task. Counters:
//   allocs_per_op  allocating calls (malloc, calloc, realloc, aligned) per task, any thread
//   frees_per_op   frees per task
// Where the allocator cannot be interposed the family still runs and labels itself
// "allocs not measured" (no allocs_per_op counter).
#include <atomic>

#include "alloc_count.h"
#include "harness.h"

namespace
{

constexpr uint64_t kTasks = 10000;
constexpr int kWarmFloods = 3;
// The longest a gate holds the loop: far more than queuing a flood takes, and a bound for
// a system whose submit waits for the loop (a full bounded queue).
constexpr uint64_t kHoldNs = 50000000;

// Holds the loop thread until the producer opens it, kHoldNs at most.
struct Gate {
    std::atomic<bool> open{false};
    std::atomic<bool> left{false};
};

void gate_task(void *arg)
{
    auto *g = static_cast<Gate *>(arg);
    uint64_t deadline = bench::now_ns() + kHoldNs;
    // acquire: pairs with the release store in held_flood()
    while (!g->open.load(std::memory_order_acquire) && bench::now_ns() < deadline)
        bench::cpu_relax();
    // release: the producer may free the gate once it reads this
    g->left.store(true, std::memory_order_release);
}

bool flood(bench::Loop &loop, bench::Countdown &cd)
{
    cd.arm(kTasks);
    return bench::submit_many(loop, bench::Countdown::task, &cd, kTasks) && cd.done.wait_spin();
}

// A flood queued whole while the loop is held. A system that refuses a submit (a bounded
// queue) gets the loop back and the rest of the flood as it drains; one whose submit
// waits gets it back when the gate gives up.
bool held_flood(bench::Loop &loop, bench::Countdown &cd)
{
    Gate g;
    cd.arm(kTasks);
    if (loop.submit(gate_task, &g) < 0)
        return false;
    uint64_t i = 0;
    while (i < kTasks && loop.submit(bench::Countdown::task, &cd) == 0)
        i++;
    // release: pairs with the acquire load in gate_task()
    g.open.store(true, std::memory_order_release);
    uint64_t deadline = bench::now_ns() + bench::kWaitLimitNs;
    while (i < kTasks && bench::now_ns() < deadline)
        if (loop.submit(bench::Countdown::task, &cd) == 0)
            i++;
    bool ok = i == kTasks && cd.done.wait_spin();
    // acquire: pairs with the release store at the end of gate_task()
    while (!g.left.load(std::memory_order_acquire))
        bench::cpu_relax();
    return ok;
}

void run(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    // The floors hand over one task at a time: there is no queue to grow.
    for (int i = 0; i < kWarmFloods; i++)
        if ((!t.is_floor() && !held_flood(loop, cd)) || !flood(loop, cd))
            return bench::Measure::fail(s, "warm-up flood did not run");
    uint64_t allocs = 0, frees = 0, tasks = 0;
    bench::Measure m(loop);
    for (auto _ : s) {
        uint64_t a0 = bench_alloc_count_allocs(), f0 = bench_alloc_count_frees();
        bench_alloc_count_enable(true);
        uint64_t t0 = bench::now_ns();
        bool ok = flood(loop, cd);
        uint64_t t1 = bench::now_ns();
        bench_alloc_count_enable(false);
        if (!ok) {
            bench::Measure::fail(s, "tasks did not all run");
            break;
        }
        allocs += bench_alloc_count_allocs() - a0;
        frees += bench_alloc_count_frees() - f0;
        tasks += kTasks;
        m.iteration(s, t1 - t0, kTasks);
    }
    m.finish(s);
    double ops = double(tasks ? tasks : 1);
    if (bench_alloc_count_available()) {
        s.counters["allocs_per_op"] = double(allocs) / ops;
        s.counters["frees_per_op"] = double(frees) / ops;
    } else {
        s.SetLabel("allocs not measured (needs glibc, no sanitizer)");
    }
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0, true))
        bench::add("AllocsPerSubmit", t, "", run);
}

} // namespace

BENCH_FAMILY("AllocsPerSubmit", register_family);
