/* Hooks (hooks.c), a subsystem: PREPARE and CHECK callbacks around the wait of every
 * iteration. The table is the loop thread's (state.h). */
#ifndef EVLOOP_HOOKS_H
#define EVLOOP_HOOKS_H

#include "state.h"

/* Loop thread (tick.c): runs the hooks of `when`, each followed by its microtasks. */
void evloop__run_hooks(evloop *loop, unsigned when);
/* At termination: every hook left is dropped, its argument to the release notification. */
void evloop__release_hooks(evloop *loop);
void evloop__hooks_destroy(evloop *loop);

#endif
