// AllocsPerSubmit: heap allocations per submitted task in a steady-state flood
// (allocs_per_op; glibc builds without a sanitizer). One op = one task. Kernel:
// kernels/allocs_per_submit.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0, true))
        bench::add_kernel("AllocsPerSubmit", t);
}

} // namespace

BENCH_FAMILY("AllocsPerSubmit", register_family);
