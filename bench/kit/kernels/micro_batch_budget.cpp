// MicroBatchBudget: how the external batch budget shapes throughput and latency.
//   Throughput/burst:B   bursts of B submits, wait (spinning) for each; one op = one task
//                        (the flood kernel).
//   SubmitToRun/burst:B  the same bursts, every task stamped at submit: p50 / p99 of
//                        submit-to-run per task; ns_per_op is the mean of those.
//   Continuous           4 producers stream 8192 tasks each at once; one op = one task,
//                        with the per-task submit-to-run p50 / p99.
#include <algorithm>
#include <vector>

#include "flood.h"

namespace bench
{
namespace
{

constexpr uint64_t kContinuousShare = 8192;

struct Stamp {
    uint64_t submitted;
    uint64_t latency;
    Countdown *cd;
};

void stamp_task(void *arg)
{
    auto *st = static_cast<Stamp *>(arg);
    st->latency = now_ns() - st->submitted;
    Countdown::task(st->cd);
}

class SubmitToRun : public Kernel
{
  public:
    SubmitToRun(const Target &t, const Params &p)
        : stamps_(p.tasks, Stamp{0, 0, &cd_}), loop_(t)
    {
        if (stamps_.empty())
            error = "tasks per burst must be > 0";
        else if (loop_.ok())
            loop_.warm_up(100, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        cd_.arm(stamps_.size());
        uint64_t t0 = now_ns();
        for (Stamp &st : stamps_) {
            st.submitted = now_ns();
            if (loop_.submit(stamp_task, &st) < 0)
                return fail("submit refused");
        }
        if (!cd_.done.wait_spin())
            return fail("tasks did not all run");
        *timed_ns = now_ns() - t0;
        *ops = stamps_.size();
        for (const Stamp &st : stamps_) {
            samples_.add(int64_t(st.latency));
            latency_sum_ += double(st.latency);
        }
        return true;
    }
    void finish(Counters &c) override
    {
        samples_.summarize(c);
        if (samples_.size())
            c["ns_per_op"] = latency_sum_ / double(samples_.size());
    }

  private:
    Countdown cd_;
    std::vector<Stamp> stamps_;
    Loop loop_;
    Samples samples_;
    double latency_sum_ = 0;
};

class Continuous : public Kernel
{
  public:
    Continuous(const Target &t, const Params &p)
        : stamps_(size_t(std::max(p.producers, 0)),
                  std::vector<Stamp>(kContinuousShare, Stamp{0, 0, &cd_})),
          loop_(t), crew_(std::max(p.producers, 0), [this](int i) { produce(i); })
    {
        if (p.producers < 1)
            error = "producers must be >= 1";
        else if (!(t.sys->caps & BENCH_CAP_MPSC))
            error = "this system takes one producer at a time";
        else if (loop_.ok())
            loop_.warm_up(100, p.warm_up_s);
    }
    Loop &loop() override
    {
        return loop_;
    }
    // Timed from the first submit to the last task run.
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        const uint64_t total = kContinuousShare * stamps_.size();
        cd_.arm(total);
        uint64_t first = 0, last = 0;
        bool ok = crew_.round(&first, &last) && !refused_.load();
        if (!ok || !cd_.done.wait_block())
            return fail(ok ? "tasks did not all run" : "submit refused");
        uint64_t end = 0;
        for (const auto &v : stamps_)
            for (const Stamp &st : v) {
                samples_.add(int64_t(st.latency));
                end = std::max(end, st.submitted + st.latency);
            }
        *timed_ns = end - first;
        *ops = total;
        return true;
    }
    void finish(Counters &c) override
    {
        samples_.summarize(c);
    }

  private:
    void produce(int p)
    {
        for (Stamp &st : stamps_[size_t(p)]) {
            st.submitted = now_ns();
            if (loop_.submit(stamp_task, &st) < 0) {
                refused_.fetch_add(1, std::memory_order_relaxed);
                return;
            }
        }
    }

    Countdown cd_;
    std::vector<std::vector<Stamp>> stamps_;
    std::atomic<int> refused_{0};
    Loop loop_;
    ProducerCrew crew_; // declared after the loop: its threads stop before the loop does
    Samples samples_;
};

std::unique_ptr<Kernel> make(const Target &t, const Params &p)
{
    if (p.shape == "Throughput")
        return make_flood(t, p);
    if (p.shape == "SubmitToRun")
        return std::make_unique<SubmitToRun>(t, p);
    // Continuous
    return std::make_unique<Continuous>(t, p);
}

std::string tail(const Params &p)
{
    return p.shape == "Continuous" ? p.shape : p.shape + "/burst:" + std::to_string(p.tasks);
}

BENCH_KERNEL({"MicroBatchBudget", make, tail, "Throughput, SubmitToRun, Continuous",
              make_params("Throughput", 1024, 4, 1)});

} // namespace
} // namespace bench
