// InternalPriority: while the loop is busy in a callback, 64 external tasks are submitted
// and then one internal task (evloop_submit_internal). When the callback ends, how many
// externals ran before the internal one (counter externals_first; 0 is the goal) and how
// long after the release it ran (ns_per_op, one op = one internal task). libev and libuv
// have one queue: their "internal" task goes through submit (native = 0).
#include "kernel.h"

namespace bench
{
namespace
{

class InternalPriority : public Kernel
{
  public:
    InternalPriority(const Target &t, const Params &p) : externals_(p.tasks), loop_(t)
    {
        if (loop_.ok())
            loop_.warm_up(100, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        started_.reset();
        release_.store(false, std::memory_order_relaxed);
        cd_.arm(externals_ + 1);
        externals_run_ = 0;
        if (loop_.submit(blocker_task, this) < 0 || !started_.wait_spin())
            return fail("blocker did not run");
        bool ok = submit_many(loop_, external_task, this, externals_) &&
                  loop_.submit_internal(internal_task, this) == 0;
        uint64_t released = now_ns();
        // release: pairs with the acquire load in blocker_task()
        release_.store(true, std::memory_order_release);
        if (!ok)
            return fail("submit refused");
        if (!cd_.done.wait_hybrid())
            return fail("tasks did not all run");
        *timed_ns = internal_ran_at_ - released;
        *ops = 1;
        externals_first_sum_ += double(externals_first_);
        iterations_++;
        return true;
    }
    void finish(Counters &c) override
    {
        c["externals_first"] = iterations_ ? externals_first_sum_ / double(iterations_) : 0;
        c["native"] = loop_.has_internal() ? 1 : 0;
    }

  private:
    static void blocker_task(void *arg)
    {
        auto *k = static_cast<InternalPriority *>(arg);
        k->started_.set();
        uint64_t deadline = now_ns() + kWaitLimitNs;
        // acquire: pairs with the release store in step()
        while (!k->release_.load(std::memory_order_acquire) && now_ns() < deadline)
            cpu_relax();
    }
    static void external_task(void *arg)
    {
        auto *k = static_cast<InternalPriority *>(arg);
        k->externals_run_++;
        Countdown::task(&k->cd_);
    }
    static void internal_task(void *arg)
    {
        auto *k = static_cast<InternalPriority *>(arg);
        k->internal_ran_at_ = now_ns();
        k->externals_first_ = k->externals_run_;
        Countdown::task(&k->cd_);
    }

    Countdown cd_;
    Signal started_;
    std::atomic<bool> release_{false};
    uint64_t externals_;
    uint64_t externals_run_ = 0;   // loop thread only
    uint64_t externals_first_ = 0; // loop thread, read after cd_.done
    uint64_t internal_ran_at_ = 0; // loop thread, read after cd_.done
    double externals_first_sum_ = 0;
    uint64_t iterations_ = 0;
    Loop loop_;
};

BENCH_KERNEL({"InternalPriority", construct<InternalPriority>, nullptr, "", make_params("", 64)});

} // namespace
} // namespace bench
