/* server_libev: the network family's HTTP/1.1 server on libev (ev_io on the default loop,
 * epoll on Linux): ready_conn's connection handling, as server_evloop.c's, on ev_io watchers
 * (ev_io_stop / ev_io_set / ev_io_start to change what one watches, as libev asks).
 * SIGTERM/SIGINT: ev_signal, ev_break. Built twice:
 *   net_server_libev (NET_OFFLOAD 0): the requests are answered at once;
 *   net_server_libev_offload (NET_OFFLOAD 1): as libev users hand results back to the loop,
 *     a worker of worker_pool.c appends the finished job to a locked list and calls
 *     ev_async_send; the ev_async callback, on the loop thread, takes the whole list and
 *     writes each job's responses. */
#include <ev.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net_util.h"
#include "ready_conn.h"

#ifndef NET_OFFLOAD
#define NET_OFFLOAD 0
#endif

static const char *const WHAT = NET_OFFLOAD ? "libev ev_io+ev_async offload" : "libev ev_io";
static const char *const WHO = NET_OFFLOAD ? "server_libev_offload" : "server_libev";

static struct ev_loop *g_loop;

static ev_io *watcher_of(struct ready_conn *c)
{
    return (ev_io *)c->watcher;
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
    ready_conn_event(ready_conn_of_watcher(w), revents & EV_READ);
}

static int add_conn(struct ready_conn *c)
{
    ev_io_init(watcher_of(c), on_conn, c->fd, EV_READ);
    ev_io_start(g_loop, watcher_of(c));
    return 0;
}

static int modify_conn(struct ready_conn *c, unsigned want)
{
    ev_io *w = watcher_of(c);
    ev_io_stop(g_loop, w);
    ev_io_set(w, w->fd, (want & READY_IN ? EV_READ : 0) | (want & READY_OUT ? EV_WRITE : 0));
    ev_io_start(g_loop, w);
    return 0;
}

static void remove_conn(struct ready_conn *c)
{
    ev_io_stop(g_loop, watcher_of(c));
}

static void on_listener(struct ev_loop *loop, ev_io *w, int revents)
{
    ready_conns_accept(w->fd);
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    ev_break(loop, EVBREAK_ALL);
}

#if NET_OFFLOAD
static ev_async g_async;
static struct reply_list g_replies;

static void on_async(struct ev_loop *loop, ev_async *w, int revents)
{
    for (struct offload_job *job = reply_list_take(&g_replies), *next; job; job = next) {
        next = job->next;
        ready_conn_job_back(ready_conn_of_job(job));
    }
}

/* On a worker thread. */
static void post_reply(struct offload_job *job, void *ctx)
{
    reply_list_push(&g_replies, job);
    ev_async_send(g_loop, &g_async);
}

/* The async watcher, then the workers (after the signal watchers: where libev reads signals
 * with a signalfd it blocks them in the thread that starts the watcher, and the workers
 * must inherit that mask). Returns 0 or a negative errno. */
static int start_offload(const struct net_opts *o)
{
    reply_list_init(&g_replies);
    ev_async_init(&g_async, on_async);
    ev_async_start(g_loop, &g_async);
    return ready_conns_offload(o, post_reply);
}

static void free_offload(void)
{
    ev_async_stop(g_loop, &g_async);
    reply_list_destroy(&g_replies);
}
#else
static int start_offload(const struct net_opts *o)
{
    return 0;
}

static void free_offload(void)
{
}
#endif

int main(int argc, char **argv)
{
    struct net_opts o;
    if (net_parse_args(argc, argv, argv[0], &o) < 0)
        return 2;
    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    g_loop = loop;
    if (!loop) {
        fprintf(stderr, "%s: ev_default_loop failed\n", WHO);
        return 1;
    }
    static const struct ready_ops ops = {.watcher_size = sizeof(ev_io),
                                         .add = add_conn,
                                         .modify = modify_conn,
                                         .remove = remove_conn};
    ready_conns_init(&ops, WHO);
    ev_signal sigterm, sigint;
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_init(&sigint, on_signal, SIGINT);
    ev_signal_start(loop, &sigterm);
    ev_signal_start(loop, &sigint);
    int r = start_offload(&o);
    if (r < 0) {
        fprintf(stderr, "%s: workers: %s\n", WHO, strerror(-r));
        return 1;
    }
    int lfd = net_listen(o.port);
    if (lfd < 0) {
        ready_conns_stop_workers();
        fprintf(stderr, "%s: listen: %s\n", WHO, strerror(-lfd));
        return 1;
    }
    ev_io listener;
    ev_io_init(&listener, on_listener, lfd, EV_READ);
    ev_io_start(loop, &listener);

    net_ready(WHAT, net_local_port(lfd));
    ev_run(loop, 0);

    /* Offload: the workers finish what they hold (their replies land in the list, unread);
     * then every connection, busy or not, is in the table. */
    ready_conns_stop_workers();
    uint64_t requests, conns;
    ready_conns_close_all(true, &requests, &conns);
    ev_io_stop(loop, &listener);
    free_offload();
    close(lfd);
    ev_loop_destroy(loop);
    net_report(WHAT, requests, conns);
    return 0;
}
