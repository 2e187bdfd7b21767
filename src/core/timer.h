/* Timers (timer.c), a subsystem: the heap of struct evloop (state.h) and its public calls. */
#ifndef EVLOOP_TIMER_H
#define EVLOOP_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

void evloop__timers_init(evloop *loop);
void evloop__timers_destroy(evloop *loop);
/* Loop thread: runs the timers due at loop->now. */
void evloop__run_timers(evloop *loop);
/* Any thread: ns until the next timer is due at now, 0 if one is, -1 if none. */
int64_t evloop__timer_timeout(evloop *loop, uint64_t now);
bool evloop__has_timers(evloop *loop);
/* At termination: every timer left is dropped, its argument to the release notification. */
void evloop__release_timers(evloop *loop);

#endif
