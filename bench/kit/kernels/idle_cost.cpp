// IdleCost: what the loop burns once work stops. Each iteration floods 1000 tasks, waits
// for them (spinning), then the producer sleeps 10 ms and 50 ms more while the loop
// thread's CPU clock is read (the per-thread form of getrusage). Counters:
//   idle_cpu_pct            % of one core the loop used from 10 ms to 60 ms after work
//   idle_cpu_pct_first10ms  the same for the first 10 ms (spinning, decay)
//   ns_per_op               loop CPU ns per ms of idleness (10..60 ms); one op = 1 ms
//   loop_wakeups_per_s      times the loop thread woke per second of idleness
#include <time.h>

#include "flood.h"

namespace bench
{
namespace
{

constexpr uint64_t kFirstNs = 10000000;
constexpr uint64_t kRestNs = 50000000;

void sleep_ns(uint64_t ns)
{
    timespec ts{time_t(ns / 1000000000u), long(ns % 1000000000u)};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

class IdleCost : public Flood
{
  public:
    IdleCost(const Target &t, const Params &p) : Flood(t, p.tasks, 1, p.warm_up_s)
    {
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        if (!flood())
            return fail("tasks did not all run");
        // The window opens the moment the last task has run: a loop that spins before
        // sleeping spends that spin inside the first window.
        uint64_t a_wall = now_ns(), a_cpu = loop_.loop_cpu_ns();
        sleep_ns(kFirstNs);
        Snapshot b = loop_.snapshot();
        sleep_ns(kRestNs);
        Snapshot c = loop_.snapshot();
        first_cpu_ += double(b.loop_cpu_ns - a_cpu);
        first_wall_ += double(b.wall_ns - a_wall);
        rest_cpu_ += double(c.loop_cpu_ns - b.loop_cpu_ns);
        rest_wall_ += double(c.wall_ns - b.wall_ns);
        rest_sleeps_ += double(c.loop_sleeps - b.loop_sleeps);
        *timed_ns = c.wall_ns - b.wall_ns;
        *ops = (c.wall_ns - b.wall_ns) / 1000000;
        return true;
    }
    void finish(Counters &c) override
    {
        if (rest_wall_ <= 0)
            return;
        c["idle_cpu_pct"] = 100.0 * rest_cpu_ / rest_wall_;
        c["idle_cpu_pct_first10ms"] = 100.0 * first_cpu_ / first_wall_;
        c["ns_per_op"] = rest_cpu_ / (rest_wall_ / 1e6);
        c["loop_wakeups_per_s"] = rest_sleeps_ / (rest_wall_ / 1e9);
    }

  private:
    double first_cpu_ = 0, first_wall_ = 0, rest_cpu_ = 0, rest_wall_ = 0, rest_sleeps_ = 0;
};

BENCH_KERNEL({"IdleCost", construct<IdleCost>, nullptr, "", make_params("", 1000)});

} // namespace
} // namespace bench
