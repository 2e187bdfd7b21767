// MicroCASContention: 1, 2, 4, 8, 16 and 32 producer threads submit 32768 tasks in all at
// once into one loop. Only submission is timed (from the first producer starting to the
// last one finishing); that every task ran is checked after the timer stops. One op = one
// submit. The producers live across iterations (ProducerCrew), so thread start-up is not
// timed.
#include "kernel.h"

namespace bench
{
namespace
{

class CasContention : public Kernel
{
  public:
    CasContention(const Target &t, const Params &p)
        : loop_(t), share_(p.producers > 0 ? p.tasks / uint64_t(p.producers) : 0),
          total_(share_ * uint64_t(p.producers > 0 ? p.producers : 0)),
          crew_(share_ ? p.producers : 0, [this](int) {
              if (!submit_many(loop_, Countdown::task, &cd_, share_))
                  refused_.fetch_add(1, std::memory_order_relaxed);
          })
    {
        if (share_ == 0)
            error = "producers must be >= 1 and tasks >= producers";
        else if (!(t.sys->caps & BENCH_CAP_MPSC))
            error = "this system takes one producer at a time";
        else if (loop_.ok())
            loop_.warm_up(100, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        cd_.arm(total_);
        uint64_t first = 0, last = 0;
        if (!crew_.round(&first, &last))
            return fail("producers did not finish");
        if (refused_.load())
            return fail("submit refused");
        if (!cd_.done.wait_hybrid()) // the drain check, untimed
            return fail("tasks did not all run");
        *timed_ns = last - first;
        *ops = total_;
        return true;
    }

  private:
    Countdown cd_;
    std::atomic<int> refused_{0};
    Loop loop_;
    uint64_t share_, total_;
    ProducerCrew crew_; // declared after the loop: its threads stop before the loop does
};

std::string producers_tail(const Params &p)
{
    return "producers:" + std::to_string(p.producers);
}

BENCH_KERNEL({"MicroCASContention", construct<CasContention>, producers_tail, "",
              make_params("", 32768, 1)});

} // namespace
} // namespace bench
