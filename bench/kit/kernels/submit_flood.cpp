// The floods: one producer submits tasks back to back, then spins until all ran (so its
// own wake-up never enters the figure). One op = one task; ns_per_op is the hand-off
// throughput of one producer.
//   PingPong     100,000 tasks per iteration, one submit each.
//   BurstSubmit  bursts of 1000, waiting for each burst to run before the next.
//   BatchSubmit  100,000 tasks per iteration in batches of 64 per call (batch:8 and
//                batch:1024 too), through evloop_submit_batch. libev and libuv have no
//                batch call: their rows are their ordinary per-task flood (counter
//                native = 0), so the ratio reads "evloop batch / libuv flood".
#include <algorithm>

#include "flood.h"

namespace bench
{

Flood::Flood(const Target &t, uint64_t tasks, uint64_t batch, double warm_up_s, Wait wait)
    : loop_(t), tasks_(tasks), batch_(std::max<uint64_t>(1, std::min(batch, tasks))), wait_(wait)
{
    if (tasks_ == 0) {
        error = "tasks per iteration must be > 0";
        return;
    }
    batch_tasks_.assign(batch_, bench_task{Countdown::task, &cd_});
    if (loop_.ok())
        loop_.warm_up(100, warm_up_s);
}

bool Flood::submit_all()
{
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
    uint64_t t0 = now_ns();
    if (!submit_all())
        return fail("submit refused");
    bool ran = wait_ == Wait::spin ? cd_.done.wait_spin() : cd_.done.wait_hybrid();
    if (!ran)
        return fail("tasks did not all run");
    *timed_ns = now_ns() - t0;
    *ops = tasks_;
    return true;
}

bool Flood::flood()
{
    cd_.arm(tasks_);
    return submit_all() && cd_.done.wait_spin();
}

void Flood::finish(Counters &c)
{
    if (batch_ > 1)
        c["native"] = loop_.has_batch() ? 1 : 0;
}

std::unique_ptr<Kernel> make_flood(const Target &t, const Params &p)
{
    return std::make_unique<Flood>(t, p.tasks, p.batch, p.warm_up_s);
}

namespace
{

std::string batch_tail(const Params &p)
{
    return "batch:" + std::to_string(p.batch);
}

BENCH_KERNEL({"PingPong", make_flood, nullptr, "", make_params("", 100000, 0, 1)});
BENCH_KERNEL({"BurstSubmit", make_flood, nullptr, "", make_params("", 1000, 0, 1)});
BENCH_KERNEL({"BatchSubmit", make_flood, batch_tail, "", make_params("", 100000, 0, 64)});

} // namespace

} // namespace bench
