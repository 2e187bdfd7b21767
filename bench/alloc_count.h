/* Heap-allocation counting for the AllocsPerSubmit family: alloc_count.c interposes the
 * process's allocator (glibc only) and counts calls while counting is switched on. */
#ifndef BENCH_ALLOC_COUNT_H
#define BENCH_ALLOC_COUNT_H

#include <stdbool.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* True when this build counts (glibc, no sanitizer owning the allocator). */
bool bench_alloc_count_available(void);
/* Switches counting on or off for every thread; counting starts off. Any thread. */
void bench_alloc_count_enable(bool on);
/* Calls that allocated (malloc, calloc, realloc, the aligned ones) / that freed a block,
 * counted while counting was on, since the process started. Any thread. */
uint64_t bench_alloc_count_allocs(void);
uint64_t bench_alloc_count_frees(void);

#ifdef __cplusplus
}
#endif

#endif
