/* http_conn: the one connection logic every server of the network family shares, so the
 * servers differ only in their loop. A tiny HTTP/1.1 keep-alive "hello" server's state:
 * it counts requests (each ends at the first "\r\n\r\n", pipelining allowed), queues one
 * canned response per request, and holds the output. In echo mode (the echo family) it
 * queues the input itself instead. No loop calls in it; the readiness helpers at the end
 * make plain read(2)/write(2) calls on a non-blocking socket. */
#ifndef BENCH_NET_HTTP_CONN_H
#define BENCH_NET_HTTP_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Bytes one read asks for, in every server (a request of wrk is about 40 bytes). */
#define HTTP_READ_SIZE 4096
/* Above this much unsent output a server stops reading the connection (backpressure). */
#define HTTP_OUT_HIGH 65536

struct http_buf {
    char *data;
    size_t off, len, cap; /* unsent bytes are data[off..len) */
};

struct http_conn {
    bool echo;             /* echo mode: the output is the input */
    bool defer;            /* offload: requests are counted into `waiting`, and answered
                              later with http_conn_answer() (set it after http_conn_init) */
    unsigned match;        /* bytes of "\r\n\r\n" matched at the end of the input so far */
    uint64_t requests;     /* complete requests seen (echo mode: bytes echoed) */
    uint64_t waiting;      /* defer: complete requests not answered yet */
    struct http_buf out;   /* responses not yet handed to the kernel */
    struct http_buf wire;  /* responses handed to an asynchronous send still in flight */
    char in[HTTP_READ_SIZE]; /* a read buffer for servers whose reads complete later */
};

/* Every connection initialised from now on echoes instead (process-wide; set once at start
 * by a server's --echo). */
void http_conn_use_echo(void);

void http_conn_init(struct http_conn *c);
void http_conn_free(struct http_conn *c);

/* Feeds n bytes of input: one response is queued in c->out per request they complete (echo
 * mode: the bytes themselves; defer: nothing is queued, c->waiting counts the requests).
 * Returns 0 or -ENOMEM (the connection should then be closed). */
int http_conn_feed(struct http_conn *c, const char *buf, size_t n);

/* Defer: queues the responses of n of the waiting requests (n <= c->waiting), once their
 * work is done. Returns 0 or -ENOMEM. */
int http_conn_answer(struct http_conn *c, uint64_t n);

/* Unsent bytes in c->out. */
static inline size_t http_conn_pending(const struct http_conn *c)
{
    return c->out.len - c->out.off;
}

/* Whether the server should read more: unsent output is below HTTP_OUT_HIGH. */
static inline bool http_conn_wants_input(const struct http_conn *c)
{
    return http_conn_pending(c) + (c->wire.len - c->wire.off) < HTTP_OUT_HIGH;
}

/* For asynchronous sends (completion operations, uv_write), whose buffer must stay put until
 * the send completes while new responses are queued: when no send is in flight and output
 * is pending, moves it to c->wire, sets *p and *n to it and returns true. */
bool http_conn_start_send(struct http_conn *c, const char **p, size_t *n);

/* The send started by http_conn_start_send() has completed (all of it). */
void http_conn_send_done(struct http_conn *c);

/* Readiness: reads fd until EAGAIN (or until output passes HTTP_OUT_HIGH) and feeds what it
 * read. Returns 1 while the connection stays open, 0 when the peer closed it, or a negative
 * errno (a read error, -ENOMEM). */
int http_conn_read(struct http_conn *c, int fd);

/* Readiness: writes c->out to fd until it is empty or the socket is full. Returns the bytes
 * still unsent (0: all written; watch for writability otherwise) or a negative errno. */
long http_conn_flush(struct http_conn *c, int fd);

#endif /* BENCH_NET_HTTP_CONN_H */
