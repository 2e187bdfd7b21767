// Timers: a million one-shot timers started and fired (million; one op = one timer), and
// the lateness of 100 timers at 1..20 ms (lateness; late_p50_ns / late_p99_ns). Kernel:
// kernels/timers.cpp.
#include "harness.h"

BENCH_FAMILY("Timers", [] {
    bench::add_for_targets("Timers", BENCH_CAP_TIMERS, false, bench::make_params("million", 0));
    bench::add_for_targets("Timers", BENCH_CAP_TIMERS, false, bench::make_params("lateness", 0));
});
