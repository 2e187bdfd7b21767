// MicroWakeupSyscall: what a submit costs depending on what the loop is doing (Running,
// Sleeping, Burst, RapidSubmit), and how many wake syscalls it takes (wakes_per_op).
// Kernel: kernels/micro_wakeup_syscall.cpp.
#include "harness.h"

namespace
{

void add(const char *shape, const bench::Target &t, double time_scale)
{
    bench::Params p;
    p.shape = shape;
    bench::add_kernel("MicroWakeupSyscall", t, p)->MinTime(bench::min_time() * time_scale);
}

void register_family()
{
    for (const bench::Target &t : bench::targets(0))
        add("Running", t, 0.5);
    for (const bench::Target &t : bench::targets(0, true))
        if (t.sys != &bench_system_floor_spin) // never sleeps: nothing to wake
            add("Sleeping", t, 0.2);
    for (const bench::Target &t : bench::targets(0))
        add("Burst", t, 0.2);
    for (const bench::Target &t : bench::targets(0))
        add("RapidSubmit", t, 0.5);
}

} // namespace

BENCH_FAMILY("MicroWakeupSyscall", register_family);
