/* The release notification (release.c), a subsystem the others call: whatever drops a callback
 * argument without running it (timers, fds, signals and hooks at termination) calls
 * evloop__released once per argument, on the loop thread or the thread freeing the loop; it
 * calls the function set by evloop_set_release_cb(), if any. Never under a lock the release
 * function could need (it may call any evloop_* but evloop_free). */
#ifndef EVLOOP_RELEASE_H
#define EVLOOP_RELEASE_H

#include "state.h"

void evloop__released(evloop *loop, void *arg);

#endif
