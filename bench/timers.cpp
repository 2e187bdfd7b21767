// Timers: a million one-shot timers started and fired (million; one op = one timer), and
// the lateness of 100 timers at 1..20 ms (lateness; late_p50_ns / late_p99_ns). Kernel:
// kernels/timers.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    bench::Params p;
    for (const char *shape : {"million", "lateness"}) {
        p.shape = shape;
        for (const bench::Target &t : bench::targets(BENCH_CAP_TIMERS))
            bench::add_kernel("Timers", t, p);
    }
}

} // namespace

BENCH_FAMILY("Timers", register_family);
