// BatchSubmit: the PingPong flood (100,000 tasks per iteration, one producer) submitted in
// batches of 8, 64 and 1024 tasks per evloop_submit_batch call (batch:N). libev and libuv
// have no batch call: they run their per-task flood under the same names (native = 0), so
// each row's ratio reads "evloop batch / libuv flood". One op = one task. Kernel:
// kernels/submit_flood.cpp.
#include "harness.h"

BENCH_FAMILY("BatchSubmit", [] {
    for (uint64_t batch : {8, 64, 1024})
        bench::add_for_targets("BatchSubmit", 0, false, bench::make_params("", 0, 0, batch));
});
