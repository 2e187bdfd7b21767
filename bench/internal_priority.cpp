// InternalPriority: 64 external tasks, then one internal task, queued behind a busy
// callback: how many externals ran first (externals_first) and how long after the release
// the internal one ran (one op). Kernel: kernels/internal_priority.cpp.
#include "harness.h"

BENCH_FAMILY("InternalPriority",
             [] { bench::add_for_targets("InternalPriority", 0, false, bench::Params(), 0.3); });
