// MicroCASContention: 1 to 32 producer threads submit at once; only submission is timed.
// One op = one submit. Kernel: kernels/micro_cas_contention.cpp.
#include "harness.h"

BENCH_FAMILY("MicroCASContention", [] {
    for (int producers : {1, 2, 4, 8, 16, 32})
        bench::add_for_targets("MicroCASContention", BENCH_CAP_MPSC, false,
                               bench::make_params("", 0, producers), 0.5);
});
