// InternalPriority: 64 external tasks, then one internal task, queued behind a busy
// callback: how many externals ran first (externals_first) and how long after the release
// the internal one ran (one op). Kernel: kernels/internal_priority.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add_kernel("InternalPriority", t)->MinTime(bench::min_time() * 0.3);
}

} // namespace

BENCH_FAMILY("InternalPriority", register_family);
