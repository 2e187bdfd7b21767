/* Helpers shared by the completion-op tests (test_ops.c, stress/stress_ops.c,
 * stress/stress_opfaults.c) on top of test_util.h: a recorded completion (struct done, whose
 * callback checks that it runs on the loop thread), a loop on its own thread, loopback TCP
 * sockets and a full fd table. Header-only, as stress/stress_util.h is: the files that include
 * it are tests of Linux and FreeBSD, and a .c file would be one more object for the macOS
 * cross-builds (tests/cross/run.sh) to compile. */
#ifndef EVLOOP_OPS_UTIL_H
#define EVLOOP_OPS_UTIL_H

#include "test_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

/* ---- a recorded completion ------------------------------------------------------------------ */

struct done {
    test_counter calls;
    _Atomic int64_t res;
    _Atomic int fd;
    atomic_bool off_loop; /* a callback ran on another thread than the loop's */
    struct test_runner *runner;
    test_counter *order; /* if set: the callback stores ++*order into seq */
    _Atomic uint64_t seq;
};

static struct test_runner *g_runner; /* the runner of the test now, for thread checks */

static inline void done_init(struct done *d)
{
    memset(d, 0, sizeof *d);
    atomic_init(&d->res, INT64_MIN);
    d->runner = g_runner;
}

/* An op's callback; arg: a struct done. */
static inline void on_done(void *arg, int fd, int64_t res)
{
    struct done *d = arg;
    if (d->runner && !test_on_runner_thread(d->runner))
        atomic_store(&d->off_loop, true);
    atomic_store(&d->fd, fd);
    atomic_store(&d->res, res);
    if (d->order)
        atomic_store(&d->seq, atomic_fetch_add(d->order, 1) + 1);
    atomic_fetch_add(&d->calls, 1);
}

/* Waits for d's callback and checks it ran once, on the loop thread. Returns its res. */
static inline int64_t wait_done(struct done *d)
{
    assert_true(wait_for_count(&d->calls, 1));
    assert_int_equal(atomic_load(&d->calls), 1);
    assert_false(atomic_load(&d->off_loop));
    return atomic_load(&d->res);
}

/* Checks that d's callback ran exactly once, with res, where nothing is left to wait for (the
 * loop has stopped or been freed); name says which op d is. */
static inline void assert_ran_once_with(const char *name, struct done *d, int64_t res)
{
    uint64_t calls = atomic_load(&d->calls);
    int64_t got = atomic_load(&d->res);
    if (calls != 1 || got != res)
        fail_msg("%s: %llu callbacks, the last with %lld; expected 1 callback with %lld", name,
                 (unsigned long long)calls, (long long)got, (long long)res);
}

/* ---- a loop on its own thread --------------------------------------------------------------- */

/* A loop running on its own thread, with g_runner set. */
static inline evloop *start_loop(struct test_runner *r, const evloop_config *cfg)
{
    evloop *loop = test_loop_new(cfg);
    g_runner = r;
    test_runner_start(r, loop);
    return loop;
}

static inline void end_loop(struct test_runner *r, evloop *loop)
{
    test_runner_stop(r);
    test_loop_free(loop);
    g_runner = NULL;
}

/* ---- loopback TCP --------------------------------------------------------------------------- */

/* stress_opfaults.c wraps accept4 and send at link time (-Wl,--wrap) to fail and count the
 * library's calls on a chosen fd; the helpers here make their own calls with accept and sendto,
 * which the wrappers never see, so that a test's sockets are never counted or failed. */

/* A non-blocking loopback TCP listener on a port the kernel picks (written to addr), with a
 * listen() backlog of backlog connections. */
static inline int tcp_listener_backlog(struct sockaddr_in *addr, int backlog)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    memset(addr, 0, sizeof *addr);
    addr->sin_family = AF_INET;
    addr->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    assert_int_equal(bind(fd, (struct sockaddr *)addr, sizeof *addr), 0);
    socklen_t len = sizeof *addr;
    assert_int_equal(getsockname(fd, (struct sockaddr *)addr, &len), 0);
    assert_int_equal(listen(fd, backlog), 0);
    return fd;
}

/* tcp_listener_backlog() with a backlog of 128. */
static inline int tcp_listener(struct sockaddr_in *addr)
{
    return tcp_listener_backlog(addr, 128);
}

/* tcp_connect()'s and tcp_pair()'s read_timeout_ms for a client whose reads wait for as long
 * as it takes. */
#define TCP_NO_READ_TIMEOUT 0

/* A blocking client connected to addr. read_timeout_ms > 0: its reads give up after that long
 * (SO_RCVTIMEO); a read with a timeout is not restarted after an interruption, so it may also
 * end with EINTR (stress_opfaults.c's read_full says when, and retries). */
static inline int tcp_connect(const struct sockaddr_in *addr, int read_timeout_ms)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    assert_int_equal(connect(fd, (const struct sockaddr *)addr, sizeof *addr), 0);
    if (read_timeout_ms > 0) {
        struct timeval tv = {read_timeout_ms / 1000, (read_timeout_ms % 1000) * 1000};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    }
    return fd;
}

/* A connected loopback TCP pair: s[0] non-blocking and close-on-exec (the ops' side), s[1] a
 * client as tcp_connect(read_timeout_ms) makes it. The connection is waited for with the test
 * deadline. */
static inline void tcp_pair(int s[2], int read_timeout_ms)
{
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    s[1] = tcp_connect(&addr, read_timeout_ms);
    struct pollfd p = {l, POLLIN, 0};
    assert_int_equal(poll(&p, 1, TEST_DEADLINE_MS), 1);
    s[0] = accept(l, NULL, NULL); /* not accept4: see above */
    assert_true(s[0] >= 0);
    int fl = fcntl(s[0], F_GETFL);
    assert_true(fl >= 0 && fcntl(s[0], F_SETFL, fl | O_NONBLOCK) == 0);
    assert_int_equal(fcntl(s[0], F_SETFD, FD_CLOEXEC), 0);
    close(l);
}

/* Fills fd's send buffer, so that a send on it waits. */
static inline void fill_send_buffer(int fd)
{
    static char junk[65536];
    while (sendto(fd, junk, sizeof junk, MSG_DONTWAIT, NULL, 0) > 0) /* not send: see above */
        continue;
}

/* ---- a full fd table ------------------------------------------------------------------------ */

/* No fd left to open: the soft RLIMIT_NOFILE a little above the lowest free fd, and those few
 * fds taken. */
struct full_fd_table {
    struct rlimit old;
    int fill[8], nfill;
};

static inline void fd_table_fill(struct full_fd_table *t)
{
    int lowest = dup(0);
    assert_true(lowest >= 0);
    close(lowest);
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &t->old), 0);
    struct rlimit low = {(rlim_t)lowest + 8, t->old.rlim_max};
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    t->nfill = 0;
    while (t->nfill < 8 && (t->fill[t->nfill] = dup(0)) >= 0)
        t->nfill++;
}

/* Closes the fds fd_table_fill() took and restores the limit. */
static inline void fd_table_release(struct full_fd_table *t)
{
    while (t->nfill > 0)
        close(t->fill[--t->nfill]);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &t->old), 0);
}

#endif
