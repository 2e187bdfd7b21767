/* evloop_server: what the evloop servers of the network family (readiness: server_evloop.c;
 * completion operations: server_evloop_ops.c) share and is not connection glue: the loop
 * made with --backend, the listening socket, a stop on SIGTERM/SIGINT, evloop_run on the
 * main thread, and the tear-down. A server file supplies only its struct evloop_glue. */
#ifndef BENCH_NET_EVLOOP_SERVER_H
#define BENCH_NET_EVLOOP_SERVER_H

#include <evloop.h>
#include <stdint.h>

struct net_opts;

struct evloop_glue {
    const char *kind; /* "readiness", "ops" or "offload": printed with the backend */
    /* Starts accepting on lfd (a non-blocking listening socket). 0 or a negative errno. */
    int (*start)(evloop *loop, int lfd);
    /* After evloop_run has returned and the loop is freed (so no loop calls): closes and
     * frees every connection left, and returns the requests and connections served. */
    void (*finish)(uint64_t *requests, uint64_t *conns);
    /* Optional (NULL: none). Right after the command line is parsed, before the loop
     * exists (the offload server starts its workers there). 0 or a negative errno. */
    int (*init)(const struct net_opts *o);
    /* Optional. After evloop_run has returned, before the loop is freed: the offload
     * server joins its workers there, whose posts the loop now refuses. */
    void (*stopped)(void);
};

/* The whole main() of an evloop server. Returns its exit status. */
int evloop_server_main(int argc, char **argv, const struct evloop_glue *glue);

#endif /* BENCH_NET_EVLOOP_SERVER_H */
