// The round trips: one task at a time, the producer waiting for it to run before the next.
// One op = one round trip (submit -> task runs -> producer sees it); each step is one, so
// the p50 / p99 counters are of round trips.
//   PingPongLatency     three shapes:
//     hot       the producer spins on the flag the task sets, then resubmits at once;
//     cold      as hot, after an untimed busy gap (50 us), so the loop has gone idle;
//     blocking  the producer sleeps on a futex that the task wakes (both sides may sleep).
//     The floors run here too.
//   MicrotaskRoundTrip  the hot round trip with the task queued as a microtask from the
//     producer thread. libev and libuv have no microtasks: they run the same round trip
//     through their only cross-thread path (counter native = 0).
#include "kernel.h"

namespace bench
{
namespace
{

class RoundTrip : public Kernel
{
  public:
    enum class Path { submit, microtask };

    RoundTrip(const Target &t, const Params &p, Path path) : loop_(t), path_(path)
    {
        step_samples = true;
        gap_ns_ = p.shape == "cold" ? p.gap_ns : 0;
        blocking_ = p.shape == "blocking";
        int warm = path == Path::microtask ? 1000 : p.shape == "hot" ? 2000 : 200;
        if (loop_.ok())
            loop_.warm_up(warm, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        if (gap_ns_)
            spin_for_ns(gap_ns_);
        sig_.reset();
        uint64_t t0 = now_ns();
        int r = path_ == Path::microtask ? loop_.queue_microtask(set_signal_task, &sig_)
                                         : loop_.submit(set_signal_task, &sig_);
        if (r < 0)
            return fail("submit refused");
        bool ran = blocking_ ? sig_.wait_block() : sig_.wait_spin();
        *timed_ns = now_ns() - t0;
        *ops = 1;
        return ran || fail("task did not run");
    }
    void finish(Counters &c) override
    {
        if (path_ == Path::microtask)
            c["native"] = loop_.has_microtask() ? 1 : 0;
    }

  private:
    Signal sig_; // declared before the loop, so it outlives every task
    Loop loop_;
    Path path_;
    uint64_t gap_ns_ = 0;
    bool blocking_ = false;
};

std::unique_ptr<Kernel> make_latency(const Target &t, const Params &p)
{
    return std::make_unique<RoundTrip>(t, p, RoundTrip::Path::submit);
}

std::unique_ptr<Kernel> make_microtask(const Target &t, const Params &p)
{
    return std::make_unique<RoundTrip>(t, p, RoundTrip::Path::microtask);
}

BENCH_KERNEL({"PingPongLatency", make_latency, shape_tail, "hot, cold, blocking",
              make_params("hot", 0, 0, 0, 50000), true});
BENCH_KERNEL({"MicrotaskRoundTrip", make_microtask, nullptr, "hot, cold, blocking",
              make_params("hot", 0, 0, 0, 50000)});

} // namespace
} // namespace bench
