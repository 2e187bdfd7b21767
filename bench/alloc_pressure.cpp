// AllocPressure: the PingPong flood (20,000 tasks) while another thread churns the
// allocator and sweeps a 32 MiB buffer through the caches. One op = one task. Kernel:
// kernels/alloc_pressure.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add_kernel("AllocPressure", t);
}

} // namespace

BENCH_FAMILY("AllocPressure", register_family);
