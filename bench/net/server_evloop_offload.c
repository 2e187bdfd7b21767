/* server_evloop_offload: the offload family's HTTP/1.1 server on evloop. The loop thread
 * reads with evloop readiness (the glue of server_evloop.c), hands each connection's
 * complete requests to the worker pool (worker_pool.c), and a worker posts the finished job
 * back with evloop_submit; the task, on the loop thread, queues the responses and writes
 * them. One job per connection at a time: requests that complete meanwhile wait for it.
 * A connection closed while its job is out keeps its fd (so the number is not reused) and
 * its memory until the job comes back, which frees it. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn_table.h"
#include "evloop_server.h"
#include "http_conn.h"
#include "net_util.h"
#include "worker_pool.h"

struct conn {
    int fd;
    unsigned events; /* what evloop watches now; 0 once closed */
    bool busy;       /* job is at the pool or its reply task is queued */
    bool dead;       /* closed while busy: the reply frees it */
    struct offload_job job;
    struct http_conn http;
};

static evloop *g_loop;
static struct worker_pool *g_pool;
static struct conn_table g_conns;
static uint64_t g_requests, g_accepted;

static struct conn *conn_of(struct offload_job *job)
{
    return (struct conn *)((char *)job - offsetof(struct conn, job));
}

static void free_conn(void *arg)
{
    struct conn *c = arg;
    g_requests += c->http.requests;
    close(c->fd);
    http_conn_free(&c->http);
    free(c);
}

static void close_conn(struct conn *c)
{
    evloop_io_remove(g_loop, c->fd);
    c->events = 0;
    if (c->busy) {
        c->dead = true;
        return;
    }
    conn_table_drop(&g_conns, c->fd);
    free_conn(c);
}

/* Sends the waiting requests to the pool, unless a job of c is out already. */
static void dispatch(struct conn *c)
{
    if (c->busy || c->http.waiting == 0)
        return;
    c->busy = true;
    c->job.count = c->http.waiting;
    worker_pool_push(g_pool, &c->job);
}

/* Writes what is queued and watches what c needs next. */
static void flush_and_watch(struct conn *c)
{
    long left = http_conn_flush(&c->http, c->fd);
    if (left < 0) {
        close_conn(c);
        return;
    }
    unsigned want = (http_conn_wants_input(&c->http) ? EVLOOP_READABLE : 0u) |
                    (left > 0 ? EVLOOP_WRITABLE : 0u);
    if (want != c->events) {
        if (evloop_io_modify(g_loop, c->fd, want) < 0) {
            close_conn(c);
            return;
        }
        c->events = want;
    }
}

static void on_conn(void *arg, int fd, unsigned events)
{
    struct conn *c = arg;
    if (events & (EVLOOP_READABLE | EVLOOP_HANGUP | EVLOOP_ERROR)) {
        if (http_conn_read(&c->http, fd) <= 0) {
            close_conn(c);
            return;
        }
        dispatch(c);
    }
    flush_and_watch(c);
}

/* The task a worker submits: on the loop thread, the job's responses go out. */
static void on_reply(void *arg)
{
    struct conn *c = conn_of(arg);
    c->busy = false;
    if (c->dead) {
        conn_table_drop(&g_conns, c->fd);
        free_conn(c);
        return;
    }
    if (http_conn_answer(&c->http, c->job.count) < 0) {
        close_conn(c);
        return;
    }
    dispatch(c);
    flush_and_watch(c);
}

/* On a worker thread (g_loop was set before the first job was pushed). After evloop_stop
 * the loop refuses the task: the connection stays busy in the table, and finish frees it. */
static void post_reply(struct offload_job *job, void *ctx)
{
    evloop_submit(g_loop, on_reply, job);
}

static void on_listener(void *arg, int lfd, unsigned events)
{
    for (;;) {
        int fd = net_accept(lfd);
        if (fd < 0) {
            static bool warned;
            if (fd != -EAGAIN && !warned)
                fprintf(stderr, "server_evloop_offload: accept: %s\n", evloop_strerror(fd));
            warned |= fd != -EAGAIN;
            return;
        }
        struct conn *c = malloc(sizeof(*c));
        if (!c || conn_table_put(&g_conns, fd, c) < 0) {
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->events = EVLOOP_READABLE;
        c->busy = c->dead = false;
        http_conn_init(&c->http);
        c->http.defer = true;
        g_accepted++;
        if (evloop_io_add(g_loop, fd, EVLOOP_READABLE, on_conn, c) < 0) {
            conn_table_drop(&g_conns, fd);
            free_conn(c);
        }
    }
}

static unsigned g_workers, g_work_us;

static int start_pool(void *arg)
{
    return worker_pool_start(&g_pool, g_workers, g_work_us, post_reply, NULL);
}

static int init(const struct net_opts *o)
{
    g_workers = o->workers;
    g_work_us = o->work_us;
    int r = offload_start_threads(o, start_pool, NULL);
    if (r < 0) {
        worker_pool_stop(g_pool);
        g_pool = NULL;
    }
    return r;
}

static int start(evloop *loop, int lfd)
{
    g_loop = loop;
    return evloop_io_add(loop, lfd, EVLOOP_READABLE, on_listener, NULL);
}

static void stopped(void)
{
    worker_pool_stop(g_pool);
    g_pool = NULL;
}

static void finish(uint64_t *requests, uint64_t *conns)
{
    conn_table_close_all(&g_conns, free_conn);
    *requests = g_requests;
    *conns = g_accepted;
}

int main(int argc, char **argv)
{
    static const struct evloop_glue glue = {
        .kind = "offload", .start = start, .finish = finish, .init = init, .stopped = stopped};
    return evloop_server_main(argc, argv, &glue);
}
