// What the benchmark kernels run against: one column of the tournament (Target: a system
// of system.h, its backend and, for evloop, its settings, with its benchmark name) and a
// running loop of it on its own thread (Loop), with the snapshots the counters are made
// of. No google-benchmark, no libev or libuv: a system is reached only through its table.
#ifndef BENCH_KERNELS_LOOP_H
#define BENCH_KERNELS_LOOP_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "system.h"

namespace bench
{

// One column of the tournament: a system, its backend and (evloop) its configuration.
struct Target {
    const bench_system *sys = nullptr;
    std::string backend; // "" = the system's own (non-evloop systems), or evloop's "auto"
    bench_loop_config cfg{nullptr, 0, -1, nullptr};
    std::string tag;  // "" for defaults, "budget64", "spin0", "tuned" (a profile), ... for
                      // fixed evloop settings
    std::string name; // "evloop-arena/epoll", "evloop-arena@budget64/epoll", "libuv", ...
    bool is_floor() const
    {
        return (sys->caps & BENCH_CAP_FLOOR) != 0;
    }
    bool is_evloop() const
    {
        return (sys->caps & BENCH_CAP_TUNABLE) != 0;
    }
};

// The target of sys with backend and cfg, tagged and named as the benchmark names it.
Target make_target(const bench_system *sys, const std::string &backend,
                   const bench_loop_config &cfg);

struct Snapshot {
    uint64_t wall_ns = 0;
    uint64_t loop_cpu_ns = 0; // the loop thread's CPU time
    uint64_t proc_cpu_ns = 0; // every thread of the process
    uint64_t loop_sleeps = 0; // voluntary context switches of the loop thread
    uint64_t proc_writes = 0; // write syscalls of the whole process (/proc/self/io syscw)
    bench_loop_stats st{};
};

class Loop
{
  public:
    explicit Loop(const Target &t);
    ~Loop(); // stops the loop gracefully (everything submitted runs), joins, frees
    Loop(const Loop &) = delete;
    Loop &operator=(const Loop &) = delete;

    bool ok() const
    {
        return error_.empty();
    }
    const std::string &error() const
    {
        return error_;
    }
    const Target &target() const
    {
        return target_;
    }
    // The backend the loop really uses ("epoll", ...; "" when the system does not say).
    const char *backend() const;

    int submit(bench_cb cb, void *arg)
    {
        return sys_->submit(loop_, cb, arg);
    }
    // The system's priority / microtask path, or submit when it has none.
    int submit_internal(bench_cb cb, void *arg);
    int queue_microtask(bench_cb cb, void *arg);
    bool has_internal() const
    {
        return sys_->submit_internal != nullptr;
    }
    bool has_microtask() const
    {
        return sys_->queue_microtask != nullptr;
    }
    // The system's batch call; only when has_batch().
    int submit_batch(const bench_task *tasks, size_t n)
    {
        return sys_->submit_batch(loop_, tasks, n);
    }
    bool has_batch() const
    {
        return sys_->submit_batch != nullptr;
    }

    // Runs fn on the loop thread and waits for it. False on a submit error or timeout.
    bool call(const std::function<void(bench_loop *)> &fn);
    // Loop-thread access for call(): the system's table and its loop.
    const bench_system *sys() const
    {
        return sys_;
    }

    Snapshot snapshot() const;
    // The loop thread's CPU time alone: cheap (no /proc read), for tight windows.
    uint64_t loop_cpu_ns() const;
    // Waits (untimed) until the loop thread is blocked in the kernel, at most timeout_ns.
    bool wait_until_asleep(uint64_t timeout_ns) const;
    // Runs n hot round trips, for at most cap_s seconds, so lazily built state, caches and
    // adaptive knobs settle. The cap keeps a warm-up on a busy machine (where a round trip
    // can take milliseconds) from becoming the longest part of a run.
    void warm_up(int n, double cap_s);

  private:
    static void *thread_main(void *self);

    Target target_;
    const bench_system *sys_;
    bench_loop *loop_ = nullptr;
    pthread_t thread_{};
    bool started_ = false;
    std::atomic<pid_t> tid_{0};
    clockid_t cpu_clock_{};
    std::string error_;
};

// Submits cb(arg) n times from the calling thread; false at the first refusal.
inline bool submit_many(Loop &loop, bench_cb cb, void *arg, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        if (loop.submit(cb, arg) < 0)
            return false;
    return true;
}

} // namespace bench

#endif
