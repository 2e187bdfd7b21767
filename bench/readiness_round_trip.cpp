// ReadinessRoundTrip (the fd ping-pong): the producer writes one byte into a pipe whose
// read end the loop watches; the fd callback reads it and sets a flag the producer spins
// on. One op = one round trip; p50 / p99 counters. Per evloop backend, libev (ev_io) and
// libuv (uv_poll).
#include <algorithm>
#include <string>

#include <fcntl.h>
#include <unistd.h>

#include "harness.h"

namespace
{

struct Pipe {
    int fds[2] = {-1, -1};
    bench::Signal sig;
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

void on_readable(void *arg, int fd, unsigned events)
{
    auto *p = static_cast<Pipe *>(arg);
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0)
        ;
    p->sig.set();
}

void run(benchmark::State &s, const bench::Target &t)
{
    Pipe p; // declared first: closed after the loop is gone
    bench::Loop loop(t);
    if (!loop.ok())
        return bench::Measure::fail(s, loop.error());
    if (p.fds[0] < 0)
        return bench::Measure::fail(s, "pipe2 failed");
    int r = -1;
    const bench_system *sys = loop.sys();
    if (!loop.call([&](bench_loop *l) { r = sys->io_add(l, p.fds[0], on_readable, &p); }) || r < 0)
        return bench::Measure::fail(s, "io_add failed: " + std::to_string(r));
    loop.warm_up(100);
    bench::Samples samples;
    samples.reserve(size_t(std::min<int64_t>(s.max_iterations, 4000000)));
    {
        bench::Measure m(loop);
        for (int warm = 0; warm < 200; warm++) { // the fd path, untimed
            p.sig.reset();
            if (write(p.fds[1], "x", 1) != 1 || !p.sig.wait_spin())
                break;
        }
        for (auto _ : s) {
            p.sig.reset();
            uint64_t t0 = bench::now_ns();
            if (write(p.fds[1], "x", 1) != 1) {
                bench::Measure::fail(s, "write failed");
                break;
            }
            if (!p.sig.wait_spin()) {
                bench::Measure::fail(s, "fd callback did not run");
                break;
            }
            uint64_t dt = bench::now_ns() - t0;
            samples.add(int64_t(dt));
            m.iteration(s, dt, 1);
        }
        samples.report(s);
        m.finish(s);
    }
    loop.call([&](bench_loop *l) { sys->io_remove(l, p.fds[0]); });
}

void register_family()
{
    for (const bench::Target &t : bench::targets(BENCH_CAP_IO))
        bench::add("ReadinessRoundTrip", t, "", run);
}

} // namespace

BENCH_FAMILY("ReadinessRoundTrip", register_family);
