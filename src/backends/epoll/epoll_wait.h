/* One wait on an epoll set with a timeout in ns (-1: none), for every backend built on an
 * epoll set (epoll.c, and the io_uring backend's io_uring.c). epoll_pwait2 (Linux 5.11+) takes
 * the ns as they are; where it is missing (ENOSYS: *no_pwait2 is set and stays set) epoll_wait
 * rounds the timeout up to whole ms, so a timer never fires early. A zero or no timeout goes
 * to epoll_wait itself, which costs less than epoll_pwait2 with a zero timespec
 * (bench/epoll_cost.c; tournament/results/design-figures.md, "Backends"), and a busy loop
 * polls with a zero timeout on every tick.
 *
 * A ThreadSanitizer build always uses epoll_wait. TSan defers a signal handler until its
 * thread next enters a function TSan intercepts, and runs the deferred ones when the thread
 * enters a blocking one (a signal that arrives while it blocks there runs at once).
 * epoll_wait is such a function; epoll_pwait2 is not (gcc 12's TSan), so a loop whose
 * handler was deferred would block there before the handler set the wake it waits for. */
#ifndef EVLOOP_EPOLL_WAIT_H
#define EVLOOP_EPOLL_WAIT_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/epoll.h>

#include "common.h"

/* Returns what the call returned: the count of events, or -1 with errno set. */
static inline int evloop__epoll_wait_ns(int epfd, struct epoll_event *ev, int max,
                                        int64_t timeout_ns, bool *no_pwait2)
{
    if (timeout_ns <= 0)
        return epoll_wait(epfd, ev, max, timeout_ns < 0 ? -1 : 0);
    if (!EVLOOP__TSAN && !*no_pwait2) {
        struct timespec ts = evloop__ns_to_timespec((uint64_t)timeout_ns);
        int n = epoll_pwait2(epfd, ev, max, &ts, NULL);
        if (n >= 0 || errno != ENOSYS)
            return n;
        *no_pwait2 = true;
    }
    int64_t ms = (timeout_ns - 1) / 1000000 + 1;
    return epoll_wait(epfd, ev, max, ms > INT_MAX ? INT_MAX : (int)ms);
}

#endif
