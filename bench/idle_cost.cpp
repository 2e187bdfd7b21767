// IdleCost: the % of a core the loop burns 10-60 ms after work stops (idle_cpu_pct), and
// in the first 10 ms. One op = 1 ms of idleness. Kernel: kernels/idle_cost.cpp.
#include "harness.h"

BENCH_FAMILY("IdleCost",
             [] { bench::add_for_targets("IdleCost", 0, false, bench::Params(), 0.5); });
