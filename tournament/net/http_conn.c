/* http_conn: the request counter, the canned response, the echo mode and the output buffers
 * every server of the network family shares (see http_conn.h). Requests are not parsed: a
 * request is whatever ends at "\r\n\r\n" (no bodies), which is what wrk sends. */
#include "http_conn.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static const char RESPONSE[] = "HTTP/1.1 200 OK\r\n"
                               "Content-Length: 5\r\n"
                               "Content-Type: text/plain\r\n"
                               "\r\n"
                               "hello";
#define RESPONSE_LEN (sizeof(RESPONSE) - 1)

static bool g_echo;

void http_conn_use_echo(void)
{
    g_echo = true;
}

void http_conn_init(struct http_conn *c)
{
    c->echo = g_echo;
    c->defer = false;
    c->match = 0;
    c->requests = 0;
    c->waiting = 0;
    c->out = (struct http_buf){0};
    c->wire = (struct http_buf){0};
}

void http_conn_free(struct http_conn *c)
{
    free(c->out.data);
    free(c->wire.data);
    c->out = (struct http_buf){0};
    c->wire = (struct http_buf){0};
}

/* Makes room for extra more bytes at the end of b, dropping what was already sent. */
static int buf_reserve(struct http_buf *b, size_t extra)
{
    if (b->off == b->len)
        b->off = b->len = 0;
    if (b->len + extra <= b->cap)
        return 0;
    if (b->off > 0) {
        memmove(b->data, b->data + b->off, b->len - b->off);
        b->len -= b->off;
        b->off = 0;
        if (b->len + extra <= b->cap)
            return 0;
    }
    size_t cap = b->cap ? b->cap : 1024;
    while (cap < b->len + extra)
        cap *= 2;
    char *data = realloc(b->data, cap);
    if (!data)
        return -ENOMEM;
    b->data = data;
    b->cap = cap;
    return 0;
}

/* Counts the requests buf completes: a match of "\r\n\r\n" carried across calls. On a
 * mismatch the only prefix of the pattern that can still be under way is a lone '\r'. */
static size_t count_requests(struct http_conn *c, const char *buf, size_t n)
{
    static const char END[4] = {'\r', '\n', '\r', '\n'};
    size_t found = 0;
    unsigned m = c->match;
    for (size_t i = 0; i < n; i++) {
        if (buf[i] == END[m]) {
            if (++m == 4) {
                found++;
                m = 0;
            }
        } else {
            m = buf[i] == '\r';
        }
    }
    c->match = m;
    return found;
}

static int echo(struct http_conn *c, const char *buf, size_t n)
{
    if (buf_reserve(&c->out, n) < 0)
        return -ENOMEM;
    memcpy(c->out.data + c->out.len, buf, n);
    c->out.len += n;
    c->requests += n;
    return 0;
}

/* Queues n canned responses. */
static int respond(struct http_conn *c, uint64_t n)
{
    if (buf_reserve(&c->out, n * RESPONSE_LEN) < 0)
        return -ENOMEM;
    for (uint64_t i = 0; i < n; i++) {
        memcpy(c->out.data + c->out.len, RESPONSE, RESPONSE_LEN);
        c->out.len += RESPONSE_LEN;
    }
    return 0;
}

int http_conn_feed(struct http_conn *c, const char *buf, size_t n)
{
    if (c->echo)
        return echo(c, buf, n);
    size_t found = count_requests(c, buf, n);
    if (found == 0)
        return 0;
    if (c->defer) {
        c->waiting += found;
    } else if (respond(c, found) < 0) {
        return -ENOMEM;
    }
    c->requests += found;
    return 0;
}

int http_conn_answer(struct http_conn *c, uint64_t n)
{
    if (respond(c, n) < 0)
        return -ENOMEM;
    c->waiting -= n;
    return 0;
}

bool http_conn_start_send(struct http_conn *c, const char **p, size_t *n)
{
    if (c->wire.off != c->wire.len || http_conn_pending(c) == 0)
        return false;
    /* Swap the buffers: the pending output goes on the wire, the spent wire buffer
     * collects the next responses. */
    struct http_buf spent = c->wire;
    c->wire = c->out;
    c->out = spent;
    c->out.off = c->out.len = 0;
    *p = c->wire.data + c->wire.off;
    *n = c->wire.len - c->wire.off;
    return true;
}

void http_conn_send_done(struct http_conn *c)
{
    c->wire.off = c->wire.len = 0;
}

int http_conn_read(struct http_conn *c, int fd)
{
    while (http_conn_wants_input(c)) {
        ssize_t n = read(fd, c->in, sizeof(c->in));
        if (n > 0) {
            if (http_conn_feed(c, c->in, (size_t)n) < 0)
                return -ENOMEM;
            if ((size_t)n < sizeof(c->in))
                return 1; /* a short read: the socket is drained (saves the EAGAIN read) */
            continue;
        }
        if (n == 0)
            return 0;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 1;
        if (errno != EINTR)
            return -errno;
    }
    return 1;
}

long http_conn_flush(struct http_conn *c, int fd)
{
    struct http_buf *b = &c->out;
    while (b->off < b->len) {
        ssize_t n = write(fd, b->data + b->off, b->len - b->off);
        if (n >= 0) {
            b->off += (size_t)n;
            continue;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            break;
        if (errno != EINTR)
            return -errno;
    }
    if (b->off == b->len)
        b->off = b->len = 0;
    return (long)(b->len - b->off);
}
