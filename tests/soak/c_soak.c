/* c_soak: the soak of evloop's C loop (tests/soak/README.md). This process is the server:
 * on one loop, an HTTP/1.1 keep-alive server on the completion operations (evloop_accept,
 * evloop_recv, evloop_send) and an echo server on fd readiness (evloop_io_add/_modify/
 * _remove, plain read/write: partial writes and writability waits), both over tournament/net's
 * connection buffers (http_conn.c) and socket helpers (net_util.c); two threads hand the loop
 * tasks (evloop_submit, evloop_submit_batch) and timers (evloop_timer_start, a fifth of them
 * cancelled from the loop before they are due), one sends SIGUSR1 every 2-5 ms and waits
 * until the loop's evloop_signal_start callback has counted it. The clients are this program
 * again (--client, c_soak_client.c), a child process pinned to another CPU. The controller
 * (main thread) prints a row every interval and the verdict: see usage() for what fails. */
#include <errno.h>
#include <evloop.h>
#include <fcntl.h>
#include <inttypes.h>
#include <malloc.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define SOAK_LSAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SOAK_LSAN 1
#endif
#endif
#ifdef SOAK_LSAN
#include <sanitizer/lsan_interface.h>
#endif

#include "conn_table.h"
#include "http_conn.h"
#include "net_util.h"
#include "soak_proto.h"

extern char **environ;

struct opts {
    double duration, interval, warmup; /* s of client load; s between rows; s before RSS is
                                          judged */
    unsigned idle, churners;           /* idle connections held; client threads churning */
    const char *backend;               /* NULL: auto */
    double rss_limit, rss_floor, rss_frag_floor; /* %/h, MiB, MiB: see rss_verdict() */
    int server_cpu, client_cpu;        /* -1: not pinned */
};

/* The loop thread's counters; the controller reads them through snapshot(). */
struct counters {
    uint64_t accepted, open, http_requests, echo_bytes, resets, server_closes;
    uint64_t recv_paused, recv_resumed, partial_writes;
    uint64_t signals, tasks_run, order_errors, heartbeats;
    uint64_t timers_fired, timers_cancelled, timers_early, timer_args_freed, timer_late_max_ns;
    uint64_t errors;
};

static evloop *g_loop;
static struct counters g_c;
static struct conn_table g_hconns, g_econns;

/* Written by the worker threads (relaxed: counts, read once they are joined or by the
 * signal thread's own wait). */
static atomic_bool g_stop_workers;
static _Atomic uint64_t g_tasks_sent, g_timers_started, g_sig_sent, g_sig_lost, g_worker_errors;
static _Atomic uint64_t g_signals_seen; /* release: the loop's count, for the signal thread */

static void loop_error(const char *fmt, ...)
{
    if (g_c.errors++ < 20) {
        va_list ap;
        va_start(ap, fmt);
        fprintf(stderr, "c_soak: server error: ");
        vfprintf(stderr, fmt, ap);
        fputc('\n', stderr);
        va_end(ap);
    }
}

static bool is_reset(int64_t err)
{
    return err == -ECONNRESET || err == -EPIPE;
}

/* ---- the HTTP server: completion operations ----
 * As tournament/net/server_evloop_ops.c: one recv posted while unsent output is under
 * HTTP_OUT_HIGH (else the connection's reading pauses until a send completes), one send in
 * flight; the connection is freed once no operation of it is pending. Replies are queued
 * with http_conn_feed on a connection in echo mode (which queues the bytes it is given). On
 * the peer's EOF (a half-close) and after a "Connection: close" request, the replies still
 * due are sent before the fd is closed. */

#define HEAD_MAX 8192

struct hconn {
    int fd;
    unsigned pending; /* operations posted whose callback has not run yet */
    bool reading, closing, peer_eof, close_after, paused;
    size_t head_len;
    struct http_conn http;
    char head[HEAD_MAX]; /* the requests read and not yet answered */
};

static char g_reply[512 + SOAK_MAX_SIZE];

static void free_hconn(void *arg)
{
    struct hconn *c = arg;
    close(c->fd);
    http_conn_free(&c->http);
    free(c);
    g_c.open--;
}

static void h_release(struct hconn *c)
{
    if (c->pending == 0) {
        conn_table_drop(&g_hconns, c->fd);
        free_hconn(c);
    }
}

static void h_shut(struct hconn *c)
{
    if (!c->closing) {
        c->closing = true;
        if (c->pending > 0) {
            c->pending++; /* a guard, should a cancelled callback run inside the cancel */
            evloop_op_cancel(g_loop, c->fd);
            c->pending--;
        }
    }
    h_release(c);
}

/* The value of header `name` (with its colon) in the head's lines, or NULL. */
static const char *header(const char *h, size_t n, const char *name, size_t *len)
{
    size_t name_len = strlen(name);
    const char *end = h + n;
    for (const char *line = h; line < end;) {
        const char *eol = memmem(line, (size_t)(end - line), "\r\n", 2);
        if (!eol)
            eol = end;
        if ((size_t)(eol - line) >= name_len && strncasecmp(line, name, name_len) == 0) {
            const char *v = line + name_len;
            while (v < eol && *v == ' ')
                v++;
            *len = (size_t)(eol - v);
            return v;
        }
        line = eol + 2;
    }
    return NULL;
}

/* Queues the reply to the request head h (n bytes, without its final CRLFCRLF). */
static int h_answer(struct hconn *c, const char *h, size_t n)
{
    const char *rid = h + 7, *sp = n > 7 ? memchr(rid, ' ', n - 7) : NULL;
    size_t len = 0, size = 0;
    const char *v = header(h, n, "X-Size:", &len);
    for (size_t i = 0; v && i < len && v[i] >= '0' && v[i] <= '9'; i++)
        size = size * 10 + (size_t)(v[i] - '0');
    if (n <= 7 || memcmp(h, "GET /r/", 7) != 0 || !sp || sp == rid || sp - rid > 64 ||
        size > SOAK_MAX_SIZE) {
        loop_error("bad request: %.60s", h);
        return http_conn_feed(&c->http, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n",
                              47);
    }
    v = header(h, n, "Connection:", &len);
    bool close = v && len == 5 && strncasecmp(v, "close", 5) == 0;
    size_t rid_len = (size_t)(sp - rid), body = soak_body_len(rid_len, size);
    int k = snprintf(g_reply, 128, "HTTP/1.1 200 OK\r\nContent-Length: %zu\r\n%s\r\n", body,
                     close ? "Connection: close\r\n" : "");
    soak_body(g_reply + k, rid, rid_len, size);
    g_c.http_requests++;
    if (close) {
        c->close_after = true;
        g_c.server_closes++;
    }
    return http_conn_feed(&c->http, g_reply, (size_t)k + body);
}

/* Answers every complete request in the n bytes read; after a "Connection: close" request
 * the rest is ignored. Returns 0 or a negative errno. */
static int h_feed(struct hconn *c, const char *p, size_t n)
{
    while (n > 0 && !c->close_after) {
        size_t take = HEAD_MAX - c->head_len < n ? HEAD_MAX - c->head_len : n;
        if (take == 0) {
            loop_error("a request head over %d bytes", HEAD_MAX);
            return -E2BIG;
        }
        memcpy(c->head + c->head_len, p, take);
        c->head_len += take;
        p += take;
        n -= take;
        size_t start = 0;
        const char *end;
        while (!c->close_after &&
               (end = memmem(c->head + start, c->head_len - start, "\r\n\r\n", 4)) != NULL) {
            size_t len = (size_t)(end - (c->head + start));
            int r = h_answer(c, c->head + start, len);
            if (r < 0)
                return r;
            start += len + 4;
        }
        memmove(c->head, c->head + start, c->head_len - start);
        c->head_len -= start;
    }
    return 0;
}

static void on_h_recv(void *arg, int fd, int64_t res);
static void on_h_sent(void *arg, int fd, int64_t res);

static void h_post_recv(struct hconn *c)
{
    int r = evloop_recv(g_loop, c->fd, c->http.in, sizeof(c->http.in), on_h_recv, c);
    if (r < 0) {
        loop_error("evloop_recv: %s", evloop_strerror(r));
        h_shut(c);
        return;
    }
    c->pending++;
    c->reading = true;
}

static bool h_sending(const struct hconn *c)
{
    return c->http.wire.off != c->http.wire.len;
}

/* Sends what is queued unless a send is in flight; closes c once everything due is sent
 * after the peer's EOF or a Connection: close. Returns false when c was shut. */
static bool h_post_send(struct hconn *c)
{
    const char *p;
    size_t n;
    if (http_conn_start_send(&c->http, &p, &n)) {
        int r = evloop_send(g_loop, c->fd, p, n, on_h_sent, c);
        if (r < 0) {
            loop_error("evloop_send: %s", evloop_strerror(r));
            http_conn_send_done(&c->http);
            h_shut(c);
            return false;
        }
        c->pending++;
    }
    if ((c->peer_eof || c->close_after) && !h_sending(c)) {
        h_shut(c);
        return false;
    }
    return true;
}

/* Reads on (or pauses reading while the output is over HTTP_OUT_HIGH). */
static void h_read_on(struct hconn *c)
{
    if (c->reading || c->peer_eof || c->close_after)
        return;
    if (!http_conn_wants_input(&c->http)) {
        if (!c->paused)
            g_c.recv_paused++;
        c->paused = true;
        return;
    }
    if (c->paused)
        g_c.recv_resumed++;
    c->paused = false;
    h_post_recv(c);
}

static void h_failed(struct hconn *c, int64_t res, const char *what)
{
    if (is_reset(res))
        g_c.resets++;
    else if (res != -ECANCELED)
        loop_error("%s: %s", what, evloop_strerror((int)res));
    h_shut(c);
}

static void on_h_recv(void *arg, int fd, int64_t res)
{
    struct hconn *c = arg;
    c->pending--;
    c->reading = false;
    if (c->closing) {
        h_release(c);
        return;
    }
    if (res < 0) {
        h_failed(c, res, "recv");
        return;
    }
    if (res == 0) {
        c->peer_eof = true; /* a half-close: the replies due still go out */
    } else {
        int r = h_feed(c, c->http.in, (size_t)res);
        if (r < 0) {
            h_failed(c, r, "request");
            return;
        }
    }
    if (h_post_send(c))
        h_read_on(c);
}

static void on_h_sent(void *arg, int fd, int64_t res)
{
    struct hconn *c = arg;
    c->pending--;
    http_conn_send_done(&c->http);
    if (c->closing) {
        h_release(c);
        return;
    }
    if (res < 0) {
        h_failed(c, res, "send");
        return;
    }
    if (h_post_send(c))
        h_read_on(c);
}

static void on_h_accept(void *arg, int lfd, int64_t res)
{
    if (res == -ECANCELED || res == -ESHUTDOWN)
        return; /* the loop is stopping */
    if (res >= 0) {
        int fd = (int)res;
        net_nodelay(fd);
        struct hconn *c = malloc(sizeof(*c));
        if (!c || conn_table_put(&g_hconns, fd, c) < 0) {
            loop_error("out of memory for a connection");
            free(c);
            close(fd);
        } else {
            c->fd = fd;
            c->pending = 0;
            c->reading = c->closing = c->peer_eof = c->close_after = c->paused = false;
            c->head_len = 0;
            http_conn_init(&c->http);
            c->http.echo = true; /* http_conn_feed queues the replies h_answer makes */
            g_c.accepted++;
            g_c.open++;
            h_post_recv(c);
        }
    } else if (res != -ECONNABORTED) {
        loop_error("accept: %s", evloop_strerror((int)res));
    }
    int r = evloop_accept(g_loop, lfd, on_h_accept, NULL);
    if (r < 0 && r != -ESHUTDOWN)
        loop_error("evloop_accept: %s", evloop_strerror(r));
}

/* ---- the echo server: fd readiness ----
 * Reads until EAGAIN or until the unsent output passes HTTP_OUT_HIGH, writes until EAGAIN;
 * watches for writability only while output is left (a partial write), for readability only
 * while the output is under HTTP_OUT_HIGH and the peer has not half-closed. */

struct econn {
    int fd;
    unsigned watching;
    bool peer_eof, blocked;
    struct http_conn http; /* echo mode */
};

static void free_econn(void *arg)
{
    struct econn *c = arg;
    close(c->fd);
    http_conn_free(&c->http);
    free(c);
    g_c.open--;
}

static void e_close(struct econn *c, long err, const char *what)
{
    if (is_reset(err))
        g_c.resets++;
    else if (err < 0)
        loop_error("echo %s: %s", what, evloop_strerror((int)err));
    int r = evloop_io_remove(g_loop, c->fd);
    if (r < 0)
        loop_error("evloop_io_remove: %s", evloop_strerror(r));
    conn_table_drop(&g_econns, c->fd);
    free_econn(c);
}

static void on_e_io(void *arg, int fd, unsigned events)
{
    struct econn *c = arg;
    if ((c->watching & EVLOOP_READABLE) &&
        (events & (EVLOOP_READABLE | EVLOOP_HANGUP | EVLOOP_ERROR))) {
        uint64_t before = c->http.requests;
        int r = http_conn_read(&c->http, fd);
        g_c.echo_bytes += c->http.requests - before;
        if (r < 0) {
            e_close(c, r, "read");
            return;
        }
        if (r == 0)
            c->peer_eof = true; /* a half-close: echo what is left, then close */
    }
    long left = http_conn_flush(&c->http, fd);
    if (left < 0) {
        e_close(c, left, "write");
        return;
    }
    if (left > 0 && !c->blocked)
        g_c.partial_writes++; /* the kernel took part: wait for writability */
    c->blocked = left > 0;
    unsigned want = (!c->peer_eof && http_conn_wants_input(&c->http) ? EVLOOP_READABLE : 0u) |
                    (left > 0 ? EVLOOP_WRITABLE : 0u);
    if (want == 0) {
        e_close(c, 0, "close");
        return;
    }
    if (want != c->watching) {
        int r = evloop_io_modify(g_loop, fd, want);
        if (r < 0) {
            e_close(c, r, "evloop_io_modify");
            return;
        }
        c->watching = want;
    }
}

static void on_e_listen(void *arg, int lfd, unsigned events)
{
    for (;;) {
        int fd = net_accept(lfd);
        if (fd == -EAGAIN)
            return;
        if (fd < 0) {
            loop_error("echo accept: %s", evloop_strerror(fd));
            return;
        }
        struct econn *c = malloc(sizeof(*c));
        if (!c || conn_table_put(&g_econns, fd, c) < 0) {
            loop_error("out of memory for a connection");
            free(c);
            close(fd);
            continue;
        }
        c->fd = fd;
        c->watching = EVLOOP_READABLE;
        c->peer_eof = c->blocked = false;
        http_conn_init(&c->http);
        c->http.echo = true;
        g_c.accepted++;
        g_c.open++;
        int r = evloop_io_add(g_loop, fd, EVLOOP_READABLE, on_e_io, c);
        if (r < 0) {
            loop_error("evloop_io_add: %s", evloop_strerror(r));
            conn_table_drop(&g_econns, fd);
            free_econn(c);
        }
    }
}

/* ---- tasks, timers and signals from other threads ---- */

struct task {
    unsigned thread;
    uint64_t seq;
};

/* A timer started by a worker; freed by its last callback (its own, and the canceller's for
 * the fifth that are cancelled). Loop thread only, once started. */
struct timer_arg {
    uint64_t deadline_ns;
    evloop_timer_id id;
    unsigned refs;
    bool fired, cancelled;
};

static uint64_t g_last_seq[2];

static void worker_error(const char *what, int r)
{
    if (atomic_fetch_add_explicit(&g_worker_errors, 1, memory_order_relaxed) < 20)
        fprintf(stderr, "c_soak: worker error: %s: %s\n", what, evloop_strerror(r));
}

static void on_task(void *arg)
{
    struct task *t = arg;
    g_c.tasks_run++;
    if (t->seq != g_last_seq[t->thread] + 1) {
        g_c.order_errors++;
        loop_error("thread %u: task %" PRIu64 " ran after %" PRIu64, t->thread, t->seq,
                   g_last_seq[t->thread]);
    }
    g_last_seq[t->thread] = t->seq;
    free(t);
}

/* Drops n references to tm. */
static void timer_unref(struct timer_arg *tm, unsigned n)
{
    tm->refs -= n;
    if (tm->refs == 0) {
        free(tm);
        g_c.timer_args_freed++;
    }
}

static void on_timer(void *arg)
{
    struct timer_arg *tm = arg;
    uint64_t now = evloop_now_ns();
    if (tm->cancelled)
        loop_error("a timer fired after evloop_timer_cancel returned 0");
    tm->fired = true;
    g_c.timers_fired++;
    if (now < tm->deadline_ns) {
        g_c.timers_early++;
        loop_error("a timer fired %" PRIu64 " ns early", tm->deadline_ns - now);
    } else if (now - tm->deadline_ns > g_c.timer_late_max_ns) {
        g_c.timer_late_max_ns = now - tm->deadline_ns;
    }
    timer_unref(tm, 1);
}

/* Cancels tm's timer from the loop thread, due before it: the cancel must succeed. */
static void on_cancel_timer(void *arg)
{
    struct timer_arg *tm = arg;
    unsigned drop = 1;
    if (!tm->fired) {
        int r = evloop_timer_cancel(g_loop, tm->id);
        if (r < 0) {
            loop_error("evloop_timer_cancel of a timer not yet fired: %s", evloop_strerror(r));
        } else {
            tm->cancelled = true;
            g_c.timers_cancelled++;
            drop = 2; /* the cancelled timer's reference too: its callback will not run */
        }
    }
    timer_unref(tm, drop);
}

static void start_timer(uint64_t *rng, uint64_t n)
{
    struct timer_arg *tm = malloc(sizeof(*tm));
    if (!tm) {
        worker_error("malloc", -ENOMEM);
        return;
    }
    uint64_t delay = soak_rand(rng) % 20000000u; /* 0-20 ms */
    bool cancel = n % 5 == 0;
    *tm = (struct timer_arg){.deadline_ns = evloop_now_ns() + delay, .refs = cancel ? 2 : 1};
    int r = evloop_timer_start(g_loop, delay, 0, on_timer, tm, &tm->id);
    if (r < 0) {
        free(tm);
        worker_error("evloop_timer_start", r);
        return;
    }
    atomic_fetch_add_explicit(&g_timers_started, 1, memory_order_relaxed);
    /* The canceller starts after the timer's id is written: it reads it on the loop. */
    if (cancel && (r = evloop_timer_start(g_loop, delay / 2, 0, on_cancel_timer, tm, NULL)) < 0)
        worker_error("evloop_timer_start", r);
}

/* A thread handing the loop tasks in order (one in 16 times a batch of 8), a timer every
 * fourth time, every 0.2-1 ms. */
static void *submitter(void *arg)
{
    unsigned id = (unsigned)(uintptr_t)arg;
    uint64_t rng = 0x9E3779B97F4A7C15ull * (id + 1), seq = 0, n = 0;
    while (!atomic_load_explicit(&g_stop_workers, memory_order_relaxed)) {
        n++;
        struct evloop_task batch[8];
        size_t k = n % 16 == 0 ? 8 : 1;
        for (size_t i = 0; i < k; i++) {
            struct task *t = malloc(sizeof(*t));
            if (!t)
                abort();
            *t = (struct task){.thread = id, .seq = seq + 1 + i};
            batch[i] = (struct evloop_task){.cb = on_task, .arg = t};
        }
        int r = k == 1 ? evloop_submit(g_loop, on_task, batch[0].arg)
                       : evloop_submit_batch(g_loop, batch, k);
        if (r < 0) {
            for (size_t i = 0; i < k; i++)
                free(batch[i].arg);
            worker_error("evloop_submit", r);
            break;
        }
        seq += k;
        atomic_fetch_add_explicit(&g_tasks_sent, k, memory_order_relaxed);
        if (n % 4 == 0)
            start_timer(&rng, n / 4);
        soak_sleep_ns(200000 + soak_rand(&rng) % 800000);
    }
    return NULL;
}

static void on_signal(void *arg)
{
    g_c.signals++;
    /* release: pairs with the signal thread's acquire load */
    atomic_store_explicit(&g_signals_seen, g_c.signals, memory_order_release);
}

/* Sends SIGUSR1 to the process every 2-5 ms, each once the loop has handled the last. */
static void *signaller(void *arg)
{
    uint64_t rng = 77;
    while (!atomic_load_explicit(&g_stop_workers, memory_order_relaxed)) {
        uint64_t before = atomic_load_explicit(&g_signals_seen, memory_order_acquire);
        kill(getpid(), SIGUSR1);
        atomic_fetch_add_explicit(&g_sig_sent, 1, memory_order_relaxed);
        uint64_t deadline = soak_now_ns() + SOAK_SIGNAL_TIMEOUT_NS;
        while (atomic_load_explicit(&g_signals_seen, memory_order_acquire) == before &&
               soak_now_ns() < deadline)
            soak_sleep_ns(100000);
        if (atomic_load_explicit(&g_signals_seen, memory_order_acquire) == before) {
            atomic_fetch_add_explicit(&g_sig_lost, 1, memory_order_relaxed);
            fprintf(stderr, "c_soak: a SIGUSR1 not handled within 10 s\n");
        }
        soak_sleep_ns(2000000 + soak_rand(&rng) % 3000000);
    }
    return NULL;
}

static void on_heartbeat(void *arg)
{
    g_c.heartbeats++;
}

/* ---- the controller ---- */

struct snapshot {
    struct counters c;
    struct evloop_stats st;
    sem_t done;
};

static void take_snapshot(void *arg)
{
    struct snapshot *s = arg;
    s->c = g_c;
    sem_post(&s->done);
}

/* The loop's counters, read on the loop thread (a task). A loop that does not run it within
 * 30 s is stuck: the soak ends there. */
static void snapshot(struct snapshot *s)
{
    static struct snapshot shared; /* outlives a task that comes too late */
    sem_init(&shared.done, 0, 0);
    int r = evloop_submit(g_loop, take_snapshot, &shared);
    if (r < 0) {
        fprintf(stderr, "c_soak: FAIL: evloop_submit of a snapshot: %s\n", evloop_strerror(r));
        _exit(1);
    }
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 30;
    while ((r = sem_timedwait(&shared.done, &ts)) < 0 && errno == EINTR)
        continue;
    if (r < 0) {
        fprintf(stderr, "c_soak: FAIL: the loop did not run a task within 30 s\n");
        _exit(1);
    }
    sem_destroy(&shared.done);
    s->c = shared.c;
    evloop_stats(g_loop, &s->st);
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, size_t n)
{
    double *w = malloc(n * sizeof(*w));
    if (!w || n == 0) {
        free(w);
        return 0;
    }
    memcpy(w, v, n * sizeof(*w));
    qsort(w, n, sizeof(*w), cmp_double);
    double m = n % 2 ? w[n / 2] : (w[n / 2 - 1] + w[n / 2]) / 2;
    free(w);
    return m;
}

/* RSS keeps growing after warm-up when, over the samples taken after warmup s of load, both:
 * their line (Theil-Sen: the median of the slopes between every two samples, which a few
 * spikes do not move) projects more than limit %/h growth of their median, and the median of
 * their second half exceeds that of their first half by more than a floor (so a step or noise
 * in a short run does not fail it): floor_mib MiB when malloc's bytes in use rose too (by more
 * than half of floor_mib), which is what a leak does; frag_mib MiB (or floor_mib, if larger)
 * when they did not, which is fragmentation or an allocator's high-water mark: a burst that
 * took malloc's bytes up 6 MiB for one sample and back left RSS 1.4 MiB higher in a CI run,
 * with malloc's bytes +0.1 MiB between the halves. As aio_soak.py's rss_verdict. */
static bool rss_verdict(const double *t, const double *rss, const double *heap, size_t n,
                        double warmup, double limit, double floor_mib, double frag_mib,
                        char *text, size_t cap)
{
    size_t a = 0;
    while (a < n && t[a] < warmup)
        a++;
    size_t m = n - a, k = 0, h = m / 2;
    if (m < 4) {
        snprintf(text, cap, "rss: %zu samples after warm-up, too few to judge growth (need 4)", m);
        return true;
    }
    double *slopes = malloc(m * m * sizeof(*slopes));
    if (!slopes)
        abort();
    for (size_t i = a; i < n; i++)
        for (size_t j = i + 1; j < n; j++)
            slopes[k++] = (rss[j] - rss[i]) / (t[j] - t[i]);
    double slope = median(slopes, k); /* bytes per s */
    free(slopes);
    double rm = median(rss + a, m);
    double pct_h = slope * 3600 / rm * 100;
    double rise = (median(rss + a + h, m - h) - median(rss + a, h)) / 1048576.0;
    double heap_rise = (median(heap + a + h, m - h) - median(heap + a, h)) / 1048576.0;
    bool leak_like = heap_rise > floor_mib / 2;
    double floor = leak_like || frag_mib < floor_mib ? floor_mib : frag_mib;
    bool grows = pct_h > limit && rise > floor;
    snprintf(text, cap,
             "rss: Theil-Sen slope %+.1f KiB/min over %zu samples after %.0f s of warm-up = "
             "%+.1f %%/h of %.1f MiB (limit %g %%/h); median second half - first half = %+.2f "
             "MiB (floor %g MiB: %s malloc's growth); meanwhile malloc's bytes in use %+.2f MiB",
             slope * 60 / 1024, m, warmup, pct_h, rm / 1048576.0, limit, rise, floor,
             leak_like ? "with" : "without", heap_rise);
    return !grows;
}

/* Reads "soak-client k=v ..." lines into *rep. */
static void parse_report(char *line, struct soak_client_report *rep)
{
    if (strncmp(line, "soak-client ", 12) != 0)
        return;
    char *save = NULL;
    for (char *tok = strtok_r(line + 12, " \n", &save); tok; tok = strtok_r(NULL, " \n", &save)) {
        char *eq = strchr(tok, '=');
        if (!eq)
            continue;
        *eq = '\0';
        uint64_t v = strtoull(eq + 1, NULL, 10);
#define SOAK_PARSE(name)                                                                           \
    if (strcmp(tok, #name) == 0)                                                                   \
        rep->name = v;
        SOAK_CLIENT_FIELDS(SOAK_PARSE)
#undef SOAK_PARSE
    }
}

/* The size of one "<total type=\"TYPE\" ... size=\"N\"/>" or "<system type=...>" entry of
 * malloc_info's text, 0 if absent. */
static uint64_t malloc_info_size(const char *xml, const char *tag)
{
    const char *p = strstr(xml, tag), *size = p ? strstr(p, "size=\"") : NULL;
    return size ? strtoull(size + 6, NULL, 10) : 0;
}

/* Bytes malloc has handed out and not taken back, over every arena (glibc's malloc_info: the
 * memory it holds from the system, less its free chunks, plus its mmapped chunks; a free top
 * chunk it has not trimmed yet counts as used), 0 where unknown. Beside RSS it tells a leak
 * (this grows) from fragmentation (RSS grows, this does not). Under ASan, whose allocator is
 * not glibc's, it reads about 0. */
static uint64_t heap_in_use(void)
{
#ifdef __GLIBC__
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return 0;
    int r = malloc_info(0, f);
    fclose(f);
    uint64_t used = 0;
    const char *all = NULL; /* the totals of every arena follow the last </heap> */
    for (const char *p = buf; r == 0 && p && (p = strstr(p, "</heap>")) != NULL; p++)
        all = p;
    if (all) {
        uint64_t held = malloc_info_size(all, "<system type=\"current\"");
        uint64_t free_ = malloc_info_size(all, "<total type=\"fast\"") +
                         malloc_info_size(all, "<total type=\"rest\"");
        used = (held > free_ ? held - free_ : 0) + malloc_info_size(all, "<total type=\"mmap\"");
    }
    free(buf);
    return used;
#else
    return 0;
#endif
}

static void print_header(void)
{
    printf("%6s %9s %7s %9s %7s %6s %8s %9s %6s %8s %7s %7s %7s %8s %7s %8s %6s %9s %9s %8s "
           "%8s\n",
           "t_s", "http_req", "req/s", "echo_MiB", "conns", "open", "rss_MiB", "heap_MiB", "fds",
           "signals", "timers", "tasks", "paused", "partial", "resets", "cl_ok", "cl_err", "ticks",
           "io_cb", "p_sleep", "p_wake");
}

static void print_row(double t, const struct snapshot *s, const struct snapshot *prev, double dt,
                      uint64_t rss, int fds, const struct soak_client_report *cl)
{
    uint64_t req = s->c.http_requests - prev->c.http_requests;
    printf("%6.0f %9" PRIu64 " %7.0f %9.1f %7" PRIu64 " %6" PRIu64 " %8.1f %9.1f %6d %8" PRIu64
           " %7" PRIu64 " %7" PRIu64 " %7" PRIu64 " %8" PRIu64 " %7" PRIu64 " %8" PRIu64
           " %6" PRIu64 " %9" PRIu64 " %9" PRIu64 " %8" PRIu64 " %8" PRIu64 "\n",
           t, req, (double)req / dt, (double)(s->c.echo_bytes - prev->c.echo_bytes) / 1048576.0,
           s->c.accepted - prev->c.accepted, s->c.open, (double)rss / 1048576.0,
           (double)heap_in_use() / 1048576.0, fds, s->c.signals, s->c.timers_fired, s->c.tasks_run,
           s->c.recv_paused, s->c.partial_writes, s->c.resets, cl->ok, cl->errors, s->st.ticks,
           s->st.io_callbacks, s->st.poller_sleeps, s->st.poller_wakes);
    fflush(stdout);
}

static void *run_loop(void *arg)
{
    int r = evloop_run(g_loop);
    if (r < 0)
        fprintf(stderr, "c_soak: evloop_run: %s\n", evloop_strerror(r));
    return (void *)(intptr_t)r;
}

static void pin(int cpu)
{
    if (cpu < 0)
        return;
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(cpu, &set);
    if (sched_setaffinity(0, sizeof(set), &set) < 0)
        perror("c_soak: sched_setaffinity");
}

static unsigned raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
    }
    getrlimit(RLIMIT_NOFILE, &rl);
    return rl.rlim_cur > 1000000 ? 1000000u : (unsigned)rl.rlim_cur;
}

static void usage(void)
{
    fprintf(stderr,
            "usage: c_soak [--duration S] [--interval S] [--idle N] [--churners N]\n"
            "              [--backend auto|epoll|io_uring] [--warmup S] [--rss-limit PCT_PER_H]\n"
            "              [--rss-floor MIB] [--rss-frag-floor MIB] [--server-cpu N]\n"
            "              [--client-cpu N]\n"
            "--duration defaults to $SOAK_DURATION, else 110 s; --interval to 10 s up to 5\n"
            "minutes, 30 up to 15, else 60; --warmup to a third of the duration. Fails (exit 1)\n"
            "on a lost or corrupted reply, a server error, a lost signal, task or timer, a timer\n"
            "early or fired after its cancel, connections or fds not back to the baseline once\n"
            "the clients have left, RSS still growing after warm-up (rss_verdict: --rss-limit\n"
            "%%/h, default 20, and --rss-floor MiB, default 1, or --rss-frag-floor MiB, default\n"
            "6, where malloc's bytes in use did not grow), or pauses/partial writes that\n"
            "never happened.\n");
}

static int parse_opts(int argc, char **argv, struct opts *o)
{
    const char *env = getenv("SOAK_DURATION");
    *o = (struct opts){.duration = env && *env ? atof(env) : 110,
                       .idle = 2000,
                       .churners = 4,
                       .rss_limit = 20,
                       .rss_floor = 1,
                       .rss_frag_floor = 6,
                       .server_cpu = -1,
                       .client_cpu = -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) {
            usage();
            return -1;
        }
        i++;
        if (strcmp(a, "--duration") == 0)
            o->duration = atof(v);
        else if (strcmp(a, "--interval") == 0)
            o->interval = atof(v);
        else if (strcmp(a, "--idle") == 0)
            o->idle = (unsigned)atoi(v);
        else if (strcmp(a, "--churners") == 0)
            o->churners = (unsigned)atoi(v);
        else if (strcmp(a, "--backend") == 0)
            o->backend = v;
        else if (strcmp(a, "--warmup") == 0)
            o->warmup = atof(v);
        else if (strcmp(a, "--rss-limit") == 0)
            o->rss_limit = atof(v);
        else if (strcmp(a, "--rss-floor") == 0)
            o->rss_floor = atof(v);
        else if (strcmp(a, "--rss-frag-floor") == 0)
            o->rss_frag_floor = atof(v);
        else if (strcmp(a, "--server-cpu") == 0)
            o->server_cpu = atoi(v);
        else if (strcmp(a, "--client-cpu") == 0)
            o->client_cpu = atoi(v);
        else {
            usage();
            return -1;
        }
    }
    if (o->duration <= 0 || o->churners == 0) {
        usage();
        return -1;
    }
    if (o->interval <= 0)
        o->interval = o->duration <= 300 ? 10 : o->duration <= 900 ? 30 : 60;
    if (o->warmup <= 0)
        o->warmup = o->duration / 3;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0 && CPU_COUNT(&set) >= 2) {
        int first = -1, last = -1;
        for (int c = 0; c < CPU_SETSIZE; c++)
            if (CPU_ISSET(c, &set)) {
                first = first < 0 ? c : first;
                last = c;
            }
        if (o->server_cpu < 0)
            o->server_cpu = last;
        if (o->client_cpu < 0)
            o->client_cpu = first;
    }
    return 0;
}

/* Starts the clients: this program with --client, its stdout a pipe to *out. */
static pid_t spawn_clients(const struct opts *o, int http_port, int echo_port, int *out)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return -1;
    char args[8][32];
    snprintf(args[0], 32, "%d", http_port);
    snprintf(args[1], 32, "%d", echo_port);
    snprintf(args[2], 32, "%g", o->duration);
    snprintf(args[3], 32, "%g", o->interval);
    snprintf(args[4], 32, "%u", o->idle);
    snprintf(args[5], 32, "%u", o->churners);
    snprintf(args[6], 32, "%d", o->client_cpu);
    char *argv[] = {"c_soak",     "--client", "--http-port", args[0], "--echo-port", args[1],
                    "--duration", args[2],    "--interval",  args[3], "--idle",      args[4],
                    "--churners", args[5],    "--cpu",       args[6], NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_adddup2(&fa, p[1], STDOUT_FILENO);
    pid_t pid;
    int r = posix_spawn(&pid, "/proc/self/exe", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    close(p[1]);
    if (r != 0) {
        close(p[0]);
        errno = r;
        return -1;
    }
    *out = p[0];
    return pid;
}

struct run {
    struct opts o;
    int http_lfd, echo_lfd, base_fds, fds_after, client_status;
    uint64_t base_rss, rss_first, rss_load_end, t0;
    double load_s;
    size_t nsamples;
    double *sample_t, *sample_rss, *sample_heap;
    struct soak_client_report cl;
    struct snapshot last;
};

/* Runs the clients to their end, a row every interval; then waits for the connections and
 * fds to come back to the baseline. Returns -1 if the clients could not start. */
static int drive(struct run *run, int http_port, int echo_port)
{
    const struct opts *o = &run->o;
    int pipe_r;
    pid_t pid = spawn_clients(o, http_port, echo_port, &pipe_r);
    if (pid < 0) {
        perror("c_soak: spawning the clients");
        return -1;
    }
    uint64_t interval = (uint64_t)(o->interval * 1e9), next = run->t0 + interval;
    uint64_t give_up = run->t0 + (uint64_t)(o->duration * 1e9) + 180000000000ull;
    size_t cap = (size_t)(o->duration / o->interval) + 8;
    run->sample_t = calloc(cap, sizeof(double));
    run->sample_rss = calloc(cap, sizeof(double));
    run->sample_heap = calloc(cap, sizeof(double));
    struct snapshot prev = {0};
    uint64_t prev_t = run->t0;
    char buf[4096];
    size_t len = 0;
    bool eof = false, killed = false;
    while (!eof) {
        uint64_t now = soak_now_ns();
        if (now >= next) {
            struct snapshot s;
            snapshot(&s);
            uint64_t rss = soak_rss_bytes();
            if (run->nsamples < cap) {
                run->sample_t[run->nsamples] = (double)(now - run->t0) / 1e9;
                run->sample_heap[run->nsamples] = (double)heap_in_use();
                run->sample_rss[run->nsamples++] = (double)rss;
            }
            if (!run->rss_first)
                run->rss_first = rss;
            print_row((double)(now - run->t0) / 1e9, &s, &prev, (double)(now - prev_t) / 1e9, rss,
                      soak_fd_count(), &run->cl);
            prev = s;
            prev_t = now;
            next += interval;
            continue;
        }
        if (now > give_up && !killed) {
            fprintf(stderr, "c_soak: the clients did not finish: killed\n");
            kill(pid, SIGKILL);
            killed = true;
        }
        struct pollfd p = {.fd = pipe_r, .events = POLLIN};
        int r = poll(&p, 1, (int)((next - now) / 1000000 + 1));
        if (r <= 0)
            continue; /* EINTR: the soak's signals */
        ssize_t n = read(pipe_r, buf + len, sizeof(buf) - 1 - len);
        if (n < 0)
            continue;
        eof = n == 0;
        len += (size_t)n;
        buf[len] = '\0';
        char *nl;
        while ((nl = strchr(buf, '\n')) != NULL) {
            *nl = '\0';
            parse_report(buf, &run->cl);
            len -= (size_t)(nl + 1 - buf);
            memmove(buf, nl + 1, len + 1);
        }
        if (len == sizeof(buf) - 1)
            len = 0; /* a line too long: not a report */
    }
    close(pipe_r);
    while (waitpid(pid, &run->client_status, 0) < 0 && errno == EINTR)
        continue;
    uint64_t end = soak_now_ns();
    run->load_s = (double)(end - run->t0) / 1e9;
    run->rss_load_end = soak_rss_bytes();

    /* The clients have left: connections and fds must come back to the baseline. */
    struct snapshot s;
    for (;;) {
        snapshot(&s);
        run->fds_after = soak_fd_count();
        if ((s.c.open == 0 && run->fds_after == run->base_fds) ||
            soak_now_ns() > end + 20000000000ull)
            break;
        soak_sleep_ns(50000000);
    }
    print_row((double)(soak_now_ns() - run->t0) / 1e9, &s, &prev,
              (double)(soak_now_ns() - prev_t) / 1e9, soak_rss_bytes(), run->fds_after, &run->cl);
    return 0;
}

/* Stops the worker threads and waits until what they handed the loop has run. */
static void stop_workers(pthread_t *threads, size_t n, struct run *run)
{
    atomic_store(&g_stop_workers, true);
    for (size_t i = 0; i < n; i++)
        pthread_join(threads[i], NULL);
    uint64_t deadline = soak_now_ns() + 10000000000ull;
    for (;;) {
        snapshot(&run->last);
        const struct counters *c = &run->last.c;
        if ((c->tasks_run == atomic_load(&g_tasks_sent) &&
             c->timer_args_freed == atomic_load(&g_timers_started)) ||
            soak_now_ns() > deadline)
            break;
        soak_sleep_ns(10000000);
    }
}

static int verdict(struct run *run)
{
    const struct counters *c = &run->last.c;
    const struct soak_client_report *cl = &run->cl;
    const struct opts *o = &run->o;
    uint64_t tasks_sent = atomic_load(&g_tasks_sent), timers = atomic_load(&g_timers_started);
    uint64_t sig_sent = atomic_load(&g_sig_sent), sig_lost = atomic_load(&g_sig_lost);
    char rss_text[512];
    bool rss_ok = rss_verdict(run->sample_t, run->sample_rss, run->sample_heap, run->nsamples,
                              o->warmup, o->rss_limit, o->rss_floor, o->rss_frag_floor,
                              rss_text, sizeof(rss_text));
    printf("c_soak: client: %" PRIu64 " replies checked (%" PRIu64 " HTTP, %" PRIu64
           " echo), %" PRIu64 " connections, %" PRIu64 " resets, %" PRIu64 " half-closes, %" PRIu64
           " Connection: close, %" PRIu64 " slow readers, %" PRIu64 " idle held, %" PRIu64
           " errors (%" PRIu64 " connects retried for want of a local port)\n",
           cl->ok, cl->http, cl->echo, cl->conns, cl->resets, cl->halfcloses, cl->server_closes,
           cl->slow, cl->idle_peak, cl->errors, cl->connect_retries);
    printf("c_soak: server: %" PRIu64 " HTTP requests, %.1f MiB echoed, %" PRIu64
           " connections, %" PRIu64 " resets, %" PRIu64 " closes on Connection: close, recv paused"
           " %" PRIu64 " / resumed %" PRIu64 " (ops), %" PRIu64
           " partial writes (readiness), %" PRIu64 " errors\n",
           c->http_requests, (double)c->echo_bytes / 1048576.0, c->accepted, c->resets,
           c->server_closes, c->recv_paused, c->recv_resumed, c->partial_writes, c->errors);
    printf("c_soak: signals %" PRIu64 " handled of %" PRIu64 " sent (%" PRIu64
           " lost); tasks %" PRIu64 " run of %" PRIu64 " submitted (%" PRIu64
           " out of order); timers %" PRIu64 " started, %" PRIu64 " fired, %" PRIu64
           " cancelled, %" PRIu64 " early, latest %.1f ms late; heartbeats %" PRIu64 "\n",
           c->signals, sig_sent, sig_lost, c->tasks_run, tasks_sent, c->order_errors, timers,
           c->timers_fired, c->timers_cancelled, c->timers_early,
           (double)c->timer_late_max_ns / 1e6, c->heartbeats);
    printf("c_soak: fds: baseline %d, after the clients left %d; open connections %" PRIu64
           "; RSS baseline %.1f MiB, first sample %.1f MiB, end of load %.1f MiB, after %.1f MiB;"
           " load %.0f s\n",
           run->base_fds, run->fds_after, c->open, (double)run->base_rss / 1048576.0,
           (double)run->rss_first / 1048576.0, (double)run->rss_load_end / 1048576.0,
           (double)soak_rss_bytes() / 1048576.0, run->load_s);
    printf("c_soak: %s\n", rss_text);
    const struct evloop_stats *st = &run->last.st;
    printf("c_soak: evloop stats: ticks %" PRIu64 ", io_callbacks %" PRIu64 ", tasks_run %" PRIu64
           ", timers_fired %" PRIu64 ", poller_sleeps %" PRIu64 ", poller_wakes %" PRIu64
           ", spin_hits %" PRIu64 ", ingress_overflows %" PRIu64 ", backend %s, ingress %s\n",
           st->ticks, st->io_callbacks, st->tasks_run, st->timers_fired, st->poller_sleeps,
           st->poller_wakes, st->spin_hits, st->ingress_overflows, st->backend, st->ingress);

    int fails = 0;
#define FAIL(...)                                                                                  \
    do {                                                                                           \
        printf("c_soak: FAIL: " __VA_ARGS__);                                                      \
        putchar('\n');                                                                             \
        fails++;                                                                                   \
    } while (0)
    int st_code = run->client_status;
    if (!WIFEXITED(st_code) || WEXITSTATUS(st_code) != 0 || !cl->final)
        FAIL("the clients %s %d (final report %s)",
             WIFEXITED(st_code) ? "exited" : "killed by signal",
             WIFEXITED(st_code) ? WEXITSTATUS(st_code) : WTERMSIG(st_code),
             cl->final ? "seen" : "missing");
    if (cl->errors)
        FAIL("%" PRIu64 " lost or corrupted replies or client errors", cl->errors);
    if (cl->idle_peak < o->idle)
        FAIL("only %" PRIu64 " of %u idle connections held", cl->idle_peak, o->idle);
    if (!cl->resets || !cl->halfcloses || !cl->slow || !cl->server_closes)
        FAIL("the clients made no resets, half-closes, slow readers or Connection: close");
    if (c->errors)
        FAIL("%" PRIu64 " server errors", c->errors);
    if (!c->recv_paused || !c->recv_resumed || !c->partial_writes)
        FAIL("the slow readers never paused the server's reads or left a partial write");
    if (sig_lost || c->signals != sig_sent || !c->signals)
        FAIL("signals: %" PRIu64 " handled of %" PRIu64 " sent", c->signals, sig_sent);
    if (c->tasks_run != tasks_sent || c->order_errors || atomic_load(&g_worker_errors))
        FAIL("tasks: %" PRIu64 " run of %" PRIu64 " submitted, %" PRIu64 " worker errors",
             c->tasks_run, tasks_sent, (uint64_t)atomic_load(&g_worker_errors));
    if (c->timers_fired + c->timers_cancelled != timers || c->timer_args_freed != timers ||
        c->timers_early)
        FAIL("timers: %" PRIu64 " fired + %" PRIu64 " cancelled of %" PRIu64 " started",
             c->timers_fired, c->timers_cancelled, timers);
    if (!c->heartbeats)
        FAIL("the interval timer never fired");
    if (c->open)
        FAIL("%" PRIu64 " connections still open after the clients left", c->open);
    if (run->fds_after != run->base_fds)
        FAIL("fds: %d after the clients left, baseline %d", run->fds_after, run->base_fds);
    if (!rss_ok)
        FAIL("RSS keeps growing after warm-up");
#ifdef SOAK_LSAN
    /* Everything is freed by now: LeakSanitizer's check here says so in the verdict; it runs
     * again when the process exits (and fails it with exit status 23 on a leak). */
    fflush(stdout);
    bool leaks = __lsan_do_recoverable_leak_check() != 0;
    printf("c_soak: LeakSanitizer, now (and again at exit): %s\n",
           leaks ? "leaks (above)" : "no leak");
    if (leaks)
        FAIL("LeakSanitizer found leaks");
#endif
#undef FAIL
    return fails;
}

static int serve(struct run *run)
{
    const struct opts *o = &run->o;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = o->backend;
    int r = evloop_new(&g_loop, &cfg);
    if (r < 0) {
        fprintf(stderr, "c_soak: evloop_new: %s %s\n", evloop_strerror(r), evloop_last_error());
        return r == -ENOTSUP ? 77 : 1;
    }
    run->http_lfd = net_listen(0);
    run->echo_lfd = net_listen(0);
    if (run->http_lfd < 0 || run->echo_lfd < 0) {
        fprintf(stderr, "c_soak: listen: %s\n", strerror(errno));
        return 1;
    }
    int http_port = net_local_port(run->http_lfd), echo_port = net_local_port(run->echo_lfd);
    if ((r = evloop_accept(g_loop, run->http_lfd, on_h_accept, NULL)) < 0 ||
        (r = evloop_io_add(g_loop, run->echo_lfd, EVLOOP_READABLE, on_e_listen, NULL)) < 0 ||
        (r = evloop_signal_start(g_loop, SIGUSR1, on_signal, NULL)) < 0 ||
        (r = evloop_timer_start(g_loop, 5000000, 5000000, on_heartbeat, NULL, NULL)) < 0) {
        fprintf(stderr, "c_soak: starting the servers: %s\n", evloop_strerror(r));
        return 1;
    }
    pthread_t loop_thread, workers[3];
    pthread_create(&loop_thread, NULL, run_loop, NULL);
    pthread_create(&workers[0], NULL, submitter, (void *)(uintptr_t)0);
    pthread_create(&workers[1], NULL, submitter, (void *)(uintptr_t)1);
    pthread_create(&workers[2], NULL, signaller, NULL);
    soak_sleep_ns(500000000);
    run->base_fds = soak_fd_count();
    run->base_rss = soak_rss_bytes();
    run->t0 = soak_now_ns();
    printf("c_soak: evloop %s, %s/%s, duration %g s, interval %g s, %u idle connections, %u"
           " churning client threads, server CPU %d, client CPU %d, fd limit %u; baseline %d fds,"
           " RSS %.1f MiB\n",
           evloop_version(), evloop_ingress(), evloop_backend(g_loop), o->duration, o->interval,
           o->idle, o->churners, o->server_cpu, o->client_cpu, raise_fd_limit(), run->base_fds,
           (double)run->base_rss / 1048576.0);
    print_header();
    fflush(stdout);
    int rc = drive(run, http_port, echo_port);
    stop_workers(workers, 3, run);
    evloop_stop(g_loop);
    void *ret;
    pthread_join(loop_thread, &ret);
    int rf = evloop_free(g_loop);
    if (ret || rf < 0) {
        fprintf(stderr, "c_soak: FAIL: evloop_run %d, evloop_free %d\n", (int)(intptr_t)ret, rf);
        rc = -1;
    }
    conn_table_close_all(&g_hconns, free_hconn);
    conn_table_close_all(&g_econns, free_econn);
    close(run->http_lfd);
    close(run->echo_lfd);
    if (rc == 0 && verdict(run) > 0)
        rc = -1;
    free(run->sample_t);
    free(run->sample_rss);
    free(run->sample_heap);
    printf("c_soak: %s (C loop, %s)\n", rc == 0 ? "passed" : "FAILED",
           o->backend ? o->backend : "auto");
    fflush(stdout); /* before LeakSanitizer's check at exit, which ends the process */
    return rc == 0 ? 0 : 1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--client") == 0)
        return soak_client_main(argc - 1, argv + 1);
    struct run run = {0};
    if (parse_opts(argc, argv, &run.o) < 0)
        return 2;
    signal(SIGPIPE, SIG_IGN);
    unsigned limit = raise_fd_limit();
    if (limit < run.o.idle + 512) {
        fprintf(stderr, "c_soak: fd limit %u: --idle lowered to %u\n", limit,
                limit > 512 ? limit - 512 : 0);
        run.o.idle = limit > 512 ? limit - 512 : 0;
    }
    pin(run.o.server_cpu); /* before any thread: the loop's and the workers' CPU */
    return serve(&run);
}
