// The flood kernel (submit_flood.cpp): one producer submits a number of tasks back to back,
// then waits until all ran. PingPong, BurstSubmit, BatchSubmit and MicroBatchBudget's
// Throughput shape are this kernel with other sizes; AllocPressure, IdleCost and
// AllocsPerSubmit build on it.
#ifndef BENCH_KERNELS_FLOOD_H
#define BENCH_KERNELS_FLOOD_H

#include <atomic>
#include <vector>

#include "kernel.h"

namespace bench
{

class Flood : public Kernel
{
  public:
    enum class Wait { spin, hybrid };
    // tasks per step, submitted in calls of batch tasks through the system's batch call
    // (batch 1, or a system without one: one submit per task); the producer then waits
    // for the last one by spinning (its own wake-up never enters the figure) or, where
    // more threads than cores are busy, by spinning a while then sleeping.
    // shared: each task stores a counter the producer polls after its last submit (the
    // shape of a harness whose tasks count into a shared word), instead of a count of the
    // loop thread's own and one flag at the end.
    Flood(const Target &t, uint64_t tasks, uint64_t batch, double warm_up_s,
          Wait wait = Wait::spin, bool shared = false);
    Loop &loop() override
    {
        return loop_;
    }
    // One op = one task.
    bool step(uint64_t *timed_ns, uint64_t *ops) override;
    void finish(Counters &c) override;

  protected:
    // Submits one flood and waits for it, untimed; false on a refusal or a lost task.
    bool flood();
    bool submit_all();

    // The shared shape's counter: stored by the loop thread, polled by the producer.
    static void shared_task(void *arg);
    bool wait_shared();

    Countdown cd_; // declared before the loop, so it outlives every task
    alignas(64) std::atomic<uint64_t> shared_ran_{0};
    bool shared_;
    Loop loop_;
    uint64_t tasks_, batch_;
    std::vector<bench_task> batch_tasks_; // batch_ copies of (Countdown::task, &cd_)
    Wait wait_;
};

// A flood kernel for Params: p.tasks per step, in batches of p.batch (0 or 1: per task).
std::unique_ptr<Kernel> make_flood(const Target &t, const Params &p);

} // namespace bench

#endif
