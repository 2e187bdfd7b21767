// The floods: one producer submits tasks back to back, then spins until all ran (so its
// own wake-up never enters the figure). One op = one task; ns_per_op is the hand-off
// throughput of one producer.
//   PingPong     100,000 tasks per iteration, one submit each; PingPong/.../shared: each
//                task stores a counter the producer polls once it has submitted the last
//                (where an independent harness found other ratios: tournament/results).
//   BurstSubmit  bursts of 1000, waiting for each burst to run before the next.
//   BatchSubmit  100,000 tasks per iteration in batches of 64 per call (batch:8 and
//                batch:1024 too), through evloop_submit_batch. libev and libuv have no
//                batch call: their rows are their ordinary per-task flood (counter
//                native = 0), so the ratio reads "evloop batch / libuv flood".
#include <algorithm>

#include "flood.h"

namespace bench
{

Flood::Flood(const Target &t, uint64_t tasks, uint64_t batch, double warm_up_s, Wait wait,
             bool shared)
    : shared_(shared), loop_(t), tasks_(tasks),
      batch_(std::max<uint64_t>(1, std::min(batch, tasks))), wait_(wait)
{
    if (tasks_ == 0) {
        error = "tasks per iteration must be > 0";
        return;
    }
    if (shared_)
        batch_tasks_.assign(batch_, bench_task{shared_task, &shared_ran_});
    else
        batch_tasks_.assign(batch_, bench_task{Countdown::task, &cd_});
    if (loop_.ok())
        loop_.warm_up(100, warm_up_s);
}

void Flood::shared_task(void *arg)
{
    auto *ran = static_cast<std::atomic<uint64_t> *>(arg);
    ran->store(ran->load(std::memory_order_relaxed) + 1, std::memory_order_release);
}

bool Flood::wait_shared()
{
    uint64_t deadline = now_ns() + 10000000000u;
    for (unsigned i = 1; shared_ran_.load(std::memory_order_acquire) < tasks_; i++) {
        cpu_relax();
        if ((i & 4095) == 0 && now_ns() > deadline)
            return false;
    }
    return true;
}

bool Flood::submit_all()
{
    if (shared_ && (batch_ == 1 || !loop_.has_batch()))
        return submit_many(loop_, shared_task, &shared_ran_, tasks_);
    if (batch_ == 1 || !loop_.has_batch())
        return submit_many(loop_, Countdown::task, &cd_, tasks_);
    for (uint64_t done = 0; done < tasks_; done += batch_)
        if (loop_.submit_batch(batch_tasks_.data(), std::min(batch_, tasks_ - done)) < 0)
            return false;
    return true;
}

bool Flood::step(uint64_t *timed_ns, uint64_t *ops)
{
    cd_.arm(tasks_);
    shared_ran_.store(0, std::memory_order_relaxed);
    uint64_t t0 = now_ns();
    if (!submit_all())
        return fail("submit refused");
    bool ran = shared_                 ? wait_shared()
               : wait_ == Wait::spin ? cd_.done.wait_spin()
                                     : cd_.done.wait_hybrid();
    if (!ran)
        return fail("tasks did not all run");
    *timed_ns = now_ns() - t0;
    *ops = tasks_;
    return true;
}

bool Flood::flood()
{
    cd_.arm(tasks_);
    shared_ran_.store(0, std::memory_order_relaxed);
    return submit_all() && (shared_ ? wait_shared() : cd_.done.wait_spin());
}

void Flood::finish(Counters &c)
{
    if (batch_ > 1)
        c["native"] = loop_.has_batch() ? 1 : 0;
}

std::unique_ptr<Kernel> make_flood(const Target &t, const Params &p)
{
    return std::make_unique<Flood>(t, p.tasks, p.batch, p.warm_up_s, Flood::Wait::spin,
                                   p.shape == "shared");
}

namespace
{

std::string batch_tail(const Params &p)
{
    return "batch:" + std::to_string(p.batch);
}

// The default shape keeps the family's first name (no tail).
std::string flood_tail(const Params &p)
{
    return p.shape == "flood" ? "" : p.shape;
}

BENCH_KERNEL({"PingPong", make_flood, flood_tail, "flood, shared",
              make_params("flood", 100000, 0, 1)});
BENCH_KERNEL({"BurstSubmit", make_flood, nullptr, "", make_params("", 1000, 0, 1)});
BENCH_KERNEL({"BatchSubmit", make_flood, batch_tail, "", make_params("", 100000, 0, 64)});

} // namespace

} // namespace bench
