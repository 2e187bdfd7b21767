// Time and waiting for the benchmark kernels (sync.h): waits with a deadline, futex
// helpers, the producer crew.
#include "sync.h"

#include <climits>

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bench
{

void spin_for_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end)
        cpu_relax();
}

void futex_wait(std::atomic<uint32_t> *word, uint32_t val, uint64_t timeout_ns)
{
    timespec ts{time_t(timeout_ns / 1000000000u), long(timeout_ns % 1000000000u)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT_PRIVATE, val, &ts, nullptr,
            0);
}

void futex_wake(std::atomic<uint32_t> *word, int count)
{
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE_PRIVATE, count, nullptr,
            nullptr, 0);
}

bool Signal::wait_spin()
{
    uint64_t deadline = now_ns() + kWaitLimitNs;
    for (unsigned i = 1;; i++) {
        if (state.load(std::memory_order_acquire) == 1)
            return true;
        cpu_relax();
        if ((i & 4095) == 0 && now_ns() > deadline)
            return false;
    }
}

bool Signal::wait_block()
{
    uint64_t deadline = now_ns() + kWaitLimitNs;
    for (;;) {
        uint32_t s = state.load(std::memory_order_acquire);
        if (s == 1)
            return true;
        // acq_rel: announce the sleeper; pairs with the exchange in set()
        if (s == 0 && !state.compare_exchange_weak(s, 2, std::memory_order_acq_rel,
                                                   std::memory_order_acquire))
            continue;
        uint64_t now = now_ns();
        if (now >= deadline)
            return false;
        futex_wait(&state, 2, deadline - now);
    }
}

bool Signal::wait_hybrid(uint64_t spin_ns)
{
    uint64_t end = now_ns() + spin_ns;
    for (unsigned i = 1;; i++) {
        if (state.load(std::memory_order_acquire) == 1)
            return true;
        cpu_relax();
        if ((i & 63) == 0 && now_ns() > end)
            return wait_block();
    }
}

void Countdown::task(void *arg)
{
    auto *c = static_cast<Countdown *>(arg);
    if (++c->count == c->target)
        c->done.set();
}

void set_signal_task(void *arg)
{
    static_cast<Signal *>(arg)->set();
}

// ---------------------------------------------------------------- producer crew

namespace
{
struct CrewStart {
    ProducerCrew *crew;
    int index;
    void (ProducerCrew::*main)(int);
};
void *crew_thread(void *p)
{
    auto *s = static_cast<CrewStart *>(p);
    CrewStart copy = *s;
    delete s;
    (copy.crew->*copy.main)(copy.index);
    return nullptr;
}
} // namespace

ProducerCrew::ProducerCrew(int n, std::function<void(int)> work) : work_(std::move(work))
{
    for (int i = 0; i < n; i++) {
        pthread_t th;
        auto *start = new CrewStart{this, i, &ProducerCrew::main};
        if (pthread_create(&th, nullptr, crew_thread, start) != 0) {
            delete start;
            break;
        }
        threads_.push_back(th);
    }
}

ProducerCrew::~ProducerCrew()
{
    quit_.store(true, std::memory_order_relaxed);
    // release: pairs with the acquire load of generation_ in main()
    generation_.fetch_add(1, std::memory_order_release);
    futex_wake(&generation_, INT_MAX);
    for (pthread_t th : threads_)
        pthread_join(th, nullptr);
}

void ProducerCrew::main(int index)
{
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        while ((g = generation_.load(std::memory_order_acquire)) == seen)
            futex_wait(&generation_, seen, 1000000000u);
        seen = g;
        if (quit_.load(std::memory_order_relaxed))
            return;
        uint64_t t0 = now_ns();
        uint64_t cur = first_start_.load(std::memory_order_relaxed);
        while (t0 < cur && !first_start_.compare_exchange_weak(cur, t0))
            ;
        work_(index);
        uint64_t t1 = now_ns();
        cur = last_end_.load(std::memory_order_relaxed);
        while (t1 > cur && !last_end_.compare_exchange_weak(cur, t1))
            ;
        // acq_rel: the last producer out publishes every producer's timestamps
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1)
            round_done_.set();
    }
}

bool ProducerCrew::round(uint64_t *first_start, uint64_t *last_end)
{
    if (threads_.empty())
        return false;
    first_start_.store(UINT64_MAX, std::memory_order_relaxed);
    last_end_.store(0, std::memory_order_relaxed);
    remaining_.store(int(threads_.size()), std::memory_order_relaxed);
    round_done_.reset();
    // release: publishes the resets above to the producers
    generation_.fetch_add(1, std::memory_order_release);
    futex_wake(&generation_, INT_MAX);
    if (!round_done_.wait_block())
        return false;
    *first_start = first_start_.load(std::memory_order_relaxed);
    *last_end = last_end_.load(std::memory_order_relaxed);
    return true;
}

} // namespace bench
