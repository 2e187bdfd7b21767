// AllocsPerSubmit: heap allocations per submitted task in a steady-state flood. One
// producer floods 10,000 tasks and waits (spinning) until all ran. Warm-up first: floods
// whose tasks all queue up behind a task that holds the loop until the last submit, so
// every queue, arena or chunk cache has grown to a whole flood's backlog (the most a
// measured flood can reach) before counting starts. While a measured flood runs, every
// allocation of the process is counted (bench/alloc_count.c interposes malloc and
// friends; glibc only, in the google-benchmark binary only: this kernel is not compiled
// into the Python extension). One op = one task. Counters:
//   allocs_per_op  allocating calls (malloc, calloc, realloc, aligned) per task, any thread
//   frees_per_op   frees per task
// Where the allocator cannot be interposed the family still runs and labels itself
// "allocs not measured" (no allocs_per_op counter).
#include "alloc_count.h"
#include "flood.h"

namespace bench
{
namespace
{

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
    uint64_t deadline = now_ns() + kHoldNs;
    // acquire: pairs with the release store in held_flood()
    while (!g->open.load(std::memory_order_acquire) && now_ns() < deadline)
        cpu_relax();
    // release: the producer may free the gate once it reads this
    g->left.store(true, std::memory_order_release);
}

class AllocsPerSubmit : public Flood
{
  public:
    AllocsPerSubmit(const Target &t, const Params &p) : Flood(t, p.tasks, 1, p.warm_up_s)
    {
        if (!ok())
            return;
        // The floors hand over one task at a time: there is no queue to grow.
        for (int i = 0; i < kWarmFloods; i++)
            if ((!t.is_floor() && !held_flood()) || !flood()) {
                error = "warm-up flood did not run";
                return;
            }
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        uint64_t a0 = bench_alloc_count_allocs(), f0 = bench_alloc_count_frees();
        bench_alloc_count_enable(true);
        uint64_t t0 = now_ns();
        bool ran = flood();
        uint64_t t1 = now_ns();
        bench_alloc_count_enable(false);
        if (!ran)
            return fail("tasks did not all run");
        allocs_ += bench_alloc_count_allocs() - a0;
        frees_ += bench_alloc_count_frees() - f0;
        counted_ += tasks_;
        *timed_ns = t1 - t0;
        *ops = tasks_;
        return true;
    }
    void finish(Counters &c) override
    {
        double n = double(counted_ ? counted_ : 1);
        if (bench_alloc_count_available()) {
            c["allocs_per_op"] = double(allocs_) / n;
            c["frees_per_op"] = double(frees_) / n;
        } else {
            label = "allocs not measured (needs glibc, no sanitizer)";
        }
    }

  private:
    // A flood queued whole while the loop is held. A system that refuses a submit (a
    // bounded queue) gets the loop back and the rest of the flood as it drains; one whose
    // submit waits gets it back when the gate gives up.
    bool held_flood()
    {
        Gate g;
        cd_.arm(tasks_);
        if (loop_.submit(gate_task, &g) < 0)
            return false;
        uint64_t i = 0;
        while (i < tasks_ && loop_.submit(Countdown::task, &cd_) == 0)
            i++;
        // release: pairs with the acquire load in gate_task()
        g.open.store(true, std::memory_order_release);
        uint64_t deadline = now_ns() + kWaitLimitNs;
        while (i < tasks_ && now_ns() < deadline)
            if (loop_.submit(Countdown::task, &cd_) == 0)
                i++;
        bool ok = i == tasks_ && cd_.done.wait_spin();
        // acquire: pairs with the release store at the end of gate_task()
        while (!g.left.load(std::memory_order_acquire))
            cpu_relax();
        return ok;
    }

    uint64_t allocs_ = 0, frees_ = 0, counted_ = 0;
};

BENCH_KERNEL({"AllocsPerSubmit", construct<AllocsPerSubmit>, nullptr, "", make_params("", 10000),
              true});

} // namespace
} // namespace bench
