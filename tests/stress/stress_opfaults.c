/* Faults under the completion operations (evloop_accept, evloop_recv, evloop_send). The libc
 * calls the readiness emulation makes (ops_emulate.c: accept4, recv, send) are wrapped at link
 * time (-Wl,--wrap, see CMakeLists.txt): on one fd, a window of calls fails with a chosen
 * errno, and every call on that fd is counted. Real faults beside them: a full fd table
 * (RLIMIT_NOFILE), a peer's reset (SO_LINGER 0) and a peer closing without reading while a
 * large send is pending, stop and free with ops pending. Expected (evloop.h, the contract;
 * libuv and asyncio where it says nothing):
 *  - accept failing with EMFILE/ENFILE/ENOBUFS/ENOMEM: the op ends once with that -errno after
 *    one accept4, the connection stays queued and a later accept takes it; while no accept is
 *    pending nothing polls the listener (a server backing off sleeps); an accept posted again
 *    at once from the callback makes one try per post, each reported, and the rest of the
 *    loop (timers, tasks, other connections) goes on;
 *  - send failing with ENOBUFS/ENOMEM, recv/send with ECONNRESET/EPIPE: the op ends once with
 *    that -errno, and the sends queued behind a failed send end with it, unwritten; ops
 *    posted afterwards run, in order, one callback each;
 *  - EINTR from accept4, recv and send: retried inside the op, never reported, nothing lost;
 *  - a peer that resets or closes while sends are pending: every pending op ends once, the
 *    sends with -ECONNRESET or -EPIPE;
 *  - stop or free with ops pending, some of them failing: each ends once, -ECANCELED (an op
 *    whose result the loop already has keeps it, as evloop_op_cancel documents).
 * Where the ops are native (io_uring, EVLOOP_OPS unset) the kernel makes recv and send and
 * no wrapper sees them: the tests that inject there skip (the real faults still run); an
 * accept on a non-blocking listener still tries accept4 in user space first (ops.c). Each
 * group runs in the backend's own mode, then with EVLOOP_OPS=native-sim, and on io_uring
 * with EVLOOP_OPS=emulate too, as test_ops.c does. Linux only: elsewhere the emulation calls
 * accept and fcntl, not accept4 (the program exits 77). */
#include "stress_util.h"

#if defined(__linux__)

#include "../ops_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>

/* ---- the wrappers: a window of failures on one fd, and a count of its calls -------------- */

/* Only the library's calls reach them: the socket helpers of ops_util.h (tcp_pair,
 * fill_send_buffer) call accept and sendto. */
int __real_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
ssize_t __real_recv(int fd, void *buf, size_t n, int flags);
ssize_t __real_send(int fd, const void *buf, size_t n, int flags);
int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags);
ssize_t __wrap_recv(int fd, void *buf, size_t n, int flags);
ssize_t __wrap_send(int fd, const void *buf, size_t n, int flags);

enum { F_ACCEPT, F_RECV, F_SEND, F_KINDS };
static const char *const kind_name[F_KINDS] = {"accept4", "recv", "send"};

struct fault {
    int fd;          /* the fd watched, -1: none */
    int err;         /* the errno of a failure */
    long skip;       /* calls on fd let through before the window */
    long left;       /* failures left in the window, -1: until cleared */
    unsigned every;  /* in the window, one call in `every` fails (1: each one) */
    uint64_t phase;  /* calls in the window so far */
    uint64_t calls;  /* calls on fd, failed or not */
    uint64_t failed; /* failures made */
    uint64_t bytes;  /* bytes the real calls moved (recv, send) */
};

static pthread_mutex_t g_fault_lock = PTHREAD_MUTEX_INITIALIZER;
static struct fault g_fault[F_KINDS];

/* Counts a call of kind on fd; returns the errno it must fail with, or 0: make the call. */
static int fault_take(int kind, int fd)
{
    pthread_mutex_lock(&g_fault_lock);
    struct fault *f = &g_fault[kind];
    int err = 0;
    if (fd >= 0 && f->fd == fd) {
        f->calls++;
        if (f->skip > 0) {
            f->skip--;
        } else if (f->left != 0 && f->phase++ % f->every == 0) {
            err = f->err;
            f->failed++;
            if (f->left > 0)
                f->left--;
        }
    }
    pthread_mutex_unlock(&g_fault_lock);
    return err;
}

static void fault_moved(int kind, int fd, ssize_t n)
{
    if (n <= 0)
        return;
    pthread_mutex_lock(&g_fault_lock);
    if (g_fault[kind].fd == fd)
        g_fault[kind].bytes += (uint64_t)n;
    pthread_mutex_unlock(&g_fault_lock);
}

int __wrap_accept4(int fd, struct sockaddr *addr, socklen_t *len, int flags)
{
    int err = fault_take(F_ACCEPT, fd);
    if (err) {
        errno = err;
        return -1;
    }
    return __real_accept4(fd, addr, len, flags);
}

ssize_t __wrap_recv(int fd, void *buf, size_t n, int flags)
{
    int err = fault_take(F_RECV, fd);
    if (err) {
        errno = err;
        return -1;
    }
    ssize_t r = __real_recv(fd, buf, n, flags);
    fault_moved(F_RECV, fd, r);
    return r;
}

ssize_t __wrap_send(int fd, const void *buf, size_t n, int flags)
{
    int err = fault_take(F_SEND, fd);
    if (err) {
        errno = err;
        return -1;
    }
    ssize_t r = __real_send(fd, buf, n, flags);
    fault_moved(F_SEND, fd, r);
    return r;
}

/* Watches fd for kind: after `skip` calls, `count` of them fail with err (-1: every one until
 * fault_clear), one in `every`. err 0: count only. */
static void fault_arm(int kind, int fd, int err, long skip, long count, unsigned every)
{
    pthread_mutex_lock(&g_fault_lock);
    g_fault[kind] = (struct fault){.fd = fd, .err = err, .skip = skip,
                                   .left = err ? count : 0, .every = every ? every : 1};
    pthread_mutex_unlock(&g_fault_lock);
}

static void fault_watch(int kind, int fd)
{
    fault_arm(kind, fd, 0, 0, 0, 1);
}

/* No more failures; the counting goes on. */
static void fault_clear(int kind)
{
    pthread_mutex_lock(&g_fault_lock);
    g_fault[kind].left = 0;
    pthread_mutex_unlock(&g_fault_lock);
}

static struct fault fault_read(int kind)
{
    pthread_mutex_lock(&g_fault_lock);
    struct fault f = g_fault[kind];
    pthread_mutex_unlock(&g_fault_lock);
    return f;
}

static void fault_reset_all(void)
{
    for (int k = 0; k < F_KINDS; k++)
        fault_arm(k, -1, 0, 0, 0, 1);
}

/* ---- results ---------------------------------------------------------------------------- */

static bool is_reset(int64_t res)
{
    return res == -ECONNRESET || res == -EPIPE;
}

/* ---- sockets ---------------------------------------------------------------------------- */

/* Reads exactly n bytes from a blocking fd (the deadline: SO_RCVTIMEO). EINTR is retried: a
 * thread that created an io_uring ring gets task work with TWA_SIGNAL when the kernel tears
 * that ring down (io_ring_exit_work, some time after evloop_free), which ends a read waiting
 * with a timeout with EINTR instead of restarting it. */
static void read_full(int fd, char *buf, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, buf + got, n - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            fail_msg("read_full: %zd after %zu of %zu bytes (%s)", r, got, n,
                     r < 0 ? strerror(errno) : "EOF");
        got += (size_t)r;
    }
}

/* ---- a loop on its thread ------------------------------------------------------------------ */

static struct evloop_stats stats_of(const evloop *loop)
{
    struct evloop_stats st;
    memset(&st, 0, sizeof st);
    assert_rc(evloop_stats(loop, &st), 0);
    return st;
}

/* Whether this group's mode makes recv and send through libc (the emulation) where the
 * wrappers see them: not where the kernel does (native io_uring ops). Asked once per group
 * with a real send. */
static int g_libc_io = -1;

static bool recv_send_reach_the_wrappers(void)
{
    if (g_libc_io >= 0)
        return g_libc_io;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    fault_watch(F_SEND, s[0]);
    struct done d;
    done_init(&d);
    assert_rc(evloop_send(loop, s[0], "p", 1, on_done, &d), 0);
    assert_int_equal(wait_done(&d), 1);
    end_loop(&r, loop);
    g_libc_io = fault_read(F_SEND).calls > 0;
    fault_reset_all();
    close(s[0]);
    close(s[1]);
    printf("# recv and send %s\n", g_libc_io
                                       ? "through libc (the wrappers see them)"
                                       : "made by the kernel (native ops): injection skips");
    return g_libc_io;
}

static void skip_unless_injectable(void)
{
    if (!recv_send_reach_the_wrappers())
        skip();
}

/* ---- an echo server on one connection, and a client for it ------------------------------- */

struct echo {
    evloop *loop;
    int fd;
    char buf[64];
    test_counter echoes, posted, completed;
    _Atomic int64_t end; /* the result that ended it (0: EOF), INT64_MIN while it runs */
};

static void echo_recv_done(void *arg, int fd, int64_t res);

static void echo_count_post(struct echo *e, int rc)
{
    if (rc == 0)
        atomic_fetch_add(&e->posted, 1);
    else
        CHECK(rc == -ESHUTDOWN);
}

static void echo_sent(void *arg, int fd, int64_t res)
{
    (void)fd;
    struct echo *e = arg;
    atomic_fetch_add(&e->completed, 1);
    if (res < 0) {
        atomic_store(&e->end, res);
        return;
    }
    atomic_fetch_add(&e->echoes, 1);
    echo_count_post(e, evloop_recv(e->loop, e->fd, e->buf, sizeof e->buf, echo_recv_done, e));
}

static void echo_recv_done(void *arg, int fd, int64_t res)
{
    struct echo *e = arg;
    atomic_fetch_add(&e->completed, 1);
    if (res <= 0) {
        atomic_store(&e->end, res);
        return;
    }
    echo_count_post(e, evloop_send(e->loop, fd, e->buf, (size_t)res, echo_sent, e));
}

static void echo_start(struct echo *e, evloop *loop, int fd)
{
    memset(e, 0, sizeof *e);
    e->loop = loop;
    e->fd = fd;
    atomic_init(&e->end, INT64_MIN);
    echo_count_post(e, evloop_recv(loop, fd, e->buf, sizeof e->buf, echo_recv_done, e));
}

/* One round trip through the echo server from its blocking client: the echo counts as served
 * when the client has it back. (The server's count of completed sends may lag: where results
 * come back as reports of the next wait, native io_uring and native-sim, a stop that comes
 * first ends a send whose bytes went out with -ECANCELED.) */
static void echo_round_trip(int client, unsigned i)
{
    char msg[16], back[16];
    int n = snprintf(msg, sizeof msg, "ping %u;", i % 1000);
    assert_int_equal(write(client, msg, (size_t)n), n);
    read_full(client, back, (size_t)n);
    assert_memory_equal(back, msg, (size_t)n);
}

/* ---- a server on evloop_accept: backs off with a timer after a failure, or posts again ---- */

struct server {
    evloop *loop;
    int lfd;
    uint64_t backoff_ns; /* 0: post the next accept from the failed one's callback */
    test_counter posts, callbacks, failures, accepted, cancelled, refused;
    _Atomic int64_t last_err;
    _Atomic int conn; /* the fd accepted, -1 */
    atomic_bool armed; /* post_then_fail_accepts has run */
};

static void server_accepted(void *arg, int fd, int64_t res);

static void server_post(struct server *s)
{
    int rc = evloop_accept(s->loop, s->lfd, server_accepted, s);
    if (rc == 0) {
        atomic_fetch_add(&s->posts, 1);
    } else {
        CHECK(rc == -ESHUTDOWN);
        atomic_fetch_add(&s->refused, 1);
    }
}

static void server_retry(void *arg)
{
    server_post(arg);
}

static void server_accepted(void *arg, int fd, int64_t res)
{
    (void)fd;
    struct server *s = arg;
    atomic_fetch_add(&s->callbacks, 1);
    if (res >= 0) {
        atomic_store(&s->conn, (int)res);
        atomic_fetch_add(&s->accepted, 1);
        return;
    }
    if (res == -ECANCELED) {
        atomic_fetch_add(&s->cancelled, 1);
        return;
    }
    atomic_store(&s->last_err, res);
    atomic_fetch_add(&s->failures, 1);
    if (s->backoff_ns == 0) {
        server_post(s);
        return;
    }
    int rc = evloop_timer_start(s->loop, s->backoff_ns, 0, server_retry, s, NULL);
    CHECK(rc == 0 || rc == -ESHUTDOWN);
}

/* A task: posts the server's accept on the loop thread, where it starts inside the call (no
 * connection yet: accept4 finds none and the accept waits for readiness), then makes every
 * accept4 on the listener fail with EMFILE from now on. Both on the loop thread, so that no
 * accept4 is under way when the fault begins (one that started before would take the
 * connection past it). */
static void post_then_fail_accepts(void *arg)
{
    struct server *s = arg;
    server_post(s);
    fault_arm(F_ACCEPT, s->lfd, EMFILE, 0, -1, 1);
    atomic_store(&s->armed, true);
}

static void server_init(struct server *s, evloop *loop, int lfd, uint64_t backoff_ns)
{
    memset(s, 0, sizeof *s);
    s->loop = loop;
    s->lfd = lfd;
    s->backoff_ns = backoff_ns;
    atomic_init(&s->conn, -1);
}

/* ---- accept: EMFILE, ENFILE (and the other two errnos asyncio backs off on) --------------- */

static int e_emfile = EMFILE, e_enfile = ENFILE, e_enobufs = ENOBUFS, e_enomem = ENOMEM;

/* One accept4 failing: the op ends once with the errno after that one call, and the next
 * accept takes the connection that waited in the backlog (bytes from its client arrive). */
static void accept_failing_once(void **state)
{
    int err = *(int *)*state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int c = tcp_connect(&addr, TEST_DEADLINE_MS); /* queued before the accept is posted */
    fault_arm(F_ACCEPT, l, err, 0, 1, 1);
    struct done d1, d2, d3;
    done_init(&d1);
    done_init(&d2);
    done_init(&d3);
    assert_rc(evloop_accept(loop, l, on_done, &d1), 0);
    assert_int_equal(wait_done(&d1), -err);
    struct fault f = fault_read(F_ACCEPT);
    assert_int_equal(f.calls, 1); /* one try, reported: no retry inside the op */
    assert_int_equal(f.failed, 1);
    assert_rc(evloop_accept(loop, l, on_done, &d2), 0);
    int64_t a = wait_done(&d2);
    assert_true(a >= 0);
    assert_int_equal(fault_read(F_ACCEPT).calls, 2);
    assert_int_equal(write(c, "q", 1), 1);
    char b = 0;
    assert_rc(evloop_recv(loop, (int)a, &b, 1, on_done, &d3), 0);
    assert_int_equal(wait_done(&d3), 1);
    assert_int_equal(b, 'q');
    end_loop(&r, loop);
    fault_reset_all();
    close((int)a);
    close(c);
    close(l);
}

#define BACKOFF_NS 20000000 /* 20 ms */
#define BACKOFF_TRIES 6
#define ECHOES_IN_FAULT 3

/* A server that backs off 20 ms after each failed accept, while accept4 fails until cleared:
 * each post makes exactly one accept4 and gets one callback; between tries the loop sleeps
 * (its iterations stay few: nothing polls the listener while no accept is pending); an
 * established connection echoes meanwhile; the connection that came during the fault is
 * accepted once it clears. A loop that spun here (the listener left registered after its
 * accept's callback, an op retried inside) would make thousands of iterations a try, even
 * on a loaded machine. Where the emulation runs the accept, its first one waits for the
 * connection (so the listener is registered when the failures begin); with native io_uring
 * ops that wait would be the kernel's, which no wrapper can fail: the connection comes first
 * there, and every try fails at once. */
static void test_a_server_backing_off_after_emfile_sleeps_and_loses_no_connection(void **state)
{
    (void)state;
    bool waits_first = recv_send_reach_the_wrappers();
    struct test_runner r;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = start_loop(&r, &cfg);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int e[2];
    tcp_pair(e, TEST_DEADLINE_MS);
    struct echo echo;
    echo_start(&echo, loop, e[0]);
    echo_round_trip(e[1], 0);
    struct server s;
    server_init(&s, loop, l, BACKOFF_NS);
    int c = -1;
    if (waits_first) {
        assert_rc(evloop_submit(loop, post_then_fail_accepts, &s), 0);
        assert_true(wait_for_flag(&s.armed)); /* its accept waits for a connection */
        c = tcp_connect(&addr, TEST_DEADLINE_MS);
    } else {
        c = tcp_connect(&addr, TEST_DEADLINE_MS);
        fault_arm(F_ACCEPT, l, EMFILE, 0, -1, 1);
        server_post(&s);
    }
    if (!wait_for_count(&s.failures, 1)) {
        struct fault f = fault_read(F_ACCEPT);
        struct evloop_stats st = stats_of(loop);
        fail_msg("no failed accept: posts %llu callbacks %llu accepted %llu; accept4 calls %llu "
                 "failed %llu; loop state %d ticks %llu io callbacks %llu poller sleeps %llu",
                 (unsigned long long)atomic_load(&s.posts),
                 (unsigned long long)atomic_load(&s.callbacks),
                 (unsigned long long)atomic_load(&s.accepted), (unsigned long long)f.calls,
                 (unsigned long long)f.failed, (int)evloop_state(loop),
                 (unsigned long long)st.ticks, (unsigned long long)st.io_callbacks,
                 (unsigned long long)st.poller_sleeps);
    }
    struct evloop_stats t0 = stats_of(loop);
    uint64_t f0 = atomic_load(&s.failures);
    for (unsigned i = 1; i <= ECHOES_IN_FAULT; i++)
        echo_round_trip(e[1], i); /* the other connection is served during the fault */
    assert_true(wait_for_count(&s.failures, f0 + BACKOFF_TRIES));
    struct evloop_stats t1 = stats_of(loop);
    uint64_t f1 = atomic_load(&s.failures);
    fault_clear(F_ACCEPT);
    assert_true(wait_for_count(&s.accepted, 1));
    int a = atomic_load(&s.conn);
    assert_int_equal(write(c, "z", 1), 1);
    char b = 0;
    struct done d;
    done_init(&d);
    assert_rc(evloop_recv(loop, a, &b, 1, on_done, &d), 0);
    assert_int_equal(wait_done(&d), 1);
    assert_int_equal(b, 'z');
    end_loop(&r, loop);
    struct fault f = fault_read(F_ACCEPT);
    uint64_t ticks = t1.ticks - t0.ticks, tries = f1 - f0;
    printf("# figure: opfaults backoff %s: %llu failed accepts (%llu accept4 calls) before the "
           "one that took the connection; %llu loop iterations over %llu tries of the fault "
           "window (%d echoes served in it)\n",
           EVLOOP_TEST_VARIANT, (unsigned long long)f.failed, (unsigned long long)f.calls,
           (unsigned long long)ticks, (unsigned long long)tries, ECHOES_IN_FAULT);
    fault_reset_all();
    close(a);
    close(c);
    close(e[0]);
    close(e[1]);
    close(l);
    assert_int_equal(atomic_load(&s.failures), f.failed);
    assert_int_equal(atomic_load(&s.posts), f.failed + 1);
    assert_int_equal(f.calls, f.failed + 1); /* one accept4 per post */
    assert_int_equal(atomic_load(&s.callbacks), atomic_load(&s.posts));
    assert_int_equal(atomic_load(&s.last_err), -EMFILE);
    assert_true(ticks <= 50 * tries + 200);
}

struct ticker {
    evloop *loop;
    test_counter fired;
    evloop_timer_id id;
};

static void ticker_fire(void *arg)
{
    struct ticker *t = arg;
    atomic_fetch_add(&t->fired, 1);
}

#define AT_ONCE_TRIES 300 /* past the delivery budget of ops completed at once (state_ops.h) */

/* A server that posts its accept again from the failed one's callback: one accept4 per post
 * (every try is reported, none is hidden inside the op), and the loop goes on around it: a
 * timer fires, a task from another thread runs, an established connection echoes. After the
 * fault the queued connection is accepted. The loop does not sleep meanwhile (the listener
 * stays readable with a connection queued): the back-off is the caller's, as with libuv's
 * connection callback; asyncio's server is the one that waits ACCEPT_RETRY_DELAY. */
static void test_a_server_posting_accept_again_at_once_gets_one_try_per_post_and_starves_nothing(
    void **state)
{
    (void)state;
    skip_unless_injectable(); /* native io_uring: tries past the budget go to the kernel */
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int e[2];
    tcp_pair(e, TEST_DEADLINE_MS);
    struct echo echo;
    echo_start(&echo, loop, e[0]);
    int c = tcp_connect(&addr, TEST_DEADLINE_MS);
    fault_arm(F_ACCEPT, l, ENFILE, 0, -1, 1);
    struct server s;
    server_init(&s, loop, l, 0);
    server_post(&s);
    assert_true(wait_for_count(&s.failures, AT_ONCE_TRIES));
    struct ticker t = {.loop = loop};
    assert_rc(evloop_timer_start(loop, 1000000, 1000000, ticker_fire, &t, &t.id), 0);
    assert_true(wait_for_count(&t.fired, 3));
    test_counter ran = 0;
    assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_true(wait_for_count(&ran, 1));
    for (unsigned i = 0; i < ECHOES_IN_FAULT; i++)
        echo_round_trip(e[1], i);
    uint64_t during = atomic_load(&s.failures);
    fault_clear(F_ACCEPT);
    assert_true(wait_for_count(&s.accepted, 1));
    int a = atomic_load(&s.conn);
    end_loop(&r, loop);
    struct fault f = fault_read(F_ACCEPT);
    printf("# figure: opfaults at-once %s: %llu failed accepts, %llu accept4 calls, %llu "
           "callbacks; timer, task and %d echoes ran after %llu of them\n",
           EVLOOP_TEST_VARIANT, (unsigned long long)f.failed, (unsigned long long)f.calls,
           (unsigned long long)atomic_load(&s.callbacks), ECHOES_IN_FAULT,
           (unsigned long long)during);
    fault_reset_all();
    close(a);
    close(c);
    close(e[0]);
    close(e[1]);
    close(l);
    assert_true(a >= 0);
    assert_int_equal(atomic_load(&s.accepted), 1);
    assert_int_equal(atomic_load(&s.failures), f.failed);
    assert_int_equal(f.calls, f.failed + 1);
    assert_int_equal(atomic_load(&s.callbacks), atomic_load(&s.posts));
}

/* The real thing on every backend and mode: the fd table full (RLIMIT_NOFILE lowered to the
 * fds open, plus a few that are then taken). The accept ends with -EMFILE, the established
 * connection still echoes (it needs no new fd), and once fds are free again the connection
 * that waited is accepted. */
static void test_accept_with_the_fd_table_full_reports_emfile_and_takes_the_connection_later(
    void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int e[2];
    tcp_pair(e, TEST_DEADLINE_MS);
    struct echo echo;
    echo_start(&echo, loop, e[0]);
    int c = tcp_connect(&addr, TEST_DEADLINE_MS);
    struct full_fd_table full;
    fd_table_fill(&full);
    struct done d1, d2;
    done_init(&d1);
    done_init(&d2);
    assert_rc(evloop_accept(loop, l, on_done, &d1), 0);
    int64_t r1 = wait_done(&d1);
    for (unsigned i = 0; i < ECHOES_IN_FAULT; i++)
        echo_round_trip(e[1], i);
    fd_table_release(&full);
    assert_rc(evloop_accept(loop, l, on_done, &d2), 0);
    int64_t a = wait_done(&d2);
    assert_true(a >= 0);
    assert_int_equal(write(c, "y", 1), 1);
    char b = 0;
    struct done d3;
    done_init(&d3);
    assert_rc(evloop_recv(loop, (int)a, &b, 1, on_done, &d3), 0);
    assert_int_equal(wait_done(&d3), 1);
    end_loop(&r, loop);
    close((int)a);
    close(c);
    close(e[0]);
    close(e[1]);
    close(l);
    assert_int_equal(r1, -EMFILE);
    assert_int_equal(b, 'y');
}

/* ---- send: ENOBUFS, ENOMEM; recv and send: ECONNRESET, EPIPE ------------------------------ */

/* A send whose one send() fails ends once with the errno; nothing of it reached the socket,
 * and the next send on the fd goes out whole. */
static void send_failing_once(void **state)
{
    int err = *(int *)*state;
    skip_unless_injectable();
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    tcp_pair(s, TEST_DEADLINE_MS);
    fault_arm(F_SEND, s[0], err, 0, 1, 1);
    struct done d1, d2;
    done_init(&d1);
    done_init(&d2);
    assert_rc(evloop_send(loop, s[0], "lost", 4, on_done, &d1), 0);
    assert_int_equal(wait_done(&d1), -err);
    assert_int_equal(fault_read(F_SEND).calls, 1);
    assert_rc(evloop_send(loop, s[0], "kept", 4, on_done, &d2), 0);
    assert_int_equal(wait_done(&d2), 4);
    char got[4];
    read_full(s[1], got, 4);
    assert_memory_equal(got, "kept", 4);
    end_loop(&r, loop);
    struct fault f = fault_read(F_SEND);
    fault_reset_all();
    close(s[0]);
    close(s[1]);
    assert_int_equal(f.calls, 2);
    assert_int_equal(f.failed, 1);
}

#define BIG_SEND (1u << 20)

/* Posts the two sends of the test below from the loop thread, one after the other: the first
 * fails inside its call (its second send() does), before the second is posted. */
struct two_sends {
    evloop *loop;
    int fd;
    const void *a, *b;
    size_t alen, blen;
    struct done *da, *db;
    _Atomic int ra, rb;
};

static void post_two_sends(void *arg)
{
    struct two_sends *t = arg;
    atomic_store(&t->ra, evloop_send(t->loop, t->fd, t->a, t->alen, on_done, t->da));
    atomic_store(&t->rb, evloop_send(t->loop, t->fd, t->b, t->blen, on_done, t->db));
}

/* ENOBUFS on the second send() of a 1 MiB send, after a first one that wrote part of it: that
 * op ends once with -ENOBUFS (not with the bytes written), and a send posted after the
 * failure, before its callback ran, ends once with -ENOBUFS too, in order, none of its bytes
 * written: the peer gets the first op's part and nothing after it (never a later send's
 * bytes after a hole; the stdlib's transport closes there). A send posted once the failure
 * was reported goes out: whether to go on is the caller's. */
static void test_a_send_failing_after_a_partial_write_ends_the_sends_queued_behind_it(
    void **state)
{
    (void)state;
    skip_unless_injectable();
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    tcp_pair(s, TEST_DEADLINE_MS);
    int small = 65536;
    setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    char *big = malloc(BIG_SEND);
    assert_non_null(big);
    memset(big, 'a', BIG_SEND);
    static const char tail[16] = "0123456789abcdef";
    fault_arm(F_SEND, s[0], ENOBUFS, 1, 1, 1);
    test_counter order = 0;
    struct done d1, d2, d3;
    done_init(&d1);
    done_init(&d2);
    done_init(&d3);
    d1.order = d2.order = &order;
    struct two_sends t = {loop, s[0], big, tail, BIG_SEND, sizeof tail, &d1, &d2, 1, 1};
    assert_rc(evloop_submit(loop, post_two_sends, &t), 0);
    assert_int_equal(wait_done(&d1), -ENOBUFS);
    assert_int_equal(wait_done(&d2), -ENOBUFS);
    assert_int_equal(atomic_load(&t.ra), 0);
    assert_int_equal(atomic_load(&t.rb), 0);
    size_t part = fault_read(F_SEND).bytes;
    /* then the caller goes on: a new send after the hole */
    assert_rc(evloop_send(loop, s[0], "z", 1, on_done, &d3), 0);
    /* the peer reads the part and that one byte, and nothing else */
    size_t got = 0;
    char *in = malloc(BIG_SEND + sizeof tail);
    assert_non_null(in);
    uint64_t t0 = stress_now_ns();
    while (got < part + 1) {
        assert_true(stress_now_ns() - t0 < (uint64_t)TEST_DEADLINE_MS * 1000000u);
        struct pollfd p = {s[1], POLLIN, 0};
        if (poll(&p, 1, 10) != 1)
            continue;
        ssize_t n = read(s[1], in + got, BIG_SEND + sizeof tail - got);
        if (n < 0 && errno == EINTR)
            continue;
        assert_true(n > 0);
        got += (size_t)n;
    }
    assert_int_equal(wait_done(&d3), 1);
    end_loop(&r, loop);
    struct fault f = fault_read(F_SEND);
    fault_reset_all();
    close(s[0]);
    close(s[1]);
    printf("# the failed send had written %llu bytes before ENOBUFS\n", (unsigned long long)part);
    assert_int_equal(f.failed, 1);
    assert_true(part > 0 && part < BIG_SEND);
    assert_int_equal(f.bytes, part + 1);
    assert_int_equal(got, part + 1);
    for (size_t i = 0; i < part; i++)
        assert_int_equal(in[i], 'a');
    assert_int_equal(in[part], 'z');
    assert_int_equal(atomic_load(&d1.seq), 1);
    assert_int_equal(atomic_load(&d2.seq), 2);
    free(in);
    free(big);
}

struct kind_err {
    int kind, err;
};
static struct kind_err recv_econnreset = {F_RECV, ECONNRESET}, recv_enomem = {F_RECV, ENOMEM},
                       send_econnreset = {F_SEND, ECONNRESET}, send_epipe = {F_SEND, EPIPE};

/* recv or send failing with a connection error: the op ends once with it; the fd is the
 * caller's to close (a recv posted again on it works). */
static void op_failing_with(void **state)
{
    const struct kind_err *ke = *state;
    skip_unless_injectable();
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    tcp_pair(s, TEST_DEADLINE_MS);
    assert_int_equal(write(s[1], "w", 1), 1);
    fault_arm(ke->kind, s[0], ke->err, 0, 1, 1);
    char b = 0;
    struct done d1, d2;
    done_init(&d1);
    done_init(&d2);
    if (ke->kind == F_RECV)
        assert_rc(evloop_recv(loop, s[0], &b, 1, on_done, &d1), 0);
    else
        assert_rc(evloop_send(loop, s[0], "v", 1, on_done, &d1), 0);
    assert_int_equal(wait_done(&d1), -ke->err);
    assert_rc(evloop_recv(loop, s[0], &b, 1, on_done, &d2), 0);
    assert_int_equal(wait_done(&d2), 1);
    assert_int_equal(b, 'w');
    end_loop(&r, loop);
    struct fault f = fault_read(ke->kind);
    fault_reset_all();
    close(s[0]);
    close(s[1]);
    assert_int_equal(f.failed, 1);
}

/* ---- real: the peer goes while a large send is pending --------------------------------------- */

static bool peer_resets = true, peer_closes = false;

/* An 8 MiB send pending (the peer read only its first bytes), a send queued behind it and a
 * recv pending; the peer resets (SO_LINGER 0) or closes without reading the rest (which Linux
 * turns into a reset as well). Every pending op ends once: the sends with -ECONNRESET or
 * -EPIPE, in order, the recv with one of those or 0; the loop serves another connection
 * afterwards. On every backend and mode (native io_uring included). */
static void peer_gone_mid_send(void **state)
{
    bool reset = *(bool *)*state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    tcp_pair(s, TEST_DEADLINE_MS);
    int small = 65536;
    setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t big = 8u << 20;
    char *data = calloc(1, big);
    assert_non_null(data);
    test_counter order = 0;
    struct done d1, d2, rd;
    done_init(&d1);
    done_init(&d2);
    done_init(&rd);
    d1.order = d2.order = &order;
    char b;
    assert_rc(evloop_send(loop, s[0], data, big, on_done, &d1), 0);
    assert_rc(evloop_send(loop, s[0], data, 16, on_done, &d2), 0);
    assert_rc(evloop_recv(loop, s[0], &b, 1, on_done, &rd), 0);
    char some[4096];
    read_full(s[1], some, sizeof some); /* started, far from finished */
    if (reset) {
        struct linger lg = {1, 0};
        setsockopt(s[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    }
    close(s[1]);
    int64_t r1 = wait_done(&d1), r2 = wait_done(&d2), r3 = wait_done(&rd);
    int e[2];
    tcp_pair(e, TEST_DEADLINE_MS);
    struct echo echo;
    echo_start(&echo, loop, e[0]);
    echo_round_trip(e[1], 1);
    end_loop(&r, loop);
    close(s[0]);
    close(e[0]);
    close(e[1]);
    free(data);
    printf("# the peer %s: sends ended with %lld and %lld, the recv with %lld\n",
           reset ? "reset" : "closed", (long long)r1, (long long)r2, (long long)r3);
    assert_true(is_reset(r1));
    assert_true(is_reset(r2));
    assert_true(is_reset(r3) || r3 == 0);
    assert_int_equal(atomic_load(&d1.seq), atomic_load(&d2.seq) - 1);
}

/* ---- EINTR ---------------------------------------------------------------------------------- */

/* Five EINTRs in a row before each of accept4, recv and send: each op completes with what the
 * call that followed gave (the connection, the bytes, the whole length); EINTR never shows. */
static void test_eintr_from_accept_recv_and_send_is_retried_inside_the_op(void **state)
{
    (void)state;
    bool libc_io = recv_send_reach_the_wrappers();
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int c = tcp_connect(&addr, TEST_DEADLINE_MS);
    fault_arm(F_ACCEPT, l, EINTR, 0, 5, 1);
    struct done da;
    done_init(&da);
    assert_rc(evloop_accept(loop, l, on_done, &da), 0);
    int64_t a = wait_done(&da);
    assert_true(a >= 0);
    struct fault fa = fault_read(F_ACCEPT);
    assert_int_equal(fa.failed, 5);
    assert_int_equal(fa.calls, 6);
    assert_int_equal(write(c, "hello", 5), 5);
    fault_arm(F_RECV, (int)a, EINTR, 0, 5, 1);
    char buf[8] = {0};
    struct done dr;
    done_init(&dr);
    assert_rc(evloop_recv(loop, (int)a, buf, sizeof buf, on_done, &dr), 0);
    assert_int_equal(wait_done(&dr), 5);
    assert_memory_equal(buf, "hello", 5);
    fault_arm(F_SEND, (int)a, EINTR, 0, 5, 1);
    struct done ds;
    done_init(&ds);
    assert_rc(evloop_send(loop, (int)a, "world", 5, on_done, &ds), 0);
    assert_int_equal(wait_done(&ds), 5);
    read_full(c, buf, 5);
    assert_memory_equal(buf, "world", 5);
    end_loop(&r, loop);
    struct fault fr = fault_read(F_RECV), fs = fault_read(F_SEND);
    fault_reset_all();
    close((int)a);
    close(c);
    close(l);
    if (libc_io) {
        assert_int_equal(fr.failed, 5);
        assert_int_equal(fs.failed, 5);
        assert_int_equal(fs.calls, 6);
    }
}

#define EINTR_BYTES (2u << 20)

struct pump {
    evloop *loop;
    int fd;
    char *buf;
    size_t got, want;
    test_counter done;
    _Atomic int64_t err;
};

static void pump_recv(void *arg, int fd, int64_t res)
{
    struct pump *p = arg;
    if (res <= 0) {
        atomic_store(&p->err, res == 0 ? -EIO : res);
        atomic_fetch_add(&p->done, 1);
        return;
    }
    p->got += (size_t)res;
    if (p->got == p->want) {
        atomic_fetch_add(&p->done, 1);
        return;
    }
    size_t n = p->want - p->got < 65536 ? p->want - p->got : 65536;
    int rc = evloop_recv(p->loop, fd, p->buf + p->got, n, pump_recv, p);
    CHECK_EQ(rc, 0);
}

struct writer {
    int fd;
    const char *buf;
    size_t len;
    atomic_bool ok;
};

static void *write_all(void *arg)
{
    struct writer *w = arg;
    size_t off = 0;
    while (off < w->len) {
        ssize_t n = write(w->fd, w->buf + off, w->len - off);
        if (n <= 0)
            return NULL;
        off += (size_t)n;
    }
    atomic_store(&w->ok, true);
    return NULL;
}

/* 2 MiB each way with every other send() and recv() of the ops failing with EINTR: one send
 * op and a chain of recv ops carry every byte, intact and in order. */
static void test_eintr_on_every_other_call_of_a_large_transfer_loses_nothing(void **state)
{
    (void)state;
    skip_unless_injectable();
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    tcp_pair(s, TEST_DEADLINE_MS);
    char *out = malloc(EINTR_BYTES), *in = malloc(EINTR_BYTES), *back = malloc(EINTR_BYTES);
    assert_true(out && in && back);
    int small = 16384; /* many send() and recv() calls, a partial one each */
    setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(s[0], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    uint64_t rng = stress_seed();
    for (size_t i = 0; i < EINTR_BYTES; i++)
        out[i] = (char)stress_rand(&rng);
    fault_arm(F_SEND, s[0], EINTR, 0, -1, 2);
    fault_arm(F_RECV, s[0], EINTR, 0, -1, 2);
    struct done ds;
    done_init(&ds);
    assert_rc(evloop_send(loop, s[0], out, EINTR_BYTES, on_done, &ds), 0);
    read_full(s[1], back, EINTR_BYTES);
    assert_int_equal(wait_done(&ds), EINTR_BYTES);
    struct pump p = {.loop = loop, .fd = s[0], .buf = in, .want = EINTR_BYTES};
    assert_rc(evloop_recv(loop, s[0], in, 65536, pump_recv, &p), 0);
    struct writer w = {.fd = s[1], .buf = out, .len = EINTR_BYTES};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, write_all, &w), 0);
    bool finished = wait_for_count(&p.done, 1);
    pthread_join(t, NULL);
    end_loop(&r, loop);
    struct fault fs = fault_read(F_SEND), fr = fault_read(F_RECV);
    fault_reset_all();
    close(s[0]);
    close(s[1]);
    printf("# figure: opfaults eintr %s: %u bytes each way, %llu EINTRs of %llu send() calls, "
           "%llu of %llu recv() calls\n",
           EVLOOP_TEST_VARIANT, EINTR_BYTES, (unsigned long long)fs.failed,
           (unsigned long long)fs.calls, (unsigned long long)fr.failed,
           (unsigned long long)fr.calls);
    assert_true(finished);
    assert_true(atomic_load(&w.ok));
    assert_int_equal(atomic_load(&p.err), 0);
    assert_int_equal(p.got, EINTR_BYTES);
    assert_memory_equal(back, out, EINTR_BYTES);
    assert_memory_equal(in, out, EINTR_BYTES);
    assert_true(fs.failed > 0 && fr.failed > 0);
    assert_int_equal(fs.bytes, EINTR_BYTES);
    assert_int_equal(fr.bytes, EINTR_BYTES);
    free(out);
    free(in);
    free(back);
}

/* ---- stop and free with ops pending, some of them failing ------------------------------------ */

/* Stop while a server posts its accept again at once into a lasting ENFILE (a connection
 * queued, so every try fails and the loop never sleeps), an echo waits in recv and a send
 * waits on a full socket: every op posted gets exactly one callback (the accept's last one
 * -ECANCELED, or its own failure when the stop came between a failure and the post its
 * callback makes, which is then refused with -ESHUTDOWN), the others -ECANCELED, and
 * evloop_run returns 0. (Not with native io_uring ops: tries past the delivery budget go to
 * the kernel, which the wrapper cannot fail, and it takes the connection.) */
static void test_stop_racing_a_server_that_retries_a_lasting_accept_fault_ends_each_op_once(
    void **state)
{
    (void)state;
    skip_unless_injectable();
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int c = tcp_connect(&addr, TEST_DEADLINE_MS);
    int e[2], f[2];
    tcp_pair(e, TEST_DEADLINE_MS);
    test_socketpair(f);
    fill_send_buffer(f[0]);
    struct echo echo;
    echo_start(&echo, loop, e[0]);
    struct done sd;
    done_init(&sd);
    assert_rc(evloop_send(loop, f[0], "blocked", 7, on_done, &sd), 0);
    fault_arm(F_ACCEPT, l, ENFILE, 0, -1, 1);
    struct server s;
    server_init(&s, loop, l, 0);
    server_post(&s);
    assert_true(wait_for_count(&s.failures, 100));
    assert_rc(evloop_stop(loop), 0);
    assert_rc(test_runner_join(&r), 0);
    /* run has returned: every callback has run */
    assert_int_equal(atomic_load(&s.callbacks), atomic_load(&s.posts));
    assert_int_equal(atomic_load(&s.accepted), 0);
    assert_int_equal(atomic_load(&s.cancelled) + atomic_load(&s.refused), 1);
    assert_int_equal(atomic_load(&echo.completed), atomic_load(&echo.posted));
    assert_int_equal(atomic_load(&echo.end), -ECANCELED);
    assert_ran_once_with("the blocked send", &sd, -ECANCELED);
    test_loop_free(loop);
    g_runner = NULL;
    fault_reset_all();
    close(c);
    close(l);
    close(e[0]);
    close(e[1]);
    close(f[0]);
    close(f[1]);
}

/* The same server, no connection queued: after the delivery budget of failures completed at
 * once, its accept waits for readiness (in the kernel with native io_uring ops), and the loop
 * sleeps. A stop then ends that accept, the echo's recv and the blocked send once each with
 * -ECANCELED, and nothing is posted after it. On every backend and mode. */
static void test_stop_with_an_accept_pending_after_a_storm_of_failures_ends_each_op_with_ecanceled(
    void **state)
{
    (void)state;
    struct test_runner r;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = start_loop(&r, &cfg);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int e[2], f[2];
    tcp_pair(e, TEST_DEADLINE_MS);
    test_socketpair(f);
    fill_send_buffer(f[0]);
    struct echo echo;
    echo_start(&echo, loop, e[0]);
    struct done sd;
    done_init(&sd);
    assert_rc(evloop_send(loop, f[0], "blocked", 7, on_done, &sd), 0);
    fault_arm(F_ACCEPT, l, EMFILE, 0, -1, 1);
    struct server s;
    server_init(&s, loop, l, 0);
    uint64_t sleeps = test_sleeps(loop);
    server_post(&s);
    assert_true(wait_for_count(&s.failures, 8));
    assert_true(wait_for_sleep(loop, sleeps)); /* the storm is over: the accept waits */
    uint64_t failures = atomic_load(&s.failures);
    assert_rc(evloop_stop(loop), 0);
    assert_rc(test_runner_join(&r), 0);
    printf("# %llu failed accepts before the one the stop found pending\n",
           (unsigned long long)failures);
    assert_int_equal(atomic_load(&s.failures), failures);
    assert_int_equal(atomic_load(&s.cancelled), 1);
    assert_int_equal(atomic_load(&s.refused), 0);
    assert_int_equal(atomic_load(&s.callbacks), atomic_load(&s.posts));
    assert_int_equal(atomic_load(&echo.end), -ECANCELED);
    assert_int_equal(atomic_load(&echo.completed), atomic_load(&echo.posted));
    assert_ran_once_with("the blocked send", &sd, -ECANCELED);
    test_loop_free(loop);
    g_runner = NULL;
    fault_reset_all();
    close(l);
    close(e[0]);
    close(e[1]);
    close(f[0]);
    close(f[1]);
}

/* A loop never run, ops posted from this thread with their fds' calls armed to fail: evloop_free
 * ends each once with -ECANCELED, and none of them reached a syscall (they were only reserved:
 * the loop thread starts ops, and it started none). */
static void test_free_of_a_loop_never_run_ends_every_op_once_and_makes_no_call(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int c = tcp_connect(&addr, TEST_DEADLINE_MS);
    int s[2];
    tcp_pair(s, TEST_DEADLINE_MS);
    assert_int_equal(write(s[1], "d", 1), 1);
    fault_arm(F_ACCEPT, l, EMFILE, 0, -1, 1);
    fault_arm(F_RECV, s[0], ECONNRESET, 0, -1, 1);
    fault_arm(F_SEND, s[0], ENOBUFS, 0, -1, 1);
    char buf[4];
    test_counter order = 0;
    struct done acc, rd, sd[3];
    done_init(&acc);
    done_init(&rd);
    assert_rc(evloop_accept(loop, l, on_done, &acc), 0);
    assert_rc(evloop_recv(loop, s[0], buf, sizeof buf, on_done, &rd), 0);
    for (int i = 0; i < 3; i++) {
        done_init(&sd[i]);
        sd[i].order = &order;
        assert_rc(evloop_send(loop, s[0], "e", 1, on_done, &sd[i]), 0);
    }
    test_loop_free(loop);
    assert_ran_once_with("accept", &acc, -ECANCELED);
    assert_ran_once_with("recv", &rd, -ECANCELED);
    for (int i = 0; i < 3; i++) {
        assert_ran_once_with("send", &sd[i], -ECANCELED);
        assert_int_equal(atomic_load(&sd[i].seq), (uint64_t)i + 1);
    }
    for (int k = 0; k < F_KINDS; k++) {
        struct fault f = fault_read(k);
        if (f.calls)
            fail_msg("%s: %llu calls on an op that was never started", kind_name[k],
                     (unsigned long long)f.calls);
    }
    fault_reset_all();
    close(c);
    close(l);
    close(s[0]);
    close(s[1]);
}

static int group_setup(void **state)
{
    (void)state;
    g_libc_io = -1;
    fault_reset_all();
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        {"test_accept_failing_with_emfile_ends_once_and_the_next_takes_the_queued_connection",
         accept_failing_once, NULL, NULL, &e_emfile},
        {"test_accept_failing_with_enfile_ends_once_and_the_next_takes_the_queued_connection",
         accept_failing_once, NULL, NULL, &e_enfile},
        {"test_accept_failing_with_enobufs_ends_once_and_the_next_takes_the_queued_connection",
         accept_failing_once, NULL, NULL, &e_enobufs},
        {"test_accept_failing_with_enomem_ends_once_and_the_next_takes_the_queued_connection",
         accept_failing_once, NULL, NULL, &e_enomem},
        cmocka_unit_test(test_a_server_backing_off_after_emfile_sleeps_and_loses_no_connection),
        cmocka_unit_test(
            test_a_server_posting_accept_again_at_once_gets_one_try_per_post_and_starves_nothing),
        cmocka_unit_test(
            test_accept_with_the_fd_table_full_reports_emfile_and_takes_the_connection_later),
        {"test_send_failing_with_enobufs_ends_once_and_the_next_send_goes_out_whole",
         send_failing_once, NULL, NULL, &e_enobufs},
        {"test_send_failing_with_enomem_ends_once_and_the_next_send_goes_out_whole",
         send_failing_once, NULL, NULL, &e_enomem},
        cmocka_unit_test(
            test_a_send_failing_after_a_partial_write_ends_the_sends_queued_behind_it),
        {"test_recv_failing_with_econnreset_ends_once_with_it", op_failing_with, NULL, NULL,
         &recv_econnreset},
        {"test_recv_failing_with_enomem_ends_once_with_it", op_failing_with, NULL, NULL,
         &recv_enomem},
        {"test_send_failing_with_econnreset_ends_once_with_it", op_failing_with, NULL, NULL,
         &send_econnreset},
        {"test_send_failing_with_epipe_ends_once_with_it", op_failing_with, NULL, NULL,
         &send_epipe},
        {"test_a_peer_reset_during_a_pending_send_ends_every_pending_op_once", peer_gone_mid_send,
         NULL, NULL, &peer_resets},
        {"test_a_peer_closing_without_reading_during_a_pending_send_ends_every_pending_op_once",
         peer_gone_mid_send, NULL, NULL, &peer_closes},
        cmocka_unit_test(test_eintr_from_accept_recv_and_send_is_retried_inside_the_op),
        cmocka_unit_test(test_eintr_on_every_other_call_of_a_large_transfer_loses_nothing),
        cmocka_unit_test(
            test_stop_racing_a_server_that_retries_a_lasting_accept_fault_ends_each_op_once),
        cmocka_unit_test(
            test_stop_with_an_accept_pending_after_a_storm_of_failures_ends_each_op_with_ecanceled),
        cmocka_unit_test(test_free_of_a_loop_never_run_ends_every_op_once_and_makes_no_call),
    };
    test_require_backend();
    const char *mode = getenv("EVLOOP_OPS");
    if (mode && *mode) /* one mode asked for */
        return cmocka_run_group_tests_name("opfaults", tests, group_setup, NULL);
    int failed = cmocka_run_group_tests_name("opfaults", tests, group_setup, NULL);
    setenv("EVLOOP_OPS", "native-sim", 1);
    failed += cmocka_run_group_tests_name("opfaults, EVLOOP_OPS=native-sim", tests, group_setup,
                                          NULL);
    const char *backend = getenv("EVLOOP_BACKEND");
    if (backend && strcmp(backend, "io_uring") == 0) {
        setenv("EVLOOP_OPS", "emulate", 1);
        failed += cmocka_run_group_tests_name("opfaults, EVLOOP_OPS=emulate", tests, group_setup,
                                              NULL);
    }
    return failed;
}

#else /* not Linux */

int main(void)
{
    printf("# skipped: the wrappers target Linux's accept4/recv/send (ops_emulate.c)\n");
    return TEST_SKIP_EXIT;
}

#endif
