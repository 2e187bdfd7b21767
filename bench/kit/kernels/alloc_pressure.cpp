// AllocPressure: the PingPong flood (20,000 tasks) while another thread churns the
// allocator (random malloc / free of 16 B .. 8 KiB blocks) and sweeps a 32 MiB buffer
// through the caches: the C counterpart of a garbage collector running beside the loop.
// One op = one task. With three busy threads on two cores, the producer waits for the
// flood by spinning briefly, then sleeping.
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "flood.h"

namespace bench
{
namespace
{

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

// The flood, warmed up before the churn starts; the churn stops before the loop does.
class AllocPressure : public Flood
{
  public:
    AllocPressure(const Target &t, const Params &p)
        : Flood(t, p.tasks, 1, p.warm_up_s, Wait::hybrid)
    {
    }

  private:
    Churn churn_;
};

BENCH_KERNEL({"AllocPressure", construct<AllocPressure>, nullptr, "", make_params("", 20000)});

} // namespace
} // namespace bench
