// PingPong (the flood): one producer submits 100,000 tasks back to back per iteration,
// then spins until all ran. One op = one task. Kernel: kernels/submit_flood.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add_kernel("PingPong", t);
}

} // namespace

BENCH_FAMILY("PingPong", register_family);
