/* server_libev_offload: the offload family's HTTP/1.1 server on libev, as libev users hand
 * results back to the loop: a worker appends the finished job to a locked list and calls
 * ev_async_send; the ev_async callback, on the loop thread, takes the whole list and writes
 * each job's responses. Reading is the glue of server_libev.c (ev_io on the default loop),
 * the workers are worker_pool.c's, one job per connection at a time. A connection closed
 * while its job is out keeps its fd and memory until the job comes back. */
#include <ev.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn_table.h"
#include "http_conn.h"
#include "net_util.h"
#include "worker_pool.h"

struct conn {
    ev_io w;   /* first: the callback gets &w */
    bool busy; /* job is at the pool or in the reply list */
    bool dead; /* closed while busy: the reply frees it */
    struct offload_job job;
    struct http_conn http;
};

static struct ev_loop *g_loop;
static ev_async g_async;
static struct reply_list g_replies;
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
    close(c->w.fd);
    http_conn_free(&c->http);
    free(c);
}

static void stop_and_free_conn(void *arg)
{
    struct conn *c = arg;
    ev_io_stop(g_loop, &c->w);
    free_conn(c);
}

static void close_conn(struct conn *c)
{
    ev_io_stop(g_loop, &c->w);
    if (c->busy) {
        c->dead = true;
        return;
    }
    conn_table_drop(&g_conns, c->w.fd);
    free_conn(c);
}

static void dispatch(struct conn *c)
{
    if (c->busy || c->http.waiting == 0)
        return;
    c->busy = true;
    c->job.count = c->http.waiting;
    worker_pool_push(g_pool, &c->job);
}

static void flush_and_watch(struct conn *c)
{
    ev_io *w = &c->w;
    long left = http_conn_flush(&c->http, w->fd);
    if (left < 0) {
        close_conn(c);
        return;
    }
    int want = (http_conn_wants_input(&c->http) ? EV_READ : 0) | (left > 0 ? EV_WRITE : 0);
    if (want != (w->events & (EV_READ | EV_WRITE))) {
        ev_io_stop(g_loop, w);
        ev_io_set(w, w->fd, want);
        ev_io_start(g_loop, w);
    }
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = (struct conn *)w;
    if (revents & EV_READ) {
        if (http_conn_read(&c->http, w->fd) <= 0) {
            close_conn(c);
            return;
        }
        dispatch(c);
    }
    flush_and_watch(c);
}

static void reply(struct offload_job *job)
{
    struct conn *c = conn_of(job);
    c->busy = false;
    if (c->dead) {
        conn_table_drop(&g_conns, c->w.fd);
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

static void on_async(struct ev_loop *loop, ev_async *w, int revents)
{
    for (struct offload_job *job = reply_list_take(&g_replies), *next; job; job = next) {
        next = job->next;
        reply(job);
    }
}

/* On a worker thread. */
static void post_reply(struct offload_job *job, void *ctx)
{
    reply_list_push(&g_replies, job);
    ev_async_send(g_loop, &g_async);
}

static void on_listener(struct ev_loop *loop, ev_io *w, int revents)
{
    for (;;) {
        int fd = net_accept(w->fd);
        if (fd < 0) {
            static bool warned;
            if (fd != -EAGAIN && !warned)
                fprintf(stderr, "server_libev_offload: accept: %s\n", strerror(-fd));
            warned |= fd != -EAGAIN;
            return;
        }
        struct conn *c = malloc(sizeof(*c));
        if (!c || conn_table_put(&g_conns, fd, c) < 0) {
            free(c);
            close(fd);
            continue;
        }
        c->busy = c->dead = false;
        http_conn_init(&c->http);
        c->http.defer = true;
        g_accepted++;
        ev_io_init(&c->w, on_conn, fd, EV_READ);
        ev_io_start(loop, &c->w);
    }
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    ev_break(loop, EVBREAK_ALL);
}

static unsigned g_workers, g_work_us;

static int start_pool(void *arg)
{
    return worker_pool_start(&g_pool, g_workers, g_work_us, post_reply, NULL);
}

int main(int argc, char **argv)
{
    struct net_opts o;
    if (net_parse_args(argc, argv, argv[0], &o) < 0)
        return 2;
    /* The loop and its async watcher exist before the first worker does. */
    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    g_loop = loop;
    if (!loop) {
        fprintf(stderr, "server_libev_offload: ev_default_loop failed\n");
        return 1;
    }
    reply_list_init(&g_replies);
    ev_async_init(&g_async, on_async);
    ev_async_start(loop, &g_async);
    /* Signals before workers: where libev reads them with a signalfd it blocks them in
     * the thread that starts the watcher, and the workers must inherit that mask. */
    ev_signal sigterm, sigint;
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_init(&sigint, on_signal, SIGINT);
    ev_signal_start(loop, &sigterm);
    ev_signal_start(loop, &sigint);
    g_workers = o.workers;
    g_work_us = o.work_us;
    int r = offload_start_threads(&o, start_pool, NULL);
    if (r < 0) {
        worker_pool_stop(g_pool);
        fprintf(stderr, "server_libev_offload: workers: %s\n", strerror(-r));
        return 1;
    }
    int lfd = net_listen(o.port);
    if (lfd < 0) {
        worker_pool_stop(g_pool);
        fprintf(stderr, "server_libev_offload: listen: %s\n", strerror(-lfd));
        return 1;
    }
    ev_io listener;
    ev_io_init(&listener, on_listener, lfd, EV_READ);
    ev_io_start(loop, &listener);

    net_ready("libev ev_io+ev_async offload", net_local_port(lfd));
    ev_run(loop, 0);

    /* The workers finish what they hold (their replies land in the list, unread); then
     * every connection, busy or not, is in the table. */
    worker_pool_stop(g_pool);
    conn_table_close_all(&g_conns, stop_and_free_conn);
    ev_io_stop(loop, &listener);
    ev_async_stop(loop, &g_async);
    close(lfd);
    ev_loop_destroy(loop);
    reply_list_destroy(&g_replies);
    net_report("libev ev_io+ev_async offload", g_requests, g_accepted);
    return 0;
}
