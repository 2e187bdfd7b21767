/* evloop: a C11 event loop whose loop thread runs work handed to it by other threads.
 * This header is the whole public API. Every function that can fail returns 0 or a
 * negative errno value; evloop_strerror() turns one into a message. It compiles as C11
 * and as C++. See README.md for an example. */
#ifndef EVLOOP_H
#define EVLOOP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#if defined(_WIN32)
#define EVLOOP_API
#elif defined(__GNUC__)
#define EVLOOP_API __attribute__((visibility("default")))
#else
#define EVLOOP_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef struct evloop evloop; /* opaque */
typedef void (*evloop_cb)(void *arg);
typedef void (*evloop_io_cb)(void *arg, int fd, unsigned events);
typedef uint64_t evloop_timer_id; /* never 0 for a live timer */

enum evloop_state {
    EVLOOP_AWAKE,       /* created, not running */
    EVLOOP_RUNNING,     /* inside evloop_run, working */
    EVLOOP_SLEEPING,    /* inside evloop_run, waiting for work */
    EVLOOP_TERMINATING, /* stopped: refusing new work, running what was accepted */
    EVLOOP_TERMINATED   /* done: evloop_run has returned or will return */
};

enum {
    EVLOOP_READABLE = 1u, /* fd readable (in events passed in and reported) */
    EVLOOP_WRITABLE = 2u, /* fd writable (in events passed in and reported) */
    EVLOOP_HANGUP = 4u,   /* peer hung up (reported only) */
    EVLOOP_ERROR = 8u     /* error condition on the fd (reported only) */
};

typedef struct evloop_config {
    const char *backend;   /* NULL or "auto", "epoll", "io_uring", "kqueue" */
    unsigned batch_budget; /* external tasks per tick; 0 = adaptive */
    int64_t spin_ns;       /* spin before sleeping; -1 = adaptive, 0 = never */
    bool auto_exit;        /* run() returns once no task, timer or fd is left */
    const char *profile;   /* a saved evloop_profile to start from (see evloop_autotune);
                              NULL: $EVLOOP_PROFILE if set and non-empty; "": none */
    const char *fence;     /* how a submit is ordered against the loop going to sleep:
                              NULL or "auto" ($EVLOOP_FENCE if set; else the chunk variant
                              "seq_cst", the arena variant "membarrier" where the kernel
                              allows it, else "seq_cst"); "membarrier": producers pay a
                              compiler barrier, the loop a membarrier() per sleep that could
                              miss a submit; "seq_cst": producers pay a full fence per
                              submit */
} evloop_config;

/* Counters of one loop, read with evloop_stats(). Counts are since evloop_new(). */
struct evloop_stats {
    uint64_t tasks_run;         /* external, internal and loop-thread tasks run */
    uint64_t microtasks_run;    /* microtasks run */
    uint64_t timers_fired;      /* timer callbacks run */
    uint64_t io_callbacks;      /* fd callbacks run */
    uint64_t ticks;             /* loop iterations */
    uint64_t futex_sleeps;      /* times the loop slept on its wake word (no fd registered) */
    uint64_t futex_wakes;       /* wake syscalls made by producers to a loop asleep on the word */
    uint64_t poller_sleeps;     /* times the loop slept in the poller (fds registered) */
    uint64_t poller_wakes;      /* wake calls made by producers to a loop asleep in the poller */
    uint64_t spin_hits;         /* spins before sleeping that found work (no syscall either side) */
    uint64_t spin_misses;       /* spins that found nothing and went on to sleep */
    uint64_t spin_preemptions;  /* spins that lost their CPU: spinning paused (oversubscribed) */
    uint64_t ingress_overflows; /* 128-task blocks (arena: lane segments; chunk: chunks)
                                   allocated beyond the external queue's preallocated pool */
    unsigned batch_budget;      /* external tasks per tick now in force */
    int64_t spin_ns;            /* spin window now in force, ns */
    const char *backend;        /* "epoll", "io_uring", "kqueue" */
    const char *ingress;        /* "arena" or "chunk" */
    const char *fallback;       /* why "auto" did not get its first choice; "" if it did */
    bool profile_loaded;        /* evloop_new loaded a profile (config or $EVLOOP_PROFILE) */
    const char *fence;          /* "membarrier" or "seq_cst": chosen at evloop_new, fixed */
    const char *fence_reason;   /* "" for membarrier; else why producers fence (asked for,
                                   the chunk variant, membarrier refused, a ThreadSanitizer
                                   build) */
    uint64_t lanes;             /* arena: producer lanes of the external queue now: one per
                                   thread that submitted, until the loop has drained and
                                   reclaimed it after the thread exited; chunk: 0 */
    const char *backend_reason; /* why this backend ("config.backend", "EVLOOP_BACKEND",
                                   "profile: ...", "auto: ...") and what runs (io_uring:
                                   "readiness from epoll_pwait2, wakes and ops in the ring") */
    uint64_t membarriers;       /* membarrier() calls the loop made (fence "membarrier"; 0 with
                                   "seq_cst"): before a sleep while a submit made without a
                                   fence could still be unseen, and to settle idle lanes */
};

/* Fills *cfg with the defaults: backend "auto", adaptive budget and spin, no auto_exit,
 * profile NULL. Any thread. NULL is ignored. */
EVLOOP_API void evloop_config_init(evloop_config *cfg);

/* Creates a loop. cfg may be NULL (the defaults of evloop_config_init). Any thread.
 * cfg->fence "membarrier" fails with -ENOTSUP where membarrier() is refused; an unknown
 * fence name (config or $EVLOOP_FENCE) is -EINVAL.
 * A profile (cfg->profile, else $EVLOOP_PROFILE) sets what the config leaves adaptive: the
 * starting spin window and its cap (spin_ns -1), the starting batch budget (batch_budget 0)
 * and the backend tried first ("auto" with $EVLOOP_BACKEND unset; auto if it cannot start).
 * Returns 0 and sets *out, -EINVAL (NULL out, unknown backend name, spin_ns < -1, a
 * malformed profile), -ENOTSUP (the named backend cannot start here), -ENOMEM, the -errno
 * of opening the profile (-ENOENT: no such file), or another -errno of the poller; then
 * evloop_last_error() says which argument, variable or file. A set but wrong
 * $EVLOOP_BACKEND or $EVLOOP_PROFILE fails the call as the same config field would: it is
 * an explicit request (tests choose their backend with it), never silently ignored. */
EVLOOP_API int evloop_new(evloop **out, const evloop_config *cfg);

/* Frees a loop that is not running. If the loop was never run to its end, it is first
 * stopped and drained on the calling thread, so no accepted task is lost. NULL is a no-op.
 * On io_uring the kernel tears the ring down some time after this returns and sends task
 * work to the thread that made the loop: like a signal, it ends a blocking call of that
 * thread that waits with a timeout (a read under SO_RCVTIMEO) with EINTR; retry it.
 * Returns 0, or -EBUSY when the loop is running (nothing is freed then). */
EVLOOP_API int evloop_free(evloop *loop);

/* Runs the loop on the calling thread until evloop_stop() (or, with auto_exit, until no
 * task, timer or fd is left), then returns with the loop TERMINATED. One thread at a time.
 * Returns 0, -EINVAL (NULL), -EBUSY (already running), -ESHUTDOWN (already terminated),
 * or the -errno of a poller failure. */
EVLOOP_API int evloop_run(evloop *loop);

/* Asks the loop to stop: new work is refused with -ESHUTDOWN, everything already accepted
 * runs, timers and fds are released, then evloop_run() returns. Any thread; idempotent.
 * Returns 0 or -EINVAL (NULL). */
EVLOOP_API int evloop_stop(evloop *loop);

/* Queues cb(arg) to run on the loop thread. Any thread, including callbacks (a task
 * submitted from a callback runs after it, never nested). Per-thread FIFO.
 * Returns 0, -EINVAL (NULL loop or cb), -ESHUTDOWN (stopped; not accepted), -ENOMEM. */
EVLOOP_API int evloop_submit(evloop *loop, evloop_cb cb, void *arg);

/* One task for evloop_submit_batch(): cb(arg) runs on the loop thread. */
struct evloop_task {
    evloop_cb cb;
    void *arg;
};

/* Queues n tasks at once, in order, as n evloop_submit() calls would, but with one
 * publication and at most one wake for the whole batch. All n are accepted or none.
 * Any thread. n == 0 is a no-op that returns 0. Returns 0, -EINVAL (NULL loop, NULL tasks
 * with n > 0, or a NULL cb in the batch; nothing accepted), -ESHUTDOWN, -ENOMEM. */
EVLOOP_API int evloop_submit_batch(evloop *loop, const struct evloop_task *tasks, size_t n);

/* Like evloop_submit(), but the task runs before external tasks still waiting.
 * Any thread. Returns as evloop_submit(). */
EVLOOP_API int evloop_submit_internal(evloop *loop, evloop_cb cb, void *arg);

/* Queues a microtask: it runs right after the callback now running on the loop thread
 * (from another thread: after whichever callback ends next), before any other task.
 * Microtasks may queue microtasks. Any thread. Returns as evloop_submit(). */
EVLOOP_API int evloop_queue_microtask(evloop *loop, evloop_cb cb, void *arg);

/* Starts a timer: cb(arg) runs no earlier than delay_ns from now, then, if interval_ns is
 * not 0, every interval_ns counted from the previous deadline (periods the loop
 * missed are skipped, not run back to back). Any thread. *out (may be
 * NULL) receives the id. Returns 0, -EINVAL (NULL loop or cb), -ESHUTDOWN, -ENOMEM. */
EVLOOP_API int evloop_timer_start(evloop *loop, uint64_t delay_ns, uint64_t interval_ns,
                                  evloop_cb cb, void *arg, evloop_timer_id *out);

/* Cancels a timer: on the loop thread (its own callback included) the callback does not
 * start after this returns; from another thread, a firing the loop has already begun to
 * dispatch may still run once. Any thread.
 * Returns 0, -EINVAL (NULL loop), -ENOENT (unknown, fired or cancelled). */
EVLOOP_API int evloop_timer_cancel(evloop *loop, evloop_timer_id id);

/* Watches fd for events (EVLOOP_READABLE | EVLOOP_WRITABLE); cb(arg, fd, revents) runs on
 * the loop thread while the fd is ready (level-triggered). Any thread. The fd stays the
 * caller's: evloop never closes it. Returns 0, -EINVAL (NULL loop or cb, no or unknown
 * event bits), -EBADF, -EEXIST, -ESHUTDOWN, -ENOMEM, or the poller's -errno (-EPERM for a
 * regular file under epoll). */
EVLOOP_API int evloop_io_add(evloop *loop, int fd, unsigned events, evloop_io_cb cb, void *arg);

/* Changes the events watched on a registered fd. Any thread. Returns 0, -EINVAL, -EBADF,
 * -ENOENT (fd not registered), -ESHUTDOWN, or the poller's -errno. */
EVLOOP_API int evloop_io_modify(evloop *loop, int fd, unsigned events);

/* Stops watching fd: no callback for it starts after this returns, even if readiness was
 * pending. From another thread, if the loop is running a callback of this fd, it waits
 * until that callback returns (so do not call it holding a lock that callback takes).
 * Any thread. Returns 0, -EINVAL (NULL loop), -EBADF (negative fd), -ENOENT. */
EVLOOP_API int evloop_io_remove(evloop *loop, int fd);

/* ---- completion operations on sockets: start now, one callback when done ----
 *
 * Each call starts an operation on a socket fd and returns; cb(arg, fd, res) runs exactly
 * once, on the loop thread, never inside the call that started it, when it completes:
 *   evloop_accept: res = the accepted fd, non-blocking and close-on-exec (call again for
 *                  the next connection);
 *   evloop_recv:   res = bytes read, 1..len; 0 means the peer closed;
 *   evloop_send:   res = len, once all of it is sent (the library finishes partial writes);
 * or a negative errno: -ECANCELED after evloop_op_cancel() or evloop_stop() (for a send,
 * whatever part of it was already written), else what the socket reported (-ECONNRESET,
 * -EPIPE, ...). A send that fails may have written part of its bytes (the count is not
 * reported); the sends queued behind it on the fd, and those posted before its callback
 * starts, end with the same error, none of their bytes written, so the peer never gets a
 * later send's bytes after a hole (from the callback on, sends go out again). An accept that
 * fails with -EMFILE, -ENFILE, -ENOBUFS or -ENOMEM leaves the connection queued: an accept
 * posted again at once fails again at once (the loop runs its other work in between, but
 * the thread never sleeps), so wait before posting it again, for a timer or for an fd to be
 * closed (asyncio's server waits a second). The buffer stays the caller's and must stay
 * valid (and, for recv, untouched) until the callback runs.
 * Per fd at most one accept and one recv may be pending, plus any number of sends, which
 * are written and complete in order; an operation is pending from the call until it
 * completes (a new recv may be posted from the previous one's callback). An fd watched with
 * evloop_io_add() cannot have pending operations and the other way round: the refused call
 * returns -EBUSY. The fd stays the caller's (evloop never closes it): close it when nothing
 * is pending on it, in or after its last callback. Two limits where a backend emulates the
 * operations with readiness (epoll, kqueue): right after an fd's last callback returns,
 * evloop drops its registration (an epoll_ctl on a number that callback may have closed:
 * harmless, but ThreadSanitizer reports it if another thread opens fds meanwhile; closing
 * from a task avoids it); and an fd closed inside that callback must not be replaced, within
 * the same callback, by a new fd of the same number that gets operations (the loop would
 * take it for the old one).
 * Threads: any thread. From the loop thread the operation starts inside the call (a recv on
 * a socket that has data completes without waiting for readiness; its callback still runs
 * after the call has returned). From another thread (or before evloop_run) the call checks
 * its arguments and reserves the operation, and the loop thread starts it; callbacks always
 * run on the loop thread. Operations of the same fd started from different threads are
 * ordered as the calls were made (sends included).
 * Stop: after evloop_stop() every pending operation completes with -ECANCELED (its callback
 * runs) before evloop_run() returns; new ones are refused with -ESHUTDOWN.
 * Return values of the three calls: 0 (cb will run once), -EINVAL (NULL loop or cb; NULL
 * buf with len > 0; len 0; accept on a socket that is not listening), -EBADF (negative or
 * closed fd), -ENOTSOCK (not a socket), -EBUSY (a second pending accept or recv on fd, or fd
 * is watched with evloop_io_add), -ESHUTDOWN (stopped), -ENOMEM; cb never runs then. */
typedef void (*evloop_op_cb)(void *arg, int fd, int64_t res);

EVLOOP_API int evloop_accept(evloop *loop, int fd, evloop_op_cb cb, void *arg);
EVLOOP_API int evloop_recv(evloop *loop, int fd, void *buf, size_t len, evloop_op_cb cb,
                           void *arg);
EVLOOP_API int evloop_send(evloop *loop, int fd, const void *buf, size_t len, evloop_op_cb cb,
                           void *arg);

/* Cancels every operation pending on fd: each completes with -ECANCELED, its callback
 * running exactly once, in order for sends (an operation whose result the loop already has
 * keeps it). On the loop thread the operations leave fd at once (a new recv may be posted
 * right after); from another thread the loop thread cancels them a moment later, and the
 * ones it has not reached yet still count as pending. Any thread. Returns 0, -EINVAL (NULL
 * loop), -EBADF (negative fd), -ENOENT (nothing pending on fd), -ENOMEM. */
EVLOOP_API int evloop_op_cancel(evloop *loop, int fd);

/* ---- a work pool: run a function on a pool thread, its done callback on the loop thread ----
 *
 * evloop_work_submit(loop, work, done, arg, &id) runs work(arg) on one of the loop's pool
 * threads, then done(arg, status) on the loop thread: status 0 once work has returned, or
 * -ECANCELED when work never started (evloop_work_cancel, or evloop_stop before a pool thread
 * took it). done runs exactly once for every accepted item (done may be NULL: nothing is
 * reported), never inside the call that caused it, as a task does: on the loop thread,
 * followed by the microtasks it queues, before external tasks still waiting. Items start in
 * the order they were submitted; they run concurrently, so done callbacks come in the order
 * the items finish. work runs with every signal blocked; it must not call this loop's
 * loop-thread-only functions.
 * Threads: submit, cancel and configure belong to the loop thread (its callbacks), or to any
 * one thread while no thread runs the loop (before evloop_run, between evloop_run_once
 * calls); from another thread while the loop runs they return -EBUSY.
 * The pool starts on the first submit, with evloop_work_configure's settings or the defaults
 * of evloop_work_config_init; its threads sleep when idle (after a bounded adaptive spin) and
 * end in evloop_free. When the pool threads and the loop have one CPU between them, a submit
 * from a callback wakes a pool thread only when the loop's tick reaches its wait (or
 * evloop_run_once returns): a callback must not block the loop thread until its item's work
 * has run.
 * Stop: after evloop_stop, items no pool thread has started complete with -ECANCELED, items
 * running complete with 0 once they return, and evloop_run returns only after every accepted
 * item's done has run (a running item keeps it waiting); new submits get -ESHUTDOWN. A
 * submitted item keeps an auto_exit loop running until its done has run. */
typedef uint64_t evloop_work_id; /* never 0 for an accepted item */
typedef void (*evloop_work_done_cb)(void *arg, int status);

#define EVLOOP_WORK_THREADS_MAX 1024
#define EVLOOP_WORK_SPIN_MAX_NS 10000000 /* 10 ms */

struct evloop_work_config {
    unsigned threads; /* pool threads, 1..EVLOOP_WORK_THREADS_MAX; evloop_work_config_init:
                         the usable CPUs less one for the loop, at least 2, at most 64 */
    int64_t spin_ns;  /* how long an idle pool thread spins before it sleeps: -1 adaptive
                         (default; never on one CPU), 0 never, else fixed, at most
                         EVLOOP_WORK_SPIN_MAX_NS */
    const int *cpus;  /* NULL: the threads run where the system puts them; else thread i is
                         pinned to CPU cpus[i % ncpus] (copied by evloop_work_configure) */
    unsigned ncpus;
};

/* What the pool has done, read with evloop_work_stats(). Counts are since the loop's start. */
struct evloop_work_stats {
    unsigned threads;   /* pool threads started (0 before the first submit) */
    uint64_t submitted; /* items accepted */
    uint64_t completed; /* done callbacks run with status 0 */
    uint64_t cancelled; /* done callbacks run with -ECANCELED */
    uint64_t pending;   /* accepted items whose done has not run yet */
    uint64_t sleeps;    /* times a pool thread went to sleep */
    uint64_t wakes;     /* wake syscalls made for a sleeping pool thread */
    uint64_t spin_hits; /* spins of an idle pool thread that found an item (no syscall) */
    uint64_t overflows; /* items that waited on the loop thread for room in the queue */
    uint64_t loop_dozes; /* sleeps of the loop with a bound and no wake for replies, taken
                            while the pool threads filled the CPUs with items queued */
};

/* Fills *cfg with the defaults for this machine (see the fields). Any thread. NULL is
 * ignored. */
EVLOOP_API void evloop_work_config_init(struct evloop_work_config *cfg);

/* Sets the pool's size, spin and placement; call it before the first evloop_work_submit.
 * Threads as evloop_work_submit. Returns 0, -EINVAL (NULL loop or cfg, threads 0 or above
 * EVLOOP_WORK_THREADS_MAX, spin_ns below -1 or above EVLOOP_WORK_SPIN_MAX_NS, ncpus > 0 with
 * cpus NULL, a CPU number negative or beyond what the system can name), -ENOTSUP (cpus on a
 * system without thread placement), -EBUSY (the pool has started, or another thread runs the
 * loop), -ESHUTDOWN (stopped), -ENOMEM. */
EVLOOP_API int evloop_work_configure(evloop *loop, const struct evloop_work_config *cfg);

/* Queues work(arg) for a pool thread; done(arg, status) then runs on the loop thread (see
 * above). *out (may be NULL) receives the item's id for evloop_work_cancel. Starts the pool
 * on the first call. Returns 0 (done will run once), -EINVAL (NULL loop or work), -EBUSY
 * (another thread runs the loop), -ESHUTDOWN (stopped), -ENOMEM, or the -errno of creating
 * the pool's first thread (-EAGAIN); done never runs then. */
EVLOOP_API int evloop_work_submit(evloop *loop, evloop_cb work, evloop_work_done_cb done, void *arg,
                                  evloop_work_id *out);

/* Cancels an item no pool thread has started: work will not run, and done(arg, -ECANCELED)
 * runs on the loop thread after this call has returned. Threads as evloop_work_submit.
 * Returns 0, -EINVAL (NULL loop), -EBUSY (work is running now, or another thread runs the
 * loop), -EALREADY (work has returned or the item was cancelled; its done has not run yet),
 * -ENOENT (no such item, or its done has run). */
EVLOOP_API int evloop_work_cancel(evloop *loop, evloop_work_id id);

/* Copies the pool's counters into *out (zeros before the pool starts). Any thread; counters
 * may be a moment old. Returns 0 or -EINVAL (NULL loop or out). */
EVLOOP_API int evloop_work_stats(const evloop *loop, struct evloop_work_stats *out);

/* The loop's state now. Any thread. A NULL loop reads as EVLOOP_TERMINATED. */
EVLOOP_API enum evloop_state evloop_state(const evloop *loop);

/* The poller this loop uses: "epoll", "io_uring" or "kqueue". Any thread. NULL for NULL. */
EVLOOP_API const char *evloop_backend(const evloop *loop);

/* The i-th backend evloop knows, built into this library or not: "epoll" (0), "io_uring" (1),
 * "kqueue" (2); NULL for i past the last. The index is that of evloop_profile.readiness_ns.
 * Any thread. */
EVLOOP_API const char *evloop_backend_name(unsigned i);

/* The ingress variant this library was built with: "arena" or "chunk". Any thread. */
EVLOOP_API const char *evloop_ingress(void);

/* A message for a value returned by an evloop function (0 or negative errno). Any thread;
 * never NULL. */
EVLOOP_API const char *evloop_strerror(int err);

/* The detail of the last failure evloop_new returned on this thread: which argument, field,
 * environment variable or file was wrong, and why, e.g. "EVLOOP_PROFILE=/x/y: No such file
 * or directory" or "config.backend \"foo\": unknown backend (...)". "" after a success
 * and when there is no more to say than evloop_strerror(). Other calls leave it as it is.
 * Any thread; never NULL; valid until this thread's next evloop_new. */
EVLOOP_API const char *evloop_last_error(void);

/* Copies the loop's counters into *out. Any thread; counters written by the loop thread
 * may be a moment old. Returns 0 or -EINVAL (NULL loop or out). */
EVLOOP_API int evloop_stats(const evloop *loop, struct evloop_stats *out);

/* The loop's monotonic clock in ns (CLOCK_MONOTONIC), as timers use it. Any thread. */
EVLOOP_API uint64_t evloop_now_ns(void);

/* ---- embedding: driving the loop from your own thread or from another loop, signals, hooks,
 * timer restart, release notification, version ---- */

#define EVLOOP_VERSION_MAJOR 0
#define EVLOOP_VERSION_MINOR 1
#define EVLOOP_VERSION_PATCH 0

/* The library's version, "MAJOR.MINOR.PATCH": the EVLOOP_VERSION_* it was built with, which
 * the build checks against the CMake project version. Any thread; never NULL. */
EVLOOP_API const char *evloop_version(void);

/* True only on the thread running the loop: inside evloop_run or evloop_run_once, callbacks
 * included. Any thread; false for NULL. */
EVLOOP_API bool evloop_on_loop_thread(const evloop *loop);

/* Runs one iteration on the calling thread, which is the loop thread until the call returns:
 * runs what is ready (due timers, tasks, microtasks, fd and signal callbacks, hooks); if
 * nothing was, waits at most timeout_ns for work (0: no wait; -1: until there is something
 * to do) and runs what came. The wait may also end with nothing run (a timer started or an fd
 * added from another thread), so read evloop_backend_timeout_ns() again after each call.
 * After evloop_stop it runs what was accepted (no timer, fd or signal callback, no hook) and
 * waits only for work-pool items still running (at most timeout_ns); the call that finds
 * everything run releases timers, fds, signals and hooks and leaves the loop TERMINATED.
 * Returns the number of callbacks run (tasks, microtasks, timer, fd and signal callbacks;
 * hooks are not counted), >= 0; -EINVAL (NULL loop, timeout_ns < -1), -EBUSY (another
 * thread is inside evloop_run or evloop_run_once, or the call comes from one of this loop's
 * callbacks), -ESHUTDOWN (the loop has terminated), or the -errno of a poller failure (the
 * loop is not stopped then: evloop_stop ends it).
 * Any thread, one at a time. */
EVLOOP_API int evloop_run_once(evloop *loop, int64_t timeout_ns);

/* A file descriptor for embedding a loop driven by evloop_run_once in another loop (GLib,
 * Qt, an epoll of your own); watch it for reading, never read it. It polls readable while
 * the loop has work ready (a task or microtask submitted, an fd ready, a signal delivered,
 * evloop_stop; from another thread, a timer that becomes the earliest or the first fd
 * added) and stops being readable once evloop_run_once has taken that work; it is not
 * readable while the loop is idle, so wait on it with evloop_backend_timeout_ns() as the
 * timeout. (A wake-up that arrives late can leave it readable once: evloop_run_once then
 * returns 0.) Readable before the first
 * evloop_run_once; after the loop has terminated it stays readable (evloop_run_once then
 * returns -ESHUTDOWN): take it out of the outer loop before evloop_free, which closes it.
 * The same fd for the loop's life, created on the first call of this or
 * evloop_backend_timeout_ns (from then on evloop_run_once arms it before it returns). An
 * epoll fd on the epoll and io_uring backends (it can be nested in another epoll), a kqueue
 * fd on kqueue (it can be watched by another kqueue). Any thread. Returns the fd, -EINVAL
 * (NULL), -ENOTSUP (the loop's backend offers no pollable fd; kqueue under libkqueue, whose
 * kqueue fd cannot be polled), or the -errno of creating it (-EMFILE). */
EVLOOP_API int evloop_backend_fd(const evloop *loop);

/* How long an outer loop may block before calling evloop_run_once: -1 (no timer: until
 * evloop_backend_fd() is readable), 0 (work is ready, or the loop is not parked by an
 * evloop_run_once: call it now), else the ns until the next timer is due. Any thread.
 * Values below -1 are errors, as evloop_backend_fd() returns them (-EINVAL for NULL). */
EVLOOP_API int64_t evloop_backend_timeout_ns(const evloop *loop);

/* Watches signal signum: while it is watched, its previous disposition (default action or
 * handler) does not run; cb(arg) runs on the loop thread after each delivery, whichever
 * thread of the process it was delivered to (deliveries may coalesce into one call). A
 * signal is watched by one loop at a time in a process. After evloop_stop, deliveries are
 * swallowed until the loop terminates, which stops every watch. A watched signal keeps an
 * auto_exit loop running. Any thread. Returns 0, -EINVAL (NULL loop or cb, SIGKILL, SIGSTOP,
 * a number out of range, or a signal the C library reserves), -EEXIST (already watched by
 * this loop), -EBUSY (watched by another loop), -ESHUTDOWN, or another -errno. */
EVLOOP_API int evloop_signal_start(evloop *loop, int signum, evloop_cb cb, void *arg);

/* Stops watching signum and puts back the disposition that was in place at
 * evloop_signal_start; a delivery not yet handled is dropped. On the loop thread, the
 * callback does not run after this returns; from another thread, one the loop has already
 * begun may still run once. Any thread. Returns 0, -EINVAL (NULL loop, signum out of
 * range), -ENOENT (not watched by this loop). */
EVLOOP_API int evloop_signal_stop(evloop *loop, int signum);

/* Restarts a live timer: it next fires delay_ns from now (an interval timer keeps its
 * interval, counted from that firing); its id stays valid. A one-shot timer is no longer live
 * once its callback has started. Any thread; from another thread, a firing the loop has
 * already begun may still run once. Returns 0, -EINVAL (NULL loop), -ENOENT (unknown, fired
 * or cancelled), -ESHUTDOWN (stopped). */
EVLOOP_API int evloop_timer_again(evloop *loop, evloop_timer_id id, uint64_t delay_ns);

enum evloop_hook {
    EVLOOP_HOOK_PREPARE = 0, /* every iteration, before the loop polls or may block */
    EVLOOP_HOOK_CHECK = 1    /* every iteration, right after that poll or sleep returns */
};

/* Adds a hook (libuv's prepare and check): cb(arg) runs on the loop thread at every
 * iteration at the point `when` names, hooks in the order added, each followed by the
 * microtasks it queued. Work a PREPARE hook submits keeps the loop from blocking. Hooks do
 * not run after evloop_stop and do not keep an auto_exit loop running. A hook added by a
 * hook first runs at the next iteration. On the loop thread, or on any thread while no
 * thread runs the loop. Returns 0, -EINVAL (NULL loop or cb, unknown when), -EEXIST (the
 * same when, cb and arg already added), -EBUSY (another thread runs the loop), -ESHUTDOWN
 * (stopped), -ENOMEM. */
EVLOOP_API int evloop_hook_add(evloop *loop, enum evloop_hook when, evloop_cb cb, void *arg);

/* Removes the hook added with the same when, cb and arg: it does not run after this returns
 * (a hook may remove itself or another). Threads as evloop_hook_add. Returns 0, -EINVAL (NULL
 * loop or cb, unknown when), -ENOENT (no such hook), -EBUSY (another thread runs the loop). */
EVLOOP_API int evloop_hook_remove(evloop *loop, enum evloop_hook when, evloop_cb cb, void *arg);

/* Sets release(arg), called once for each callback argument the loop drops without being
 * asked to: when the loop terminates, for every timer that has not fired (interval timers
 * included), fd, signal and hook still registered. Not called for tasks (every accepted task
 * runs), for a one-shot timer that fired (its callback had the argument), nor after
 * evloop_timer_cancel, evloop_io_remove, evloop_signal_stop or evloop_hook_remove (the
 * caller knows). It runs on the thread that terminates the loop: the loop thread, or
 * evloop_free's caller; it may not call evloop_free. NULL turns it off. Any thread; a release
 * already under way may still use the previous function. Returns 0 or -EINVAL (NULL loop). */
EVLOOP_API int evloop_set_release_cb(evloop *loop, evloop_cb release);

/* ---- autotuning: measure this machine once, save a profile, start loops from it ---- */

#define EVLOOP_PROFILE_VERSION 1u
/* Bytes evloop_profile_format() needs at most, the terminating NUL included. */
#define EVLOOP_PROFILE_TEXT_MAX 1024

/* What evloop_autotune() measured, and the starting settings it chose from that. Saved as
 * text: a first line "# evloop profile", then one "key value" line per field (readiness_ns
 * as readiness_epoll_ns, readiness_io_uring_ns, readiness_kqueue_ns). Loading ignores
 * unknown keys and "#" lines; the measurements (wake_ns, handoff_ns, readiness_*) may be
 * absent (0), every other key is required. */
struct evloop_profile {
    unsigned version;         /* EVLOOP_PROFILE_VERSION */
    unsigned ncpu;            /* online CPUs when measured, >= 1 */
    char backend[16];         /* fastest poller that opened: "epoll", "io_uring", "kqueue";
                                 "auto": no preference */
    int64_t spin_ns;          /* starting adaptive spin window, 0..spin_max_ns */
    int64_t spin_max_ns;      /* cap of the adaptive spin window, 0..10 ms; 0 = never spin */
    unsigned batch_budget;    /* starting adaptive batch budget, 1..1048576 (a loop rounds it
                                 down to a power of two within its adaptive range 64..4096) */
    uint64_t wake_ns;         /* median hand-off to a sleeping loop (futex wake path); 0 unknown */
    uint64_t handoff_ns;      /* median hand-off to a spinning loop; 0 unknown */
    uint64_t readiness_ns[3]; /* median fd round trip per backend, indexed as
                                 evloop_backend_name(i) (epoll, io_uring, kqueue); 0 = not
                                 available here */
};

struct evloop_autotune_options {
    double max_seconds;    /* time limit of the calibration; 0 = the default, about 2 s */
    const char *save_path; /* where to save the profile (evloop_profile_save); NULL: not saved */
};

/* Calibrates this machine: the cost of waking a sleeping loop and of handing a task to a
 * spinning one (from which it picks the spin window by the ski-rental rule: spin at most
 * as long as a wake costs, never on one CPU), the fastest fixed batch budget for a one-
 * producer flood, and the fd round trip of every backend that starts here (the fastest
 * wins). Runs its own loops on its own threads for at most about opt->max_seconds; opt may
 * be NULL (the defaults). Any thread; it keeps the CPUs busy meanwhile. Fills *out, then
 * saves it if opt->save_path is set. Returns 0, -EINVAL (NULL out, max_seconds negative,
 * above 3600 or not a number), -ETIMEDOUT (a calibration loop did not answer within 5 s),
 * the -errno of evloop_new or of creating a thread, or the -errno of the save (*out is
 * filled then). A backend that fails its measurement just reads 0. */
EVLOOP_API int evloop_autotune(struct evloop_profile *out,
                               const struct evloop_autotune_options *opt);

/* Saves *p at path, atomically (a temporary file beside it, then rename): a reader sees the
 * old file or the new one, never a part. Any thread. Returns 0, -EINVAL (NULL argument, a
 * field out of range or a wrong version), or the -errno of creating, writing or renaming. */
EVLOOP_API int evloop_profile_save(const struct evloop_profile *p, const char *path);

/* Loads the profile saved at path into *p (which is left untouched on failure). Any thread.
 * Returns 0, -EINVAL (NULL argument, not a profile, a malformed number, a missing required
 * key, a key given twice, a value out of range, a version other than
 * EVLOOP_PROFILE_VERSION), or the -errno of opening or reading (-ENOENT: no such file). */
EVLOOP_API int evloop_profile_load(struct evloop_profile *p, const char *path);

/* Writes the text of *p (what evloop_profile_save puts in the file) into buf of size bytes,
 * NUL-terminated; EVLOOP_PROFILE_TEXT_MAX always suffices. Any thread. Returns 0, -EINVAL
 * (NULL argument, a field out of range), or -ENOSPC (buf too small; nothing useful in it). */
EVLOOP_API int evloop_profile_format(const struct evloop_profile *p, char *buf, size_t size);

#ifdef __cplusplus
}
#endif

#endif /* EVLOOP_H */
