// ReadinessRoundTrip (the fd ping-pong): a byte into a pipe the loop watches, the fd
// callback sets the flag the producer spins on. One op = one round trip, with p50 / p99.
// Kernel: kernels/readiness_round_trip.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(BENCH_CAP_IO))
        bench::add_kernel("ReadinessRoundTrip", t);
}

} // namespace

BENCH_FAMILY("ReadinessRoundTrip", register_family);
