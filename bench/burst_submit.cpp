// BurstSubmit: bursts of 1000 submits from one producer, waiting (spinning) for each burst
// to run before the next. One op = one task.
#include "harness.h"

namespace
{

constexpr uint64_t kBurst = 1000;

void run(benchmark::State &s, const bench::Target &t)
{
    bench::run_submit_batches(s, t, kBurst);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        bench::add("BurstSubmit", t, "", run);
}

} // namespace

BENCH_FAMILY("BurstSubmit", register_family);
