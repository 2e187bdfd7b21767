/* The tick (tick.c), the driver under evloop_run and evloop_run_once. evloop__tick =
 * evloop__tick_ready (timers, signals, queues) then evloop__tick_wait (hooks, poll or sleep at
 * most max_wait_ns, -1: no bound, fd callbacks); evloop_run_once calls the halves itself, and
 * evloop__park before it returns. */
#ifndef EVLOOP_TICK_H
#define EVLOOP_TICK_H

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

int evloop__tick(evloop *loop);
void evloop__tick_ready(evloop *loop);
int evloop__tick_wait(evloop *loop, int64_t max_wait_ns);
void evloop__park(evloop *loop, bool poller);
/* Whether a task or microtask waits in any queue. */
bool evloop__has_work(evloop *loop);

#endif
