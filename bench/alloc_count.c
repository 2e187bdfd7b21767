/* Counts heap allocations for the AllocsPerSubmit family by interposing the allocator in
 * the bench binary: malloc and friends defined here take precedence over libc's for the
 * whole process (libuv, libev, libstdc++ and evloop included) and forward to glibc's
 * exported __libc_* entry points. Counting is off unless AllocsPerSubmit switches it on,
 * so other families pay one relaxed load per call. Only on glibc, and not under a
 * sanitizer (it brings its own allocator); elsewhere nothing is interposed. Known limit:
 * allocations glibc makes internally without going through malloc's PLT entry (a few
 * string functions, valloc's relatives) are not seen. */
#include "alloc_count.h"

#include <stddef.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer) ||                         \
    __has_feature(memory_sanitizer)
#define BENCH_ALLOC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define BENCH_ALLOC_SANITIZED 1
#endif

#if defined(__GLIBC__) && !defined(BENCH_ALLOC_SANITIZED)

#include <errno.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdlib.h>

/* glibc's own allocator, exported under these names since forever. */
extern void *__libc_malloc(size_t size);
extern void *__libc_calloc(size_t n, size_t size);
extern void *__libc_realloc(void *p, size_t size);
extern void __libc_free(void *p);
extern void *__libc_memalign(size_t align, size_t size);
extern void *__libc_valloc(size_t size);
extern void *__libc_pvalloc(size_t size);

/* Relaxed everywhere: these are statistics; the bench reads them after a hand-off that
 * already orders the counted work before the read. The counters live apart from the flag,
 * which every allocation of every family reads. */
static _Alignas(64) atomic_bool counting;
static _Alignas(64) atomic_uint_fast64_t allocs;
static _Alignas(64) atomic_uint_fast64_t frees;

static inline void count(atomic_uint_fast64_t *c)
{
    if (atomic_load_explicit(&counting, memory_order_relaxed))
        atomic_fetch_add_explicit(c, 1, memory_order_relaxed);
}

bool bench_alloc_count_available(void)
{
    return true;
}

void bench_alloc_count_enable(bool on)
{
    atomic_store_explicit(&counting, on, memory_order_relaxed);
}

uint64_t bench_alloc_count_allocs(void)
{
    return atomic_load_explicit(&allocs, memory_order_relaxed);
}

uint64_t bench_alloc_count_frees(void)
{
    return atomic_load_explicit(&frees, memory_order_relaxed);
}

void *malloc(size_t size)
{
    count(&allocs);
    return __libc_malloc(size);
}

void *calloc(size_t n, size_t size)
{
    count(&allocs);
    return __libc_calloc(n, size);
}

void *realloc(void *p, size_t size)
{
    /* realloc(p, 0) frees; realloc(NULL, n) allocates; anything else may move. */
    if (p && size == 0)
        count(&frees);
    else
        count(&allocs);
    return __libc_realloc(p, size);
}

void free(void *p)
{
    if (p)
        count(&frees);
    __libc_free(p);
}

void *memalign(size_t align, size_t size)
{
    count(&allocs);
    return __libc_memalign(align, size);
}

void *aligned_alloc(size_t align, size_t size)
{
    count(&allocs);
    return __libc_memalign(align, size);
}

int posix_memalign(void **out, size_t align, size_t size)
{
    if (align < sizeof(void *) || (align & (align - 1)) != 0)
        return EINVAL;
    count(&allocs);
    void *p = __libc_memalign(align, size);
    if (!p)
        return ENOMEM;
    *out = p;
    return 0;
}

void *valloc(size_t size)
{
    count(&allocs);
    return __libc_valloc(size);
}

void *pvalloc(size_t size)
{
    count(&allocs);
    return __libc_pvalloc(size);
}

#else

bool bench_alloc_count_available(void)
{
    return false;
}

void bench_alloc_count_enable(bool on)
{
}

uint64_t bench_alloc_count_allocs(void)
{
    return 0;
}

uint64_t bench_alloc_count_frees(void)
{
    return 0;
}

#endif
