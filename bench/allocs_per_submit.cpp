// AllocsPerSubmit: heap allocations per submitted task in a steady-state flood
// (allocs_per_op; glibc builds without a sanitizer). One op = one task; the floors run
// here too. Kernel: kernels/allocs_per_submit.cpp.
#include "harness.h"

BENCH_FAMILY("AllocsPerSubmit", [] { bench::add_for_targets("AllocsPerSubmit", 0, true); });
