/* evloop_run and what evloop_run_once shares with it (run.c), drivers: entering and leaving a
 * run, the shutdown rule after each iteration, and the end of a run. */
#ifndef EVLOOP_RUN_H
#define EVLOOP_RUN_H

#include <stdbool.h>

#include "state.h"

/* One thread runs the loop at a time, and that thread is the loop thread until it leaves.
 * Returns 0, -EBUSY (another thread runs it) or -ESHUTDOWN (terminated). */
int evloop__enter(evloop *loop);
/* evloop_run_once between its calls: no loop thread; the loop is AWAKE (not running). */
void evloop__leave(evloop *loop);
/* After an iteration: the auto_exit rule, then whether the loop is done (closed, every
 * accepted task run). */
bool evloop__drained(evloop *loop);
/* The end of a run: what is still registered is released, then the loop is TERMINATED. */
void evloop__terminate(evloop *loop);

#endif
