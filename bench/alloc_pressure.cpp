// AllocPressure: the PingPong flood (20,000 tasks) while another thread churns the
// allocator and sweeps a 32 MiB buffer through the caches. One op = one task. Kernel:
// kernels/alloc_pressure.cpp.
#include "harness.h"

BENCH_FAMILY("AllocPressure", [] { bench::add_for_targets("AllocPressure", 0); });
