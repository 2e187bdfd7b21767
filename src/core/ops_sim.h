/* native-sim ($EVLOOP_OPS=native-sim, tests only): a provider under ops.c that keeps the
 * native contract (op_start / op_cancel, every result a report of the next wait(), short
 * sends restarted) with the readiness emulation (ops_emulate.c) underneath, so the core's
 * native path is tested on every backend. Its reports wait in a queue of the loop thread's
 * (changed under io_lock); the driver asks evloop__sim_holds_reports before each wait. */
#ifndef EVLOOP_OPS_SIM_H
#define EVLOOP_OPS_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "ops_emulate.h"
#include "state.h"

/* Bytes a send start writes at most: short sends, restarted by the core as native ones. */
#define EVLOOP__SIM_SEND_MAX 1000

/* Under io_lock, loop thread: starts op through the emulation. 0: its result comes from the
 * next wait() (also when the emulation completed it at once); < 0: it could not start. */
int evloop__sim_start(evloop *loop, struct evloop__ofd *f, struct evloop__op *op);
/* Under io_lock, loop thread: a started op ends; its -ECANCELED comes from the next wait(),
 * unless its report is already queued. */
void evloop__sim_cancel(evloop *loop, struct evloop__ofd *f, struct evloop__op *op);
/* Under io_lock, loop thread: the emulation's result for op, held for the next wait(). */
void evloop__sim_queue(evloop *loop, struct evloop__op *op, int64_t res);

/* Loop thread: whether reports are held back (the driver then waits through sim_wait). */
static inline bool evloop__sim_holds_reports(const evloop *loop)
{
    return loop->ops.sim_head != NULL;
}
/* Loop thread: the backend's wait() (without blocking while reports are held back), then
 * those reports, as wait() reports native results. */
int evloop__sim_wait(evloop *loop, int64_t timeout_ns, struct evloop__io_event *ev, int max);

#endif
