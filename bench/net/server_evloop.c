/* server_evloop: the network family's HTTP/1.1 server on evloop readiness (evloop_io_add,
 * evloop_io_modify, evloop_io_remove), on the backend --backend names. Thin glue around
 * http_conn: accept until EAGAIN, read until EAGAIN, write the responses, and watch for
 * writability only while output is pending. */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "conn_table.h"
#include "evloop_server.h"
#include "http_conn.h"
#include "net_util.h"

struct conn {
    int fd;
    unsigned events; /* what evloop watches now */
    struct http_conn http;
};

static evloop *g_loop;
static struct conn_table g_conns;
static uint64_t g_requests, g_accepted;

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
    conn_table_drop(&g_conns, c->fd);
    free_conn(c);
}

static void on_conn(void *arg, int fd, unsigned events)
{
    struct conn *c = arg;
    if (events & (EVLOOP_READABLE | EVLOOP_HANGUP | EVLOOP_ERROR)) {
        if (http_conn_read(&c->http, fd) <= 0) {
            close_conn(c);
            return;
        }
    }
    long left = http_conn_flush(&c->http, fd);
    if (left < 0) {
        close_conn(c);
        return;
    }
    unsigned want = (http_conn_wants_input(&c->http) ? EVLOOP_READABLE : 0u) |
                    (left > 0 ? EVLOOP_WRITABLE : 0u);
    if (want != c->events) {
        if (evloop_io_modify(g_loop, fd, want) < 0) {
            close_conn(c);
            return;
        }
        c->events = want;
    }
}

static void on_listener(void *arg, int lfd, unsigned events)
{
    for (;;) {
        int fd = net_accept(lfd);
        if (fd < 0) {
            static bool warned;
            if (fd != -EAGAIN && !warned)
                fprintf(stderr, "server_evloop: accept: %s\n", evloop_strerror(fd));
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
        http_conn_init(&c->http);
        g_accepted++;
        if (evloop_io_add(g_loop, fd, EVLOOP_READABLE, on_conn, c) < 0) {
            conn_table_drop(&g_conns, fd);
            free_conn(c);
        }
    }
}

static int start(evloop *loop, int lfd)
{
    g_loop = loop;
    return evloop_io_add(loop, lfd, EVLOOP_READABLE, on_listener, NULL);
}

static void finish(uint64_t *requests, uint64_t *conns)
{
    conn_table_close_all(&g_conns, free_conn);
    *requests = g_requests;
    *conns = g_accepted;
}

int main(int argc, char **argv)
{
    static const struct evloop_glue glue = {.kind = "readiness", .start = start, .finish = finish};
    return evloop_server_main(argc, argv, &glue);
}
