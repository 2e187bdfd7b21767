// SubmitInternalChain: the producer submits hop 1 with evloop_submit_internal; every hop,
// running on the loop thread, submits the next one the same way; hop 32 signals the
// producer, who spins. One op = one hop; each step is a whole chain, so p50 / p99 are of
// whole chains. libev and libuv hop through submit (native = 0).
#include "kernel.h"

namespace bench
{
namespace
{

class Chain : public Kernel
{
  public:
    Chain(const Target &t, const Params &p) : hops_(p.tasks), loop_(t)
    {
        step_samples = true;
        if (hops_ == 0)
            error = "hops (tasks) must be > 0";
        else if (loop_.ok())
            loop_.warm_up(100, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        hops_left_ = hops_;
        done_.reset();
        uint64_t t0 = now_ns();
        if (loop_.submit_internal(hop_task, this) < 0 || !done_.wait_spin() || refused_)
            return fail("chain broken");
        *timed_ns = now_ns() - t0;
        *ops = hops_;
        return true;
    }
    void finish(Counters &c) override
    {
        c["native"] = loop_.has_internal() ? 1 : 0;
    }

  private:
    static void hop_task(void *arg)
    {
        auto *k = static_cast<Chain *>(arg);
        if (--k->hops_left_ == 0) {
            k->done_.set();
            return;
        }
        if (k->loop_.submit_internal(hop_task, k) < 0) {
            k->refused_ = true;
            k->done_.set();
        }
    }

    uint64_t hops_;
    uint64_t hops_left_ = 0; // loop thread while a chain runs
    bool refused_ = false;
    Signal done_;
    Loop loop_;
};

BENCH_KERNEL({"SubmitInternalChain", construct<Chain>, nullptr, "", make_params("", 32)});

} // namespace
} // namespace bench
