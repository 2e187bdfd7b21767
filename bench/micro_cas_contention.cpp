// MicroCASContention: 1 to 32 producer threads submit at once; only submission is timed.
// One op = one submit. Kernel: kernels/micro_cas_contention.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (int producers : {1, 2, 4, 8, 16, 32}) {
        bench::Params p;
        p.producers = producers;
        for (const bench::Target &t : bench::targets(BENCH_CAP_MPSC))
            bench::add_kernel("MicroCASContention", t, p)->MinTime(bench::min_time() * 0.5);
    }
}

} // namespace

BENCH_FAMILY("MicroCASContention", register_family);
