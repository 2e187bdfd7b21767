/* The data of completion operations (state layer, docs/design.md "Layers inside the core"):
 * the op, the per-fd table and the loop's ops state kept inside struct evloop (state.h).
 * ops.c owns it and ops_emulate.c, its readiness provider, works on it; ops.h says who
 * touches what, and under which lock. */
#ifndef EVLOOP_STATE_OPS_H
#define EVLOOP_STATE_OPS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

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
    struct evloop__op *send_failed; /* a send that failed: until its callback starts, sends
                                       end with its error, unwritten (ops.c) */
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

#endif
