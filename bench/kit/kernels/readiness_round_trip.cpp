// ReadinessRoundTrip (the fd ping-pong): the producer writes one byte into a pipe whose
// read end the loop watches; the fd callback reads it and sets a flag the producer spins
// on. One op = one round trip; each step is one (p50 / p99 counters). Per evloop backend,
// libev (ev_io) and libuv (uv_poll). 200 untimed round trips warm the fd path first.
// Shapes: alone (the default, no tail in the name); silent: one other thread has posted a
// task to the loop once and stays alive (a worker known to the loop); sporadic: that
// thread posts a task every 200 us, as a worker pool returning results now and then does.
// The loop's sleep between round trips is what they change: whether it pays for the
// other thread (evloop: a membarrier before it sleeps, while a submit could be unseen).
#include <atomic>
#include <cerrno>
#include <cstring>
#include <thread>

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
        if (p.shape == "silent" || p.shape == "sporadic") {
            side_ = std::thread([this, sporadic = p.shape == "sporadic"] { side(sporadic); });
            while (!side_ready_.load())
                std::this_thread::yield();
            if (side_failed_.load()) {
                error = "the other thread's submit was refused";
                return;
            }
        }
        loop_.warm_up(100, p.warm_up_s);
        for (int warm = 0; warm < 200; warm++) { // the fd path, untimed
            sig_.reset();
            if (write(pipe_.fds[1], "x", 1) != 1 || !sig_.wait_spin())
                break;
        }
    }
    ~Readiness() override
    {
        side_stop_.store(true);
        if (side_.joinable())
            side_.join();
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
    static void noop(void *arg)
    {
        static_cast<std::atomic<uint64_t> *>(arg)->fetch_add(1);
    }

    // The other thread: one post it waits for, then every 200 us (sporadic) or none.
    void side(bool sporadic)
    {
        if (loop_.submit(noop, &side_ran_) < 0)
            side_failed_.store(true);
        while (side_ran_.load() == 0 && !side_failed_.load())
            std::this_thread::yield();
        side_ready_.store(true);
        while (!side_stop_.load()) {
            std::this_thread::sleep_for(std::chrono::microseconds(200));
            if (sporadic && !side_stop_.load())
                loop_.submit(noop, &side_ran_);
        }
    }

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
    std::thread side_; // joined before loop_ goes (declared after it)
    std::atomic<bool> side_ready_{false}, side_stop_{false}, side_failed_{false};
    std::atomic<uint64_t> side_ran_{0};
};

// The default shape keeps the family's first name (no tail).
std::string readiness_tail(const Params &p)
{
    return p.shape == "alone" ? "" : p.shape;
}

BENCH_KERNEL({"ReadinessRoundTrip", construct<Readiness>, readiness_tail,
              "alone, silent, sporadic", make_params("alone", 0)});

} // namespace
} // namespace bench
