// PingPongLatency: one task at a time, the producer waiting for it to run before the next,
// hot / cold / blocking; one op = one round trip, with p50 / p99. The floors run here too.
// Kernel: kernels/round_trip.cpp.
#include "harness.h"

BENCH_FAMILY("PingPongLatency", [] {
    // The cold gap is untimed: its min time is scaled down to keep the wall time in check.
    bench::add_for_targets("PingPongLatency", 0, true, bench::make_params("hot", 0), 1.0);
    bench::add_for_targets("PingPongLatency", 0, true, bench::make_params("cold", 0), 0.3);
    bench::add_for_targets("PingPongLatency", 0, true, bench::make_params("blocking", 0), 0.5);
});
