// MicroBatchBudget: how the external batch budget shapes throughput (Throughput/burst:B)
// and submit-to-run latency (SubmitToRun/burst:B, Continuous). evloop runs with its
// adaptive budget and, on its first backend, with fixed budgets
// (evloop-arena@budget64/epoll ...), so the adaptive one is judged against them. The
// latency shape is not called "Latency", so that --benchmark_filter=Latency selects the
// latency families only. Kernel: kernels/micro_batch_budget.cpp.
#include <vector>

#include "harness.h"

namespace
{

const std::vector<unsigned> kFixedBudgets = {16, 64, 256, 4096};

void register_family()
{
    std::vector<bench::Target> all = bench::targets(BENCH_CAP_MPSC);
    for (const bench::Target &t : bench::evloop_budget_targets(kFixedBudgets))
        all.push_back(t);
    bench::Params p;
    for (uint64_t burst : {64, 256, 1024, 4096}) {
        p.tasks = burst;
        for (const char *shape : {"Throughput", "SubmitToRun"}) {
            p.shape = shape;
            for (const bench::Target &t : all)
                bench::add_kernel("MicroBatchBudget", t, p)->MinTime(bench::min_time() * 0.5);
        }
    }
    p = bench::Params();
    p.shape = "Continuous";
    for (const bench::Target &t : all)
        bench::add_kernel("MicroBatchBudget", t, p)->MinTime(bench::min_time() * 0.5);
}

} // namespace

BENCH_FAMILY("MicroBatchBudget", register_family);
