/* net_util: command line, listening socket, accept and the "ready" line shared by the servers
 * of the network family (see net_util.h). */
#include "net_util.h"

#include "http_conn.h"

#include <arpa/inet.h>
#include <errno.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Parses a decimal number within [lo, hi] into *out. Returns 0 or -1. */
static int parse_unsigned(const char *s, long lo, long hi, unsigned *out)
{
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || *end || v < lo || v > hi)
        return -1;
    *out = (unsigned)v;
    return 0;
}

int net_parse_args(int argc, char **argv, const char *prog, struct net_opts *o)
{
    signal(SIGPIPE, SIG_IGN);
    o->port = 8080;
    o->backend = NULL;
    o->workers = 2;
    o->work_us = 2;
    o->loop_cpus = NULL;
    o->worker_cpus = NULL;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
            char *end;
            long p = strtol(argv[++i], &end, 10);
            if (*end || p < 0 || p > 65535)
                goto usage;
            o->port = (int)p;
        } else if (strcmp(argv[i], "--backend") == 0 && i + 1 < argc) {
            o->backend = argv[++i];
        } else if (strcmp(argv[i], "--echo") == 0) {
            http_conn_use_echo();
        } else if (strcmp(argv[i], "--workers") == 0 && i + 1 < argc) {
            if (parse_unsigned(argv[++i], 1, 256, &o->workers) < 0)
                goto usage;
        } else if (strcmp(argv[i], "--work-us") == 0 && i + 1 < argc) {
            if (parse_unsigned(argv[++i], 0, 1000000, &o->work_us) < 0)
                goto usage;
        } else if (strcmp(argv[i], "--loop-cpu") == 0 && i + 1 < argc) {
            o->loop_cpus = argv[++i];
        } else if (strcmp(argv[i], "--worker-cpus") == 0 && i + 1 < argc) {
            o->worker_cpus = argv[++i];
        } else {
            goto usage;
        }
    }
    return 0;
usage:
    fprintf(stderr,
            "usage: %s [--port N] [--backend auto|epoll|io_uring|...] [--echo]\n"
            "       offload servers: [--workers N] [--work-us US] [--loop-cpu LIST]"
            " [--worker-cpus LIST]\n",
            prog);
    return -1;
}

int net_listen(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, NET_BACKLOG) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    return fd;
}

int net_local_port(int fd)
{
    struct sockaddr_in sa;
    socklen_t len = sizeof(sa);
    if (getsockname(fd, (struct sockaddr *)&sa, &len) < 0)
        return -errno;
    return ntohs(sa.sin_port);
}

void net_nodelay(int fd)
{
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int net_accept(int lfd)
{
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            net_nodelay(fd);
            return fd;
        }
        /* A connection reset while queued is not the listener's failure: try the next. */
        if (errno != EINTR && errno != ECONNABORTED)
            return errno == EWOULDBLOCK ? -EAGAIN : -errno;
    }
}

void net_ready(const char *what, int port)
{
    printf("ready %s 127.0.0.1:%d\n", what, port);
    fflush(stdout);
}

void net_report(const char *what, uint64_t requests, uint64_t conns)
{
    fprintf(stderr, "%s: %" PRIu64 " requests on %" PRIu64 " connections\n", what, requests,
            conns);
}
