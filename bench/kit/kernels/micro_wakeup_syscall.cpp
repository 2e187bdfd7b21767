// MicroWakeupSyscall: what a submit costs depending on what the loop is doing, and how
// many wake syscalls it takes (counter wakes_per_op).
//   Running      the loop is busy inside a callback; 256 submits are timed (no wake is
//                needed); then the callback ends and the tasks drain, untimed.
//   Sleeping     the loop thread has been blocked in the kernel for >= 50 us; one submit
//                and the wait until it ran are timed (p50 / p99 of those). The futex
//                floor runs here too.
//   Burst        as Sleeping, with a burst of 100 submits; one op = one task.
//   RapidSubmit  1024 submits back to back to a loop left to itself; only the submits are
//                timed, the drain is waited for after.
// Counter never_asleep (Sleeping, Burst): iterations whose loop never went to sleep.
#include "kernel.h"

namespace bench
{
namespace
{

constexpr uint64_t kAsleepNs = 50000;

// A task that keeps the loop busy until released.
struct Blocker {
    Signal started;
    std::atomic<bool> release{false};
    static void task(void *arg)
    {
        auto *b = static_cast<Blocker *>(arg);
        b->started.set();
        uint64_t deadline = now_ns() + kWaitLimitNs;
        // acquire: pairs with the release store in Running::step()
        while (!b->release.load(std::memory_order_acquire) && now_ns() < deadline)
            cpu_relax();
    }
};

class WakeupSyscall : public Kernel
{
  public:
    WakeupSyscall(const Target &t, const Params &p) : loop_(t), tasks_(p.tasks)
    {
        if (p.shape == "Running")
            shape_ = Shape::running;
        else if (p.shape == "RapidSubmit")
            shape_ = Shape::rapid;
        else
            shape_ = Shape::sleeping;
        step_samples = shape_ == Shape::sleeping && tasks_ == 1;
        if (tasks_ == 0)
            error = "tasks must be > 0";
        else if (loop_.ok())
            loop_.warm_up(100, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        *ops = tasks_;
        switch (shape_) {
        case Shape::running: return step_running(timed_ns);
        case Shape::sleeping: return step_sleeping(timed_ns);
        case Shape::rapid: return step_rapid(timed_ns);
        }
        return false;
    }
    void finish(Counters &c) override
    {
        if (shape_ == Shape::sleeping)
            c["never_asleep"] = double(missed_);
    }

  private:
    enum class Shape { running, sleeping, rapid };

    bool step_running(uint64_t *timed_ns)
    {
        blocker_.started.reset();
        blocker_.release.store(false, std::memory_order_relaxed);
        if (loop_.submit(Blocker::task, &blocker_) < 0 || !blocker_.started.wait_spin())
            return fail("blocker did not run");
        cd_.arm(tasks_);
        uint64_t t0 = now_ns();
        bool ok = submit_many(loop_, Countdown::task, &cd_, tasks_);
        *timed_ns = now_ns() - t0;
        // release: pairs with the acquire load in Blocker::task()
        blocker_.release.store(true, std::memory_order_release);
        if (!ok)
            return fail("submit refused");
        return cd_.done.wait_hybrid() || fail("tasks did not all run");
    }

    // Waits until the loop thread has been blocked in the kernel for kAsleepNs; counts
    // the times it never got there (a loop that never sleeps) in missed_.
    void wait_deep_sleep()
    {
        for (int tries = 0; tries < 3; tries++) {
            if (!loop_.wait_until_asleep(20000000)) {
                missed_++;
                return;
            }
            spin_for_ns(kAsleepNs);
            if (loop_.wait_until_asleep(0))
                return;
        }
    }

    bool step_sleeping(uint64_t *timed_ns)
    {
        wait_deep_sleep();
        cd_.arm(tasks_);
        uint64_t t0 = now_ns();
        if (!submit_many(loop_, Countdown::task, &cd_, tasks_))
            return fail("submit refused");
        if (!cd_.done.wait_spin())
            return fail("tasks did not all run");
        *timed_ns = now_ns() - t0;
        return true;
    }

    bool step_rapid(uint64_t *timed_ns)
    {
        cd_.arm(tasks_);
        uint64_t t0 = now_ns();
        bool ok = submit_many(loop_, Countdown::task, &cd_, tasks_);
        *timed_ns = now_ns() - t0;
        if (!ok)
            return fail("submit refused");
        return cd_.done.wait_hybrid() || fail("tasks did not all run");
    }

    Countdown cd_;
    Blocker blocker_;
    Loop loop_;
    Shape shape_;
    uint64_t tasks_;
    uint64_t missed_ = 0;
};

std::unique_ptr<Kernel> make(const Target &t, const Params &p)
{
    // The shapes' own sizes, unless the caller set one.
    Params q = p;
    if (q.tasks == 0)
        q.tasks = p.shape == "Running"       ? 256
                  : p.shape == "Sleeping"    ? 1
                  : p.shape == "Burst"       ? 100
                                             : 1024;
    return std::make_unique<WakeupSyscall>(t, q);
}

BENCH_KERNEL({"MicroWakeupSyscall", make, shape_tail, "Running, Sleeping, Burst, RapidSubmit",
              make_params("Sleeping", 0)});

} // namespace
} // namespace bench
