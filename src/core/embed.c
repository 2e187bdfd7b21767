/* The embedding API of issue 13 (design.md, "Embedding"): evloop_run_once, evloop_backend_fd
 * and evloop_backend_timeout_ns, hooks, the release notification, evloop_on_loop_thread and
 * evloop_version. Signals are in signal.c.
 *
 * evloop_backend_fd is an epoll set holding an eventfd and, while fds are registered, the
 * backend's own pollable fd (epoll's epfd, nested). Between two evloop_run_once calls the loop
 * is parked: its sleep word holds SLEEP_EXTERNAL (sleep.h), so the producer that flips it makes
 * the one wake call of the protocol, a write to the eventfd. evloop_run_once ends a park when
 * it starts (word back to AWAKE, eventfd read) and parks again before it returns, after the
 * same heavy barrier and re-check as a sleep (tick.c): readable exactly while work is ready. */
#include <limits.h>
#include <stdlib.h>
#include <unistd.h>
#ifdef __linux__
#include <sys/epoll.h>
#include <sys/eventfd.h>
#endif

#include "loop.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)
#define HOOKS_START 4

void evloop__embed_init(struct evloop__embed *e)
{
    pthread_mutex_init(&e->lock, NULL);
    atomic_init(&e->epfd, -1);
    e->efd = -1;
    e->backend_fd = -1;
    e->sig_keepalive[0] = e->sig_keepalive[1] = -1;
    atomic_init(&e->release, NULL);
}

void evloop__embed_destroy(struct evloop__embed *e)
{
    int epfd = atomic_load_explicit(&e->epfd, memory_order_relaxed);
    if (epfd >= 0)
        close(epfd);
    if (e->efd >= 0)
        close(e->efd);
    free(e->hooks);
    pthread_mutex_destroy(&e->lock);
}

EVLOOP_API const char *evloop_version(void)
{
    return STRINGIFY(EVLOOP_VERSION_MAJOR) "." STRINGIFY(EVLOOP_VERSION_MINOR) "." STRINGIFY(
        EVLOOP_VERSION_PATCH);
}

EVLOOP_API bool evloop_on_loop_thread(const evloop *loop)
{
    return loop && evloop__on_loop_thread(loop);
}

/* ---- evloop_backend_fd: the fds and the park ------------------------------------------------ */

static void set_readable(int efd)
{
    uint64_t one = 1;
    ssize_t n = write(efd, &one, sizeof(one)); /* EAGAIN: it already is */
    (void)n;
}

#ifdef __linux__
/* Under e->lock: the epoll set and its eventfd. Returns the epoll fd or -errno. */
static int create_fds(evloop *loop)
{
    struct evloop__embed *e = &loop->embed;
    int epfd = epoll_create1(EPOLL_CLOEXEC);
    if (epfd < 0)
        return -errno;
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (efd < 0 || epoll_ctl(epfd, EPOLL_CTL_ADD, efd, &ev) < 0) {
        int r = -errno;
        if (efd >= 0)
            close(efd);
        close(epfd);
        return r;
    }
    e->efd = efd;
    e->backend_fd = loop->backend->pollable_fd(loop->backend_state);
    loop->sleep.external_fd = efd;
    /* Not parked yet: readable until an evloop_run_once parks the loop. */
    set_readable(efd);
    /* release: pairs with the acquire loads of epfd; a park (and so any waker that reads
     * SLEEP_EXTERNAL, sleep.c) comes after one, so external_fd is seen set. */
    atomic_store_explicit(&e->epfd, epfd, memory_order_release);
    return epfd;
}
#endif

/* The epoll fd, created on first demand (evloop_backend_fd, evloop_backend_timeout_ns);
 * from then on evloop_run_once parks the loop. Any thread. Returns it or -errno. */
static int embed_open(evloop *loop)
{
#ifdef __linux__
    struct evloop__embed *e = &loop->embed;
    /* acquire: pairs with the release store in create_fds(). */
    int epfd = atomic_load_explicit(&e->epfd, memory_order_acquire);
    if (epfd >= 0)
        return epfd;
    if (!loop->backend->pollable_fd)
        return -ENOTSUP;
    pthread_mutex_lock(&e->lock);
    epfd = atomic_load_explicit(&e->epfd, memory_order_relaxed);
    if (epfd < 0)
        epfd = create_fds(loop);
    pthread_mutex_unlock(&e->lock);
    return epfd;
#else
    (void)loop;
    return -ENOTSUP;
#endif
}

/* The fds are made on first demand: mutable state of a loop the caller passes as const. */
EVLOOP_API int evloop_backend_fd(const evloop *loop)
{
    return loop ? embed_open((evloop *)loop) : -EINVAL;
}

EVLOOP_API int64_t evloop_backend_timeout_ns(const evloop *loop)
{
    if (!loop)
        return -EINVAL;
    evloop *l = (evloop *)loop;
    int r = embed_open(l);
    if (r < 0)
        return r;
    if (!evloop__sleep_parked(&l->sleep) ||
        atomic_load_explicit(&l->stopping, memory_order_relaxed))
        return 0;
    return evloop__timer_timeout(l, evloop__clock_ns());
}

/* A run starts (evloop_run, evloop_run_once): the park ends and the fd goes quiet, since
 * this run takes what made it readable. A waker that flipped the word before this and
 * writes the eventfd only after the read leaves it readable once more (the spurious
 * wake-up the header mentions). */
void evloop__embed_enter(evloop *loop)
{
    struct evloop__embed *e = &loop->embed;
    /* acquire: pairs with the release store in create_fds(). */
    if (atomic_load_explicit(&e->epfd, memory_order_acquire) < 0)
        return;
    evloop__sleep_finish(&loop->sleep);
    uint64_t v;
    ssize_t n = read(e->efd, &v, sizeof(v)); /* EAGAIN: it was not readable */
    (void)n;
}

/* evloop_run_once returns: the backend's pollable fd goes into the set while fds are
 * registered (their readiness must make the fd readable) and out when none is (it could
 * be left readable by a late wake of the backend, which no wait would clear), then the
 * loop parks. Returns 0 or the -errno of epoll_ctl; then the fd is made readable and the
 * loop left unparked, so the outer loop calls again and this is retried. */
int evloop__embed_park(evloop *loop)
{
#ifdef __linux__
    struct evloop__embed *e = &loop->embed;
    /* acquire: pairs with the release store in create_fds(). */
    int epfd = atomic_load_explicit(&e->epfd, memory_order_acquire);
    if (epfd < 0)
        return 0;
    bool poller = atomic_load_explicit(&loop->nfds, memory_order_relaxed) > 0;
    if (poller != e->backend_in_set) {
        struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1};
        if (epoll_ctl(epfd, poller ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, e->backend_fd, &ev) < 0) {
            int r = -errno;
            set_readable(e->efd);
            return r;
        }
        e->backend_in_set = poller;
    }
    evloop__park(loop, poller);
#else
    (void)loop;
#endif
    return 0;
}

/* The loop has terminated: the fd stays readable (evloop_run_once says -ESHUTDOWN). */
void evloop__embed_terminated(evloop *loop)
{
    if (atomic_load_explicit(&loop->embed.epfd, memory_order_acquire) >= 0)
        set_readable(loop->embed.efd);
}

/* ---- evloop_run_once ---------------------------------------------------------------------- */

/* Callbacks run so far, as evloop_run_once counts them (hooks are not). Loop thread. */
static uint64_t callbacks_run(evloop *loop)
{
    const struct evloop__stats_counters *c = &loop->stats;
    return atomic_load_explicit(&c->tasks_run, memory_order_relaxed) +
           atomic_load_explicit(&c->microtasks_run, memory_order_relaxed) +
           atomic_load_explicit(&c->timers_fired, memory_order_relaxed) +
           atomic_load_explicit(&c->io_callbacks, memory_order_relaxed) +
           atomic_load_explicit(&loop->embed.signals_run, memory_order_relaxed);
}

/* One iteration: what is ready runs (the first half of a tick); the wait is bounded by
 * timeout_ns, and skipped when something ran; when the wait ran nothing itself (it ended
 * for a task, a timer or a signal, not an fd), the first half runs again, so a call that
 * waited returns having run what ended the wait (libuv's UV_RUN_ONCE does the same for
 * timers). */
EVLOOP_API int evloop_run_once(evloop *loop, int64_t timeout_ns)
{
    if (!loop || timeout_ns < -1)
        return -EINVAL;
    int r = evloop__enter(loop);
    if (r < 0)
        return r;
    uint64_t before = callbacks_run(loop);
    evloop__tick_ready(loop);
    int64_t cap = callbacks_run(loop) != before ? 0 : timeout_ns;
    r = evloop__tick_wait(loop, cap);
    if (r >= 0 && cap != 0 && callbacks_run(loop) == before)
        evloop__tick_ready(loop);
    uint64_t ran = callbacks_run(loop) - before;
    if (evloop__drained(loop)) {
        evloop__terminate(loop);
    } else {
        int parked = evloop__embed_park(loop);
        if (r >= 0)
            r = parked;
        evloop__leave(loop);
    }
    if (r < 0)
        return r;
    return ran > INT_MAX ? INT_MAX : (int)ran;
}

/* ---- hooks ---------------------------------------------------------------------------------- */

static int check_hook_call(evloop *loop, unsigned when, evloop_cb cb)
{
    if (!loop || !cb || when > EVLOOP_HOOK_CHECK)
        return -EINVAL;
    /* The table is the loop thread's: another thread may change it only while none runs. */
    if (atomic_load(&loop->running) && !evloop__on_loop_thread(loop))
        return -EBUSY;
    return 0;
}

static int find_hook(const struct evloop__embed *e, unsigned when, evloop_cb cb, void *arg)
{
    for (uint32_t i = 0; i < e->nhooks; i++)
        if (e->hooks[i].cb == cb && e->hooks[i].arg == arg && e->hooks[i].when == when)
            return (int)i;
    return -1;
}

/* Drops the entries removed while hooks were running. O(n) in the hooks. */
static void compact_hooks(struct evloop__embed *e)
{
    if (e->nhooks == e->hooks_of[0] + e->hooks_of[1])
        return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < e->nhooks; i++)
        if (e->hooks[i].cb)
            e->hooks[k++] = e->hooks[i];
    e->nhooks = k;
}

EVLOOP_API int evloop_hook_add(evloop *loop, enum evloop_hook when, evloop_cb cb, void *arg)
{
    int r = check_hook_call(loop, (unsigned)when, cb);
    if (r < 0)
        return r;
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        return -ESHUTDOWN;
    struct evloop__embed *e = &loop->embed;
    if (find_hook(e, (unsigned)when, cb, arg) >= 0)
        return -EEXIST;
    if (e->nhooks == e->hooks_cap) {
        uint32_t cap = e->hooks_cap ? e->hooks_cap * 2 : HOOKS_START;
        struct evloop__hook *hooks = realloc(e->hooks, cap * sizeof(*hooks));
        if (!hooks)
            return -ENOMEM;
        e->hooks = hooks;
        e->hooks_cap = cap;
    }
    e->hooks[e->nhooks++] = (struct evloop__hook){cb, arg, (unsigned)when};
    e->hooks_of[when]++;
    return 0;
}

EVLOOP_API int evloop_hook_remove(evloop *loop, enum evloop_hook when, evloop_cb cb, void *arg)
{
    int r = check_hook_call(loop, (unsigned)when, cb);
    if (r < 0)
        return r;
    struct evloop__embed *e = &loop->embed;
    int i = find_hook(e, (unsigned)when, cb, arg);
    if (i < 0)
        return -ENOENT;
    e->hooks[i].cb = NULL; /* a run under way skips it; compacted after that run */
    e->hooks_of[when]--;
    if (!e->hooks_running)
        compact_hooks(e);
    return 0;
}

/* Loop thread (tick.c). Hooks added meanwhile wait for the next run; removed ones are
 * skipped. Indexes, not pointers: a hook's evloop_hook_add may move the table. */
void evloop__run_hooks(evloop *loop, unsigned when)
{
    struct evloop__embed *e = &loop->embed;
    e->hooks_running = true;
    uint32_t n = e->nhooks;
    for (uint32_t i = 0; i < n; i++) {
        struct evloop__hook h = e->hooks[i];
        if (!h.cb || h.when != when)
            continue;
        h.cb(h.arg);
        evloop__drain_microtasks(loop);
    }
    e->hooks_running = false;
    compact_hooks(e);
}

/* At termination: every hook left is dropped, its argument to the release notification. */
void evloop__release_hooks(evloop *loop)
{
    struct evloop__embed *e = &loop->embed;
    e->hooks_running = true; /* a release function's evloop_hook_remove only marks */
    for (uint32_t i = 0; i < e->nhooks; i++) {
        struct evloop__hook h = e->hooks[i];
        if (!h.cb)
            continue;
        e->hooks[i].cb = NULL;
        e->hooks_of[h.when]--;
        evloop__released(loop, h.arg);
    }
    e->hooks_running = false;
    e->nhooks = 0;
}

/* ---- the release notification -------------------------------------------------------------- */

EVLOOP_API int evloop_set_release_cb(evloop *loop, evloop_cb release)
{
    if (!loop)
        return -EINVAL;
    /* release: pairs with the acquire in evloop__released(). */
    atomic_store_explicit(&loop->embed.release, release, memory_order_release);
    return 0;
}

void evloop__released(evloop *loop, void *arg)
{
    evloop_cb release = atomic_load_explicit(&loop->embed.release, memory_order_acquire);
    if (release)
        release(arg);
}

/* At termination, before evloop__release_fds (io.c): each fd still registered is removed
 * through evloop_io_remove, one at a time with io_lock released, and its argument goes to
 * the release notification, unless another thread's evloop_io_remove got it first. */
void evloop__release_fd_args(evloop *loop)
{
    for (int fd = 0;; fd++) {
        pthread_mutex_lock(&loop->io_lock);
        while (fd < loop->fds_cap && !loop->fds[fd].active)
            fd++;
        bool found = fd < loop->fds_cap;
        void *arg = found ? loop->fds[fd].arg : NULL;
        pthread_mutex_unlock(&loop->io_lock);
        if (!found)
            return;
        if (evloop_io_remove(loop, fd) == 0)
            evloop__released(loop, arg);
    }
}
