// MultiProducer (10 producer threads) and MultiProducerContention (100): the producers are
// started inside the timed region, each submits its share of 100,000 tasks back to back,
// and the time runs until every task has run (the producer of the run sleeps meanwhile).
// One op = one task.
#include <thread>
#include <vector>

#include "kernel.h"

namespace bench
{
namespace
{

class MultiProducer : public Kernel
{
  public:
    MultiProducer(const Target &t, const Params &p) : loop_(t), producers_(p.producers)
    {
        if (producers_ < 1) {
            error = "producers must be >= 1";
            return;
        }
        if (!(t.sys->caps & BENCH_CAP_MPSC)) {
            error = "this system takes one producer at a time";
            return;
        }
        share_ = p.tasks / uint64_t(producers_);
        if (share_ == 0) {
            error = "tasks must be >= producers";
            return;
        }
        if (loop_.ok())
            loop_.warm_up(100, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        const uint64_t total = share_ * uint64_t(producers_);
        cd_.arm(total);
        std::atomic<int> refused{0};
        std::vector<std::thread> threads;
        threads.reserve(size_t(producers_));
        uint64_t t0 = now_ns();
        for (int i = 0; i < producers_; i++)
            threads.emplace_back([&] {
                if (!submit_many(loop_, Countdown::task, &cd_, share_))
                    refused.fetch_add(1, std::memory_order_relaxed);
            });
        bool ran = cd_.done.wait_block();
        *timed_ns = now_ns() - t0;
        *ops = total;
        for (std::thread &th : threads)
            th.join();
        if (refused.load())
            return fail("submit refused");
        return ran || fail("tasks did not all run");
    }

  private:
    Countdown cd_;
    Loop loop_;
    int producers_;
    uint64_t share_ = 0;
};

BENCH_KERNEL({"MultiProducer", construct<MultiProducer>, nullptr, "", make_params("", 100000, 10)});
BENCH_KERNEL({"MultiProducerContention", construct<MultiProducer>, nullptr, "",
              make_params("", 100000, 100)});

} // namespace
} // namespace bench
