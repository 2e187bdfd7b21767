// evloop.bench._kernels, the benchmark subpackage's extension module: runs bench/'s benchmark
// kernels (bench/kit/kernels/, the ones the google-benchmark families run) from Python, with
// no Python in the timed path (the GIL is released for the whole run). CMakeLists.txt builds
// it once, with every system it can have: the hardware floors, and evloop in both ingress
// variants, whose adapter (bench/kit/systems/evloop_system.c, BENCH_EVLOOP_C_API=1) calls the
// library of the loop module evloop._arena or evloop._chunk through that module's capsule
// _c_api (src/c_api.h); this module links no evloop library. The loop modules know nothing
// of it. This file only steps a kernel, keeps a sample per step and turns the result into a
// dict.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cerrno>
#include <memory>
#include <string>
#include <vector>

#include "c_api.h"
#include "kernels/kernel.h"

// Set at module init from evloop._arena._c_api and evloop._chunk._c_api; read by the evloop
// adapters (evloop_system.c) of each variant.
extern "C" {
const evloop_py_c_api *bench_evloop_c_api_arena = nullptr;
const evloop_py_c_api *bench_evloop_c_api_chunk = nullptr;
}

namespace py = pybind11;

namespace
{

const bench_system *const kSystems[] = {&bench_system_evloop_arena, &bench_system_evloop_chunk,
                                        &bench_system_floor_spin, &bench_system_floor_futex};

const bench_system *find_system(const std::string &name)
{
    for (const bench_system *s : kSystems)
        if (name == s->name)
            return s;
    return nullptr;
}

// What one run measured. samples: per step, its ns when each step is one latency
// (step_samples), else its ns per op.
struct Outcome {
    std::string error, label, name, backend;
    std::vector<int64_t> samples;
    uint64_t timed_ns = 0, ops = 0, iterations = 0;
    bool step_samples = false;
    bench::Counters counters;
};

void step_kernel(const bench::KernelSpec &spec, const bench::Target &t, const bench::Params &p,
                 uint64_t iterations, double max_seconds, Outcome &out)
{
    std::unique_ptr<bench::Kernel> k = spec.make(t, p);
    if (!k->ok()) {
        out.error = k->why_not();
        return;
    }
    out.backend = k->loop().backend();
    out.name = bench::benchmark_name(spec, bench::make_target(t.sys, out.backend, t.cfg), p);
    out.step_samples = k->step_samples;
    out.samples.reserve(size_t(std::min<uint64_t>(iterations, 10000000)));
    uint64_t limit = max_seconds > 0 ? bench::now_ns() + uint64_t(max_seconds * 1e9) : UINT64_MAX;
    bench::Snapshot start = k->loop().snapshot();
    for (uint64_t i = 0; i < iterations; i++) {
        uint64_t ns = 0, ops = 0;
        if (!k->step(&ns, &ops)) {
            out.error = k->error;
            break;
        }
        out.timed_ns += ns;
        out.ops += ops;
        out.iterations++;
        out.samples.push_back(k->step_samples ? int64_t(ns) : int64_t(ns / (ops ? ops : 1)));
        if ((i & 15) == 15 && bench::now_ns() > limit)
            break;
    }
    out.counters = bench::loop_counters(t, start, k->loop().snapshot(), out.timed_ns, out.ops);
    bench::Samples(out.samples).summarize(out.counters, "", true);
    k->finish(out.counters);
    out.label = k->label;
}

// One run's kernel, system and parameters, checked; the arguments are evloop.bench.run's.
struct Setup {
    const bench::KernelSpec *spec;
    bench::Target target;
    bench::Params params;
};

Setup set_up(const std::string &family, const std::string &system, const std::string &backend,
             int64_t spin_ns, unsigned batch_budget, double max_seconds, const std::string &shape,
             int producers, uint64_t tasks, uint64_t batch, uint64_t gap_ns)
{
    const bench::KernelSpec *spec = bench::find_kernel(family);
    if (!spec)
        throw py::value_error("unknown family '" + family + "'");
    const bench_system *sys = find_system(system);
    if (!sys)
        throw py::value_error("unknown system '" + system + "'");
    if (spin_ns < -1)
        throw py::value_error("spin_ns must be >= -1");
    bench::Params p = bench::make_params(shape, tasks, producers, batch, gap_ns);
    // bench/'s warm-up cap (50 ms, less for a short run), with max_seconds as the run time.
    p.warm_up_s = max_seconds > 0 ? std::min(0.05, max_seconds * 0.5) : 0.05;
    p = bench::resolve(*spec, p);
    std::string bad = bench::check(*spec, p);
    if (!bad.empty())
        throw std::runtime_error(bad);
    bench_loop_config cfg{nullptr, batch_budget, spin_ns, nullptr};
    return {spec, bench::make_target(sys, backend, cfg), p};
}

// The benchmark's name as a run with these arguments would give it, without running it
// (with backend "" a run names the backend that started instead).
std::string name(const std::string &family, const std::string &system, const std::string &backend,
                 int64_t spin_ns, unsigned batch_budget, const std::string &shape, int producers,
                 uint64_t tasks, uint64_t batch, uint64_t gap_ns)
{
    Setup s = set_up(family, system, backend, spin_ns, batch_budget, 0, shape, producers, tasks,
                     batch, gap_ns);
    return bench::benchmark_name(*s.spec, s.target, s.params);
}

py::dict run(const std::string &family, const std::string &system, const std::string &backend,
             int64_t spin_ns, unsigned batch_budget, uint64_t iterations, double max_seconds,
             const std::string &shape, int producers, uint64_t tasks, uint64_t batch,
             uint64_t gap_ns)
{
    Setup s = set_up(family, system, backend, spin_ns, batch_budget, max_seconds, shape,
                     producers, tasks, batch, gap_ns);
    const bench::Params &p = s.params;
    Outcome r;
    {
        py::gil_scoped_release nogil; // no Python anywhere in the run
        step_kernel(*s.spec, s.target, p, iterations, max_seconds, r);
    }
    if (r.iterations == 0 && !r.error.empty())
        throw std::runtime_error(family + "/" + system + ": " + r.error);
    py::dict d;
    d["name"] = r.name;
    d["system"] = system;
    d["backend"] = r.backend;
    d["params"] = py::dict(py::arg("shape") = p.shape, py::arg("tasks") = p.tasks,
                           py::arg("producers") = p.producers, py::arg("batch") = p.batch,
                           py::arg("gap_ns") = p.gap_ns);
    d["iterations"] = r.iterations;
    d["ops"] = r.ops;
    d["timed_ns"] = r.timed_ns;
    d["per_op_samples"] = r.step_samples;
    d["error"] = r.error;
    d["label"] = r.label;
    d["samples"] = r.samples;
    d["counters"] = r.counters;
    return d;
}

} // namespace

namespace
{

// The C API table of the loop module evloop.<name>, which must be the variant it says.
const evloop_py_c_api *c_api_of(const char *name, const char *variant)
{
    py::object cap = py::module_::import(name).attr("_c_api");
    auto *api = static_cast<const evloop_py_c_api *>(
        PyCapsule_GetPointer(cap.ptr(), EVLOOP_PY_C_API_CAPSULE));
    if (!api)
        throw py::error_already_set();
    if (api->size < sizeof(evloop_py_c_api) || std::string(api->ingress()) != variant)
        throw std::runtime_error(std::string(name) + "._c_api is not the " + variant +
                                 " variant's table this module was built for");
    return api;
}

} // namespace

PYBIND11_MODULE(_kernels, m)
{
    m.doc() = "bench/'s benchmark kernels; the API is evloop.bench.run.";
    bench_evloop_c_api_arena = c_api_of("evloop._arena", "arena");
    bench_evloop_c_api_chunk = c_api_of("evloop._chunk", "chunk");
    m.def("families", &bench::kernel_families, "The benchmark families the kernels know.");
    m.def(
        "spec",
        [](const std::string &family) {
            const bench::KernelSpec *spec = bench::find_kernel(family);
            if (!spec)
                throw py::value_error("unknown family " + family);
            return py::dict(py::arg("shapes") = bench::kernel_shapes(*spec),
                            py::arg("floors") = spec->floors);
        },
        py::arg("family"),
        "The family as its kernel registers it: its shapes ([] for none), whether the floors "
        "run it.");
    m.def(
        "systems",
        []() {
            std::vector<std::string> names;
            for (const bench_system *s : kSystems)
                names.push_back(s->name);
            return names;
        },
        "The systems the kernels can run: evloop-arena, evloop-chunk and the floors.");
    m.def(
        "probe",
        [](const std::string &system, const std::string &backend) {
            const bench_system *s = find_system(system);
            if (!s)
                return -EINVAL;
            return s->probe ? s->probe(backend.empty() ? nullptr : backend.c_str()) : 0;
        },
        py::arg("system"), py::arg("backend") = "",
        "0 when system can run with backend here, else a negative errno.");
    m.def("name", &name, py::arg("family"), py::arg("system"), py::arg("backend") = "",
          py::arg("spin_ns") = -1, py::arg("batch_budget") = 0, py::arg("shape") = "",
          py::arg("producers") = 0, py::arg("tasks") = 0, py::arg("batch") = 0,
          py::arg("gap_ns") = 0,
          "The benchmark's name as run() with these arguments gives it, without running it.");
    m.def("run", &run, py::arg("family"), py::arg("system"), py::arg("backend") = "",
          py::arg("spin_ns") = -1, py::arg("batch_budget") = 0, py::arg("iterations") = 1000,
          py::arg("max_seconds") = 0.0, py::arg("shape") = "", py::arg("producers") = 0,
          py::arg("tasks") = 0, py::arg("batch") = 0, py::arg("gap_ns") = 0,
          "Runs one benchmark kernel with the GIL released; see evloop.bench.run. Zero or "
          "empty parameters take the family's defaults.");
}
