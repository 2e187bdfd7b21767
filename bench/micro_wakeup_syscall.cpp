// MicroWakeupSyscall: what a submit costs depending on what the loop is doing, and how
// many wake syscalls it takes (counter wakes_per_op).
//   Running      the loop is busy inside a callback; 256 submits are timed (no wake is
//                needed); then the callback ends and the tasks drain, untimed.
//   Sleeping     the loop thread has been blocked in the kernel for >= 50 us; one submit
//                and the wait until it ran are timed. The futex floor runs here too.
//   Burst        as Sleeping, with a burst of 100 submits; one op = one task.
//   RapidSubmit  1024 submits back to back to a loop left to itself; only the submits are
//                timed, the drain is waited for after.
#include "harness.h"

namespace
{

constexpr uint64_t kRunningSubmits = 256;
constexpr uint64_t kBurst = 100;
constexpr uint64_t kRapidSubmits = 1024;
constexpr uint64_t kAsleepNs = 50000;

// A task that keeps the loop busy until released.
struct Blocker {
    bench::Signal started;
    std::atomic<bool> release{false};
    static void task(void *arg)
    {
        auto *b = static_cast<Blocker *>(arg);
        b->started.set();
        uint64_t deadline = bench::now_ns() + bench::kWaitLimitNs;
        while (!b->release.load(std::memory_order_acquire) && bench::now_ns() < deadline)
            bench::cpu_relax();
    }
};

void run_running(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    Blocker blocker;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    bench::Measure m(loop);
    for (auto _ : s) {
        blocker.started.reset();
        blocker.release.store(false, std::memory_order_relaxed);
        if (loop.submit(Blocker::task, &blocker) < 0 || !blocker.started.wait_spin()) {
            bench::Measure::fail(s, "blocker did not run");
            break;
        }
        cd.arm(kRunningSubmits);
        uint64_t t0 = bench::now_ns();
        bool ok = bench::submit_many(loop, bench::Countdown::task, &cd, kRunningSubmits);
        uint64_t dt = bench::now_ns() - t0;
        blocker.release.store(true, std::memory_order_release);
        if (!ok || !cd.done.wait_hybrid()) {
            bench::Measure::fail(s, ok ? "tasks did not all run" : "submit refused");
            break;
        }
        m.iteration(s, dt, kRunningSubmits);
    }
    m.finish(s);
}

// Waits until the loop thread has been blocked in the kernel for kAsleepNs; counts
// the times it never got there (a loop that never sleeps) in *missed.
void wait_deep_sleep(const bench::Loop &loop, uint64_t *missed)
{
    for (int tries = 0; tries < 3; tries++) {
        if (!loop.wait_until_asleep(20000000)) {
            (*missed)++;
            return;
        }
        bench::spin_for_ns(kAsleepNs);
        if (loop.wait_until_asleep(0))
            return;
    }
}

void run_sleeping(benchmark::State &s, const bench::Target &t, uint64_t burst)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    bench::Samples samples;
    uint64_t missed = 0;
    bench::Measure m(loop);
    for (auto _ : s) {
        wait_deep_sleep(loop, &missed);
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
        uint64_t dt = bench::now_ns() - t0;
        samples.add(int64_t(dt));
        m.iteration(s, dt, burst);
    }
    m.finish(s);
    if (burst == 1)
        samples.report(s);
    s.counters["never_asleep"] = double(missed);
}

void run_rapid(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(kRapidSubmits);
        uint64_t t0 = bench::now_ns();
        bool ok = bench::submit_many(loop, bench::Countdown::task, &cd, kRapidSubmits);
        uint64_t dt = bench::now_ns() - t0;
        if (!ok || !cd.done.wait_hybrid()) {
            bench::Measure::fail(s, ok ? "tasks did not all run" : "submit refused");
            break;
        }
        m.iteration(s, dt, kRapidSubmits);
    }
    m.finish(s);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("MicroWakeupSyscall", t, "Running", run_running)
            ->MinTime(bench::min_time() * 0.5);
    for (const bench::Target &t : bench::targets(0, true)) {
        if (t.sys == &bench_system_floor_spin) // never sleeps: nothing to wake
            continue;
        bench::add("MicroWakeupSyscall", t, "Sleeping",
                   [](benchmark::State &s, const bench::Target &tt) { run_sleeping(s, tt, 1); })
            ->MinTime(bench::min_time() * 0.2);
    }
    for (const bench::Target &t : bench::targets(0))
        bench::add(
            "MicroWakeupSyscall", t, "Burst",
            [](benchmark::State &s, const bench::Target &tt) { run_sleeping(s, tt, kBurst); })
            ->MinTime(bench::min_time() * 0.2);
    for (const bench::Target &t : bench::targets(0))
        bench::add("MicroWakeupSyscall", t, "RapidSubmit", run_rapid)
            ->MinTime(bench::min_time() * 0.5);
}

} // namespace

BENCH_FAMILY("MicroWakeupSyscall", register_family);
