// BurstSubmit: bursts of 1000 submits from one producer, waiting (spinning) for each burst
// to run before the next. One op = one task. Kernel: kernels/submit_flood.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add_kernel("BurstSubmit", t);
}

} // namespace

BENCH_FAMILY("BurstSubmit", register_family);
