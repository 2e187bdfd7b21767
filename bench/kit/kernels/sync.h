// Time and waiting for the benchmark kernels: the clock, busy gaps, futex helpers, the
// one-shot completion flag tasks signal (Signal), a countdown of tasks (Countdown) and
// producer threads that live across iterations (ProducerCrew). No google-benchmark, no
// libev or libuv: the google-benchmark suite and the Python extension both compile it.
#ifndef BENCH_KERNELS_SYNC_H
#define BENCH_KERNELS_SYNC_H

#include <atomic>
#include <cstdint>
#include <functional>
#include <vector>

#include <pthread.h>
#include <time.h>

namespace bench
{

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

// How long any wait of a kernel may take before it reports an error instead of hanging
// (a lost task, a dead loop).
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

} // namespace bench

#endif
