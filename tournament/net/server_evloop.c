/* server_evloop: the network family's HTTP/1.1 server on evloop readiness (evloop_io_add,
 * evloop_io_modify, evloop_io_remove), on the backend --backend names: ready_conn's
 * connection handling on evloop's watchers. Built twice:
 *   net_server_evloop (NET_OFFLOAD 0): the requests are answered at once;
 *   net_server_evloop_offload (NET_OFFLOAD 1): worker_pool.c's workers do each request's
 *     work and post the finished job back with evloop_submit; the task, on the loop thread,
 *     queues the responses and writes them. */
#include "evloop_server.h"
#include "net_util.h"
#include "ready_conn.h"

#ifndef NET_OFFLOAD
#define NET_OFFLOAD 0
#endif

static evloop *g_loop;

static unsigned evloop_events(unsigned want)
{
    return (want & READY_IN ? EVLOOP_READABLE : 0u) | (want & READY_OUT ? EVLOOP_WRITABLE : 0u);
}

static void on_conn(void *arg, int fd, unsigned events)
{
    ready_conn_event(arg, events & (EVLOOP_READABLE | EVLOOP_HANGUP | EVLOOP_ERROR));
}

static int add_conn(struct ready_conn *c)
{
    return evloop_io_add(g_loop, c->fd, EVLOOP_READABLE, on_conn, c);
}

static int modify_conn(struct ready_conn *c, unsigned want)
{
    return evloop_io_modify(g_loop, c->fd, evloop_events(want));
}

static void remove_conn(struct ready_conn *c)
{
    evloop_io_remove(g_loop, c->fd);
}

static void on_listener(void *arg, int lfd, unsigned events)
{
    ready_conns_accept(lfd);
}

static int start(evloop *loop, int lfd)
{
    static const struct ready_ops ops = {
        .add = add_conn, .modify = modify_conn, .remove = remove_conn};
    g_loop = loop;
    ready_conns_init(&ops, NET_OFFLOAD ? "server_evloop_offload" : "server_evloop");
    return evloop_io_add(loop, lfd, EVLOOP_READABLE, on_listener, NULL);
}

/* After evloop_free: nothing to unwatch. */
static void finish(uint64_t *requests, uint64_t *conns)
{
    ready_conns_close_all(false, requests, conns);
}

#if NET_OFFLOAD
/* The task a worker submits: on the loop thread, the job's responses go out. */
static void on_reply(void *arg)
{
    ready_conn_job_back(ready_conn_of_job(arg));
}

/* On a worker thread (g_loop was set before the first job was pushed). After evloop_stop
 * the loop refuses the task: the connection stays busy in the table, and finish frees it. */
static void post_reply(struct offload_job *job, void *ctx)
{
    evloop_submit(g_loop, on_reply, job);
}

static int init(const struct net_opts *o)
{
    return ready_conns_offload(o, post_reply);
}

static const struct evloop_glue GLUE = {.kind = "offload",
                                        .start = start,
                                        .finish = finish,
                                        .init = init,
                                        .stopped = ready_conns_stop_workers};
#else
static const struct evloop_glue GLUE = {.kind = "readiness", .start = start, .finish = finish};
#endif

int main(int argc, char **argv)
{
    return evloop_server_main(argc, argv, &GLUE);
}
