/* Fast-wake primitive for macOS: the loop blocks on its 32-bit sleep word with the
 * public os_sync_wait_on_address() (macOS 14.4+, <os/os_sync_wait_on_address.h>) where
 * the SDK has it, because it is the supported API; older SDKs fall back to the private
 * but long-stable __ulock_wait2/__ulock_wake that libc++ and Go's runtime also use.
 * Implements wake.h. Compiled only on macOS. */
#include <stdlib.h>

#include "common.h"
#include "wake.h"

#if __has_include(<os/os_sync_wait_on_address.h>)
#include <os/os_sync_wait_on_address.h>
#define EVLOOP_HAVE_OS_SYNC 1
#else
#define EVLOOP_HAVE_OS_SYNC 0
#define UL_COMPARE_AND_WAIT 1
#define ULF_NO_ERRNO 0x01000000
extern int __ulock_wait2(uint32_t operation, void *addr, uint64_t value, uint64_t timeout_ns,
                         uint64_t value2);
extern int __ulock_wake(uint32_t operation, void *addr, uint64_t wake_value);
#endif

struct evloop__waker {
    int unused;
};

int evloop__waker_new(struct evloop__waker **out)
{
    *out = calloc(1, sizeof(**out));
    return *out ? 0 : -ENOMEM;
}

void evloop__waker_free(struct evloop__waker *w)
{
    free(w);
}

int evloop__waker_wait(struct evloop__waker *w, _Atomic uint32_t *word, uint32_t expected,
                       int64_t timeout_ns)
{
    (void)w;
#if EVLOOP_HAVE_OS_SYNC
    if (timeout_ns >= 0)
        os_sync_wait_on_address_with_timeout((void *)word, expected, 4,
                                             OS_SYNC_WAIT_ON_ADDRESS_NONE,
                                             OS_CLOCK_MACH_ABSOLUTE_TIME, (uint64_t)timeout_ns);
    else
        os_sync_wait_on_address((void *)word, expected, 4, OS_SYNC_WAIT_ON_ADDRESS_NONE);
#else
    /* timeout 0 means "forever" to __ulock_wait2; a zero timeout never reaches here
     * because the loop polls instead of sleeping then. */
    __ulock_wait2(UL_COMPARE_AND_WAIT | ULF_NO_ERRNO, (void *)word, expected,
                  timeout_ns > 0 ? (uint64_t)timeout_ns : 0, 0);
#endif
    return 0;
}

void evloop__waker_wake(struct evloop__waker *w, _Atomic uint32_t *word)
{
    (void)w;
#if EVLOOP_HAVE_OS_SYNC
    os_sync_wake_by_address_any((void *)word, 4, OS_SYNC_WAKE_BY_ADDRESS_NONE);
#else
    __ulock_wake(UL_COMPARE_AND_WAIT | ULF_NO_ERRNO, (void *)word, 0);
#endif
}

const char *evloop__waker_name(void)
{
    return "ulock";
}
