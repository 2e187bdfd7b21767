/* Running callbacks (callback.c), the subsystem every other one calls to run what it holds:
 * each callback is followed by the microtasks it queued. */
#ifndef EVLOOP_CALLBACK_H
#define EVLOOP_CALLBACK_H

#include <stdbool.h>
#include <stddef.h>

#include "state.h"

void evloop__run_tasks(evloop *loop, const struct evloop_task *tasks, size_t n);
void evloop__drain_microtasks(evloop *loop);
bool evloop__microtasks_pending(evloop *loop);

#endif
