// Timers, two shapes, the timers started on the loop thread (libev and libuv timers are
// loop-thread only; evloop's are started the same way for a like-for-like comparison).
//   million   1,000,000 one-shot timers with deadlines spread pseudo-randomly over
//             1..16 ms (libuv rounds each up to its millisecond), started in one go and
//             all fired; one op = one timer (start + fire). The field's "million timers";
//             starting them takes longer than the spread, so this measures the timer
//             structure, not the wait. Counter start_ns_per_timer: the start phase alone.
//   lateness  100 timers per iteration at whole-millisecond delays 1..20 ms on an
//             otherwise idle loop; p50 / p99 of (fire time - requested deadline), signed
//             (libuv computes deadlines from its cached millisecond clock, so it can fire
//             early), counters late_*; ns_per_op is the mean lateness.
#include <string>
#include <vector>

#include "kernel.h"

namespace bench
{
namespace
{

uint64_t mix(uint64_t x) // splitmix64: a fixed pseudo-random spread
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

struct LateTimer {
    uint64_t deadline;
    uint64_t fired;
    Countdown *cd;
};

void late_timer_task(void *arg)
{
    auto *lt = static_cast<LateTimer *>(arg);
    lt->fired = now_ns();
    Countdown::task(lt->cd);
}

class Timers : public Kernel
{
  public:
    Timers(const Target &t, const Params &p)
        : million_(p.shape == "million"), n_(p.tasks), loop_(t)
    {
        if (n_ == 0) {
            error = "timers (tasks) must be > 0";
            return;
        }
        if (!(t.sys->caps & BENCH_CAP_TIMERS)) {
            error = "this system has no timers";
            return;
        }
        if (million_) {
            delays_.resize(n_);
            for (size_t i = 0; i < n_; i++)
                delays_[i] = 1000000 + mix(i) % 15000000;
        } else {
            late_.assign(n_, LateTimer{0, 0, &cd_});
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
        return million_ ? step_million(timed_ns, ops) : step_lateness(timed_ns, ops);
    }
    void finish(Counters &c) override
    {
        if (million_) {
            if (fired_)
                c["start_ns_per_timer"] = start_ns_ / double(fired_);
            return;
        }
        late_samples_.summarize(c, "late_", true);
        if (late_samples_.size())
            c["ns_per_op"] = late_sum_ / double(late_samples_.size());
    }

  private:
    bool step_million(uint64_t *timed_ns, uint64_t *ops)
    {
        const bench_system *sys = loop_.sys();
        int r = 0;
        if (!loop_.call([&](bench_loop *l) { r = sys->timers_reserve(l, n_); }) || r < 0)
            return fail("timers_reserve failed");
        cd_.arm(n_);
        uint64_t started_at = 0;
        uint64_t t0 = now_ns();
        bool ok = loop_.call([&](bench_loop *l) {
            for (size_t i = 0; i < n_ && r == 0; i++)
                r = sys->timer_start(l, delays_[i], Countdown::task, &cd_);
            started_at = now_ns();
        });
        if (!ok || r < 0)
            return fail("timer_start failed: " + std::to_string(r));
        if (!cd_.done.wait_block())
            return fail("timers did not all fire");
        *timed_ns = now_ns() - t0;
        *ops = n_;
        start_ns_ += double(started_at - t0);
        fired_ += n_;
        return true;
    }

    bool step_lateness(uint64_t *timed_ns, uint64_t *ops)
    {
        const bench_system *sys = loop_.sys();
        int r = 0;
        cd_.arm(n_);
        uint64_t t0 = now_ns();
        bool ok = loop_.call([&](bench_loop *l) {
            r = sys->timers_reserve(l, n_);
            for (size_t i = 0; i < n_ && r == 0; i++) {
                uint64_t delay = (1 + i % 20) * 1000000ull;
                late_[i].deadline = now_ns() + delay;
                r = sys->timer_start(l, delay, late_timer_task, &late_[i]);
            }
        });
        if (!ok || r < 0)
            return fail("timer_start failed: " + std::to_string(r));
        if (!cd_.done.wait_block())
            return fail("timers did not all fire");
        *timed_ns = now_ns() - t0;
        *ops = n_;
        for (const LateTimer &lt : late_) {
            int64_t late = int64_t(lt.fired) - int64_t(lt.deadline);
            late_samples_.add(late);
            late_sum_ += double(late);
        }
        return true;
    }

    Countdown cd_;
    bool million_;
    size_t n_;
    std::vector<uint64_t> delays_; // million: the delays, fixed
    std::vector<LateTimer> late_;  // lateness: one record per timer
    Loop loop_;
    double start_ns_ = 0;
    uint64_t fired_ = 0;
    Samples late_samples_;
    double late_sum_ = 0;
};

std::unique_ptr<Kernel> make(const Target &t, const Params &p)
{
    Params q = p;
    if (q.tasks == 0)
        q.tasks = p.shape == "million" ? 1000000 : 100;
    return std::make_unique<Timers>(t, q);
}

BENCH_KERNEL({"Timers", make, shape_tail, "million, lateness", make_params("million", 0)});

} // namespace
} // namespace bench
