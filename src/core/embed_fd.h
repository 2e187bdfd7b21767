/* evloop_backend_fd (embed_fd.c), a subsystem: the fd a program polls to drive the loop with
 * evloop_run_once from a loop of its own. The backend makes it (backend.h, pollable_fd). */
#ifndef EVLOOP_EMBED_FD_H
#define EVLOOP_EMBED_FD_H

#include <stdbool.h>

#include "state.h"

void evloop__embed_init(evloop *loop);
void evloop__embed_destroy(evloop *loop);
/* Whether evloop_backend_fd has been made: from then on evloop_run_once parks the loop. */
bool evloop__embed_in_use(evloop *loop);
/* A run starts (evloop_run, evloop_run_once): end the park, drain the fd. */
void evloop__embed_enter(evloop *loop);
/* evloop_run_once is about to park: wait()'s readiness goes into the fd while fds are
 * registered (poller) and out while none is. Returns 0 or -errno; then the fd is readable. */
int evloop__embed_watch(evloop *loop, bool poller);
/* The loop has terminated: the fd stays readable from now on. */
void evloop__embed_terminated(evloop *loop);

#endif
