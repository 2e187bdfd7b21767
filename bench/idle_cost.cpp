// IdleCost: the % of a core the loop burns 10-60 ms after work stops (idle_cpu_pct), and
// in the first 10 ms. One op = 1 ms of idleness. Kernel: kernels/idle_cost.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add_kernel("IdleCost", t)->MinTime(bench::min_time() * 0.5);
}

} // namespace

BENCH_FAMILY("IdleCost", register_family);
