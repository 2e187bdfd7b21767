// evloop_bench: every benchmark family for every system (evloop in both ingress variants
// and each backend, libev, libuv, the hardware floors), named Family/system[/backend][/...].
// Usable on its own (./bench/evloop_bench --benchmark_filter=Latency); the tournament
// (tournament/tournament.py) runs it in rounds and turns its JSON into ratios.
//
// Environment:
//   EVLOOP_BENCH_SYSTEMS         only these targets or systems, comma-separated
//                                ("evloop-arena,libuv", "evloop-chunk/epoll")
//   EVLOOP_BENCH_EVLOOP_CONFIGS  extra fixed evloop settings run beside the adaptive
//                                defaults, ';'-separated ("budget=64;spin=0;spin=20000")
//   EVLOOP_BENCH_ROTATE          rotate the order of targets inside each family by N
//
// Exit status 1 when any benchmark reported an error (after running them all).
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include <ev.h>
#include <sys/utsname.h>
#include <uv.h>

#include "harness.h"

#ifndef BENCH_EVLOOP_BACKENDS
#define BENCH_EVLOOP_BACKENDS "epoll"
#endif

// google-benchmark 1.7.1 does not expose the flag it parses, and a few families scale
// their minimum time from it, so it is read here first.
static double parse_min_time(int argc, char **argv)
{
    const char *flag = "--benchmark_min_time=";
    double t = 0.5;
    for (int i = 1; i < argc; i++)
        if (std::strncmp(argv[i], flag, std::strlen(flag)) == 0)
            t = std::atof(argv[i] + std::strlen(flag));
    return t > 0 ? t : 0.5;
}

static void add_context()
{
    std::string names;
    for (const bench::Target &t : bench::all_targets())
        names += (names.empty() ? "" : ",") + t.name;
    benchmark::AddCustomContext("evloop_targets", names);
    benchmark::AddCustomContext("evloop_backends_built", BENCH_EVLOOP_BACKENDS);
    benchmark::AddCustomContext("libuv_version", uv_version_string());
    benchmark::AddCustomContext("libev_version", std::to_string(ev_version_major()) + "." +
                                                     std::to_string(ev_version_minor()));
    utsname u;
    if (uname(&u) == 0)
        benchmark::AddCustomContext("kernel", std::string(u.sysname) + " " + u.release);
    const char *rot = std::getenv("EVLOOP_BENCH_ROTATE");
    benchmark::AddCustomContext("rotate", rot ? rot : "0");
}

int main(int argc, char **argv)
{
    bench::set_min_time(parse_min_time(argc, argv));
    benchmark::Initialize(&argc, argv);
    if (benchmark::ReportUnrecognizedArguments(argc, argv))
        return 1;
    bench::setup_targets(BENCH_EVLOOP_BACKENDS);
    bench::register_families();
    add_context();
    benchmark::RunSpecifiedBenchmarks();
    benchmark::Shutdown();
    // No benchmark asserts; but a run that could not measure (a refused submit, a task
    // that never ran) makes the exit status 1, so a smoke run in CI catches it.
    if (bench::failures() > 0) {
        std::fprintf(stderr, "evloop_bench: %d benchmark run(s) reported an error\n",
                     bench::failures());
        return 1;
    }
    return 0;
}
