/* c_soak_client: the C soak's clients, a process of their own (c_soak runs itself with
 * --client): plain blocking sockets, no event loop. It first opens --idle connections, each
 * answered once, and holds them; then --churners threads churn connections until the
 * duration is over (a few requests then close, some pipelined; a last request with
 * "Connection: close" and the server's EOF; a half-close with shutdown(SHUT_WR), the
 * replies still due, then EOF; a reset with SO_LINGER 0 with replies unread) while one more
 * thread reads slowly through a small receive window (HTTP: 120 pipelined requests for 32 KiB
 * bodies; echo: 6 MiB sent while it is read back slowly); at the end every idle connection
 * is answered once more and closed. Every reply is checked (soak_proto.h). Counters go to
 * stdout as "soak-client k=v ..." lines; exit 1 on any error. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "soak_proto.h"

struct client_opts {
    int http_port, echo_port, cpu;
    double duration, interval;
    unsigned idle, churners;
};

static struct client_opts g_o;
static uint64_t g_end_ns;
static _Atomic uint64_t g_next_id;

static struct {
#define SOAK_FIELD(name) _Atomic uint64_t name;
    SOAK_CLIENT_FIELDS(SOAK_FIELD)
#undef SOAK_FIELD
} g_n;

#define COUNT(name) atomic_fetch_add_explicit(&g_n.name, 1, memory_order_relaxed)

static void client_error(const char *fmt, ...)
{
    if (COUNT(errors) < 20) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "c_soak: client error: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

static void report(bool final)
{
    atomic_store(&g_n.final, final);
    printf("soak-client");
#define SOAK_PRINT(name) printf(" %s=%" PRIu64, #name, (uint64_t)atomic_load(&g_n.name));
    SOAK_CLIENT_FIELDS(SOAK_PRINT)
#undef SOAK_PRINT
    printf("\n");
    fflush(stdout);
}

/* One connection with a read buffer (replies of pipelined requests arrive together). */
struct conn {
    int fd;
    uint64_t id;
    size_t off, len;
    char buf[65536];
};

/* A thread's scratch space. */
struct worker {
    uint64_t rng;
    char exp[512 + SOAK_MAX_SIZE], got[512 + SOAK_MAX_SIZE];
    char out[256 * 1024];
    struct conn c;
};

/* Connects to port; rcvbuf > 0: a small receive buffer, set before connecting (the window
 * stays small). Returns 0 or -errno. */
static int conn_open(struct conn *c, int port, int rcvbuf)
{
    for (int attempt = 0;; attempt++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0)
            return -errno;
        if (rcvbuf > 0)
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
        struct timeval tv = {.tv_sec = SOAK_OP_TIMEOUT_S};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
        setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
        sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0) {
            c->fd = fd;
            c->id = atomic_fetch_add(&g_next_id, 1) + 1;
            c->off = c->len = 0;
            COUNT(conns);
            return 0;
        }
        int err = errno;
        close(fd);
        /* Out of local ports for a moment (TIME_WAIT): not the server's doing. */
        if (err != EADDRNOTAVAIL || attempt == 50)
            return -err;
        COUNT(connect_retries);
        soak_sleep_ns(50000000);
    }
}

static int send_all(struct conn *c, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t k = send(c->fd, p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN ? -ETIMEDOUT : -errno;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* Reads more into the buffer. Returns bytes read, 0 at EOF, or -errno (-ETIMEDOUT). */
static ssize_t fill(struct conn *c)
{
    if (c->off > 0) {
        memmove(c->buf, c->buf + c->off, c->len - c->off);
        c->len -= c->off;
        c->off = 0;
    }
    if (c->len == sizeof(c->buf))
        return -ENOBUFS;
    for (;;) {
        ssize_t k = recv(c->fd, c->buf + c->len, sizeof(c->buf) - c->len, 0);
        if (k >= 0) {
            c->len += (size_t)k;
            return k;
        }
        if (errno != EINTR)
            return errno == EAGAIN ? -ETIMEDOUT : -errno;
    }
}

/* Reads exactly n bytes. Returns 0, -ENODATA at an early EOF, or -errno. */
static int read_exact(struct conn *c, char *dst, size_t n)
{
    while (n > 0) {
        if (c->off == c->len) {
            ssize_t k = fill(c);
            if (k <= 0)
                return k == 0 ? -ENODATA : (int)k;
        }
        size_t take = c->len - c->off < n ? c->len - c->off : n;
        memcpy(dst, c->buf + c->off, take);
        c->off += take;
        dst += take;
        n -= take;
    }
    return 0;
}

static const char *err_name(int r)
{
    return r == -ENODATA ? "EOF before the reply" : strerror(-r);
}

/* Reads the reply to <c->id>/seq and checks it. Returns 0 or -1 (error counted). */
static int read_http(struct worker *w, struct conn *c, uint64_t seq, size_t size,
                     const char *scenario)
{
    char *end;
    while ((end = memmem(c->buf + c->off, c->len - c->off, "\r\n\r\n", 4)) == NULL) {
        ssize_t k = fill(c);
        if (k <= 0) {
            client_error("%s: connection %" PRIu64 ": reply %" PRIu64 " lost: %s", scenario, c->id,
                         seq, err_name(k == 0 ? -ENODATA : (int)k));
            return -1;
        }
    }
    const char *head = c->buf + c->off;
    size_t head_len = (size_t)(end - head);
    static const char ok[] = "HTTP/1.1 200 OK\r\n";
    const char *cl = memmem(head, head_len, "Content-Length: ", 16);
    if (head_len < sizeof(ok) - 1 || memcmp(head, ok, sizeof(ok) - 1) != 0 || !cl) {
        client_error("%s: connection %" PRIu64 ": reply %" PRIu64 ": bad head %.40s", scenario,
                     c->id, seq, head);
        return -1;
    }
    size_t len = strtoul(cl + 16, NULL, 10);
    c->off += head_len + 4;
    char rid[64];
    int rid_len = snprintf(rid, sizeof(rid), "%" PRIu64 "/%" PRIu64, c->id, seq);
    size_t want = soak_body_len((size_t)rid_len, size);
    if (len != want || len > sizeof(w->got)) {
        client_error("%s: reply %s: Content-Length %zu, want %zu", scenario, rid, len, want);
        return -1;
    }
    int r = read_exact(c, w->got, len);
    if (r < 0) {
        client_error("%s: reply %s: body lost: %s", scenario, rid, err_name(r));
        return -1;
    }
    soak_body(w->exp, rid, (size_t)rid_len, size);
    if (memcmp(w->got, w->exp, len) != 0) {
        client_error("%s: reply %s: body corrupted: %.40s", scenario, rid, w->got);
        return -1;
    }
    COUNT(ok);
    COUNT(http);
    return 0;
}

static int expect_eof(struct conn *c, const char *scenario)
{
    ssize_t k = c->off == c->len ? fill(c) : 1;
    if (k != 0) {
        client_error("%s: connection %" PRIu64 ": %s where EOF was due", scenario, c->id,
                     k > 0 ? "more bytes" : strerror((int)-k));
        return -1;
    }
    return 0;
}

static const size_t HTTP_SIZES[] = {0, 10, 200, 1000, 4000, 8000};
static const size_t ECHO_SIZES[] = {1, 16, 100, 1500, 8000};

/* Appends echo message seq of c ("<conn>:<seq>:" and random bytes) at w->out + at. */
static size_t echo_msg(struct worker *w, struct conn *c, uint64_t seq, size_t at, size_t size)
{
    int k = snprintf(w->out + at, 64, "%" PRIu64 ":%" PRIu64 ":", c->id, seq);
    for (size_t i = 0; i < size; i++)
        w->out[at + (size_t)k + i] = (char)soak_rand(&w->rng);
    return (size_t)k + size;
}

/* n exchanges on c, requests 1..n (all sent at once if pipelined; the last with
 * "Connection: close" if close_last; a half-close after the last if shut_wr). HTTP or echo
 * by c's port. Returns 0 or -1 (error counted). */
static int exchange(struct worker *w, struct conn *c, bool http, unsigned n, bool pipelined,
                    bool close_last, bool shut_wr, const char *scenario)
{
    size_t sizes[8], at = 0, start = 0;
    unsigned first = 1;
    for (unsigned seq = 1; seq <= n; seq++) {
        if (http) {
            sizes[seq - 1] = HTTP_SIZES[soak_rand(&w->rng) % 6];
            at +=
                soak_request(w->out + at, 256, c->id, seq, sizes[seq - 1], close_last && seq == n);
        } else {
            at += echo_msg(w, c, seq, at, ECHO_SIZES[soak_rand(&w->rng) % 5]);
        }
        if (pipelined && seq < n)
            continue;
        int r = send_all(c, w->out + start, at - start);
        if (r == 0 && shut_wr && seq == n && shutdown(c->fd, SHUT_WR) < 0)
            r = -errno;
        if (r < 0) {
            client_error("%s: connection %" PRIu64 ": send: %s", scenario, c->id, strerror(-r));
            return -1;
        }
        for (unsigned s = first; s <= seq; s++) {
            if (http && read_http(w, c, s, sizes[s - 1], scenario) < 0)
                return -1;
        }
        if (!http) {
            r = read_exact(c, w->got, at - start);
            if (r < 0) {
                client_error("%s: connection %" PRIu64 ": echo lost: %s", scenario, c->id,
                             err_name(r));
                return -1;
            }
            if (memcmp(w->got, w->out + start, at - start) != 0) {
                client_error("%s: connection %" PRIu64 ": echo corrupted", scenario, c->id);
                return -1;
            }
            for (unsigned s = first; s <= seq; s++) {
                COUNT(ok);
                COUNT(echo);
            }
        }
        first = seq + 1;
        start = at = 0;
    }
    return 0;
}

static void set_linger0(int fd)
{
    struct linger l = {.l_onoff = 1, .l_linger = 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
}

/* 120 pipelined requests for 32 KiB bodies through an 8 KiB receive window, read slowly. */
static int slow_http(struct worker *w, struct conn *c)
{
    size_t at = 0;
    for (unsigned seq = 1; seq <= 120; seq++)
        at += soak_request(w->out + at, 256, c->id, seq, 32768, false);
    int r = send_all(c, w->out, at);
    if (r < 0) {
        client_error("slow_http: send: %s", strerror(-r));
        return -1;
    }
    for (unsigned seq = 1; seq <= 120; seq++) {
        if (read_http(w, c, seq, 32768, "slow_http") < 0)
            return -1;
        if (seq % 3 == 0)
            soak_sleep_ns(4000000);
    }
    return 0;
}

/* 6 MiB sent (more than the server's send buffer takes: net.ipv4.tcp_wmem's largest, 4 MiB
 * by default) through an 8 KiB receive window, nothing read until all is sent or the socket
 * has not been writable for 1 s and 0.5 s more (time for the server, however slow, to fill
 * its buffers), then the echo read back slowly. */
static int slow_echo(struct worker *w, struct conn *c)
{
    size_t total = 6u << 20, sent = 0, got = 0;
    char *data = malloc(total);
    if (!data)
        abort();
    for (size_t i = 0; i < total; i++)
        data[i] = (char)soak_rand(&w->rng);
    int rc = -1;
    fcntl(c->fd, F_SETFL, fcntl(c->fd, F_GETFL) | O_NONBLOCK);
    struct pollfd out = {.fd = c->fd, .events = POLLOUT};
    while (sent < total && poll(&out, 1, 1000) > 0) {
        size_t n = total - sent < 32768 ? total - sent : 32768;
        ssize_t k = send(c->fd, data + sent, n, MSG_NOSIGNAL);
        if (k > 0)
            sent += (size_t)k;
        else if (k < 0 && errno != EAGAIN && errno != EINTR)
            break; /* the loop below reports it */
    }
    soak_sleep_ns(500000000);
    while (got < total) {
        struct pollfd p = {.fd = c->fd, .events = POLLIN | (sent < total ? POLLOUT : 0)};
        int r = poll(&p, 1, SOAK_OP_TIMEOUT_S * 1000);
        if (r == 0) {
            client_error("slow_echo: connection %" PRIu64 ": nothing for %d s (%zu of %zu back)",
                         c->id, SOAK_OP_TIMEOUT_S, got, total);
            goto out;
        }
        if (r < 0)
            continue;
        if ((p.revents & POLLOUT) && sent < total) {
            size_t n = total - sent < 32768 ? total - sent : 32768;
            ssize_t k = send(c->fd, data + sent, n, MSG_NOSIGNAL);
            if (k > 0)
                sent += (size_t)k;
            else if (k < 0 && errno != EAGAIN && errno != EINTR) {
                client_error("slow_echo: send: %s", strerror(errno));
                goto out;
            }
        }
        if (p.revents & (POLLIN | POLLHUP | POLLERR)) {
            ssize_t k = recv(c->fd, w->got, 8192, 0);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR)) {
                client_error("slow_echo: connection %" PRIu64 ": %s after %zu of %zu bytes", c->id,
                             k == 0 ? "EOF" : strerror(errno), got, total);
                goto out;
            }
            if (k > 0) {
                if ((size_t)k > sent - got || memcmp(w->got, data + got, (size_t)k) != 0) {
                    client_error("slow_echo: connection %" PRIu64 ": echo corrupted at %zu", c->id,
                                 got);
                    goto out;
                }
                if ((got + (size_t)k) / 32768 != got / 32768) {
                    COUNT(ok);
                    COUNT(echo);
                    soak_sleep_ns(2000000);
                }
                got += (size_t)k;
            }
        }
    }
    rc = 0;
out:
    free(data);
    return rc;
}

/* One connection: what the scenario says, then close (or reset). */
static void scenario(struct worker *w, const char *name)
{
    bool http = soak_rand(&w->rng) % 2;
    if (strcmp(name, "server_close") == 0 || strcmp(name, "slow_http") == 0)
        http = true;
    if (strcmp(name, "slow_echo") == 0)
        http = false;
    struct conn *c = &w->c;
    int r = conn_open(c, http ? g_o.http_port : g_o.echo_port,
                      strncmp(name, "slow", 4) == 0 ? 8192 : 0);
    if (r < 0) {
        client_error("%s: connect: %s", name, strerror(-r));
        return;
    }
    unsigned n = 1 + (unsigned)(soak_rand(&w->rng) % 6);
    bool pipelined = soak_rand(&w->rng) % 10 < 3;
    if (strcmp(name, "plain") == 0) {
        exchange(w, c, http, n, pipelined, false, false, name);
    } else if (strcmp(name, "server_close") == 0) {
        if (exchange(w, c, true, n, pipelined, true, false, name) == 0 && expect_eof(c, name) == 0)
            COUNT(server_closes);
    } else if (strcmp(name, "halfclose") == 0) {
        if (exchange(w, c, http, n, true, false, true, name) == 0 && expect_eof(c, name) == 0)
            COUNT(halfcloses);
    } else if (strcmp(name, "reset") == 0) {
        /* Some replies read, then more requests sent and the connection reset unread. */
        unsigned read = (unsigned)(soak_rand(&w->rng) % (n + 1));
        if (read == 0 || exchange(w, c, http, read, true, false, false, name) == 0) {
            size_t at = 0;
            for (unsigned seq = read + 1; seq <= n; seq++)
                at += http ? soak_request(w->out + at, 256, c->id, seq, 4000, false)
                           : echo_msg(w, c, seq, at, 4000);
            send_all(c, w->out, at);
            if (soak_rand(&w->rng) % 2)
                soak_sleep_ns(1000000);
            set_linger0(c->fd);
            COUNT(resets);
        }
    } else if (strcmp(name, "slow_http") == 0) {
        if (slow_http(w, c) == 0)
            COUNT(slow);
    } else if (strcmp(name, "slow_echo") == 0) {
        if (slow_echo(w, c) == 0)
            COUNT(slow);
    }
    close(c->fd);
}

static struct worker *new_worker(uint64_t seed)
{
    struct worker *w = malloc(sizeof(*w));
    if (!w)
        abort();
    w->rng = 0x9E3779B97F4A7C15ull * (seed + 1);
    return w;
}

static void *churner(void *arg)
{
    struct worker *w = new_worker((uintptr_t)arg);
    static const char *const names[] = {"plain", "server_close", "halfclose", "reset"};
    static const unsigned weights[] = {60, 10, 15, 15}; /* of 100 */
    while (soak_now_ns() < g_end_ns) {
        unsigned x = (unsigned)(soak_rand(&w->rng) % 100), i = 0;
        while (x >= weights[i]) {
            x -= weights[i];
            i++;
        }
        scenario(w, names[i]);
    }
    free(w);
    return NULL;
}

static void *slow_reader(void *arg)
{
    struct worker *w = new_worker(1000);
    for (unsigned k = 0; soak_now_ns() < g_end_ns; k++) {
        scenario(w, k % 2 ? "slow_echo" : "slow_http");
        soak_sleep_ns(500000000);
    }
    free(w);
    return NULL;
}

struct idle {
    int fd;
    uint64_t id;
};

/* One exchange on an idle connection (HTTP for odd i, echo for even). */
static int idle_exchange(struct worker *w, struct idle *in, unsigned i, const char *when)
{
    struct conn *c = &w->c;
    c->fd = in->fd;
    c->id = in->id;
    c->off = c->len = 0;
    return exchange(w, c, i % 2, 1, false, false, false, when);
}

int soak_client_main(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i += 2) {
        const char *a = argv[i], *v = argv[i + 1];
        if (strcmp(a, "--http-port") == 0)
            g_o.http_port = atoi(v);
        else if (strcmp(a, "--echo-port") == 0)
            g_o.echo_port = atoi(v);
        else if (strcmp(a, "--duration") == 0)
            g_o.duration = atof(v);
        else if (strcmp(a, "--interval") == 0)
            g_o.interval = atof(v);
        else if (strcmp(a, "--idle") == 0)
            g_o.idle = (unsigned)atoi(v);
        else if (strcmp(a, "--churners") == 0)
            g_o.churners = (unsigned)atoi(v);
        else if (strcmp(a, "--cpu") == 0)
            g_o.cpu = atoi(v);
    }
    if (g_o.cpu >= 0) {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(g_o.cpu, &set);
        sched_setaffinity(0, sizeof(set), &set);
    }
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    uint64_t start = soak_now_ns();
    g_end_ns = start + (uint64_t)(g_o.duration * 1e9);

    /* The idle connections, each answered once. */
    struct worker *w = new_worker(2000);
    struct idle *idle = calloc(g_o.idle + 1, sizeof(*idle));
    unsigned held = 0;
    for (unsigned i = 0; i < g_o.idle; i++) {
        struct conn *c = &w->c;
        int r = conn_open(c, i % 2 ? g_o.http_port : g_o.echo_port, 0);
        if (r < 0) {
            client_error("idle connection %u: connect: %s", i, strerror(-r));
            break;
        }
        idle[held] = (struct idle){.fd = c->fd, .id = c->id};
        if (idle_exchange(w, &idle[held], i, "idle") < 0) {
            close(c->fd);
            break;
        }
        held++;
        atomic_store(&g_n.idle, held);
        atomic_store(&g_n.idle_peak, held);
    }

    pthread_t threads[65];
    unsigned n = g_o.churners < 64 ? g_o.churners : 64;
    for (unsigned i = 0; i < n; i++)
        pthread_create(&threads[i], NULL, churner, (void *)(uintptr_t)i);
    pthread_create(&threads[n], NULL, slow_reader, NULL);
    uint64_t half = (uint64_t)(g_o.interval * 5e8);
    for (uint64_t next = start + half; soak_now_ns() < g_end_ns; next += half) {
        uint64_t now = soak_now_ns();
        if (next > now)
            soak_sleep_ns(next - now < g_end_ns - now ? next - now : g_end_ns - now);
        report(false);
    }
    for (unsigned i = 0; i <= n; i++)
        pthread_join(threads[i], NULL);

    /* Every idle connection answered once more, then closed. */
    for (unsigned i = 0; i < held; i++) {
        idle_exchange(w, &idle[i], i, "idle at the end");
        close(idle[i].fd);
        atomic_fetch_sub(&g_n.idle, 1);
    }
    free(idle);
    free(w);
    report(true);
    return atomic_load(&g_n.errors) ? 1 : 0;
}
