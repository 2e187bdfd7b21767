// The harness every benchmark family is written against: which systems run (Target), a
// running loop of one system on its own thread (Loop), the one-shot completion flag the
// tasks signal (Signal), per-op samples (Samples) and the counters every benchmark
// reports (Measure). Families live one per file (ping_pong.cpp, ...) and register
// themselves with BENCH_FAMILY; only the adapters in systems/ differ per system.
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <benchmark/benchmark.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <pthread.h>
#include <sys/types.h>
#include <time.h>

#include "system.h"

namespace bench
{

// ---------------------------------------------------------------- time and waiting

inline uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

// Busy-waits until ns have passed: an untimed gap that keeps the producer's CPU awake,
// so what follows measures the loop's wake-up, not the producer's.
void spin_for_ns(uint64_t ns);

void futex_wait(std::atomic<uint32_t> *word, uint32_t val, uint64_t timeout_ns);
void futex_wake(std::atomic<uint32_t> *word, int count);

// How long any wait of the harness may take before the benchmark reports an error
// instead of hanging (a lost task, a dead loop).
constexpr uint64_t kWaitLimitNs = 20ull * 1000000000u;

// A one-shot completion flag: set() on the loop thread, waited for by the producer by
// spinning, by sleeping on a futex, or by spinning a while then sleeping. set() makes a
// wake syscall only when the waiter really sleeps.
struct alignas(64) Signal {
    std::atomic<uint32_t> state{0}; // 0 pending, 1 set, 2 set-pending with a sleeper

    void reset()
    {
        state.store(0, std::memory_order_relaxed);
    }
    bool is_set() const
    {
        return state.load(std::memory_order_acquire) == 1;
    }
    void set()
    {
        // acq_rel: pairs with the acquire loads of the waiters
        if (state.exchange(1, std::memory_order_acq_rel) == 2)
            futex_wake(&state, 1);
    }
    // Each returns false when kWaitLimitNs passed first.
    bool wait_spin();
    bool wait_block();
    bool wait_hybrid(uint64_t spin_ns = 100000);
};

// A count of tasks run on the loop thread and the signal the last one sets. The count is
// touched by the loop thread only; target is written before the first submit.
struct alignas(64) Countdown {
    uint64_t count = 0;
    uint64_t target = 0;
    Signal done;

    void arm(uint64_t n)
    {
        count = 0;
        target = n;
        done.reset();
    }
    static void task(void *arg); // a bench_cb: counts one, the last sets done
};

// A task that sets the Signal it is given.
void set_signal_task(void *arg);

// ---------------------------------------------------------------- systems

// One column of the tournament: a system, its backend and (evloop) its configuration.
struct Target {
    const bench_system *sys = nullptr;
    std::string backend; // "" = the system's own (non-evloop systems)
    bench_loop_config cfg{nullptr, 0, -1, nullptr};
    std::string tag;  // "" for defaults, "budget64", "spin0", "tuned" (a profile), ... for
                      // fixed evloop settings
    std::string name; // "evloop-arena/epoll", "evloop-arena@budget64/epoll", "libuv", ...
    bool is_floor() const;
    bool is_evloop() const;
};

// Which targets a family runs for. need: BENCH_CAP_* the family uses. floors: also the
// hardware floors (single-producer families where a floor makes sense).
std::vector<Target> targets(unsigned need, bool floors = false);
// evloop only, with each fixed batch budget in budgets (0 = adaptive), default backend.
std::vector<Target> evloop_budget_targets(const std::vector<unsigned> &budgets);

// Registers one benchmark named family/target.name[/params], run with manual time.
using BenchFn = std::function<void(benchmark::State &, const Target &)>;
benchmark::internal::Benchmark *add(const std::string &family, const Target &t,
                                    const std::string &params, BenchFn fn);

// The --benchmark_min_time in force (seconds); families whose single op is long scale it.
double min_time();

// For main(): probes the evloop backends (a comma list) and builds the target list from
// EVLOOP_BENCH_SYSTEMS, EVLOOP_BENCH_EVLOOP_CONFIGS and EVLOOP_BENCH_ROTATE; then
// registers every family.
void setup_targets(const char *evloop_backends);
const std::vector<Target> &all_targets();
void register_families();
void set_min_time(double seconds);
// How many benchmark runs reported an error (main() exits 1 if any did, after all ran).
int failures();

// Family registration, run from main() after the systems were probed.
struct FamilyRegistrar {
    FamilyRegistrar(const char *name, void (*fn)());
};
#define BENCH_CAT2(a, b) a##b
#define BENCH_CAT(a, b) BENCH_CAT2(a, b)
#define BENCH_FAMILY(name, fn)                                                                     \
    static ::bench::FamilyRegistrar BENCH_CAT(bench_family_registrar_, __LINE__)(name, fn)

// ---------------------------------------------------------------- a running loop

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
    // Runs n hot round trips (at most 50 ms of them) so lazily built state, caches and
    // adaptive knobs settle.
    void warm_up(int n);

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

// The body of PingPong and BurstSubmit: every iteration, one producer submits n tasks back
// to back, then spins until all ran (so its own wake-up never enters the figure). One op =
// one task.
void run_submit_batches(benchmark::State &s, const Target &t, uint64_t n);

// Producer threads that live across iterations and submit on command: each round wakes
// every producer, runs work(index) in each, and returns when all have returned. Used
// where thread start-up must stay out of the timed region.
class ProducerCrew
{
  public:
    ProducerCrew(int n, std::function<void(int)> work);
    ~ProducerCrew();
    ProducerCrew(const ProducerCrew &) = delete;
    ProducerCrew &operator=(const ProducerCrew &) = delete;
    // Runs one round; *first_start / *last_end receive when the earliest producer began
    // and the latest finished. False when a producer did not finish within the limit.
    bool round(uint64_t *first_start, uint64_t *last_end);

  private:
    void main(int index);

    std::function<void(int)> work_;
    std::vector<pthread_t> threads_;
    alignas(64) std::atomic<uint32_t> generation_{0};
    std::atomic<bool> quit_{false};
    alignas(64) std::atomic<int> remaining_{0};
    std::atomic<uint64_t> first_start_{0}, last_end_{0};
    Signal round_done_;
};

// ---------------------------------------------------------------- results

// Per-op durations (or any per-op values) for percentiles.
class Samples
{
  public:
    void reserve(size_t n)
    {
        v_.reserve(n);
    }
    void add(int64_t x)
    {
        v_.push_back(x);
    }
    size_t size() const
    {
        return v_.size();
    }
    // Sets counters prefix+"p50_ns", "p99_ns", and "min_ns", "p10_ns", "p90_ns",
    // "p999_ns" (and "max_ns" when with_max).
    void report(benchmark::State &s, const std::string &prefix = "", bool with_max = false);

  private:
    std::vector<int64_t> v_;
};

// Snapshots around a benchmark's runs and the counters every benchmark reports:
// ns_per_op (timed ns / ops: the tournament's headline), loop_cpu_ns_per_op,
// cpu_ns_per_op, loop_sleeps_per_op, wakes_per_op, tasks_per_drain, and for evloop
// spin_hits_per_op and the budget / spin window in force at the end.
class Measure
{
  public:
    explicit Measure(Loop &loop);
    // Adds one iteration's timed ns to the manual time and to ns_per_op.
    void iteration(benchmark::State &s, uint64_t timed_ns, uint64_t ops);
    void finish(benchmark::State &s);
    // Reports an error (a benchmark never asserts) and stops the iterations.
    static void fail(benchmark::State &s, const std::string &what);

  private:
    Loop &loop_;
    Snapshot start_;
    uint64_t timed_ns_ = 0, ops_ = 0;
};

} // namespace bench

#endif
