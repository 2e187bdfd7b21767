/* Completion operations (evloop_accept, evloop_recv, evloop_send, evloop_op_cancel), a
 * subsystem: the core's per-fd state (ops.c; its data in state_ops.h) and the readiness
 * emulation that runs them on backends without native ops (ops_emulate.c, ops_emulate.h).
 * The backend seam for native ops is in backend.h.
 *
 *   state                   | who touches it
 *   ------------------------+-------------------------------------------------------------
 *   evloop__ofd table       | under the loop's io_lock: any thread links (reserves) ops,
 *   cancel marks            | marks them for cancel; the loop thread starts, completes and
 *   evloop__op flags        | unlinks them, and makes every syscall and backend call of
 *                           | an op under io_lock too
 *   done list, op cache     | the loop thread alone (callbacks run there, outside the lock)
 *
 * Lifetime of an op: linked into its fd's slot (accept, recv) or send FIFO by the call;
 * started by the loop thread (a provider: the backend's op_start or the emulation); its
 * result comes back (at once, from a report of wait(), or from readiness); it is unlinked
 * and queued on the done list; its callback runs; then its fd is settled (an fd with nothing
 * pending drops its readiness registration and stops counting in the loop's nfds). */
#ifndef EVLOOP_OPS_H
#define EVLOOP_OPS_H

#include <stdbool.h>
#include <stdint.h>

#include "backend.h"
#include "state.h"

/* The drivers (run.c, run_once.c): on the loop thread once the loop is stopping (after every
 * tick): every pending op completes with -ECANCELED and its callback runs. */
void evloop__ops_stop(evloop *loop);
/* lifecycle.c: frees what is left (ops cached for reuse, the table). */
void evloop__ops_destroy(evloop *loop);

/* tick_poll.c: whether a report of wait() belongs to ops, and its dispatch (loop thread). */
static inline bool evloop__ops_owns(const struct evloop__io_event *ev)
{
    return (ev->events & EVLOOP__EV_OP) || (ev->tag & EVLOOP__OPS_TAG);
}
void evloop__ops_dispatch(evloop *loop, const struct evloop__io_event *ev);
/* io.c, through loop->fd_claim, under io_lock, before evloop_io_add registers fd: -EBUSY if
 * operations are pending on it; else 0, after dropping the emulation's idle registration of
 * fd, if any. */
int evloop__ops_claim_fd(evloop *loop, int fd);

/* Under io_lock, loop thread: the result of a started op (from a provider). */
void evloop__ops_result(evloop *loop, struct evloop__op *op, int64_t res);

#endif
