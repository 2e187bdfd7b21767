/* Small internal helpers shared by every part of the library: assertions, cache-line
 * padding, container_of, the CPU pause hint, the monotonic clock, the usable CPUs, and
 * whether this is a ThreadSanitizer build. */
#ifndef EVLOOP_COMMON_H
#define EVLOOP_COMMON_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>
#ifdef __linux__
#include <sched.h>
#endif

#ifdef EVLOOP_DEBUG
#include <stdio.h>
#include <stdlib.h>
#define EVLOOP_ASSERT(cond)                                                                        \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "evloop: %s:%d: assertion failed: %s\n", __FILE__, __LINE__, #cond);   \
            abort();                                                                               \
        }                                                                                          \
    } while (0)
#else
#define EVLOOP_ASSERT(cond) ((void)0)
#endif

#define EVLOOP_CACHELINE 64

/* Thread-locals read on every submit: initial-exec, one %fs-relative address and no
 * __tls_get_addr call when the library is built -fPIC. They are few bytes in all (arena.c's
 * cache, state.c's mark): glibc's surplus static TLS holds them even in a dlopen()ed module
 * such as the Python extension. */
#if defined(__GNUC__) && !defined(__APPLE__)
#define EVLOOP_TLS_FAST __attribute__((tls_model("initial-exec")))
#else
#define EVLOOP_TLS_FAST
#endif

/* EVLOOP__TSAN: 1 in a ThreadSanitizer build (gcc's and clang's spellings), else 0. */
#if defined(__SANITIZE_THREAD__)
#define EVLOOP__TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define EVLOOP__TSAN 1
#endif
#endif
#ifndef EVLOOP__TSAN
#define EVLOOP__TSAN 0
#endif

#define container_of(ptr, type, member) ((type *)((char *)(ptr)-offsetof(type, member)))

static inline void evloop__cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

static inline uint64_t evloop__clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline struct timespec evloop__ns_to_timespec(uint64_t ns)
{
    struct timespec ts = {.tv_sec = (time_t)(ns / 1000000000u),
                          .tv_nsec = (long)(ns % 1000000000u)};
    return ts;
}

/* CPUs this process may run on: the affinity mask when it can be read (a process pinned to
 * one CPU of a large machine must not spin), else the online count. */
static inline long evloop__usable_cpus(void)
{
#ifdef __linux__
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return CPU_COUNT(&set);
#endif
    return sysconf(_SC_NPROCESSORS_ONLN);
}

/* CPU numbers a placement may name: 0..EVLOOP__MAX_CPUS - 1. */
#ifdef __linux__
#define EVLOOP__MAX_CPUS CPU_SETSIZE
#else
#define EVLOOP__MAX_CPUS 1024
#endif

#endif
