/* server_evloop_ops: the network family's HTTP/1.1 server on evloop's completion operations
 * (evloop_accept, evloop_recv, evloop_send), on the backend --backend names. Thin glue
 * around http_conn. One operation is in flight per connection: a recv; when it completes,
 * the responses it asked for go out in one send, and the next recv is posted once that send
 * has completed (a keep-alive client waits for its response anyway). So a callback that
 * closes its connection never has another operation of it in flight. */
#include <fcntl.h>
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

/* From the callback of the connection's only operation: nothing else of it is in flight. */
static void close_conn(struct conn *c)
{
    conn_table_drop(&g_conns, c->fd);
    free_conn(c);
}

static void on_recv(void *arg, int fd, int64_t res);

static void post_recv(struct conn *c)
{
    if (evloop_recv(g_loop, c->fd, c->http.in, sizeof(c->http.in), on_recv, c) < 0)
        close_conn(c);
}

static void on_sent(void *arg, int fd, int64_t res)
{
    struct conn *c = arg;
    http_conn_send_done(&c->http);
    if (res < 0) {
        close_conn(c);
        return;
    }
    post_recv(c);
}

static void on_recv(void *arg, int fd, int64_t res)
{
    struct conn *c = arg;
    if (res <= 0 || http_conn_feed(&c->http, c->http.in, (size_t)res) < 0) {
        close_conn(c); /* 0: the peer closed; < 0: an error, or cancelled by the stop */
        return;
    }
    const char *p;
    size_t n;
    if (!http_conn_start_send(&c->http, &p, &n)) {
        post_recv(c); /* a request not complete yet */
        return;
    }
    if (evloop_send(g_loop, fd, p, n, on_sent, c) < 0)
        close_conn(c);
}

static void on_accept(void *arg, int lfd, int64_t res)
{
    if (res >= 0) {
        int fd = (int)res;
        /* As the other servers' sockets: non-blocking (whatever the backend does with it)
         * and without Nagle. */
        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        net_nodelay(fd);
        struct conn *c = malloc(sizeof(*c));
        if (!c || conn_table_put(&g_conns, fd, c) < 0) {
            free(c);
            close(fd);
        } else {
            c->fd = fd;
            http_conn_init(&c->http);
            g_accepted++;
            post_recv(c);
        }
    } else if (res == -ECANCELED || res == -ESHUTDOWN) {
        return; /* the loop is stopping */
    } else {
        static bool warned;
        if (!warned)
            fprintf(stderr, "server_evloop_ops: accept: %s\n", evloop_strerror((int)res));
        warned = true;
    }
    int r = evloop_accept(g_loop, lfd, on_accept, NULL);
    if (r < 0 && r != -ESHUTDOWN)
        fprintf(stderr, "server_evloop_ops: evloop_accept: %s\n", evloop_strerror(r));
}

static int start(evloop *loop, int lfd)
{
    g_loop = loop;
    return evloop_accept(loop, lfd, on_accept, NULL);
}

static void finish(uint64_t *requests, uint64_t *conns)
{
    conn_table_close_all(&g_conns, free_conn);
    *requests = g_requests;
    *conns = g_accepted;
}

int main(int argc, char **argv)
{
    static const struct evloop_glue glue = {"ops", start, finish};
    return evloop_server_main(argc, argv, &glue);
}
