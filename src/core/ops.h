/* Completion operations (evloop_accept, evloop_recv, evloop_send, evloop_op_cancel): the
 * core's per-fd state (ops.c) and the readiness emulation that runs them on backends
 * without native ops (ops_emulate.c). The backend seam for native ops is in backend.h.
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
#include <stddef.h>
#include <stdint.h>

#include "backend.h"
#include "evloop.h"

/* Backend tags of the emulation's readiness registrations: this bit, gen << 32 and the fd.
 * io.c keeps its own tags' generations below it. */
#define EVLOOP__OPS_TAG (UINT64_C(1) << 63)

enum {
    EVLOOP__OPF_STARTED = 1u,   /* a provider has it: its result has not come back */
    EVLOOP__OPF_CANCEL = 2u,    /* cancel asked: its result becomes -ECANCELED */
    EVLOOP__OPF_CANCELLED = 4u, /* the provider's cancel was called (native) */
    EVLOOP__OPF_TASK = 8u,      /* a start task (call from another thread) points at it */
    EVLOOP__OPF_DONE = 16u,     /* unlinked, on the done list or delivered */
    EVLOOP__OPF_DELIVERED = 32u, /* its callback has run */
    EVLOOP__OPF_REPORTED = 64u,  /* native-sim: its report waits for the next wait() */
};

struct evloop__op {
    struct evloop__op *next; /* in the send FIFO, then on the done list */
    struct evloop__op *report_next; /* native-sim: in the queue of held-back reports */
    evloop *loop;
    evloop_op_cb cb;
    void *arg;
    char *buf;
    size_t len;
    size_t done;    /* SEND: bytes the provider has confirmed */
    size_t emu_off; /* SEND, emulation: bytes written of the current start */
    int64_t res;
    int fd;
    uint8_t kind;  /* EVLOOP__OP_* */
    uint8_t flags; /* EVLOOP__OPF_* */
};

/* One fd's operations. Under io_lock. */
struct evloop__ofd {
    struct evloop__op *accept, *recv;         /* pending, NULL when none */
    struct evloop__op *send_head, *send_tail; /* pending sends, oldest first */
    uint32_t pending; /* ops of this fd whose callback has not run yet (linked or not) */
    bool counted;     /* counted in the loop's nfds */
    /* The emulation's state (ops_emulate.c). */
    struct evloop__op *w_accept, *w_recv, *w_send; /* started, waiting for readiness */
    uint32_t gen;   /* generation of the registration, in its tag */
    uint32_t armed; /* EVLOOP_READABLE | EVLOOP_WRITABLE registered, 0: not registered */
    bool drained;   /* the last recv or accept found the socket empty: wait, do not try */
    bool nonblock;  /* the fd is O_NONBLOCK (asked with the checks of a first accept) */
    bool accept_failed; /* the last accept tried at once failed (EMFILE and the like) */
};

struct evloop__ops {
    /* Under io_lock. */
    struct evloop__ofd *fds;
    int cap;
    uint32_t live;   /* ops of every fd whose callback has not run yet */
    int mode;          /* EVLOOP__OPS_*: decided at the loop's first op */
    uint32_t inflight; /* native ops started whose result has not come back (loop thread) */
    size_t send_cap;   /* the emulation writes at most this per start (native-sim), 0: all */
    /* The loop thread alone. */
    struct evloop__op *done, *done_tail; /* completed, callbacks to run, in order */
    bool done_task;  /* a delivery task is queued */
    bool delivering; /* a caller up the stack runs the done list before returning */
    uint32_t delivered; /* callbacks run by the outermost delivery so far */
    struct evloop__op *cache;
    unsigned ncache;
    struct evloop__op *sim_head, *sim_tail; /* native-sim: reports for the next wait() (loop
                                               thread, changed under io_lock) */
};

/* Who runs a loop's ops. NATIVE_SIM ($EVLOOP_OPS=native-sim, for tests) takes the core's
 * native path (op_start/op_cancel, results as reports of wait(), short sends restarted) with
 * the emulation underneath, so that path is tested on every backend. */
enum {
    EVLOOP__OPS_UNDECIDED = 0,
    EVLOOP__OPS_NATIVE,     /* the backend's op_start / op_cancel */
    EVLOOP__OPS_EMULATED,   /* ops_emulate.c */
    EVLOOP__OPS_NATIVE_SIM, /* the native contract over ops_emulate.c */
};

/* A delivery of the done list that has run this many callbacks lets no more ops complete at
 * once that could chain on without end: a recv, or an accept whose last try failed, started
 * from a callback past it waits for its result from the next wait(). Without it, connections
 * whose data is always there chained their callbacks in one delivery (tens of thousands were
 * seen), and a server that accepts again after EMFILE never left it; other fds, timers and
 * tasks waited meanwhile. An accept that succeeds still goes on at once: the backlog is
 * finite, and a server drains it in one go, as a readiness server does. */
#define EVLOOP__OPS_DELIVERY_BUDGET 64u
static inline bool evloop__ops_over_budget(const struct evloop__ops *o)
{
    return o->delivering && o->delivered >= EVLOOP__OPS_DELIVERY_BUDGET;
}

/* loop.c: on the loop thread once the loop is stopping (after every tick): every pending op
 * completes with -ECANCELED and its callback runs. */
void evloop__ops_stop(evloop *loop);
/* loop.c: frees what is left (ops cached for reuse, the table). */
void evloop__ops_destroy(evloop *loop);

/* io.c: whether a report of wait() belongs to ops, and its dispatch (loop thread). */
static inline bool evloop__ops_owns(const struct evloop__io_event *ev)
{
    return (ev->events & EVLOOP__EV_OP) || (ev->tag & EVLOOP__OPS_TAG);
}
void evloop__ops_dispatch(evloop *loop, const struct evloop__io_event *ev);
/* io.c, under io_lock, before evloop_io_add registers fd: -EBUSY if operations are pending
 * on it; else 0, after dropping the emulation's idle registration of fd, if any. */
int evloop__ops_claim_fd(evloop *loop, int fd);

/* ---- the provider seam inside the core: the emulation (ops_emulate.c) ----
 * Under io_lock, loop thread. start: 1 = completed now (*res set), 0 = waiting (the result
 * comes back through evloop__ops_result), < 0 = could not start. cancel: a waiting op stops
 * waiting; returns 1 (done now: no result will come back). */
int evloop__emu_start(evloop *loop, struct evloop__ofd *f, struct evloop__op *op,
                      int64_t *res);
int evloop__emu_cancel(evloop *loop, struct evloop__ofd *f, struct evloop__op *op);
/* Under io_lock, loop thread: one non-blocking accept on listener fd. 1 = a connection
 * (*res: its fd, non-blocking and close-on-exec, or a negative errno), 0 = none queued. */
int evloop__emu_try_accept(int fd, int64_t *res);
/* A readiness report for the emulation's tag: tries the waiting ops of that fd. */
void evloop__emu_ready(evloop *loop, uint64_t tag, uint32_t events);
/* f has nothing pending: drop its registration. Returns whether it had one. */
bool evloop__emu_settle(evloop *loop, struct evloop__ofd *f, int fd);

/* Under io_lock, loop thread: the result of a started op (from a provider). */
void evloop__ops_result(evloop *loop, struct evloop__op *op, int64_t res);
/* The same, from the emulation: held back as a report in native-sim mode. */
void evloop__emu_result(evloop *loop, struct evloop__op *op, int64_t res);

/* io.c, loop thread, when native-sim holds reports back: wait() of the backend without
 * blocking, plus those reports. */
int evloop__ops_sim_wait(evloop *loop, int64_t timeout_ns, struct evloop__io_event *ev, int max);

#endif
