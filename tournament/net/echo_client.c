/* echo_client: the load generator of the echo family (run_net.py --families echo). Opens
 * --conns connections to an echo server (a server of tournament/net started with --echo), and on
 * each sends a --size byte message, waits until all of it has come back, and sends the next,
 * for --duration seconds; one thread, epoll. Prints one line:
 *   messages N per_s X p50_us Y p99_us Z
 * with the round-trip percentiles over every message. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "net_util.h"

struct client {
    int fd;
    size_t sent, received; /* bytes of the message now under way */
    uint64_t started_ns;   /* when its first byte went out */
};

struct lat_log {
    uint32_t *ns; /* one round trip per message, in ns (capped at 4 s) */
    size_t n, cap;
};

static size_t g_size = 1;
static char *g_msg, *g_sink;

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int lat_add(struct lat_log *l, uint64_t ns)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1 << 16;
        uint32_t *p = realloc(l->ns, cap * sizeof(*p));
        if (!p)
            return -ENOMEM;
        l->ns = p;
        l->cap = cap;
    }
    l->ns[l->n++] = ns > UINT32_MAX ? UINT32_MAX : (uint32_t)ns;
    return 0;
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

static double percentile_us(const struct lat_log *l, double p)
{
    if (l->n == 0)
        return 0;
    size_t i = (size_t)(p * (double)(l->n - 1) + 0.5);
    return l->ns[i] / 1000.0;
}

static int connect_one(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -errno;
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
        int r = -errno;
        close(fd);
        return r;
    }
    net_nodelay(fd);
    return fd;
}

/* Writes what is left of the message; returns 0 or -errno. EAGAIN leaves the rest for the
 * next EPOLLOUT (a 4 KiB message fits a socket buffer, so this is rare). */
static int push(struct client *c)
{
    while (c->sent < g_size) {
        ssize_t n = send(c->fd, g_msg + c->sent, g_size - c->sent, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        c->sent += (size_t)n;
    }
    return 0;
}

static int start_message(struct client *c)
{
    c->sent = c->received = 0;
    c->started_ns = now_ns();
    return push(c);
}

/* Reads what has come back; a whole message logs its round trip and starts the next. */
static int pull(struct client *c, struct lat_log *log)
{
    for (;;) {
        ssize_t n = recv(c->fd, g_sink, g_size - c->received, MSG_DONTWAIT);
        if (n == 0)
            return -ECONNRESET;
        if (n < 0)
            return errno == EAGAIN ? 0 : -errno;
        c->received += (size_t)n;
        if (c->received == g_size) {
            if (lat_add(log, now_ns() - c->started_ns) < 0)
                return -ENOMEM;
            return start_message(c);
        }
    }
}

static int run(struct client *cl, int nconns, double seconds, struct lat_log *log)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (ep < 0)
        return -errno;
    for (int i = 0; i < nconns; i++) {
        struct epoll_event ev = {.events = EPOLLIN | EPOLLOUT | EPOLLET, .data.ptr = &cl[i]};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, cl[i].fd, &ev) < 0 || start_message(&cl[i]) < 0) {
            close(ep);
            return -errno;
        }
    }
    uint64_t end = now_ns() + (uint64_t)(seconds * 1e9);
    struct epoll_event evs[256];
    int r = 0;
    while (r == 0 && now_ns() < end) {
        int n = epoll_wait(ep, evs, 256, 100);
        for (int i = 0; i < n && r == 0; i++) {
            struct client *c = evs[i].data.ptr;
            if (evs[i].events & EPOLLOUT)
                r = push(c);
            if (r == 0 && (evs[i].events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
                r = pull(c, log);
        }
    }
    close(ep);
    return r;
}

static int parse(int argc, char **argv, int *port, int *conns, double *seconds)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "--port") == 0)
            *port = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--conns") == 0)
            *conns = atoi(argv[i + 1]);
        else if (strcmp(argv[i], "--size") == 0)
            g_size = (size_t)atol(argv[i + 1]);
        else if (strcmp(argv[i], "--duration") == 0)
            *seconds = atof(argv[i + 1]);
        else
            return -1;
    }
    return argc % 2 == 1 && *port > 0 && *conns > 0 && g_size > 0 && *seconds > 0 ? 0 : -1;
}

int main(int argc, char **argv)
{
    int port = 8080, nconns = 1;
    double seconds = 1;
    if (parse(argc, argv, &port, &nconns, &seconds) < 0) {
        fprintf(stderr, "usage: %s --port N --conns N --size BYTES --duration S\n", argv[0]);
        return 2;
    }
    g_msg = malloc(g_size);
    g_sink = malloc(g_size);
    struct client *cl = calloc((size_t)nconns, sizeof(*cl));
    if (!g_msg || !g_sink || !cl)
        return 1;
    memset(g_msg, 'x', g_size);
    for (int i = 0; i < nconns; i++) {
        cl[i].fd = connect_one(port);
        if (cl[i].fd < 0) {
            fprintf(stderr, "echo_client: connect: %s\n", strerror(-cl[i].fd));
            return 1;
        }
    }
    struct lat_log log = {0};
    uint64_t t0 = now_ns();
    int r = run(cl, nconns, seconds, &log);
    double elapsed = (double)(now_ns() - t0) / 1e9;
    for (int i = 0; i < nconns; i++)
        close(cl[i].fd);
    if (r < 0) {
        fprintf(stderr, "echo_client: %s\n", strerror(-r));
        return 1;
    }
    if (log.n == 0) { /* not one echo came back in the whole run: a failed run */
        fprintf(stderr, "echo_client: no echo came back in %.1f s\n", elapsed);
        return 1;
    }
    qsort(log.ns, log.n, sizeof(*log.ns), cmp_u32);
    printf("messages %zu per_s %.1f p50_us %.2f p99_us %.2f\n", log.n, (double)log.n / elapsed,
           percentile_us(&log, 0.50), percentile_us(&log, 0.99));
    free(log.ns);
    free(cl);
    free(g_msg);
    free(g_sink);
    return 0;
}
