/* The readiness emulation of completion operations (ops_emulate.c): the provider that
 * ops.c calls on backends without native ops (ops.h, state_ops.h). */
#ifndef EVLOOP_OPS_EMULATE_H
#define EVLOOP_OPS_EMULATE_H

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

/* The provider seam inside the core. Under io_lock, loop thread. start: 1 = completed now
 * (*res set), 0 = waiting (the result comes back through evloop__emu_ready), < 0 = could not
 * start. cancel: a waiting op stops waiting; returns 1 (done now: no result will come back). */
int evloop__emu_start(evloop *loop, struct evloop__ofd *f, struct evloop__op *op, int64_t *res);
int evloop__emu_cancel(evloop *loop, struct evloop__ofd *f, struct evloop__op *op);
/* Under io_lock, loop thread: one non-blocking accept on listener fd. 1 = a connection
 * (*res: its fd, non-blocking and close-on-exec, or a negative errno), 0 = none queued. */
int evloop__emu_try_accept(int fd, int64_t *res);
/* ops.c's way back for a result (installed with each call below): it may start the fd's
 * next op, through evloop__emu_start, before it returns. */
typedef void (*evloop__emu_result_fn)(evloop *loop, struct evloop__op *op, int64_t res);
/* A readiness report for the emulation's tag: tries the waiting ops of that fd, and hands
 * the result of each that completes to result. */
void evloop__emu_ready(evloop *loop, uint64_t tag, uint32_t events, evloop__emu_result_fn result);
/* f has nothing pending: drop its registration. Returns whether it had one. */
bool evloop__emu_settle(evloop *loop, struct evloop__ofd *f, int fd);

#endif
