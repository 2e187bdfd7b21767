/* server_libev: the network family's HTTP/1.1 server on libev (ev_io on the default loop,
 * epoll on Linux), the same glue as server_evloop.c around http_conn: accept until EAGAIN,
 * read until EAGAIN, write the responses, watch for writability only while output is
 * pending (ev_io_stop / ev_io_set / ev_io_start, as libev asks). SIGTERM/SIGINT: ev_signal,
 * ev_break. */
#include <ev.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "conn_table.h"
#include "http_conn.h"
#include "net_util.h"

struct conn {
    ev_io w; /* first: the callback gets &w */
    struct http_conn http;
};

static struct ev_loop *g_loop;
static struct conn_table g_conns;
static uint64_t g_requests, g_accepted;

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

static void close_conn(struct ev_loop *loop, struct conn *c)
{
    conn_table_drop(&g_conns, c->w.fd);
    stop_and_free_conn(c);
}

static void on_conn(struct ev_loop *loop, ev_io *w, int revents)
{
    struct conn *c = (struct conn *)w;
    if (revents & EV_READ) {
        if (http_conn_read(&c->http, w->fd) <= 0) {
            close_conn(loop, c);
            return;
        }
    }
    long left = http_conn_flush(&c->http, w->fd);
    if (left < 0) {
        close_conn(loop, c);
        return;
    }
    int want = (http_conn_wants_input(&c->http) ? EV_READ : 0) | (left > 0 ? EV_WRITE : 0);
    if (want != (w->events & (EV_READ | EV_WRITE))) {
        ev_io_stop(loop, w);
        ev_io_set(w, w->fd, want);
        ev_io_start(loop, w);
    }
}

static void on_listener(struct ev_loop *loop, ev_io *w, int revents)
{
    for (;;) {
        int fd = net_accept(w->fd);
        if (fd < 0) {
            static bool warned;
            if (fd != -EAGAIN && !warned)
                fprintf(stderr, "server_libev: accept: %s\n", strerror(-fd));
            warned |= fd != -EAGAIN;
            return;
        }
        struct conn *c = malloc(sizeof(*c));
        if (!c || conn_table_put(&g_conns, fd, c) < 0) {
            free(c);
            close(fd);
            continue;
        }
        http_conn_init(&c->http);
        g_accepted++;
        ev_io_init(&c->w, on_conn, fd, EV_READ);
        ev_io_start(loop, &c->w);
    }
}

static void on_signal(struct ev_loop *loop, ev_signal *w, int revents)
{
    ev_break(loop, EVBREAK_ALL);
}

int main(int argc, char **argv)
{
    struct net_opts o;
    if (net_parse_args(argc, argv, argv[0], &o) < 0)
        return 2;
    struct ev_loop *loop = ev_default_loop(EVFLAG_AUTO);
    g_loop = loop;
    if (!loop) {
        fprintf(stderr, "server_libev: ev_default_loop failed\n");
        return 1;
    }
    int lfd = net_listen(o.port);
    if (lfd < 0) {
        fprintf(stderr, "server_libev: listen: %s\n", strerror(-lfd));
        return 1;
    }
    ev_io listener;
    ev_io_init(&listener, on_listener, lfd, EV_READ);
    ev_io_start(loop, &listener);
    ev_signal sigterm, sigint;
    ev_signal_init(&sigterm, on_signal, SIGTERM);
    ev_signal_init(&sigint, on_signal, SIGINT);
    ev_signal_start(loop, &sigterm);
    ev_signal_start(loop, &sigint);

    net_ready("libev ev_io", net_local_port(lfd));
    ev_run(loop, 0);

    conn_table_close_all(&g_conns, stop_and_free_conn);
    ev_io_stop(loop, &listener);
    close(lfd);
    ev_loop_destroy(loop);
    net_report("libev ev_io", g_requests, g_accepted);
    return 0;
}
