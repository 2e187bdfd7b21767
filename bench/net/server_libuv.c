/* server_libuv: the network family's HTTP/1.1 server on libuv streams, as libuv users write
 * one: uv_tcp_bind / uv_listen / uv_accept, uv_read_start into the connection's buffer, and
 * uv_write of the queued responses (one write in flight per connection; responses that
 * arrive meanwhile wait in http_conn's output and go out with the next). Around the same
 * http_conn as the other servers. SIGTERM/SIGINT: uv_signal, uv_stop. */
#include <arpa/inet.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <uv.h>

#include "http_conn.h"
#include "net_util.h"

struct conn {
    uv_tcp_t tcp; /* first: handle callbacks get &tcp */
    uv_write_t req;
    bool reading;
    struct http_conn http;
};

static uint64_t g_requests, g_accepted;

static void on_closed(uv_handle_t *h)
{
    struct conn *c = (struct conn *)h;
    g_requests += c->http.requests;
    http_conn_free(&c->http);
    free(c);
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
    if (!c->reading && http_conn_wants_input(&c->http)) {
        c->reading = uv_read_start((uv_stream_t *)&c->tcp, on_alloc, on_read) == 0;
        if (!c->reading)
            close_conn(c);
    }
}

static void on_connection(uv_stream_t *server, int status)
{
    if (status < 0)
        return;
    struct conn *c = malloc(sizeof(*c));
    if (!c)
        return;
    http_conn_init(&c->http);
    c->req.data = c;
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

/* At exit: connections are freed by on_closed, the listener and the signals are static. */
static void close_any(uv_handle_t *h, void *arg)
{
    if (uv_is_closing(h))
        return;
    uv_close(h, h->type == UV_TCP && h != arg ? on_closed : NULL);
}

static int fail(const char *what, int err)
{
    fprintf(stderr, "server_libuv: %s: %s\n", what, uv_strerror(err));
    return 1;
}

int main(int argc, char **argv)
{
    struct net_opts o;
    if (net_parse_args(argc, argv, argv[0], &o) < 0)
        return 2;
    uv_loop_t loop;
    int r = uv_loop_init(&loop);
    if (r < 0)
        return fail("uv_loop_init", r);
    static uv_tcp_t server;
    struct sockaddr_in addr;
    uv_ip4_addr("127.0.0.1", o.port, &addr);
    uv_tcp_init(&loop, &server);
    r = uv_tcp_bind(&server, (const struct sockaddr *)&addr, 0);
    if (r == 0)
        r = uv_listen((uv_stream_t *)&server, NET_BACKLOG, on_connection);
    if (r < 0)
        return fail("listen", r);
    static uv_signal_t sigterm, sigint;
    uv_signal_init(&loop, &sigterm);
    uv_signal_init(&loop, &sigint);
    uv_signal_start(&sigterm, on_signal, SIGTERM);
    uv_signal_start(&sigint, on_signal, SIGINT);

    int namelen = sizeof(addr);
    uv_tcp_getsockname(&server, (struct sockaddr *)&addr, &namelen);
    net_ready("libuv uv_tcp", ntohs(addr.sin_port));
    uv_run(&loop, UV_RUN_DEFAULT);

    uv_walk(&loop, close_any, &server);
    uv_run(&loop, UV_RUN_DEFAULT);
    r = uv_loop_close(&loop);
    net_report("libuv uv_tcp", g_requests, g_accepted);
    return r < 0 ? fail("uv_loop_close", r) : 0;
}
