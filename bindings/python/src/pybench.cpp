// evloop.bench's kernels: the benchmark families of bench/ run from Python with their
// parameters, with no Python in the timed path (the GIL is released for the whole run).
//
// Systems come through the bench suite's own adapter seam (bench/system.h): this file is
// compiled into each extension module together with bench/systems/evloop_system.c (built
// for the module's variant) and bench/systems/floor_system.c, the same sources the
// google-benchmark binary uses. The kernels themselves are here because bench/'s are
// written against benchmark::State (harness.h includes <benchmark/benchmark.h>, and
// harness.cpp needs libev, libuv and libbenchmark); each class below has the shape
// proposed for bench/ (bindings/python/README.md, "evloop.bench"): constructed from a
// target and parameters, step() runs one timed iteration and reports its ns and ops, so
// google-benchmark's loop and Python's can both drive the same kernel. Definitions of an
// op, waits and warm-ups follow the bench families of the same name.
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <fcntl.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

extern "C" {
#include "system.h"
}

#define PYBENCH_CAT2(a, b) a##b
#define PYBENCH_CAT(a, b) PYBENCH_CAT2(a, b)
#define PYBENCH_EVLOOP_SYSTEM PYBENCH_CAT(bench_system_evloop_, EVLOOP_PY_MODULE_VARIANT)

namespace py = pybind11;

namespace PYBENCH_CAT(pybench_, EVLOOP_PY_MODULE_VARIANT) {

// ---------------------------------------------------------------- time and waiting

uint64_t now_ns()
{
    timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void spin_for_ns(uint64_t ns)
{
    uint64_t end = now_ns() + ns;
    while (now_ns() < end)
        cpu_relax();
}

void futex_wait(std::atomic<uint32_t> *w, uint32_t val, uint64_t timeout_ns)
{
    timespec ts{time_t(timeout_ns / 1000000000u), long(timeout_ns % 1000000000u)};
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAIT_PRIVATE, val, &ts, nullptr, 0);
}

void futex_wake(std::atomic<uint32_t> *w, int n)
{
    syscall(SYS_futex, reinterpret_cast<uint32_t *>(w), FUTEX_WAKE_PRIVATE, n, nullptr, nullptr,
            0);
}

constexpr uint64_t kWaitLimitNs = 20ull * 1000000000u;

// A one-shot completion flag, as bench::Signal: set() on the loop thread makes a wake
// syscall only when the waiter really sleeps.
struct alignas(64) Signal {
    std::atomic<uint32_t> state{0}; // 0 pending, 1 set, 2 pending with a sleeper

    void reset() { state.store(0, std::memory_order_relaxed); }
    void set()
    {
        // acq_rel: pairs with the acquire loads of the waiters
        if (state.exchange(1, std::memory_order_acq_rel) == 2)
            futex_wake(&state, 1);
    }
    bool wait_spin()
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
    bool wait_block()
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
    bool wait_hybrid(uint64_t spin_ns = 100000)
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
};

void set_signal_task(void *arg)
{
    static_cast<Signal *>(arg)->set();
}

struct alignas(64) Countdown {
    uint64_t count = 0, target = 0; // loop thread only
    Signal done;
    void arm(uint64_t n)
    {
        count = 0;
        target = n;
        done.reset();
    }
    static void task(void *arg)
    {
        auto *c = static_cast<Countdown *>(arg);
        if (++c->count == c->target)
            c->done.set();
    }
};

// ---------------------------------------------------------------- a running loop

struct Target {
    const bench_system *sys;
    std::string backend; // "" = the system's default
    bench_loop_config cfg{nullptr, 0, -1, nullptr};
};

struct Snapshot {
    uint64_t wall_ns = 0, loop_cpu_ns = 0, proc_cpu_ns = 0, loop_sleeps = 0, proc_writes = 0;
    bench_loop_stats st{};
};

size_t read_proc(const char *path, char *buf, size_t cap)
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

uint64_t proc_field(const char *path, const char *key)
{
    char buf[4096];
    if (read_proc(path, buf, sizeof(buf)) == 0)
        return 0;
    const char *p = std::strstr(buf, key);
    return p ? std::strtoull(p + std::strlen(key), nullptr, 10) : 0;
}

uint64_t clock_ns(clockid_t c)
{
    timespec ts;
    if (clock_gettime(c, &ts) != 0)
        return 0;
    return uint64_t(ts.tv_sec) * 1000000000u + uint64_t(ts.tv_nsec);
}

// One loop of one system on its own thread, as bench::Loop.
class Loop {
public:
    explicit Loop(const Target &t) : sys_(t.sys), backend_(t.backend)
    {
        bench_loop_config cfg = t.cfg;
        cfg.backend = backend_.empty() ? nullptr : backend_.c_str();
        int r = sys_->create(&loop_, &cfg);
        if (r < 0) {
            error_ = std::string("create: ") + std::strerror(-r);
            loop_ = nullptr;
            return;
        }
        if (pthread_create(&thread_, nullptr, thread_main, this) != 0) {
            error_ = "pthread_create failed";
            return;
        }
        started_ = true;
        while (tid_.load(std::memory_order_acquire) == 0)
            sched_yield();
        if (pthread_getcpuclockid(thread_, &cpu_clock_) != 0)
            cpu_clock_ = CLOCK_THREAD_CPUTIME_ID;
    }
    ~Loop()
    {
        if (!started_)
            return;
        sys_->stop(loop_);
        pthread_join(thread_, nullptr);
        sys_->destroy(loop_);
    }
    Loop(const Loop &) = delete;
    Loop &operator=(const Loop &) = delete;

    bool ok() const { return error_.empty(); }
    const std::string &error() const { return error_; }
    const bench_system *sys() const { return sys_; }
    bench_loop *raw() const { return loop_; }
    int submit(bench_cb cb, void *arg) { return sys_->submit(loop_, cb, arg); }
    int queue_microtask(bench_cb cb, void *arg)
    {
        return sys_->queue_microtask ? sys_->queue_microtask(loop_, cb, arg)
                                     : sys_->submit(loop_, cb, arg);
    }
    const char *backend() const { return sys_->backend ? sys_->backend(loop_) : ""; }

    Snapshot snapshot() const
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

    void warm_up(int n)
    {
        uint64_t deadline = now_ns() + 50000000;
        for (int i = 0; i < n && now_ns() < deadline; i++) {
            Signal s;
            if (submit(set_signal_task, &s) < 0 || !s.wait_hybrid())
                return;
        }
    }

    // Runs fn(loop) on the loop thread and waits for it.
    template <class F> bool call(F fn)
    {
        struct Call {
            F *fn;
            bench_loop *loop;
            Signal done;
            static void run(void *a)
            {
                auto *c = static_cast<Call *>(a);
                (*c->fn)(c->loop);
                c->done.set();
            }
        };
        auto *c = new Call{&fn, loop_, {}};
        if (submit(Call::run, c) < 0) {
            delete c;
            return false;
        }
        if (!c->done.wait_block())
            return false; // leaked rather than freed under the loop
        delete c;
        return true;
    }

private:
    static void *thread_main(void *self)
    {
        auto *l = static_cast<Loop *>(self);
        // release: pairs with the acquire in the constructor
        l->tid_.store(pid_t(syscall(SYS_gettid)), std::memory_order_release);
        l->sys_->run(l->loop_);
        return nullptr;
    }

    const bench_system *sys_;
    std::string backend_;
    bench_loop *loop_ = nullptr;
    pthread_t thread_{};
    bool started_ = false;
    std::atomic<pid_t> tid_{0};
    clockid_t cpu_clock_{};
    std::string error_;
};

// ---------------------------------------------------------------- kernels

struct Params {
    std::string shape = "hot"; // PingPongLatency: hot, cold, blocking
    int producers = 10;        // MultiProducer
    uint64_t tasks = 100000;   // PingPong / MultiProducer: tasks per round
    uint64_t burst = 1000;     // BurstSubmit
    uint64_t gap_ns = 50000;   // PingPongLatency/cold: the untimed gap
};

// The kernel interface: construct (may fail: error()), then step() per timed iteration.
class Kernel {
public:
    virtual ~Kernel() = default;
    virtual bool step(uint64_t *timed_ns, uint64_t *ops) = 0;
    virtual bool per_op_samples() const { return true; } // else one sample per iteration
    virtual Loop &loop() = 0;
    std::string error;
};

class PingPongLatency : public Kernel {
public:
    PingPongLatency(const Target &t, const Params &p) : loop_(t), shape_(p.shape), gap_(p.gap_ns)
    {
        if (shape_ != "hot" && shape_ != "cold" && shape_ != "blocking")
            error = "shape must be hot, cold or blocking";
        if (loop_.ok())
            loop_.warm_up(shape_ == "hot" ? 2000 : 200);
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        if (shape_ == "cold")
            spin_for_ns(gap_);
        sig_.reset();
        uint64_t t0 = now_ns();
        if (loop_.submit(set_signal_task, &sig_) < 0)
            return fail("submit refused");
        bool ok = shape_ == "blocking" ? sig_.wait_block() : sig_.wait_spin();
        *timed_ns = now_ns() - t0;
        *ops = 1;
        return ok || fail("task did not run");
    }
    Loop &loop() override { return loop_; }

private:
    bool fail(const char *what)
    {
        error = what;
        return false;
    }
    Signal sig_; // declared before the loop: outlives every task
    Loop loop_;
    std::string shape_;
    uint64_t gap_;
};

class MicrotaskRoundTrip : public Kernel {
public:
    MicrotaskRoundTrip(const Target &t, const Params &) : loop_(t)
    {
        if (loop_.ok())
            loop_.warm_up(1000);
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        sig_.reset();
        uint64_t t0 = now_ns();
        if (loop_.queue_microtask(set_signal_task, &sig_) < 0) {
            error = "microtask refused";
            return false;
        }
        bool ok = sig_.wait_spin();
        *timed_ns = now_ns() - t0;
        *ops = 1;
        if (!ok)
            error = "microtask did not run";
        return ok;
    }
    Loop &loop() override { return loop_; }

private:
    Signal sig_;
    Loop loop_;
};

// PingPong (one producer floods tasks per round) and BurstSubmit (bursts): one sample per
// round, in ns per task.
class Flood : public Kernel {
public:
    Flood(const Target &t, uint64_t n) : loop_(t), n_(n)
    {
        if (n_ == 0)
            error = "tasks per round must be > 0";
        if (loop_.ok())
            loop_.warm_up(100);
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        cd_.arm(n_);
        uint64_t t0 = now_ns();
        for (uint64_t i = 0; i < n_; i++)
            if (loop_.submit(Countdown::task, &cd_) < 0) {
                error = "submit refused";
                return false;
            }
        if (!cd_.done.wait_hybrid()) {
            error = "tasks did not all run";
            return false;
        }
        *timed_ns = now_ns() - t0;
        *ops = n_;
        return true;
    }
    bool per_op_samples() const override { return false; }
    Loop &loop() override { return loop_; }

private:
    Countdown cd_;
    Loop loop_;
    uint64_t n_;
};

class MultiProducer : public Kernel {
public:
    MultiProducer(const Target &t, const Params &p) : loop_(t), producers_(p.producers)
    {
        if (producers_ < 1)
            error = "producers must be >= 1";
        else if (!(t.sys->caps & BENCH_CAP_MPSC))
            error = "this system takes one producer at a time";
        share_ = producers_ > 0 ? p.tasks / uint64_t(producers_) : 0;
        if (share_ == 0 && error.empty())
            error = "tasks must be >= producers";
        if (loop_.ok())
            loop_.warm_up(100);
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        uint64_t total = share_ * uint64_t(producers_);
        cd_.arm(total);
        std::atomic<int> refused{0};
        std::vector<std::thread> threads;
        threads.reserve(size_t(producers_));
        uint64_t t0 = now_ns();
        for (int i = 0; i < producers_; i++)
            threads.emplace_back([&] {
                for (uint64_t k = 0; k < share_; k++)
                    if (loop_.submit(Countdown::task, &cd_) < 0) {
                        refused.fetch_add(1, std::memory_order_relaxed);
                        return;
                    }
            });
        bool ok = cd_.done.wait_block();
        *timed_ns = now_ns() - t0;
        *ops = total;
        for (std::thread &th : threads)
            th.join();
        if (refused.load() || !ok) {
            error = refused.load() ? "submit refused" : "tasks did not all run";
            return false;
        }
        return true;
    }
    bool per_op_samples() const override { return false; }
    Loop &loop() override { return loop_; }

private:
    Countdown cd_;
    Loop loop_;
    int producers_;
    uint64_t share_ = 0;
};

class ReadinessRoundTrip : public Kernel {
public:
    ReadinessRoundTrip(const Target &t, const Params &) : loop_(t)
    {
        if (!(t.sys->caps & BENCH_CAP_IO)) {
            error = "this system has no fd watching";
            return;
        }
        if (pipe2(fds_, O_NONBLOCK | O_CLOEXEC) < 0) {
            error = "pipe2 failed";
            fds_[0] = fds_[1] = -1;
            return;
        }
        if (!loop_.ok())
            return;
        int r = -1;
        const bench_system *sys = loop_.sys();
        if (!loop_.call([&](bench_loop *l) { r = sys->io_add(l, fds_[0], on_readable, this); }) ||
            r < 0) {
            error = "io_add failed: " + std::string(std::strerror(r < 0 ? -r : EIO));
            return;
        }
        added_ = true;
        loop_.warm_up(100);
        for (int i = 0; i < 200; i++) { // the fd path, untimed
            sig_.reset();
            if (write(fds_[1], "x", 1) != 1 || !sig_.wait_spin())
                break;
        }
    }
    ~ReadinessRoundTrip() override
    {
        if (added_) {
            const bench_system *sys = loop_.sys();
            loop_.call([&](bench_loop *l) { sys->io_remove(l, fds_[0]); });
        }
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        sig_.reset();
        uint64_t t0 = now_ns();
        if (write(fds_[1], "x", 1) != 1) {
            error = "write failed";
            return false;
        }
        bool ok = sig_.wait_spin();
        *timed_ns = now_ns() - t0;
        *ops = 1;
        if (!ok)
            error = "fd callback did not run";
        return ok;
    }
    Loop &loop() override { return loop_; }

private:
    static void on_readable(void *arg, int fd, unsigned)
    {
        auto *k = static_cast<ReadinessRoundTrip *>(arg);
        char buf[64];
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
        k->sig_.set();
    }
    struct Fds { // closed after the loop is gone (declared before it)
        int v[2] = {-1, -1};
        ~Fds()
        {
            for (int fd : v)
                if (fd >= 0)
                    close(fd);
        }
    } fdh_;
    int *fds_ = fdh_.v;
    Signal sig_;
    Loop loop_;
    bool added_ = false;
};

const std::vector<std::string> kFamilies = {"PingPongLatency", "PingPong", "BurstSubmit",
                                            "MultiProducer", "MicrotaskRoundTrip",
                                            "ReadinessRoundTrip"};

std::unique_ptr<Kernel> make_kernel(const std::string &family, const Target &t, const Params &p)
{
    if (family == "PingPongLatency")
        return std::make_unique<PingPongLatency>(t, p);
    if (family == "PingPong")
        return std::make_unique<Flood>(t, p.tasks);
    if (family == "BurstSubmit")
        return std::make_unique<Flood>(t, p.burst);
    if (family == "MultiProducer")
        return std::make_unique<MultiProducer>(t, p);
    if (family == "MicrotaskRoundTrip")
        return std::make_unique<MicrotaskRoundTrip>(t, p);
    if (family == "ReadinessRoundTrip")
        return std::make_unique<ReadinessRoundTrip>(t, p);
    return nullptr;
}

const bench_system *find_system(const std::string &name)
{
    for (const bench_system *s :
         {&PYBENCH_EVLOOP_SYSTEM, &bench_system_floor_spin, &bench_system_floor_futex})
        if (name == s->name)
            return s;
    return nullptr;
}

struct RunOut {
    std::string error, backend;
    std::vector<int64_t> samples;
    uint64_t timed_ns = 0, ops = 0, iterations = 0;
    Snapshot start, end;
    bool per_op = true;
};

RunOut run_kernel(const std::string &family, const Target &t, const Params &p,
                  uint64_t iterations, double max_seconds)
{
    RunOut out;
    std::unique_ptr<Kernel> k = make_kernel(family, t, p);
    if (!k) {
        out.error = "unknown family " + family;
        return out;
    }
    if (!k->loop().ok()) {
        out.error = k->loop().error();
        return out;
    }
    if (!k->error.empty()) {
        out.error = k->error;
        return out;
    }
    out.backend = k->loop().backend();
    out.per_op = k->per_op_samples();
    out.samples.reserve(size_t(std::min<uint64_t>(iterations, 10000000)));
    uint64_t limit = max_seconds > 0 ? now_ns() + uint64_t(max_seconds * 1e9) : UINT64_MAX;
    out.start = k->loop().snapshot();
    for (uint64_t i = 0; i < iterations; i++) {
        uint64_t ns = 0, ops = 0;
        if (!k->step(&ns, &ops)) {
            out.error = k->error;
            break;
        }
        out.timed_ns += ns;
        out.ops += ops;
        out.iterations++;
        out.samples.push_back(out.per_op ? int64_t(ns) : int64_t(ns / (ops ? ops : 1)));
        if ((i & 15) == 15 && now_ns() > limit)
            break;
    }
    out.end = k->loop().snapshot();
    return out;
}

double at(const std::vector<int64_t> &sorted, double q)
{
    return double(sorted[size_t(q * double(sorted.size() - 1) + 0.5)]);
}

py::dict run_py(const std::string &family, const std::string &system, const std::string &backend,
                int64_t spin_ns, unsigned batch_budget, uint64_t iterations, double max_seconds,
                const std::string &shape, int producers, uint64_t tasks, uint64_t burst,
                uint64_t gap_ns)
{
    const bench_system *sys = find_system(system);
    if (!sys)
        throw py::value_error("unknown system '" + system + "' in this module");
    if (spin_ns < -1)
        throw py::value_error("spin_ns must be >= -1");
    Target t{sys, backend, bench_loop_config{nullptr, batch_budget, spin_ns, nullptr}};
    Params p;
    p.shape = shape;
    p.producers = producers;
    p.tasks = tasks;
    p.burst = burst;
    p.gap_ns = gap_ns;
    RunOut r;
    {
        py::gil_scoped_release nogil; // no Python anywhere in the run
        r = run_kernel(family, t, p, iterations, max_seconds);
    }
    if (r.iterations == 0 && !r.error.empty())
        throw std::runtime_error(family + "/" + system + ": " + r.error);
    py::dict d;
    d["family"] = family;
    d["system"] = system;
    d["backend"] = r.backend;
    d["spin_ns_config"] = spin_ns;
    d["batch_budget_config"] = batch_budget;
    d["iterations"] = r.iterations;
    d["ops"] = r.ops;
    d["timed_ns"] = r.timed_ns;
    d["per_op_samples"] = r.per_op;
    d["error"] = r.error;
    py::list samples(r.samples.size());
    for (size_t i = 0; i < r.samples.size(); i++)
        samples[i] = py::int_(r.samples[i]);
    d["samples"] = samples;
    py::dict c;
    double ops = double(r.ops ? r.ops : 1);
    const Snapshot &a = r.start, &b = r.end;
    c["ns_per_op"] = double(r.timed_ns) / ops;
    c["loop_cpu_ns_per_op"] = double(b.loop_cpu_ns - a.loop_cpu_ns) / ops;
    c["cpu_ns_per_op"] = double(b.proc_cpu_ns - a.proc_cpu_ns) / ops;
    c["loop_sleeps_per_op"] = double(b.loop_sleeps - a.loop_sleeps) / ops;
    double wakes = b.st.wakes >= 0 ? double(b.st.wakes - a.st.wakes)
                                   : double(b.proc_writes - a.proc_writes);
    c["wakes_per_op"] = wakes / ops;
    uint64_t drains = b.st.drains - a.st.drains;
    c["tasks_per_drain"] = double(b.st.tasks - a.st.tasks) / double(drains ? drains : 1);
    if (sys->caps & BENCH_CAP_TUNABLE) {
        c["spin_hits_per_op"] = double(b.st.spin_hits - a.st.spin_hits) / ops;
        c["budget_end"] = double(b.st.budget);
        c["spin_ns_end"] = double(b.st.spin_ns);
    }
    if (!r.samples.empty()) {
        std::vector<int64_t> s = r.samples;
        std::sort(s.begin(), s.end());
        c["min_ns"] = double(s.front());
        c["p10_ns"] = at(s, 0.10);
        c["p50_ns"] = at(s, 0.50);
        c["p90_ns"] = at(s, 0.90);
        c["p99_ns"] = at(s, 0.99);
        c["p999_ns"] = at(s, 0.999);
        c["max_ns"] = double(s.back());
    }
    d["counters"] = c;
    return d;
}

std::vector<std::string> systems()
{
    return {PYBENCH_EVLOOP_SYSTEM.name, bench_system_floor_spin.name,
            bench_system_floor_futex.name};
}

} // namespace pybench_<variant>

void evloop_pybench_register(py::module_ &m)
{
    using namespace PYBENCH_CAT(pybench_, EVLOOP_PY_MODULE_VARIANT);
    m.def("bench_families", []() { return kFamilies; },
          "The benchmark families evloop.bench can run.");
    m.def("bench_systems", &systems, "The systems this module's kernels can run.");
    m.def("bench_probe", [](const std::string &system, const std::string &backend) {
              const bench_system *s = find_system(system);
              if (!s)
                  return -EINVAL;
              return s->probe ? s->probe(backend.empty() ? nullptr : backend.c_str()) : 0;
          }, py::arg("system"), py::arg("backend") = "",
          "0 when system can run with backend here, else a negative errno.");
    m.def("bench_run", &run_py, py::arg("family"), py::arg("system"), py::arg("backend") = "",
          py::arg("spin_ns") = -1, py::arg("batch_budget") = 0, py::arg("iterations") = 1000,
          py::arg("max_seconds") = 0.0, py::arg("shape") = "hot", py::arg("producers") = 10,
          py::arg("tasks") = 100000, py::arg("burst") = 1000, py::arg("gap_ns") = 50000,
          "Runs one benchmark kernel with the GIL released; see evloop.bench.run.");
}
