// BurstSubmit: bursts of 1000 submits from one producer, waiting (spinning) for each burst
// to run before the next. One op = one task. Kernel: kernels/submit_flood.cpp.
#include "harness.h"

BENCH_FAMILY("BurstSubmit", [] { bench::add_for_targets("BurstSubmit", 0); });
