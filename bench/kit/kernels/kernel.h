// The benchmark kernels' interface: one kernel per family, a KernelSpec registered with
// BENCH_KERNEL in bench/kit/kernels/*.cpp (related families share a file: submit_flood.cpp
// holds PingPong, BurstSubmit and BatchSubmit), constructed from a Target and Params (loop
// started, warmed up), then step() runs one timed iteration and says how many ns it timed
// and how many ops it did. Whatever drives the steps owns the clock of the run: bench/'s
// google-benchmark families (harness.h, families.cpp) and the Python evloop.bench
// (bindings/python/src/bench/kernels.cpp) both do, through this interface only. No
// google-benchmark, no libev or libuv here.
#ifndef BENCH_KERNELS_KERNEL_H
#define BENCH_KERNELS_KERNEL_H

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "loop.h"
#include "sync.h"

namespace bench
{

// A kernel's parameters; a zero or empty field means the family's default (KernelSpec).
struct Params {
    std::string shape;     // the family's variant: PingPongLatency hot|cold|blocking, ...
    uint64_t tasks = 0;    // tasks per iteration (a flood, a burst, all producers' together)
    int producers = 0;     // producer threads
    uint64_t batch = 0;    // BatchSubmit: tasks per batch call
    uint64_t gap_ns = 0;   // PingPongLatency/cold: the untimed gap before each round trip
    double warm_up_s = 0;  // the longest a warm-up may take, seconds
};

using Counters = std::map<std::string, double>;

// Per-op durations (or any per-op values) for percentiles.
class Samples
{
  public:
    Samples() = default;
    explicit Samples(std::vector<int64_t> v) : v_(std::move(v))
    {
    }
    void reserve(size_t n)
    {
        v_.reserve(n);
    }
    void add(int64_t x)
    {
        v_.push_back(x);
    }
    size_t size() const
    {
        return v_.size();
    }
    // Adds prefix+"p50_ns", "p99_ns", "min_ns", "p10_ns", "p90_ns", "p999_ns" (and
    // "max_ns" when with_max) to c; nothing when there is no sample.
    void summarize(Counters &c, const std::string &prefix = "", bool with_max = false);

  private:
    std::vector<int64_t> v_;
};

// The counters every benchmark reports, from snapshots around its timed iterations:
// ns_per_op (timed ns / ops: the tournament's headline), loop_cpu_ns_per_op,
// cpu_ns_per_op, loop_sleeps_per_op, wakes_per_op, tasks_per_drain, and for evloop
// spin_hits_per_op, membarriers_per_op and the budget / spin window in force at the end.
Counters loop_counters(const Target &t, const Snapshot &start, const Snapshot &end,
                       uint64_t timed_ns, uint64_t ops);

class Kernel
{
  public:
    virtual ~Kernel() = default;
    // The kernel's loop; a kernel whose loop is not ok() must not be stepped.
    virtual Loop &loop() = 0;
    // One timed iteration: *timed_ns and *ops (what an op is: the kernel file's header).
    // False on a failure (error says which); no step may follow one.
    virtual bool step(uint64_t *timed_ns, uint64_t *ops) = 0;
    // After the last step: the family's own counters, added to the common ones (or
    // replacing one: ns_per_op when the family's headline is not the timed time).
    virtual void finish(Counters &c)
    {
    }
    // Ready to step: the loop started and the parameters made sense.
    bool ok()
    {
        return error.empty() && loop().ok();
    }
    const std::string &why_not()
    {
        return error.empty() ? loop().error() : error;
    }

    std::string error;          // construction or a step failed: why
    std::string label;          // a note for the report ("allocs not measured ...")
    bool step_samples = false;  // each step is one latency: percentiles of the step times
                                // (per round trip, per chain) are meaningful

  protected:
    // Sets error and returns false, for step(): `return fail("submit refused");`.
    bool fail(const std::string &why)
    {
        error = why;
        return false;
    }
};

// A family as the kernels know it: its name, how to build its kernel, how the benchmark
// name ends for some parameters, its shapes. Defaults fill what Params leaves zero.
struct KernelSpec {
    const char *family;
    // Builds the kernel for resolved, checked parameters; never nullptr.
    std::unique_ptr<Kernel> (*make)(const Target &t, const Params &p);
    std::string (*tail)(const Params &p); // after "Family/target/"; nullptr: none
    const char *shapes;                   // the valid shapes, ", "-separated; "": none
    Params defaults;
    bool floors = false; // the hardware floors run it too (others' kernels may hang on them)
};

// Spec helpers: the factory of a kernel class constructed from (Target, Params), and
// Params spelled in one line (a spec's defaults).
template <class K> std::unique_ptr<Kernel> construct(const Target &t, const Params &p)
{
    return std::make_unique<K>(t, p);
}
inline Params make_params(const std::string &shape, uint64_t tasks, int producers = 0,
                          uint64_t batch = 0, uint64_t gap_ns = 0)
{
    Params p;
    p.shape = shape;
    p.tasks = tasks;
    p.producers = producers;
    p.batch = batch;
    p.gap_ns = gap_ns;
    return p;
}

// A tail that is the shape: "hot", "million".
std::string shape_tail(const Params &p);

// Registers a spec at start-up (static initialisation): BENCH_KERNEL(spec).
struct KernelRegistrar {
    explicit KernelRegistrar(const KernelSpec &spec);
};
#define BENCH_KERNEL_CAT2(a, b) a##b
#define BENCH_KERNEL_CAT(a, b) BENCH_KERNEL_CAT2(a, b)
#define BENCH_KERNEL(...)                                                                          \
    static ::bench::KernelRegistrar BENCH_KERNEL_CAT(bench_kernel_registrar_,                      \
                                                     __LINE__)(::bench::KernelSpec __VA_ARGS__)

// The spec of a family; nullptr when no kernel of that name was compiled in.
const KernelSpec *find_kernel(const std::string &family);
// Every family compiled in, sorted.
std::vector<std::string> kernel_families();
// The spec's shapes in the order it lists them; empty when the family has none.
std::vector<std::string> kernel_shapes(const KernelSpec &spec);
// p with what it leaves zero or empty taken from the spec's defaults.
Params resolve(const KernelSpec &spec, const Params &p);
// "" when resolved parameters suit the family, else why not (an unknown shape).
std::string check(const KernelSpec &spec, const Params &p);
// "Family/target.name[/tail]" for resolved parameters.
std::string benchmark_name(const KernelSpec &spec, const Target &t, const Params &p);

} // namespace bench

#endif
