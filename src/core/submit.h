/* How work enters a loop, and how stop closes the way in (submit.c), a subsystem. */
#ifndef EVLOOP_SUBMIT_H
#define EVLOOP_SUBMIT_H

#include "state.h"

/* The body of evloop_stop (lifecycle.c), which the drivers also call (a poller failure,
 * auto_exit): stopping is set, the ingress queues are closed, then `closed`, and the loop is
 * kicked. Any thread; idempotent. */
void evloop__stop(evloop *loop);

#endif
