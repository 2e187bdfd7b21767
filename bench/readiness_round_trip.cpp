// ReadinessRoundTrip (the fd ping-pong): a byte into a pipe the loop watches, the fd
// callback sets the flag the producer spins on. One op = one round trip, with p50 / p99.
// Kernel: kernels/readiness_round_trip.cpp.
#include "harness.h"

BENCH_FAMILY("ReadinessRoundTrip",
             [] { bench::add_for_targets("ReadinessRoundTrip", BENCH_CAP_IO); });
