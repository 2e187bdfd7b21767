// The harness of harness.h: target selection (probing, environment filters, rotation),
// the loop thread, /proc and CPU-clock snapshots, waits with a deadline, percentiles.
#include "harness.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>

#include <fcntl.h>
#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace bench
{

// ---------------------------------------------------------------- time and waiting

void run_submit_batches(benchmark::State &s, const Target &t, uint64_t n)
{
    Countdown cd; // declared before the loop, so it outlives every task
    Loop loop(t);
    if (!loop.ok())
        return Measure::fail(s, loop.error());
    loop.warm_up(100);
    Measure m(loop);
    for (auto _ : s) {
        cd.arm(n);
        uint64_t t0 = now_ns();
        if (!submit_many(loop, Countdown::task, &cd, n)) {
            Measure::fail(s, "submit refused");
            break;
        }
        if (!cd.done.wait_spin()) {
            Measure::fail(s, "tasks did not all run");
            break;
        }
        m.iteration(s, now_ns() - t0, n);
    }
    m.finish(s);
}

void spin_for_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end)
        cpu_relax();
}

void futex_wait(std::atomic<uint32_t> *word, uint32_t val, uint64_t timeout_ns)
{
    timespec ts{time_t(timeout_ns / 1000000000u), long(timeout_ns % 1000000000u)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAIT_PRIVATE, val, &ts, nullptr,
            0);
}

void futex_wake(std::atomic<uint32_t> *word, int count)
{
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(word), FUTEX_WAKE_PRIVATE, count, nullptr,
            nullptr, 0);
}

bool Signal::wait_spin()
{
    uint64_t deadline = now_ns() + kWaitLimitNs;
    for (unsigned i = 1;; i++) {
        if (state.load(std::memory_order_acquire) == 1)
            return true;
        cpu_relax();
        if ((i & 4095) == 0 && now_ns() > deadline)
            return false;
    }
}

bool Signal::wait_block()
{
    uint64_t deadline = now_ns() + kWaitLimitNs;
    for (;;) {
        uint32_t s = state.load(std::memory_order_acquire);
        if (s == 1)
            return true;
        // acq_rel: announce the sleeper; pairs with the exchange in set()
        if (s == 0 && !state.compare_exchange_weak(s, 2, std::memory_order_acq_rel,
                                                   std::memory_order_acquire))
            continue;
        uint64_t now = now_ns();
        if (now >= deadline)
            return false;
        futex_wait(&state, 2, deadline - now);
    }
}

bool Signal::wait_hybrid(uint64_t spin_ns)
{
    uint64_t end = now_ns() + spin_ns;
    for (unsigned i = 1;; i++) {
        if (state.load(std::memory_order_acquire) == 1)
            return true;
        cpu_relax();
        if ((i & 63) == 0 && now_ns() > end)
            return wait_block();
    }
}

void Countdown::task(void *arg)
{
    auto *c = static_cast<Countdown *>(arg);
    if (++c->count == c->target)
        c->done.set();
}

void set_signal_task(void *arg)
{
    static_cast<Signal *>(arg)->set();
}

// ---------------------------------------------------------------- systems

static std::vector<Target> g_targets;
static unsigned g_rotate;
static double g_min_time = 0.5;

bool Target::is_floor() const
{
    return sys == &bench_system_floor_spin || sys == &bench_system_floor_futex;
}

bool Target::is_evloop() const
{
    return sys == &bench_system_evloop_arena || sys == &bench_system_evloop_chunk;
}

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

static std::string config_tag(const bench_loop_config &c)
{
    std::string tag;
    if (c.batch_budget != 0)
        tag += "budget" + std::to_string(c.batch_budget);
    if (c.spin_ns != -1)
        tag += (tag.empty() ? "" : "-") + std::string("spin") + std::to_string(c.spin_ns);
    if (c.profile)
        tag += (tag.empty() ? "" : "-") + std::string("tuned");
    return tag;
}

static Target make_target(const bench_system *sys, const std::string &backend,
                          const bench_loop_config &cfg)
{
    Target t;
    t.sys = sys;
    t.backend = backend;
    t.cfg = cfg;
    t.tag = config_tag(cfg);
    t.name = sys->name;
    if (!t.tag.empty())
        t.name += "@" + t.tag;
    if (sys->caps & BENCH_CAP_BACKENDS)
        t.name += "/" + backend;
    return t;
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

benchmark::internal::Benchmark *add(const std::string &family, const Target &t,
                                    const std::string &params, BenchFn fn)
{
    std::string name = family + "/" + t.name;
    if (!params.empty())
        name += "/" + params;
    return benchmark::RegisterBenchmark(name.c_str(), [t, fn](benchmark::State &s) { fn(s, t); })
        ->UseManualTime()
        ->Unit(benchmark::kMicrosecond);
}

double min_time()
{
    return g_min_time;
}

void set_min_time(double t)
{
    g_min_time = t;
}

static std::vector<std::pair<std::string, void (*)()>> &families()
{
    static std::vector<std::pair<std::string, void (*)()>> list;
    return list;
}

FamilyRegistrar::FamilyRegistrar(const char *name, void (*fn)())
{
    families().emplace_back(name, fn);
}

void register_families()
{
    // Sorted, so every round registers (and runs) families in the same order whatever the
    // link order of the files; targets inside a family rotate per round instead.
    std::vector<std::pair<std::string, void (*)()>> list = families();
    std::sort(list.begin(), list.end());
    for (auto &f : list)
        f.second();
}

// ---------------------------------------------------------------- a running loop

Loop::Loop(const Target &t) : target_(t), sys_(t.sys)
{
    bench_loop_config cfg = target_.cfg;
    cfg.backend = target_.backend.empty() ? nullptr : target_.backend.c_str();
    int r = sys_->create(&loop_, &cfg);
    if (r < 0) {
        error_ = std::string("create: ") + std::strerror(-r);
        loop_ = nullptr;
        return;
    }
    r = pthread_create(&thread_, nullptr, thread_main, this);
    if (r != 0) {
        error_ = std::string("pthread_create: ") + std::strerror(r);
        return; // the loop is leaked: a system may not free a loop that never ran
    }
    started_ = true;
    while (tid_.load(std::memory_order_acquire) == 0)
        sched_yield();
    if (pthread_getcpuclockid(thread_, &cpu_clock_) != 0)
        cpu_clock_ = CLOCK_THREAD_CPUTIME_ID; // reads as 0 from here: the counter is moot
}

Loop::~Loop()
{
    if (!started_)
        return;
    sys_->stop(loop_);
    pthread_join(thread_, nullptr);
    sys_->destroy(loop_);
}

void *Loop::thread_main(void *self)
{
    auto *l = static_cast<Loop *>(self);
    // release: pairs with the acquire in the constructor
    l->tid_.store(pid_t(syscall(SYS_gettid)), std::memory_order_release);
    l->sys_->run(l->loop_);
    return nullptr;
}

int Loop::submit_internal(bench_cb cb, void *arg)
{
    return sys_->submit_internal ? sys_->submit_internal(loop_, cb, arg)
                                 : sys_->submit(loop_, cb, arg);
}

int Loop::queue_microtask(bench_cb cb, void *arg)
{
    return sys_->queue_microtask ? sys_->queue_microtask(loop_, cb, arg)
                                 : sys_->submit(loop_, cb, arg);
}

namespace
{
struct Call {
    std::function<void(bench_loop *)> fn;
    bench_loop *loop;
    Signal done;
};
void call_task(void *arg)
{
    auto *c = static_cast<Call *>(arg);
    c->fn(c->loop);
    c->done.set();
}
} // namespace

bool Loop::call(const std::function<void(bench_loop *)> &fn)
{
    auto *c = new Call{fn, loop_, {}};
    if (submit(call_task, c) < 0) {
        delete c;
        return false;
    }
    if (!c->done.wait_block())
        return false; // the task may still run: leak it rather than free it under the loop
    delete c;
    return true;
}

// Reads a small /proc file into buf; returns its length or 0.
static size_t read_proc(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, cap - 1);
    close(fd);
    if (n < 0)
        n = 0;
    buf[n] = '\0';
    return size_t(n);
}

static uint64_t proc_field(const char *path, const char *key)
{
    char buf[4096];
    if (read_proc(path, buf, sizeof(buf)) == 0)
        return 0;
    const char *p = std::strstr(buf, key);
    return p ? std::strtoull(p + std::strlen(key), nullptr, 10) : 0;
}

static uint64_t clock_ns(clockid_t c)
{
    timespec ts;
    if (clock_gettime(c, &ts) != 0)
        return 0;
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

Snapshot Loop::snapshot() const
{
    Snapshot s;
    char path[64];
    std::snprintf(path, sizeof(path), "/proc/self/task/%d/status", int(tid_.load()));
    s.loop_sleeps = proc_field(path, "voluntary_ctxt_switches:");
    s.proc_writes = proc_field("/proc/self/io", "syscw:");
    s.loop_cpu_ns = cpu_clock_ == CLOCK_THREAD_CPUTIME_ID ? 0 : clock_ns(cpu_clock_);
    s.proc_cpu_ns = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
    sys_->stats(loop_, &s.st);
    s.wall_ns = now_ns();
    return s;
}

uint64_t Loop::loop_cpu_ns() const
{
    return cpu_clock_ == CLOCK_THREAD_CPUTIME_ID ? 0 : clock_ns(cpu_clock_);
}

bool Loop::wait_until_asleep(uint64_t timeout_ns) const
{
    char path[64], buf[512];
    std::snprintf(path, sizeof(path), "/proc/self/task/%d/stat", int(tid_.load()));
    uint64_t deadline = now_ns() + timeout_ns;
    do {
        if (read_proc(path, buf, sizeof(buf)) > 0) {
            const char *p = std::strrchr(buf, ')'); // the state follows "(comm) "
            if (p && p[1] == ' ' && (p[2] == 'S' || p[2] == 'D'))
                return true;
        }
    } while (now_ns() < deadline);
    return false;
}

void Loop::warm_up(int n)
{
    // Bounded in time too (50 ms, less for a tiny --benchmark_min_time): on a busy machine
    // a round trip can take milliseconds, and a warm-up must not become the longest part
    // of a run.
    double cap_s = std::min(0.05, min_time() * 0.5);
    uint64_t deadline = now_ns() + uint64_t(cap_s * 1e9);
    for (int i = 0; i < n && now_ns() < deadline; i++) {
        Signal s;
        if (submit(set_signal_task, &s) < 0 || !s.wait_hybrid())
            return;
    }
}

// ---------------------------------------------------------------- results

void Samples::report(benchmark::State &s, const std::string &prefix, bool with_max)
{
    if (v_.empty())
        return;
    std::sort(v_.begin(), v_.end());
    auto at = [this](double q) { return double(v_[size_t(q * double(v_.size() - 1) + 0.5)]); };
    s.counters[prefix + "p50_ns"] = at(0.50);
    s.counters[prefix + "p99_ns"] = at(0.99);
    // The rest of the distribution, for the tournament's distribution plots.
    s.counters[prefix + "p10_ns"] = at(0.10);
    s.counters[prefix + "p90_ns"] = at(0.90);
    s.counters[prefix + "p999_ns"] = at(0.999);
    s.counters[prefix + "min_ns"] = double(v_.front());
    if (with_max)
        s.counters[prefix + "max_ns"] = double(v_.back());
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
    Snapshot end = loop_.snapshot();
    double ops = double(ops_ ? ops_ : 1);
    auto per_op = [ops](double d) { return d / ops; };
    s.counters["ns_per_op"] = double(timed_ns_) / ops;
    s.counters["loop_cpu_ns_per_op"] = per_op(double(end.loop_cpu_ns - start_.loop_cpu_ns));
    s.counters["cpu_ns_per_op"] = per_op(double(end.proc_cpu_ns - start_.proc_cpu_ns));
    s.counters["loop_sleeps_per_op"] = per_op(double(end.loop_sleeps - start_.loop_sleeps));
    // Systems that count their own wakes say so; for libev and libuv a wake is a write to
    // their eventfd, so the process's write syscalls stand in.
    double wakes = end.st.wakes >= 0 ? double(end.st.wakes - start_.st.wakes)
                                     : double(end.proc_writes - start_.proc_writes);
    s.counters["wakes_per_op"] = per_op(wakes);
    uint64_t drains = end.st.drains - start_.st.drains;
    s.counters["tasks_per_drain"] =
        double(end.st.tasks - start_.st.tasks) / double(drains ? drains : 1);
    if (loop_.target().is_evloop()) {
        s.counters["spin_hits_per_op"] = per_op(double(end.st.spin_hits - start_.st.spin_hits));
        s.counters["budget_end"] = double(end.st.budget);
        s.counters["spin_ns_end"] = double(end.st.spin_ns);
    }
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

namespace bench
{

// ---------------------------------------------------------------- producer crew

namespace
{
struct CrewStart {
    ProducerCrew *crew;
    int index;
    void (ProducerCrew::*main)(int);
};
void *crew_thread(void *p)
{
    auto *s = static_cast<CrewStart *>(p);
    CrewStart copy = *s;
    delete s;
    (copy.crew->*copy.main)(copy.index);
    return nullptr;
}
} // namespace

ProducerCrew::ProducerCrew(int n, std::function<void(int)> work) : work_(std::move(work))
{
    for (int i = 0; i < n; i++) {
        pthread_t th;
        auto *start = new CrewStart{this, i, &ProducerCrew::main};
        if (pthread_create(&th, nullptr, crew_thread, start) != 0) {
            delete start;
            break;
        }
        threads_.push_back(th);
    }
}

ProducerCrew::~ProducerCrew()
{
    quit_.store(true, std::memory_order_relaxed);
    // release: pairs with the acquire load of generation_ in main()
    generation_.fetch_add(1, std::memory_order_release);
    futex_wake(&generation_, INT32_MAX);
    for (pthread_t th : threads_)
        pthread_join(th, nullptr);
}

void ProducerCrew::main(int index)
{
    uint32_t seen = 0;
    for (;;) {
        uint32_t g;
        while ((g = generation_.load(std::memory_order_acquire)) == seen)
            futex_wait(&generation_, seen, 1000000000u);
        seen = g;
        if (quit_.load(std::memory_order_relaxed))
            return;
        uint64_t t0 = now_ns();
        uint64_t cur = first_start_.load(std::memory_order_relaxed);
        while (t0 < cur && !first_start_.compare_exchange_weak(cur, t0))
            ;
        work_(index);
        uint64_t t1 = now_ns();
        cur = last_end_.load(std::memory_order_relaxed);
        while (t1 > cur && !last_end_.compare_exchange_weak(cur, t1))
            ;
        // acq_rel: the last producer out publishes every producer's timestamps
        if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1)
            round_done_.set();
    }
}

bool ProducerCrew::round(uint64_t *first_start, uint64_t *last_end)
{
    if (threads_.empty())
        return false;
    first_start_.store(UINT64_MAX, std::memory_order_relaxed);
    last_end_.store(0, std::memory_order_relaxed);
    remaining_.store(int(threads_.size()), std::memory_order_relaxed);
    round_done_.reset();
    // release: publishes the resets above to the producers
    generation_.fetch_add(1, std::memory_order_release);
    futex_wake(&generation_, INT32_MAX);
    if (!round_done_.wait_block())
        return false;
    *first_start = first_start_.load(std::memory_order_relaxed);
    *last_end = last_end_.load(std::memory_order_relaxed);
    return true;
}

} // namespace bench
