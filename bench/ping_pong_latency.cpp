// PingPongLatency: one task at a time, the producer waiting for it to run before the next,
// hot / cold / blocking; one op = one round trip, with p50 / p99. The floors run here too.
// Kernel: kernels/round_trip.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    const struct {
        const char *shape;
        double time_scale; // the cold gap is untimed: keep its wall time in check
    } shapes[] = {{"hot", 1.0}, {"cold", 0.3}, {"blocking", 0.5}};
    for (const auto &sh : shapes) {
        bench::Params p;
        p.shape = sh.shape;
        for (const bench::Target &t : bench::targets(0, true))
            bench::add_kernel("PingPongLatency", t, p)->MinTime(bench::min_time() * sh.time_scale);
    }
}

} // namespace

BENCH_FAMILY("PingPongLatency", register_family);
