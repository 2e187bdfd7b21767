// The google-benchmark glue of harness.h: target selection (probing, environment filters,
// rotation), registration, driving a kernel from benchmark::State, reporting counters.
#include "harness.h"

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include <unistd.h>

namespace bench
{

// ---------------------------------------------------------------- systems

static std::vector<Target> g_targets;
static unsigned g_rotate;
static double g_min_time = 0.5;

static std::vector<std::string> split(const std::string &s, char sep)
{
    std::vector<std::string> out;
    size_t start = 0;
    while (start <= s.size()) {
        size_t end = s.find(sep, start);
        if (end == std::string::npos)
            end = s.size();
        if (end > start)
            out.push_back(s.substr(start, end - start));
        start = end + 1;
    }
    return out;
}

// EVLOOP_BENCH_SYSTEMS: a target is kept when its name, its system's name or its
// "system/" prefix is listed.
static bool selected(const Target &t, const std::vector<std::string> &only)
{
    if (only.empty())
        return true;
    // The name without a fixed-setting tag: "evloop-arena/epoll" for
    // "evloop-arena@spin0/epoll", so a listed target keeps its extra settings.
    std::string base = t.sys->name;
    if (t.sys->caps & BENCH_CAP_BACKENDS)
        base += "/" + t.backend;
    for (const std::string &o : only)
        if (t.name == o || base == o || t.sys->name == o || base.rfind(o + "/", 0) == 0)
            return true;
    return false;
}

// "budget=64,spin=0" or "profile=FILE" -> config; false when malformed. The profile's path
// is kept for the life of the process (the config points into it).
static bool parse_config(const std::string &s, bench_loop_config *c)
{
    static std::vector<std::unique_ptr<std::string>> paths;
    *c = bench_loop_config{nullptr, 0, -1, nullptr};
    for (const std::string &kv : split(s, ',')) {
        size_t eq = kv.find('=');
        if (eq == std::string::npos)
            return false;
        std::string k = kv.substr(0, eq);
        long long v = std::atoll(kv.c_str() + eq + 1);
        if (k == "budget") {
            c->batch_budget = unsigned(v);
        } else if (k == "spin") {
            c->spin_ns = v;
        } else if (k == "profile" && eq + 1 < kv.size()) {
            if (access(kv.c_str() + eq + 1, R_OK) != 0) {
                std::fprintf(stderr, "evloop_bench: profile %s: %s\n", kv.c_str() + eq + 1,
                             std::strerror(errno));
                return false;
            }
            paths.push_back(std::make_unique<std::string>(kv.substr(eq + 1)));
            c->profile = paths.back()->c_str();
        } else {
            return false;
        }
    }
    return true;
}

void setup_targets(const char *evloop_backends)
{
    const char *env_only = std::getenv("EVLOOP_BENCH_SYSTEMS");
    std::vector<std::string> only = split(env_only ? env_only : "", ',');
    const char *env_rot = std::getenv("EVLOOP_BENCH_ROTATE");
    g_rotate = env_rot ? unsigned(std::atoi(env_rot)) : 0;

    // Extra fixed evloop settings, for comparing them with the adaptive defaults:
    // EVLOOP_BENCH_EVLOOP_CONFIGS="budget=64;spin=0;budget=256,spin=20000;profile=FILE"
    // (profile: a saved evloop_autotune profile; such targets are tagged "tuned").
    std::vector<bench_loop_config> configs{bench_loop_config{nullptr, 0, -1, nullptr}};
    if (const char *env_cfg = std::getenv("EVLOOP_BENCH_EVLOOP_CONFIGS")) {
        for (const std::string &s : split(env_cfg, ';')) {
            bench_loop_config c;
            if (parse_config(s, &c))
                configs.push_back(c);
            else
                std::fprintf(stderr, "evloop_bench: ignoring evloop config '%s'\n", s.c_str());
        }
    }

    std::vector<Target> all;
    for (const bench_system *sys : {&bench_system_evloop_arena, &bench_system_evloop_chunk}) {
        for (const std::string &b : split(evloop_backends, ',')) {
            int r = sys->probe(b.c_str());
            if (r < 0) {
                std::fprintf(stderr, "evloop_bench: %s/%s cannot run here: %s\n", sys->name,
                             b.c_str(), std::strerror(-r));
                continue;
            }
            for (const bench_loop_config &c : configs)
                all.push_back(make_target(sys, b, c));
        }
    }
    for (const bench_system *sys : {&bench_system_libev, &bench_system_libuv,
                                    &bench_system_floor_spin, &bench_system_floor_futex})
        all.push_back(make_target(sys, "", bench_loop_config{nullptr, 0, -1, nullptr}));
    for (const Target &t : all)
        if (selected(t, only))
            g_targets.push_back(t);
}

const std::vector<Target> &all_targets()
{
    return g_targets;
}

static std::vector<Target> rotated(std::vector<Target> v)
{
    if (!v.empty())
        std::rotate(v.begin(), v.begin() + (g_rotate % v.size()), v.end());
    return v;
}

std::vector<Target> targets(unsigned need, bool floors)
{
    std::vector<Target> out;
    for (const Target &t : g_targets) {
        if (t.is_floor() ? !floors : (t.sys->caps & need) != need)
            continue;
        out.push_back(t);
    }
    return rotated(out);
}

std::vector<Target> evloop_budget_targets(const std::vector<unsigned> &budgets)
{
    std::vector<Target> out;
    std::map<const bench_system *, bool> seen;
    for (const Target &t : g_targets) {
        if (!t.is_evloop() || !t.tag.empty() || seen[t.sys])
            continue;
        seen[t.sys] = true; // the first backend only: no fd is registered, so it is moot
        for (unsigned b : budgets) {
            bench_loop_config c = t.cfg;
            c.batch_budget = b;
            out.push_back(make_target(t.sys, t.backend, c));
        }
    }
    return rotated(out);
}

benchmark::internal::Benchmark *add_kernel(const std::string &family, const Target &t,
                                           const Params &p)
{
    const KernelSpec *spec = find_kernel(family);
    if (!spec) {
        std::fprintf(stderr, "evloop_bench: no kernel %s was built in\n", family.c_str());
        std::exit(2);
    }
    Params rp = resolve(*spec, p);
    std::string name = benchmark_name(*spec, t, rp);
    return benchmark::RegisterBenchmark(name.c_str(),
                                        [spec, t, rp](benchmark::State &s) {
                                            run_kernel(s, *spec, t, rp);
                                        })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
}

void add_for_targets(const std::string &family, unsigned need, bool floors, const Params &p,
                     double time_scale)
{
    for (const Target &t : targets(need, floors)) {
        benchmark::internal::Benchmark *b = add_kernel(family, t, p);
        if (time_scale > 0)
            b->MinTime(min_time() * time_scale);
    }
}

void run_kernel(benchmark::State &s, const KernelSpec &spec, const Target &t, const Params &p)
{
    std::string bad = check(spec, p);
    if (!bad.empty())
        return Measure::fail(s, bad);
    Params rp = p;
    // bench/'s warm-up cap: 50 ms, less for a tiny --benchmark_min_time.
    rp.warm_up_s = std::min(0.05, min_time() * 0.5);
    std::unique_ptr<Kernel> k = spec.make(t, rp);
    if (!k->ok())
        return Measure::fail(s, k->why_not());
    Samples steps;
    if (k->step_samples)
        steps.reserve(size_t(std::min<int64_t>(s.max_iterations, 4000000)));
    Measure m(k->loop());
    for (auto _ : s) {
        uint64_t ns = 0, ops = 0;
        if (!k->step(&ns, &ops)) {
            Measure::fail(s, k->error);
            break;
        }
        if (k->step_samples)
            steps.add(int64_t(ns));
        m.iteration(s, ns, ops);
    }
    m.finish(s);
    Counters c;
    steps.summarize(c);
    k->finish(c);
    report(s, c);
    if (!k->label.empty())
        s.SetLabel(k->label);
}

double min_time()
{
    return g_min_time;
}

void set_min_time(double t)
{
    g_min_time = t;
}

// ---------------------------------------------------------------- results

void report(benchmark::State &s, const Counters &c)
{
    for (const auto &kv : c)
        s.counters[kv.first] = kv.second;
}

Measure::Measure(Loop &loop) : loop_(loop), start_(loop.snapshot())
{
}

void Measure::iteration(benchmark::State &s, uint64_t timed_ns, uint64_t ops)
{
    s.SetIterationTime(double(timed_ns) * 1e-9);
    timed_ns_ += timed_ns;
    ops_ += ops;
}

void Measure::finish(benchmark::State &s)
{
    report(s, loop_counters(loop_.target(), start_, loop_.snapshot(), timed_ns_, ops_));
    s.SetItemsProcessed(int64_t(ops_));
}

static std::atomic<int> g_failures{0};

void Measure::fail(benchmark::State &s, const std::string &what)
{
    g_failures.fetch_add(1, std::memory_order_relaxed);
    if (!s.error_occurred())
        s.SkipWithError(what.c_str());
}

int failures()
{
    return g_failures.load(std::memory_order_relaxed);
}

} // namespace bench
