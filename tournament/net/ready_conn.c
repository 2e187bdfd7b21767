/* ready_conn: the readiness servers' connection handling (see ready_conn.h). A connection
 * closed while its job is out keeps its fd (so the number is not reused) and its memory
 * until the job comes back, which frees it. */
#include "ready_conn.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn_table.h"
#include "net_util.h"

static const struct ready_ops *g_ops;
static const char *g_who;
static struct worker_pool *g_pool; /* offload on worker_pool.c's pool */
static ready_push_fn g_push;       /* offload: where waiting requests go; NULL: answered now */
static struct conn_table g_conns;
static uint64_t g_requests, g_accepted;

void ready_conns_init(const struct ready_ops *ops, const char *who)
{
    g_ops = ops;
    g_who = who;
}

static int push_to_pool(struct offload_job *job)
{
    worker_pool_push(g_pool, job);
    return 0;
}

int ready_conns_offload(const struct net_opts *o, offload_post_fn post)
{
    int r = offload_start_pool(&g_pool, o, post, NULL);
    if (r == 0)
        g_push = push_to_pool;
    return r;
}

void ready_conns_offload_to(ready_push_fn push)
{
    g_push = push;
}

void ready_conns_stop_workers(void)
{
    worker_pool_stop(g_pool);
    g_pool = NULL;
}

static void free_conn(struct ready_conn *c)
{
    g_requests += c->http.requests;
    close(c->fd);
    http_conn_free(&c->http);
    free(c);
}

static void drop_and_free(struct ready_conn *c)
{
    conn_table_drop(&g_conns, c->fd);
    free_conn(c);
}

static void close_conn(struct ready_conn *c)
{
    g_ops->remove(c);
    c->watching = 0;
    if (c->busy) {
        c->dead = true;
        return;
    }
    drop_and_free(c);
}

/* Sends the waiting requests to the pool, unless a job of c is out already (plain servers:
 * nothing ever waits). Returns 0, or the push's negative errno (c is not busy then). */
static int dispatch(struct ready_conn *c)
{
    if (c->busy || c->http.waiting == 0)
        return 0;
    c->busy = true;
    c->job.count = c->http.waiting;
    int r = g_push(&c->job);
    if (r < 0)
        c->busy = false;
    return r;
}

/* Writes what is queued and watches what c needs next. */
static void flush_and_watch(struct ready_conn *c)
{
    long left = http_conn_flush(&c->http, c->fd);
    if (left < 0) {
        close_conn(c);
        return;
    }
    unsigned want = (http_conn_wants_input(&c->http) ? READY_IN : 0u) | (left > 0 ? READY_OUT : 0u);
    if (want != c->watching) {
        if (g_ops->modify(c, want) < 0) {
            close_conn(c);
            return;
        }
        c->watching = want;
    }
}

void ready_conn_event(struct ready_conn *c, bool readable)
{
    if (readable) {
        if (http_conn_read(&c->http, c->fd) <= 0 || dispatch(c) < 0) {
            close_conn(c);
            return;
        }
    }
    flush_and_watch(c);
}

void ready_conn_job_back(struct ready_conn *c)
{
    c->busy = false;
    if (c->dead) {
        drop_and_free(c);
        return;
    }
    if (http_conn_answer(&c->http, c->job.count) < 0 || dispatch(c) < 0) {
        close_conn(c);
        return;
    }
    flush_and_watch(c);
}

void ready_conn_job_dropped(struct ready_conn *c)
{
    c->busy = false;
    if (c->dead)
        drop_and_free(c);
}

void ready_conns_accept(int lfd)
{
    for (;;) {
        int fd = net_accept(lfd);
        if (fd < 0) {
            static bool warned;
            if (fd != -EAGAIN && !warned)
                fprintf(stderr, "%s: accept: %s\n", g_who, strerror(-fd));
            warned |= fd != -EAGAIN;
            return;
        }
        struct ready_conn *c = malloc(sizeof(*c) + g_ops->watcher_size);
        if (!c || conn_table_put(&g_conns, fd, c) < 0) {
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->watching = READY_IN;
        c->busy = c->dead = false;
        http_conn_init(&c->http);
        c->http.defer = g_push != NULL;
        g_accepted++;
        if (g_ops->add(c) < 0)
            drop_and_free(c);
    }
}

static bool g_unwatch;

static void close_left(void *arg)
{
    struct ready_conn *c = arg;
    if (g_unwatch)
        g_ops->remove(c);
    free_conn(c);
}

void ready_conns_close_all(bool unwatch, uint64_t *requests, uint64_t *conns)
{
    g_unwatch = unwatch;
    conn_table_close_all(&g_conns, close_left);
    *requests = g_requests;
    *conns = g_accepted;
}
