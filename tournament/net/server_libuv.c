/* server_libuv: the network family's HTTP/1.1 server on libuv streams, as libuv users write
 * one: uv_tcp_bind / uv_listen / uv_accept, uv_read_start into the connection's buffer, and
 * uv_write of the queued responses (one write in flight per connection; responses that
 * arrive meanwhile wait in http_conn's output and go out with the next). Around the same
 * http_conn as the other servers. SIGTERM/SIGINT: uv_signal, uv_stop. Built three times:
 *   net_server_libuv (NET_OFFLOAD 0): the requests are answered at once;
 *   net_server_libuv_offload (NET_OFFLOAD 1): worker_pool.c's workers, as the other
 *     systems; a worker appends the finished job to a locked list and calls uv_async_send,
 *     and the uv_async callback takes the whole list on the loop thread;
 *   net_server_libuv_queue_work (NET_OFFLOAD 1, OFFLOAD_QUEUE_WORK 1): libuv's own thread
 *     pool, uv_queue_work, with UV_THREADPOOL_SIZE set to --workers; its work callback does
 *     the same busy work (offload_work), its after-work callback runs on the loop thread.
 * Offload: one job per connection at a time. A connection closed while its job is out is
 * freed when the job comes back (libuv has no fd reuse hazard here: the handle's memory is
 * what must live). */
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "http_conn.h"
#include "net_util.h"
#include "worker_pool.h"

#ifndef NET_OFFLOAD
#define NET_OFFLOAD 0
#endif
#ifndef OFFLOAD_QUEUE_WORK
#define OFFLOAD_QUEUE_WORK 0
#endif

static const char *const WHAT = !NET_OFFLOAD         ? "libuv uv_tcp"
                                : OFFLOAD_QUEUE_WORK ? "libuv uv_tcp+uv_queue_work offload"
                                                     : "libuv uv_tcp+uv_async offload";
static const char *const WHO = NET_OFFLOAD ? "server_libuv_offload" : "server_libuv";

struct conn {
    uv_tcp_t tcp; /* first: handle callbacks get &tcp */
    uv_write_t req;
    uv_work_t work; /* uv_queue_work */
    bool reading;
    bool busy;   /* offload: job is out (pool, reply list, or libuv's pool) */
    bool closed; /* offload: the close callback has run while busy: the reply frees it */
    struct offload_job job;
    struct http_conn http;
};

static uv_loop_t g_loop;
static uv_async_t g_async;
static struct reply_list g_replies;
static struct worker_pool *g_pool;
static unsigned g_work_us;
static bool g_stopping; /* the loop has returned: no new job */
static uint64_t g_requests, g_accepted;

static void free_conn(struct conn *c)
{
    g_requests += c->http.requests;
    http_conn_free(&c->http);
    free(c);
}

static void on_closed(uv_handle_t *h)
{
    struct conn *c = (struct conn *)h;
    if (c->busy)
        c->closed = true;
    else
        free_conn(c);
}

static void close_conn(struct conn *c)
{
    if (!uv_is_closing((uv_handle_t *)&c->tcp))
        uv_close((uv_handle_t *)&c->tcp, on_closed);
}

static void on_alloc(uv_handle_t *h, size_t suggested, uv_buf_t *buf)
{
    struct conn *c = (struct conn *)h;
    *buf = uv_buf_init(c->http.in, sizeof(c->http.in));
}

static void on_written(uv_write_t *req, int status);
static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf);

static void send_pending(struct conn *c)
{
    const char *p;
    size_t n;
    if (!http_conn_start_send(&c->http, &p, &n))
        return;
    uv_buf_t buf = uv_buf_init((char *)p, (unsigned)n);
    if (uv_write(&c->req, (uv_stream_t *)&c->tcp, &buf, 1, on_written) < 0)
        close_conn(c);
}

static void resume_reading(struct conn *c)
{
    if (c->reading || !http_conn_wants_input(&c->http))
        return;
    c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
    if (!c->reading)
        close_conn(c);
}

static void on_work(uv_work_t *req)
{
    struct conn *c = req->data;
    offload_work(c->job.count, g_work_us);
}

static void on_after_work(uv_work_t *req, int status);

/* Offload: sends the waiting requests to the workers, unless a job of c is out already
 * (plain server: nothing ever waits). */
static void dispatch(struct conn *c)
{
    if (c->busy || c->http.waiting == 0 || g_stopping)
        return;
    c->job.count = c->http.waiting;
    if (OFFLOAD_QUEUE_WORK) {
        if (uv_queue_work(&g_loop, &c->work, on_work, on_after_work) < 0) {
            close_conn(c);
            return;
        }
    } else {
        worker_pool_push(g_pool, &c->job);
    }
    c->busy = true;
}

/* Offload, on the loop thread: a job of c is back. */
static void reply(struct conn *c)
{
    c->busy = false;
    if (c->closed) {
        free_conn(c);
        return;
    }
    if (uv_is_closing((uv_handle_t *)&c->tcp))
        return; /* on_closed, still to come, frees it */
    if (http_conn_answer(&c->http, c->job.count) < 0) {
        close_conn(c);
        return;
    }
    send_pending(c);
    dispatch(c);
    resume_reading(c);
}

static void on_after_work(uv_work_t *req, int status)
{
    reply(req->data);
}

static void on_async(uv_async_t *h)
{
    for (struct offload_job *job = reply_list_take(&g_replies), *next; job; job = next) {
        next = job->next;
        reply((struct conn *)((char *)job - offsetof(struct conn, job)));
    }
}

/* On a worker thread. */
static void post_reply(struct offload_job *job, void *ctx)
{
    reply_list_push(&g_replies, job);
    uv_async_send(&g_async);
}

static void on_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *buf)
{
    struct conn *c = (struct conn *)s;
    if (nread < 0) {
        close_conn(c); /* UV_EOF or an error */
        return;
    }
    if (nread == 0)
        return;
    if (http_conn_feed(&c->http, buf->base, (size_t)nread) < 0) {
        close_conn(c);
        return;
    }
    if (NET_OFFLOAD)
        dispatch(c); /* the answers come with the job */
    else
        send_pending(c);
    if (!http_conn_wants_input(&c->http)) {
        uv_read_stop(s);
        c->reading = false;
    }
}

static void on_written(uv_write_t *req, int status)
{
    struct conn *c = req->data;
    http_conn_send_done(&c->http);
    if (status < 0) {
        close_conn(c);
        return;
    }
    send_pending(c);
    resume_reading(c);
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    struct conn *c = malloc(sizeof(*c));
    if (!c)
        return;
    http_conn_init(&c->http);
    c->http.defer = NET_OFFLOAD;
    c->req.data = c;
    c->work.data = c;
    c->reading = c->busy = c->closed = false;
    uv_tcp_init(server->loop, &c->tcp);
    g_accepted++;
    if (uv_accept(server, (uv_stream_t *)&c->tcp) < 0) {
        close_conn(c);
        return;
    }
    uv_tcp_nodelay(&c->tcp, 1);
    c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
    if (!c->reading)
        close_conn(c);
}

static void on_signal(uv_signal_t *h, int signum)
{
    uv_stop(h->loop);
}

/* At exit: connections are freed by on_closed (or by their last reply), the listener, the
 * async handle and the signals are static. */
static void close_any(uv_handle_t *h, void *arg)
{
    if (uv_is_closing(h))
        return;
    uv_close(h, h->type == UV_TCP && h != arg ? on_closed : NULL);
}

static int fail(const char *what, int err)
{
    fprintf(stderr, "%s: %s: %s\n", WHO, what, uv_strerror(err));
    return 1;
}

static void no_work(uv_work_t *req)
{
}

static void no_work_done(uv_work_t *req, int status)
{
}

/* Starts the workers: worker_pool.c's, or libuv's pool, which libuv starts (all its threads)
 * at the first uv_queue_work: one that does nothing, waited for on a loop with nothing else
 * in it, so the threads are made here, with the workers' CPU mask. */
static int start_workers(void *arg)
{
    const struct net_opts *o = arg;
    if (!OFFLOAD_QUEUE_WORK)
        return worker_pool_start(&g_pool, o->workers, o->work_us, post_reply, NULL);
    static uv_work_t warm;
    int r = uv_queue_work(&g_loop, &warm, no_work, no_work_done);
    if (r == 0)
        r = uv_run(&g_loop, UV_RUN_DEFAULT);
    return r < 0 ? r : 0;
}

/* The loop and, offload, the workers, started while the loop has no handle (the warm-up's
 * uv_run returns once its work is done; libuv's signals are a handler and a pipe: any thread
 * may take them). Returns 0, or 1 once it has printed why not. */
static int init_loop(struct net_opts *o)
{
    g_work_us = o->work_us;
    char size[16];
    snprintf(size, sizeof(size), "%u", o->workers);
    if (OFFLOAD_QUEUE_WORK)
        setenv("UV_THREADPOOL_SIZE", size, 1);
    int r = uv_loop_init(&g_loop);
    if (r < 0)
        return fail("uv_loop_init", r);
    if (!NET_OFFLOAD)
        return 0;
    r = offload_start_threads(o, start_workers, o);
    if (r < 0) {
        worker_pool_stop(g_pool);
        return fail("workers", r);
    }
    reply_list_init(&g_replies);
    if (!OFFLOAD_QUEUE_WORK) {
        r = uv_async_init(&g_loop, &g_async, on_async);
        if (r < 0) {
            worker_pool_stop(g_pool);
            return fail("uv_async_init", r);
        }
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct net_opts o;
    if (net_parse_args(argc, argv, argv[0], &o) < 0)
        return 2;
    if (init_loop(&o) != 0)
        return 1;
    static uv_signal_t sigterm, sigint;
    uv_signal_init(&g_loop, &sigterm);
    uv_signal_init(&g_loop, &sigint);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_start(&sigint, on_signal, SIGINT);
    static uv_tcp_t server;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", o.port, &addr);
    uv_tcp_init(&g_loop, &server);
    int r = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&server, NET_BACKLOG, on_connection);
    if (r < 0) {
        worker_pool_stop(g_pool);
        return fail("listen", r);
    }

    int namelen = sizeof(addr);
    uv_tcp_getsockname(&server, (struct sockaddr *)&addr, &namelen);
    net_ready(WHAT, ntohs(addr.sin_port));
    uv_run(&g_loop, UV_RUN_DEFAULT);

    /* Offload: the workers finish what they hold; their replies, in the list, are handed
     * out here (the loop no longer runs the async callback; nothing is dispatched any more,
     * the pool is gone), so no connection stays busy. libuv's own pool needs nothing: the
     * uv_run below waits for every uv_work_t. */
    g_stopping = true;
    worker_pool_stop(g_pool);
    if (NET_OFFLOAD && !OFFLOAD_QUEUE_WORK)
        on_async(&g_async);
    uv_walk(&g_loop, close_any, &server);
    uv_run(&g_loop, UV_RUN_DEFAULT);
    r = uv_loop_close(&g_loop);
    if (NET_OFFLOAD)
        reply_list_destroy(&g_replies);
    net_report(WHAT, g_requests, g_accepted);
    return r < 0 ? fail("uv_loop_close", r) : 0;
}
