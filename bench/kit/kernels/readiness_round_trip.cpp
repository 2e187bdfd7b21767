// ReadinessRoundTrip (the fd ping-pong): the producer writes one byte into a pipe whose
// read end the loop watches; the fd callback reads it and sets a flag the producer spins
// on. One op = one round trip; each step is one (p50 / p99 counters). Per evloop backend,
// libev (ev_io) and libuv (uv_poll). 200 untimed round trips warm the fd path first.
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <unistd.h>

#include "kernel.h"

namespace bench
{
namespace
{

// The pipe, closed after the loop is gone (declared before it).
struct Pipe {
    int fds[2] = {-1, -1};
    Pipe()
    {
        if (pipe2(fds, O_NONBLOCK | O_CLOEXEC) < 0)
            fds[0] = fds[1] = -1;
    }
    ~Pipe()
    {
        for (int fd : fds)
            if (fd >= 0)
                close(fd);
    }
};

class Readiness : public Kernel
{
  public:
    Readiness(const Target &t, const Params &p) : loop_(t)
    {
        step_samples = true;
        if (!(t.sys->caps & BENCH_CAP_IO)) {
            error = "this system has no fd watching";
            return;
        }
        if (pipe_.fds[0] < 0) {
            error = "pipe2 failed";
            return;
        }
        if (!loop_.ok())
            return;
        int r = -1;
        const bench_system *sys = loop_.sys();
        int rfd = pipe_.fds[0];
        if (!loop_.call([&](bench_loop *l) { r = sys->io_add(l, rfd, on_readable, this); }) ||
            r < 0) {
            error = std::string("io_add failed: ") + std::strerror(r < 0 ? -r : EIO);
            return;
        }
        added_ = true;
        loop_.warm_up(100, p.warm_up_s);
        for (int warm = 0; warm < 200; warm++) { // the fd path, untimed
            sig_.reset();
            if (write(pipe_.fds[1], "x", 1) != 1 || !sig_.wait_spin())
                break;
        }
    }
    ~Readiness() override
    {
        if (!added_)
            return;
        const bench_system *sys = loop_.sys();
        int rfd = pipe_.fds[0];
        loop_.call([&](bench_loop *l) { sys->io_remove(l, rfd); });
    }
    Loop &loop() override
    {
        return loop_;
    }
    bool step(uint64_t *timed_ns, uint64_t *ops) override
    {
        sig_.reset();
        uint64_t t0 = now_ns();
        if (write(pipe_.fds[1], "x", 1) != 1)
            return fail("write failed");
        if (!sig_.wait_spin())
            return fail("fd callback did not run");
        *timed_ns = now_ns() - t0;
        *ops = 1;
        return true;
    }

  private:
    static void on_readable(void *arg, int fd, unsigned events)
    {
        auto *k = static_cast<Readiness *>(arg);
        char buf[64];
        while (read(fd, buf, sizeof(buf)) > 0)
            ;
        k->sig_.set();
    }

    Pipe pipe_;
    Signal sig_;
    Loop loop_;
    bool added_ = false;
};

BENCH_KERNEL({"ReadinessRoundTrip", construct<Readiness>, nullptr, "", Params()});

} // namespace
} // namespace bench
