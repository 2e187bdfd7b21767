/* Signals (evloop_signal_start, evloop_signal_stop; design.md "Embedding"): one
 * process-wide sigaction handler for every watched signal. The handler only sets the signal's
 * pending bit in the watching loop and kicks that loop's sleep word with
 * evloop__sleep_kick_async (atomics, then a bare wake syscall: futex, write to an eventfd);
 * the loop thread runs the callbacks in its tick (evloop__run_signals, after the timers).
 *
 *   state            | who touches it
 *   -----------------+------------------------------------------------------------------
 *   watches[].loop   | written under `lock` (start, stop, termination); read by handlers
 *   watches[].busy   | handlers (count themselves in and out); unwatch waits for 0
 *   watches[] rest   | under `lock`
 *   loop pending bits| set by handlers, taken by the loop thread (exchange)
 *
 * A handler may run on any thread, the loop's included, between any two instructions; it
 * takes no lock and calls nothing but lock-free atomics and syscalls. unwatch() clears the
 * loop pointer and then waits until no handler of that signal is inside, so a loop is
 * never used by a handler after its watch ended (its memory may be freed next). */
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <unistd.h>

#include "callback.h"
#include "release.h"
#include "signals.h"

#define MAX_SIGNALS (EVLOOP__SIGNAL_WORDS * 64)

_Static_assert(NSIG <= MAX_SIGNALS, "pending bits for every signal number");
_Static_assert(ATOMIC_INT_LOCK_FREE == 2 && ATOMIC_LLONG_LOCK_FREE == 2 &&
                   ATOMIC_POINTER_LOCK_FREE == 2,
               "a signal handler may only use lock-free atomics");

struct watch {
    _Atomic(evloop *) loop; /* the loop watching this signal, NULL when none */
    _Atomic int busy;       /* handlers inside on_signal() for this signal now */
    evloop_cb cb;
    void *arg;
    struct sigaction old; /* the disposition to put back */
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct watch watches[NSIG];

static void on_signal(int signum)
{
    int saved_errno = errno;
    struct watch *w = &watches[signum];
    /* seq_cst, both: a Dekker pair with unwatch()'s [store loop; load busy]: either unwatch
     * sees this handler counted and waits, or this handler reads the NULL it stored. */
    atomic_fetch_add(&w->busy, 1);
    evloop *loop = atomic_load(&w->loop);
    if (loop) {
        /* release: pairs with the acquire exchange in evloop__run_signals(); the kick's
         * barrier orders the bit before its read of the sleep word (sleep.h). */
        atomic_fetch_or_explicit(&loop->sig_pending[signum / 64], UINT64_C(1) << (signum % 64),
                                 memory_order_release);
        evloop__sleep_kick_async(&loop->sleep);
    }
    /* release: pairs with unwatch()'s acquire load of busy. */
    atomic_fetch_sub_explicit(&w->busy, 1, memory_order_release);
    errno = saved_errno;
}

static bool signum_in_range(int signum)
{
    return signum > 0 && signum < NSIG;
}

/* ---- the keep-alive fd of a condvar loop ---------------------------------------------------- */

static void keepalive_never_ready(void *arg, int fd, unsigned events)
{
    (void)arg, (void)fd, (void)events; /* nothing ever writes the pipe */
}

/* Under lock, before a loop's first watch: a loop whose word wake may not be called from a
 * handler (the condvar waker takes a mutex), or built with ThreadSanitizer (which defers a
 * handler past a raw futex wait), gets an fd registered, so it sleeps in the poller, whose
 * wake is a write (sleep.c, evloop__sleep_kick_async). */
static int keepalive_start(evloop *loop)
{
    if (!loop->sleep.signals_want_poller || loop->sig_keepalive[0] >= 0)
        return 0;
    int p[2];
#ifdef __linux__
    if (pipe2(p, O_CLOEXEC) < 0) /* close-on-exec from the start, as every fd of a loop */
        return -errno;
#else
    if (pipe(p) < 0)
        return -errno;
    fcntl(p[0], F_SETFD, FD_CLOEXEC);
    fcntl(p[1], F_SETFD, FD_CLOEXEC);
#endif
    int r = evloop_io_add(loop, p[0], EVLOOP_READABLE, keepalive_never_ready, NULL);
    if (r < 0) {
        close(p[0]);
        close(p[1]);
        return r;
    }
    loop->sig_keepalive[0] = p[0];
    loop->sig_keepalive[1] = p[1];
    return 0;
}

/* Under lock, after a watch ended: the keep-alive fd goes with the loop's last watch. */
static void keepalive_stop(evloop *loop)
{
    if (loop->sig_keepalive[0] < 0 || atomic_load(&loop->nsignals) > 0)
        return;
    evloop_io_remove(loop, loop->sig_keepalive[0]);
    close(loop->sig_keepalive[0]);
    close(loop->sig_keepalive[1]);
    loop->sig_keepalive[0] = loop->sig_keepalive[1] = -1;
}

void evloop__signals_init(evloop *loop)
{
    loop->sig_keepalive[0] = loop->sig_keepalive[1] = -1;
}

/* ---- watching ------------------------------------------------------------------------------- */

/* Under lock. */
static int watch(evloop *loop, int signum, evloop_cb cb, void *arg)
{
    struct watch *w = &watches[signum];
    evloop *owner = atomic_load_explicit(&w->loop, memory_order_relaxed);
    if (owner == loop)
        return -EEXIST;
    if (owner)
        return -EBUSY;
    /* Checked under the lock: termination releases watches under it, after stopping is set,
     * so a watch made here is either refused or released by it. */
    if (atomic_load(&loop->stopping))
        return -ESHUTDOWN;
    int r = keepalive_start(loop);
    if (r < 0)
        return r;
    w->cb = cb;
    w->arg = arg;
    /* Before the handler is installed: a delivery right after sigaction finds the loop. */
    atomic_store(&w->loop, loop);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(signum, &sa, &w->old) < 0) {
        r = -errno; /* EINVAL: a signal the C library keeps for itself */
        atomic_store(&w->loop, NULL);
        keepalive_stop(loop);
        return r;
    }
    atomic_fetch_add(&loop->nsignals, 1);
    return 0;
}

/* Under lock: ends loop's watch of signum. */
static void unwatch(evloop *loop, int signum)
{
    struct watch *w = &watches[signum];
    /* First the previous disposition, so no delivery falls between the two. */
    sigaction(signum, &w->old, NULL);
    atomic_store(&w->loop, NULL); /* seq_cst: see on_signal() */
    while (atomic_load(&w->busy) != 0)
        sched_yield(); /* a handler still using loop: a few instructions from done */
    atomic_fetch_and(&loop->sig_pending[signum / 64], ~(UINT64_C(1) << (signum % 64)));
    atomic_fetch_sub(&loop->nsignals, 1);
    keepalive_stop(loop);
}

EVLOOP_API int evloop_signal_start(evloop *loop, int signum, evloop_cb cb, void *arg)
{
    if (!loop || !cb || !signum_in_range(signum) || signum == SIGKILL || signum == SIGSTOP)
        return -EINVAL;
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        return -ESHUTDOWN;
    pthread_mutex_lock(&lock);
    int r = watch(loop, signum, cb, arg);
    pthread_mutex_unlock(&lock);
    return r;
}

EVLOOP_API int evloop_signal_stop(evloop *loop, int signum)
{
    if (!loop || !signum_in_range(signum))
        return -EINVAL;
    int r = -ENOENT;
    pthread_mutex_lock(&lock);
    if (atomic_load_explicit(&watches[signum].loop, memory_order_relaxed) == loop) {
        unwatch(loop, signum);
        r = 0;
    }
    pthread_mutex_unlock(&lock);
    return r;
}

/* ---- the loop's side ------------------------------------------------------------------------- */

/* Loop thread (tick.c): runs the callback of each signal delivered since the last call.
 * Each is looked up under the lock right before it runs, so a watch an earlier callback
 * stopped does not run. */
void evloop__run_signals(evloop *loop)
{
    for (int word = 0; word < EVLOOP__SIGNAL_WORDS; word++) {
        /* acquire: pairs with the release fetch_or in on_signal(). */
        uint64_t bits = atomic_exchange_explicit(&loop->sig_pending[word], 0, memory_order_acquire);
        while (bits) {
            int signum = word * 64 + __builtin_ctzll(bits);
            bits &= bits - 1;
            if (signum >= NSIG)
                continue;
            pthread_mutex_lock(&lock);
            struct watch *w = &watches[signum];
            bool mine = atomic_load_explicit(&w->loop, memory_order_relaxed) == loop;
            evloop_cb cb = w->cb;
            void *arg = w->arg;
            pthread_mutex_unlock(&lock);
            if (!mine)
                continue;
            cb(arg);
            evloop__count(&loop->stats.signals_run, 1);
            evloop__drain_microtasks(loop);
        }
    }
}

/* At termination: every watch of this loop ends (the previous dispositions are back), each
 * argument goes to the release notification, called with the lock released. */
void evloop__release_signals(evloop *loop)
{
    for (;;) {
        void *arg = NULL;
        int found = 0;
        pthread_mutex_lock(&lock);
        for (int signum = 1; signum < NSIG && !found; signum++) {
            if (atomic_load_explicit(&watches[signum].loop, memory_order_relaxed) == loop) {
                arg = watches[signum].arg;
                unwatch(loop, signum);
                found = signum;
            }
        }
        pthread_mutex_unlock(&lock);
        if (!found)
            return;
        evloop__released(loop, arg);
    }
}
