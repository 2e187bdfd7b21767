// The google-benchmark side of the suite: which systems run (targets()), registration of
// a family's benchmarks (add_kernel()) and the glue that drives a kernel (kit/kernels/)
// from benchmark::State and reports its counters (Measure). The kernels themselves, their
// loop and their waits are in kit/kernels/ and know nothing of google-benchmark; the
// Python evloop.bench drives the same kernels. The families are one table, families.cpp;
// only the adapters in kit/systems/ differ per system.
#ifndef BENCH_HARNESS_H
#define BENCH_HARNESS_H

#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "kernels/kernel.h"

namespace bench
{

// ---------------------------------------------------------------- systems

// Which targets a family runs for. need: BENCH_CAP_* the family uses. floors: also the
// hardware floors (single-producer families where a floor makes sense).
std::vector<Target> targets(unsigned need, bool floors = false);
// evloop only, with each fixed batch budget in budgets (0 = adaptive), default backend.
std::vector<Target> evloop_budget_targets(const std::vector<unsigned> &budgets);

// Registers the kernel of family (kit/kernels/kernel.h) for t with p (zero fields: the
// family's defaults), named as the kernel names it: family/target.name[/tail], run with
// manual time.
benchmark::internal::Benchmark *add_kernel(const std::string &family, const Target &t,
                                           const Params &p = Params());
// add_kernel() for every target of targets(need, floors); time_scale > 0 sets each one's min
// time to that share of --benchmark_min_time (families whose single op is long, or whose
// untimed part is; google-benchmark then puts the min time into the name).
void add_for_targets(const std::string &family, unsigned need, bool floors = false,
                     const Params &p = Params(), double time_scale = 0);
// Drives a kernel through a benchmark's iterations and reports its counters.
void run_kernel(benchmark::State &s, const KernelSpec &spec, const Target &t, const Params &p);

// The --benchmark_min_time in force (seconds); families whose single op is long scale it.
double min_time();

// For main(): probes the evloop backends (a comma list) and builds the target list from
// EVLOOP_BENCH_SYSTEMS, EVLOOP_BENCH_EVLOOP_CONFIGS and EVLOOP_BENCH_ROTATE; then
// registers every family (families.cpp), in the table's order.
void setup_targets(const char *evloop_backends);
const std::vector<Target> &all_targets();
void register_families();
void set_min_time(double seconds);
// How many benchmark runs reported an error (main() exits 1 if any did, after all ran).
int failures();

// ---------------------------------------------------------------- results

// Sets the counters of c on the benchmark.
void report(benchmark::State &s, const Counters &c);

// Snapshots around a benchmark's runs and the counters every benchmark reports
// (loop_counters(): ns_per_op, the headline, and the rest).
class Measure
{
  public:
    explicit Measure(Loop &loop);
    // Adds one iteration's timed ns to the manual time and to ns_per_op.
    void iteration(benchmark::State &s, uint64_t timed_ns, uint64_t ops);
    void finish(benchmark::State &s);
    // Reports an error (a benchmark never asserts) and stops the iterations.
    static void fail(benchmark::State &s, const std::string &what);

  private:
    Loop &loop_;
    Snapshot start_;
    uint64_t timed_ns_ = 0, ops_ = 0;
};

} // namespace bench

#endif
