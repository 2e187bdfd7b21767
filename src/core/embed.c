/* The embedding API of issue 13 (design.md, "Embedding"): evloop_run_once,
 * evloop_backend_fd and evloop_backend_timeout_ns, hooks, the release notification,
 * evloop_on_loop_thread and evloop_version. Signals are in signal.c. */
#include <stdlib.h>
#include <unistd.h>

#include "loop.h"

#define STRINGIFY_(x) #x
#define STRINGIFY(x) STRINGIFY_(x)

void evloop__embed_init(struct evloop__embed *e)
{
    pthread_mutex_init(&e->lock, NULL);
    atomic_init(&e->epfd, -1);
    e->efd = -1;
    e->backend_fd = -1;
    e->sig_keepalive_fd = -1;
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

/* ---- the release notification ------------------------------------------------------------ */

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
