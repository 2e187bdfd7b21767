// MicrotaskRoundTrip: the hot round trip of PingPongLatency with the task queued as a
// microtask from the producer thread (native = 0 where the system has none). Kernel:
// kernels/round_trip.cpp.
#include "harness.h"

BENCH_FAMILY("MicrotaskRoundTrip", [] { bench::add_for_targets("MicrotaskRoundTrip", 0); });
