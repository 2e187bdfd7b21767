/* The tick's poll step (tick_poll.c), a driver: waits for the backend's reports and hands each
 * to the subsystem that owns it. */
#ifndef EVLOOP_TICK_POLL_H
#define EVLOOP_TICK_POLL_H

#include <stdint.h>

#include "state.h"

/* Waits up to timeout_ns (-1: no bound) and fills ev with at most EVLOOP__IO_EVENTS_MAX
 * reports. Returns their count or -errno. */
int evloop__wait_io(evloop *loop, int64_t timeout_ns, struct evloop__io_event *ev);
/* Hands each report to its owner: an op (ops.c) or a registered fd (io.c). */
void evloop__dispatch_io(evloop *loop, const struct evloop__io_event *ev, int n);
/* Both: returns 0 or the wait's -errno. */
int evloop__poll_io(evloop *loop, int64_t timeout_ns);

#endif
