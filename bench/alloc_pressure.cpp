// AllocPressure: the PingPong flood while another thread churns the allocator (random
// malloc / free of 16 B .. 8 KiB blocks) and sweeps a 32 MiB buffer through the caches:
// the C counterpart of a garbage collector running beside the loop. One op = one task.
// With three busy threads on two cores, the producer waits for the flood by spinning
// briefly, then sleeping.
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "harness.h"

namespace
{

constexpr uint64_t kTasks = 20000;
constexpr size_t kSlots = 4096;
constexpr size_t kSweepBytes = 32u << 20;

class Churn
{
  public:
    Churn() : thread_([this] { main(); })
    {
    }
    ~Churn()
    {
        stop_.store(true, std::memory_order_relaxed);
        thread_.join();
    }

  private:
    void main()
    {
        std::vector<void *> slots(kSlots, nullptr);
        auto *buf = static_cast<unsigned char *>(std::calloc(kSweepBytes, 1));
        uint64_t x = 88172645463325252ull;
        while (!stop_.load(std::memory_order_relaxed)) {
            for (int i = 0; i < 4096; i++) {
                x ^= x << 13; // xorshift64
                x ^= x >> 7;
                x ^= x << 17;
                size_t k = size_t(x % kSlots), size = 16 + size_t((x >> 20) % 8192);
                std::free(slots[k]);
                slots[k] = std::malloc(size);
                if (slots[k])
                    std::memset(slots[k], int(x), size < 64 ? size : 64);
            }
            if (buf)
                for (size_t off = 0; off < kSweepBytes; off += 64)
                    buf[off]++;
        }
        for (void *p : slots)
            std::free(p);
        std::free(buf);
    }

    std::atomic<bool> stop_{false};
    std::thread thread_;
};

void run(benchmark::State &s, const bench::Target &t)
{
    bench::Countdown cd;
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    loop.warm_up(100);
    Churn churn;
    bench::Measure m(loop);
    for (auto _ : s) {
        cd.arm(kTasks);
        uint64_t t0 = bench::now_ns();
        if (!bench::submit_many(loop, bench::Countdown::task, &cd, kTasks)) {
            bench::Measure::fail(s, "submit refused");
            break;
        }
        if (!cd.done.wait_hybrid()) {
            bench::Measure::fail(s, "tasks did not all run");
            break;
        }
        m.iteration(s, bench::now_ns() - t0, kTasks);
    }
    m.finish(s);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("AllocPressure", t, "", run);
}

} // namespace

BENCH_FAMILY("AllocPressure", register_family);
