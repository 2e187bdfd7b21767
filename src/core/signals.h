/* Signals (signals.c), a subsystem: watches of this loop in the process-wide signal table. */
#ifndef EVLOOP_SIGNALS_H
#define EVLOOP_SIGNALS_H

#include "state.h"

void evloop__signals_init(evloop *loop);
/* Loop thread (tick.c): runs the callback of each signal delivered since the last call. */
void evloop__run_signals(evloop *loop);
/* At termination: every watch of this loop ends, its argument to the release notification. */
void evloop__release_signals(evloop *loop);

#endif
