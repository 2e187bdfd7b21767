// What evloop_bench measures: one row per benchmark family, saying what it runs, what one
// op is, which targets it runs for (harness.h: targets()) and which kernel runs it
// (kit/kernels/*.cpp, where the op is defined in full). Registration only: main() calls
// register_families() after the systems were probed, and every family registers
// add_kernel() entries named Family/target[/tail] (kit/kernels/kernel.h: benchmark_name()).
// The table is in name order, the order every round registers and runs the families
// (targets inside a family rotate per round instead).
#include <vector>

#include "harness.h"

namespace bench
{
namespace
{

struct Family {
    const char *name;
    void (*add)();
};

// MicroBatchBudget: evloop with its adaptive budget and, on its first backend, with fixed
// budgets (evloop-arena@budget64/epoll ...), so the adaptive one is judged against them.
void add_micro_batch_budget()
{
    std::vector<Target> all = targets(BENCH_CAP_MPSC);
    for (const Target &t : evloop_budget_targets({16, 64, 256, 4096}))
        all.push_back(t);
    Params p;
    for (uint64_t burst : {64, 256, 1024, 4096}) {
        p.tasks = burst;
        for (const char *shape : {"Throughput", "SubmitToRun"}) {
            p.shape = shape;
            for (const Target &t : all)
                add_kernel("MicroBatchBudget", t, p)->MinTime(min_time() * 0.5);
        }
    }
    p = Params();
    p.shape = "Continuous";
    for (const Target &t : all)
        add_kernel("MicroBatchBudget", t, p)->MinTime(min_time() * 0.5);
}

// MicroWakeupSyscall: Sleeping also runs the futex floor (the spinning floor never sleeps,
// so there is nothing to wake).
void add_micro_wakeup_syscall()
{
    const char *family = "MicroWakeupSyscall";
    add_for_targets(family, 0, false, make_params("Running", 0), 0.5);
    Params sleeping = make_params("Sleeping", 0);
    for (const Target &t : targets(0, true))
        if (t.sys != &bench_system_floor_spin)
            add_kernel(family, t, sleeping)->MinTime(min_time() * 0.2);
    add_for_targets(family, 0, false, make_params("Burst", 0), 0.2);
    add_for_targets(family, 0, false, make_params("RapidSubmit", 0), 0.5);
}

// add_for_targets(family, need, floors, params, time_scale): time_scale > 0 scales
// --benchmark_min_time for families whose single op, or untimed part, is long.
const Family kFamilies[] = {
    // The PingPong flood (20,000 tasks) while another thread churns the allocator and
    // sweeps a 32 MiB buffer through the caches. One op = one task.
    // kit/kernels/alloc_pressure.cpp
    {"AllocPressure", [] { add_for_targets("AllocPressure", 0); }},

    // Heap allocations per submitted task in a steady-state flood (allocs_per_op; glibc
    // builds without a sanitizer). One op = one task; the floors run too.
    // kit/kernels/allocs_per_submit.cpp
    {"AllocsPerSubmit", [] { add_for_targets("AllocsPerSubmit", 0, true); }},

    // The PingPong flood (100,000 tasks, one producer) in batches of 8, 64 and 1024 tasks
    // per evloop_submit_batch call (batch:N). libev and libuv have no batch call: they run
    // their per-task flood under the same names (native = 0), so each row reads "evloop
    // batch / libuv flood". One op = one task. kit/kernels/submit_flood.cpp
    {"BatchSubmit",
     [] {
         for (uint64_t batch : {8, 64, 1024})
             add_for_targets("BatchSubmit", 0, false, make_params("", 0, 0, batch));
     }},

    // Bursts of 1000 submits from one producer, waiting (spinning) for each burst to run
    // before the next. One op = one task. kit/kernels/submit_flood.cpp
    {"BurstSubmit", [] { add_for_targets("BurstSubmit", 0); }},

    // The % of a core the loop burns 10-60 ms after work stops (idle_cpu_pct), and in the
    // first 10 ms. One op = 1 ms of idleness. kit/kernels/idle_cost.cpp
    {"IdleCost", [] { add_for_targets("IdleCost", 0, false, Params(), 0.5); }},

    // 64 external tasks, then one internal task, queued behind a busy callback: how many
    // externals ran first (externals_first) and how long after the release the internal
    // one ran (one op). kit/kernels/internal_priority.cpp
    {"InternalPriority", [] { add_for_targets("InternalPriority", 0, false, Params(), 0.3); }},

    // How the external batch budget shapes throughput (Throughput/burst:B) and
    // submit-to-run latency (SubmitToRun/burst:B, Continuous). The latency shape is not
    // called "Latency", so that --benchmark_filter=Latency selects the latency families
    // only. kit/kernels/micro_batch_budget.cpp
    {"MicroBatchBudget", add_micro_batch_budget},

    // 1 to 32 producer threads submit at once; only submission is timed. One op = one
    // submit. kit/kernels/micro_cas_contention.cpp
    {"MicroCASContention",
     [] {
         for (int producers : {1, 2, 4, 8, 16, 32})
             add_for_targets("MicroCASContention", BENCH_CAP_MPSC, false,
                             make_params("", 0, producers), 0.5);
     }},

    // What a submit costs depending on what the loop is doing (Running, Sleeping, Burst,
    // RapidSubmit), and how many wake syscalls it takes (wakes_per_op).
    // kit/kernels/micro_wakeup_syscall.cpp
    {"MicroWakeupSyscall", add_micro_wakeup_syscall},

    // The hot round trip of PingPongLatency with the task queued as a microtask from the
    // producer thread (native = 0 where the system has none). kit/kernels/round_trip.cpp
    {"MicrotaskRoundTrip", [] { add_for_targets("MicrotaskRoundTrip", 0); }},

    // MultiProducer (10 producer threads) and MultiProducerContention (100), started inside
    // the timed region, 100,000 tasks in all. One op = one task.
    // kit/kernels/multi_producer.cpp
    {"MultiProducer",
     [] {
         add_for_targets("MultiProducer", BENCH_CAP_MPSC);
         add_for_targets("MultiProducerContention", BENCH_CAP_MPSC);
     }},

    // The flood: one producer submits 100,000 tasks back to back per iteration, then spins
    // until all ran. One op = one task. Shapes: the default (the loop counts the tasks and
    // sets one flag at the end) and shared (each task stores a counter the producer polls
    // after its last submit: PingPong/target/shared). kit/kernels/submit_flood.cpp
    {"PingPong",
     [] {
         add_for_targets("PingPong", 0);
         add_for_targets("PingPong", 0, false, make_params("shared", 0));
     }},

    // One task at a time, the producer waiting for it to run before the next, hot / cold /
    // blocking; one op = one round trip, with p50 / p99. The floors run too. The cold gap
    // is untimed: its min time is scaled down to keep the wall time in check.
    // kit/kernels/round_trip.cpp
    {"PingPongLatency",
     [] {
         add_for_targets("PingPongLatency", 0, true, make_params("hot", 0), 1.0);
         add_for_targets("PingPongLatency", 0, true, make_params("cold", 0), 0.3);
         add_for_targets("PingPongLatency", 0, true, make_params("blocking", 0), 0.5);
     }},

    // The fd ping-pong: a byte into a pipe the loop watches, the fd callback sets the flag
    // the producer spins on. One op = one round trip, with p50 / p99.
    // kit/kernels/readiness_round_trip.cpp
    // Shapes: alone; silent and sporadic, with another thread known to the loop that posts
    // once, or every 200 us (ReadinessRoundTrip/target/silent, .../sporadic).
    {"ReadinessRoundTrip",
     [] {
         add_for_targets("ReadinessRoundTrip", BENCH_CAP_IO);
         add_for_targets("ReadinessRoundTrip", BENCH_CAP_IO, false, make_params("silent", 0));
         add_for_targets("ReadinessRoundTrip", BENCH_CAP_IO, false, make_params("sporadic", 0));
     }},

    // A chain of 32 internal submits, each made by the previous hop on the loop thread. One
    // op = one hop; p50 / p99 are of whole chains. kit/kernels/submit_internal_chain.cpp
    {"SubmitInternalChain", [] { add_for_targets("SubmitInternalChain", 0); }},

    // A million one-shot timers started and fired (million; one op = one timer), and the
    // lateness of 100 timers at 1..20 ms (lateness; late_p50_ns / late_p99_ns).
    // kit/kernels/timers.cpp
    {"Timers",
     [] {
         add_for_targets("Timers", BENCH_CAP_TIMERS, false, make_params("million", 0));
         add_for_targets("Timers", BENCH_CAP_TIMERS, false, make_params("lateness", 0));
     }},
};

} // namespace

void register_families()
{
    for (const Family &f : kFamilies)
        f.add();
}

} // namespace bench
