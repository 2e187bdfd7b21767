// Targets and the loop thread of loop.h: naming, the thread, /proc and CPU-clock
// snapshots.
#include "loop.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include <fcntl.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sync.h"

namespace bench
{

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

Target make_target(const bench_system *sys, const std::string &backend,
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

const char *Loop::backend() const
{
    return sys_->backend && loop_ ? sys_->backend(loop_) : "";
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
    s.loop_cpu_ns = loop_cpu_ns();
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

void Loop::warm_up(int n, double cap_s)
{
    uint64_t deadline = now_ns() + uint64_t(cap_s * 1e9);
    for (int i = 0; i < n && now_ns() < deadline; i++) {
        Signal s;
        if (submit(set_signal_task, &s) < 0 || !s.wait_hybrid())
            return;
    }
}

} // namespace bench
