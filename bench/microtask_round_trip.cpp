// MicrotaskRoundTrip: the hot round trip of PingPongLatency with the task queued as a
// microtask from the producer thread (native = 0 where the system has none). Kernel:
// kernels/round_trip.cpp.
#include "harness.h"

namespace
{

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add_kernel("MicrotaskRoundTrip", t);
}

} // namespace

BENCH_FAMILY("MicrotaskRoundTrip", register_family);
