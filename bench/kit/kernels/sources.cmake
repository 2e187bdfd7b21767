# The benchmark kernels (kernel.h), for every build that runs them: bench/CMakeLists.txt
# (the google-benchmark suite) and bindings/python/CMakeLists.txt (evloop.bench). Paths
# are relative to this folder. The kernels reach systems only through bench/kit/system.h,
# so a build compiles them with the systems it has (plus bench/kit/ on the include path).
#   EVLOOP_BENCH_KERNEL_SOURCES       what runs anywhere
#   EVLOOP_BENCH_KERNEL_SOURCES_BENCH what needs the bench binary's malloc counting
#                                     (bench/alloc_count.c, bench/ on the include path)
set(EVLOOP_BENCH_KERNEL_SOURCES
    sync.cpp
    loop.cpp
    kernel.cpp
    alloc_pressure.cpp
    idle_cost.cpp
    internal_priority.cpp
    micro_batch_budget.cpp
    micro_cas_contention.cpp
    micro_wakeup_syscall.cpp
    multi_producer.cpp
    readiness_round_trip.cpp
    round_trip.cpp
    submit_flood.cpp
    submit_internal_chain.cpp
    timers.cpp)
set(EVLOOP_BENCH_KERNEL_SOURCES_BENCH
    allocs_per_submit.cpp)
