// MicroWakeupSyscall: what a submit costs depending on what the loop is doing (Running,
// Sleeping, Burst, RapidSubmit), and how many wake syscalls it takes (wakes_per_op).
// Kernel: kernels/micro_wakeup_syscall.cpp.
#include "harness.h"

BENCH_FAMILY("MicroWakeupSyscall", [] {
    const char *family = "MicroWakeupSyscall";
    bench::add_for_targets(family, 0, false, bench::make_params("Running", 0), 0.5);
    bench::Params sleeping = bench::make_params("Sleeping", 0);
    for (const bench::Target &t : bench::targets(0, true))
        if (t.sys != &bench_system_floor_spin) // never sleeps: nothing to wake
            bench::add_kernel(family, t, sleeping)->MinTime(bench::min_time() * 0.2);
    bench::add_for_targets(family, 0, false, bench::make_params("Burst", 0), 0.2);
    bench::add_for_targets(family, 0, false, bench::make_params("RapidSubmit", 0), 0.5);
});
