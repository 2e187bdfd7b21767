// PingPong (the flood): one producer submits 100,000 tasks back to back per iteration,
// then spins until all ran. One op = one task. Kernel: kernels/submit_flood.cpp.
#include "harness.h"

BENCH_FAMILY("PingPong", [] { bench::add_for_targets("PingPong", 0); });
