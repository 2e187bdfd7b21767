// The kernels' registry, the common counters and percentiles (kernel.h).
#include "kernel.h"

#include <algorithm>

namespace bench
{

static std::vector<KernelSpec> &specs()
{
    static std::vector<KernelSpec> list;
    return list;
}

KernelRegistrar::KernelRegistrar(const KernelSpec &spec)
{
    specs().push_back(spec);
}

const KernelSpec *find_kernel(const std::string &family)
{
    for (const KernelSpec &s : specs())
        if (family == s.family)
            return &s;
    return nullptr;
}

std::vector<std::string> kernel_families()
{
    std::vector<std::string> out;
    for (const KernelSpec &s : specs())
        out.push_back(s.family);
    std::sort(out.begin(), out.end());
    return out;
}

std::vector<std::string> kernel_shapes(const KernelSpec &spec)
{
    std::vector<std::string> out;
    std::string rest = spec.shapes;
    while (!rest.empty()) {
        size_t comma = rest.find(", ");
        out.push_back(rest.substr(0, comma));
        rest = comma == std::string::npos ? "" : rest.substr(comma + 2);
    }
    return out;
}

Params resolve(const KernelSpec &spec, const Params &p)
{
    const Params &d = spec.defaults;
    Params r = p;
    if (r.shape.empty())
        r.shape = d.shape;
    if (r.tasks == 0)
        r.tasks = d.tasks;
    if (r.producers == 0)
        r.producers = d.producers;
    if (r.batch == 0)
        r.batch = d.batch;
    if (r.gap_ns == 0)
        r.gap_ns = d.gap_ns;
    if (r.warm_up_s <= 0)
        r.warm_up_s = d.warm_up_s > 0 ? d.warm_up_s : 0.05;
    return r;
}

std::string check(const KernelSpec &spec, const Params &p)
{
    std::string shapes = std::string(", ") + spec.shapes + ", ";
    bool known = p.shape.empty() ? *spec.shapes == '\0'
                                 : shapes.find(", " + p.shape + ", ") != std::string::npos;
    if (known)
        return "";
    if (*spec.shapes == '\0')
        return std::string(spec.family) + " has no shapes";
    return std::string(spec.family) + ": shape must be one of " + spec.shapes;
}

std::string shape_tail(const Params &p)
{
    return p.shape;
}

std::string benchmark_name(const KernelSpec &spec, const Target &t, const Params &p)
{
    std::string name = std::string(spec.family) + "/" + t.name;
    std::string tail = spec.tail ? spec.tail(p) : "";
    return tail.empty() ? name : name + "/" + tail;
}

void Samples::summarize(Counters &c, const std::string &prefix, bool with_max)
{
    if (v_.empty())
        return;
    std::sort(v_.begin(), v_.end());
    auto at = [this](double q) { return double(v_[size_t(q * double(v_.size() - 1) + 0.5)]); };
    c[prefix + "p50_ns"] = at(0.50);
    c[prefix + "p99_ns"] = at(0.99);
    // The rest of the distribution, for the tournament's distribution plots.
    c[prefix + "p10_ns"] = at(0.10);
    c[prefix + "p90_ns"] = at(0.90);
    c[prefix + "p999_ns"] = at(0.999);
    c[prefix + "min_ns"] = double(v_.front());
    if (with_max)
        c[prefix + "max_ns"] = double(v_.back());
}

Counters loop_counters(const Target &t, const Snapshot &start, const Snapshot &end,
                       uint64_t timed_ns, uint64_t ops)
{
    Counters c;
    double n = double(ops ? ops : 1);
    c["ns_per_op"] = double(timed_ns) / n;
    c["loop_cpu_ns_per_op"] = double(end.loop_cpu_ns - start.loop_cpu_ns) / n;
    c["cpu_ns_per_op"] = double(end.proc_cpu_ns - start.proc_cpu_ns) / n;
    c["loop_sleeps_per_op"] = double(end.loop_sleeps - start.loop_sleeps) / n;
    // Systems that count their own wakes say so; for libev and libuv a wake is a write to
    // their eventfd, so the process's write syscalls stand in.
    double wakes = end.st.wakes >= 0 ? double(end.st.wakes - start.st.wakes)
                                     : double(end.proc_writes - start.proc_writes);
    c["wakes_per_op"] = wakes / n;
    uint64_t drains = end.st.drains - start.st.drains;
    c["tasks_per_drain"] = double(end.st.tasks - start.st.tasks) / double(drains ? drains : 1);
    if (t.is_evloop()) {
        c["spin_hits_per_op"] = double(end.st.spin_hits - start.st.spin_hits) / n;
        c["membarriers_per_op"] = double(end.st.membarriers - start.st.membarriers) / n;
        c["budget_end"] = double(end.st.budget);
        c["spin_ns_end"] = double(end.st.spin_ns);
    }
    return c;
}

} // namespace bench
