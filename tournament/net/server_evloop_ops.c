/* server_evloop_ops: the network family's HTTP/1.1 server on evloop's completion operations
 * (evloop_accept, evloop_recv, evloop_send), on the backend --backend names. Thin glue
 * around http_conn. A recv stays posted on every connection (as libuv keeps reading), except
 * while unsent output is above HTTP_OUT_HIGH; the responses a recv asks for go out in one
 * send, one send in flight at a time. A connection is freed, and its fd closed, once no
 * operation of it is pending: closing cancels what is (evloop_op_cancel) and the last
 * callback frees it. */
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
    unsigned pending; /* operations posted whose callback has not run yet */
    bool reading;     /* a recv is pending */
    bool closing;     /* closed: what is pending was cancelled; the last callback frees */
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

/* Frees c once nothing of it is pending. */
static void release(struct conn *c)
{
    if (c->pending == 0) {
        conn_table_drop(&g_conns, c->fd);
        free_conn(c);
    }
}

/* Closes c: cancels what is pending (the last of those callbacks frees it), or frees it
 * now. The caller must not touch c afterwards. */
static void shut(struct conn *c)
{
    if (!c->closing) {
        c->closing = true;
        if (c->pending > 0) {
            /* A guard, should the cancelled callbacks run inside the cancel: none of them
             * may free c under our feet. */
            c->pending++;
            evloop_op_cancel(g_loop, c->fd);
            c->pending--;
        }
    }
    release(c);
}

static void on_recv(void *arg, int fd, int64_t res);
static void on_sent(void *arg, int fd, int64_t res);

static void post_recv(struct conn *c)
{
    if (evloop_recv(g_loop, c->fd, c->http.in, sizeof(c->http.in), on_recv, c) < 0) {
        shut(c);
        return;
    }
    c->pending++;
    c->reading = true;
}

/* Sends the queued responses unless a send is in flight. Returns false when c was shut. */
static bool post_send(struct conn *c)
{
    const char *p;
    size_t n;
    if (!http_conn_start_send(&c->http, &p, &n))
        return true;
    if (evloop_send(g_loop, c->fd, p, n, on_sent, c) < 0) {
        http_conn_send_done(&c->http);
        shut(c);
        return false;
    }
    c->pending++;
    return true;
}

static void on_recv(void *arg, int fd, int64_t res)
{
    struct conn *c = arg;
    c->pending--;
    c->reading = false;
    if (c->closing) {
        release(c);
        return;
    }
    if (res <= 0 || http_conn_feed(&c->http, c->http.in, (size_t)res) < 0) {
        shut(c); /* 0: the peer closed; < 0: an error, or cancelled by the stop */
        return;
    }
    if (post_send(c) && http_conn_wants_input(&c->http))
        post_recv(c);
}

static void on_sent(void *arg, int fd, int64_t res)
{
    struct conn *c = arg;
    c->pending--;
    http_conn_send_done(&c->http);
    if (c->closing) {
        release(c);
        return;
    }
    if (res < 0) {
        shut(c);
        return;
    }
    if (post_send(c) && !c->reading && http_conn_wants_input(&c->http))
        post_recv(c);
}

static void on_accept(void *arg, int lfd, int64_t res)
{
    if (res >= 0) {
        int fd = (int)res; /* non-blocking and close-on-exec already */
        net_nodelay(fd);
        struct conn *c = malloc(sizeof(*c));
        if (!c || conn_table_put(&g_conns, fd, c) < 0) {
            free(c);
            close(fd);
        } else {
            *c = (struct conn){.fd = fd};
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
    static const struct evloop_glue glue = {.kind = "ops", .start = start, .finish = finish};
    return evloop_server_main(argc, argv, &glue);
}
