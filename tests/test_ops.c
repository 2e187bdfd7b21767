/* Completion operations (evloop_accept, evloop_recv, evloop_send, evloop_op_cancel) on
 * socketpairs and loopback TCP: results, order, the one callback on the loop thread, bad
 * arguments (from the loop thread and from another), -EBUSY per fd and against
 * evloop_io_add, cancel (also racing completion), stop and free with ops pending, a peer
 * reset mid-send, a slow reader, EINTR and a tiny completion queue. Calls marked "local"
 * are made on the loop thread (inside a task), "remote" ones from the test thread. */
#include "ops_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

/* ---- calls on the loop thread ----------------------------------------------------------- */

enum { ACCEPT, RECV, SEND, CANCEL };

struct call {
    evloop *loop;
    int kind, fd;
    void *buf;
    size_t len;
    evloop_op_cb cb;
    void *arg;
    _Atomic int rc;
    atomic_bool returned;
    bool cb_ran_inside; /* the callback had already run when the call returned */
    struct done *watch;
};

static int make_call(struct call *c)
{
    switch (c->kind) {
    case ACCEPT:
        return evloop_accept(c->loop, c->fd, c->cb, c->arg);
    case RECV:
        return evloop_recv(c->loop, c->fd, c->buf, c->len, c->cb, c->arg);
    case SEND:
        return evloop_send(c->loop, c->fd, c->buf, c->len, c->cb, c->arg);
    default:
        return evloop_op_cancel(c->loop, c->fd);
    }
}

static void call_task(void *arg)
{
    struct call *c = arg;
    int rc = make_call(c);
    c->cb_ran_inside = c->watch && atomic_load(&c->watch->calls) > 0;
    atomic_store(&c->rc, rc);
    atomic_store(&c->returned, true);
}

/* Makes the call on the loop thread (local) or here (remote); returns its result. */
static int call_op(bool local, evloop *loop, int kind, int fd, void *buf, size_t len,
                   struct done *d)
{
    struct call c = {.loop = loop, .kind = kind, .fd = fd, .buf = buf, .len = len,
                     .cb = on_done, .arg = d, .watch = d};
    if (!local)
        return make_call(&c);
    assert_rc(evloop_submit(loop, call_task, &c), 0);
    assert_true(wait_for_flag(&c.returned));
    assert_false(c.cb_ran_inside);
    return atomic_load(&c.rc);
}

/* ---- sockets ---------------------------------------------------------------------------- */

static void close_pair(int s[2])
{
    close(s[0]);
    close(s[1]);
}

/* The initial states of a test run twice, once a row in main(): it makes its calls on the
 * loop thread (local) or from the test thread. */
static bool on_the_loop_thread = true, from_another_thread = false;

static bool calls_are_local(void **state)
{
    return *(const bool *)*state;
}

/* ---- results ---------------------------------------------------------------------------- */

static void recv_with_data_waiting(void **state)
{
    bool local = calls_are_local(state);
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    assert_int_equal(write(s[1], "hello", 5), 5);
    char buf[16] = {0};
    struct done d;
    done_init(&d);
    assert_rc(call_op(local, loop, RECV, s[0], buf, sizeof buf, &d), 0);
    assert_int_equal(wait_done(&d), 5);
    assert_int_equal(atomic_load(&d.fd), s[0]);
    assert_memory_equal(buf, "hello", 5);
    end_loop(&r, loop);
    close_pair(s);
}

static void test_recv_waits_for_data_and_reports_zero_when_the_peer_closes(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    char buf[8];
    struct done d, eof;
    done_init(&d);
    done_init(&eof);
    uint64_t slept = test_sleeps(loop);
    assert_rc(call_op(true, loop, RECV, s[0], buf, sizeof buf, &d), 0);
    assert_true(wait_for_sleep(loop, slept));
    assert_int_equal(atomic_load(&d.calls), 0);
    assert_int_equal(write(s[1], "abc", 3), 3);
    assert_int_equal(wait_done(&d), 3);
    assert_rc(call_op(false, loop, RECV, s[0], buf, sizeof buf, &eof), 0);
    close(s[1]);
    assert_int_equal(wait_done(&eof), 0);
    end_loop(&r, loop);
    close(s[0]);
}

static void test_send_completes_with_its_length_and_the_peer_reads_it(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    static const char msg[] = "a message";
    struct done d;
    done_init(&d);
    assert_rc(call_op(true, loop, SEND, s[0], (void *)msg, sizeof msg, &d), 0);
    assert_int_equal(wait_done(&d), sizeof msg);
    char got[sizeof msg];
    assert_int_equal(read(s[1], got, sizeof got), sizeof msg);
    assert_memory_equal(got, msg, sizeof msg);
    end_loop(&r, loop);
    close_pair(s);
}

static void test_accept_gives_a_nonblocking_cloexec_fd_and_is_called_again_for_the_next(
    void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    struct done first, second;
    done_init(&first);
    done_init(&second);
    assert_rc(call_op(true, loop, ACCEPT, l, NULL, 0, &first), 0);
    assert_rc(call_op(true, loop, ACCEPT, l, NULL, 0, &second), -EBUSY); /* one per fd */
    int c1 = tcp_connect(&addr, TCP_NO_READ_TIMEOUT);
    int64_t fd1 = wait_done(&first);
    assert_true(fd1 >= 0);
    assert_true(fcntl((int)fd1, F_GETFL) & O_NONBLOCK);
    assert_true(fcntl((int)fd1, F_GETFD) & FD_CLOEXEC);
    /* queued before the next accept: found at once */
    int c2 = tcp_connect(&addr, TCP_NO_READ_TIMEOUT);
    done_init(&second);
    assert_rc(call_op(false, loop, ACCEPT, l, NULL, 0, &second), 0);
    int64_t fd2 = wait_done(&second);
    assert_true(fd2 >= 0 && fd2 != fd1);
    end_loop(&r, loop);
    close((int)fd1);
    close((int)fd2);
    close(c1);
    close(c2);
    close(l);
}

/* ---- order and partial writes ----------------------------------------------------------- */

#define SLOW_SENDS 24
#define SLOW_LEN (64 * 1024)

struct slow_reader {
    int fd;
    size_t total;
    unsigned char *got;
};

static void *slow_read(void *arg)
{
    struct slow_reader *sr = arg;
    size_t at = 0;
    while (at < sr->total) {
        usleep(200); /* slower than the sender: sends go out in many partial writes */
        ssize_t n = read(sr->fd, sr->got + at, 4096 < sr->total - at ? 4096 : sr->total - at);
        if (n <= 0)
            break;
        at += (size_t)n;
    }
    sr->total = at;
    return NULL;
}

/* Alternating the threads when remote: sends keep the order of the calls. */
static void sends_to_a_slow_reader(void **state)
{
    bool local = calls_are_local(state);
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    int small = 4096;
    setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    setsockopt(s[1], SOL_SOCKET, SO_RCVBUF, &small, sizeof small);
    fcntl(s[1], F_SETFL, fcntl(s[1], F_GETFL) & ~O_NONBLOCK); /* the reader blocks */
    size_t total = (size_t)SLOW_SENDS * SLOW_LEN;
    unsigned char *out = malloc(total), *in = calloc(1, total);
    assert_non_null(out);
    assert_non_null(in);
    for (size_t i = 0; i < total; i++)
        out[i] = (unsigned char)(i * 7 + i / SLOW_LEN);
    struct slow_reader sr = {s[1], total, in};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, slow_read, &sr), 0);
    test_counter order = 0;
    struct done d[SLOW_SENDS];
    for (int i = 0; i < SLOW_SENDS; i++) {
        done_init(&d[i]);
        d[i].order = &order;
        bool here = local || (i % 2 == 0);
        assert_rc(call_op(here, loop, SEND, s[0], out + (size_t)i * SLOW_LEN, SLOW_LEN, &d[i]), 0);
    }
    for (int i = 0; i < SLOW_SENDS; i++) {
        assert_int_equal(wait_done(&d[i]), SLOW_LEN);
        assert_int_equal(atomic_load(&d[i].seq), i + 1);
    }
    pthread_join(t, NULL);
    assert_int_equal(sr.total, total);
    assert_memory_equal(in, out, total);
    end_loop(&r, loop);
    close_pair(s);
    free(out);
    free(in);
}

/* ---- -EBUSY, and mixing with readiness -------------------------------------------------- */

static void test_a_second_recv_is_refused_while_sends_queue_beside_it(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    char buf[4], buf2[4];
    struct done rd, rd2, sd[3];
    done_init(&rd);
    done_init(&rd2);
    assert_rc(call_op(true, loop, RECV, s[0], buf, sizeof buf, &rd), 0);
    assert_rc(call_op(true, loop, RECV, s[0], buf2, sizeof buf2, &rd2), -EBUSY);
    assert_rc(call_op(false, loop, RECV, s[0], buf2, sizeof buf2, &rd2), -EBUSY);
    for (int i = 0; i < 3; i++) {
        done_init(&sd[i]);
        assert_rc(call_op(i == 1, loop, SEND, s[0], "xy", 2, &sd[i]), 0);
    }
    for (int i = 0; i < 3; i++)
        assert_int_equal(wait_done(&sd[i]), 2);
    assert_int_equal(write(s[1], "z", 1), 1);
    assert_int_equal(wait_done(&rd), 1);
    assert_int_equal(atomic_load(&rd2.calls), 0);
    end_loop(&r, loop);
    close_pair(s);
}

static void test_io_add_and_ops_refuse_each_other_per_fd(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    test_counter io = 0;
    char buf[4];
    struct done d;
    done_init(&d);
    /* readiness first: ops refused from both threads */
    assert_rc(evloop_io_add(loop, s[0], EVLOOP_READABLE, test_count_io, &io), 0);
    assert_rc(call_op(false, loop, RECV, s[0], buf, sizeof buf, &d), -EBUSY);
    assert_rc(call_op(true, loop, SEND, s[0], "a", 1, &d), -EBUSY);
    assert_rc(call_op(true, loop, ACCEPT, s[0], NULL, 0, &d), -EBUSY);
    assert_rc(evloop_io_remove(loop, s[0]), 0);
    /* ops first: io_add refused while one is pending; io_remove/modify know nothing of it */
    assert_rc(call_op(true, loop, RECV, s[0], buf, sizeof buf, &d), 0);
    assert_rc(evloop_io_add(loop, s[0], EVLOOP_READABLE, test_count_io, &io), -EBUSY);
    assert_rc(evloop_io_remove(loop, s[0]), -ENOENT);
    assert_rc(evloop_io_modify(loop, s[0], EVLOOP_READABLE), -ENOENT);
    uint64_t slept = test_sleeps(loop);
    assert_int_equal(write(s[1], "q", 1), 1);
    assert_int_equal(wait_done(&d), 1);
    /* nothing pending any more (the callback has run): readiness may take the fd */
    assert_true(wait_for_sleep(loop, slept));
    assert_rc(evloop_io_add(loop, s[0], EVLOOP_READABLE, test_count_io, &io), 0);
    assert_int_equal(write(s[1], "w", 1), 1);
    assert_true(wait_for_count(&io, 1));
    assert_rc(evloop_io_remove(loop, s[0]), 0);
    end_loop(&r, loop);
    close_pair(s);
}

/* A thread adds and removes fd with evloop_io_add/remove while the loop keeps posting
 * recvs on it (from a task, so there are gaps): each side gets 0 or -EBUSY, never both at
 * once, and every op posted gets its one callback. */
struct mix {
    evloop *loop;
    int fd;
    char buf[8];
    test_counter posted, completed, refused, io_calls;
    atomic_bool quit, io_has_it;
    _Atomic int overlaps; /* an op accepted while io_add held the fd */
};

static void mix_post(void *arg);

static void mix_done(void *arg, int fd, int64_t res)
{
    (void)fd;
    struct mix *m = arg;
    CHECK(res == -ECANCELED || res > 0);
    atomic_fetch_add(&m->completed, 1);
    if (!atomic_load(&m->quit)) {
        int rc = evloop_submit(m->loop, mix_post, m);
        CHECK(rc == 0 || rc == -ESHUTDOWN);
    }
}

static void mix_post(void *arg)
{
    struct mix *m = arg;
    if (atomic_load(&m->quit))
        return;
    int rc = evloop_recv(m->loop, m->fd, m->buf, sizeof m->buf, mix_done, m);
    if (rc == 0) {
        if (atomic_load(&m->io_has_it))
            atomic_fetch_add(&m->overlaps, 1);
        atomic_fetch_add(&m->posted, 1);
        evloop_op_cancel(m->loop, m->fd); /* ends it soon: a gap for io_add */
    } else if (rc != -ESHUTDOWN) { /* the stop may come between quit's read and the call */
        CHECK_EQ(rc, -EBUSY);
        atomic_fetch_add(&m->refused, 1);
        rc = evloop_submit(m->loop, mix_post, m);
        CHECK(rc == 0 || rc == -ESHUTDOWN);
    }
}

static void mix_io(void *arg, int fd, unsigned events)
{
    (void)fd;
    (void)events;
    atomic_fetch_add(&((struct mix *)arg)->io_calls, 1);
}

/* Rounds of io_add/remove, at most MIX_SECONDS of them: each round yields twice, and under
 * load a yield gives the CPU away for a time slice, so 2,000 rounds took 4 s on a quiet
 * machine and over a minute (ctest's timeout) beside a build, a fuzzer and another suite. */
#define MIX_ROUNDS 2000
#define MIX_SECONDS 1

static void test_io_add_and_remove_racing_ops_on_one_fd_never_hold_it_together(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    struct mix m = {.loop = loop, .fd = s[0]};
    assert_rc(evloop_submit(loop, mix_post, &m), 0);
    int added = 0, busy = 0;
    time_t until = time(NULL) + MIX_SECONDS;
    for (int i = 0; i < TEST_SIZE(MIX_ROUNDS) && (i < 20 || time(NULL) < until); i++) {
        int rc = evloop_io_add(loop, s[0], EVLOOP_WRITABLE, mix_io, &m);
        if (rc == 0) {
            atomic_store(&m.io_has_it, true);
            added++;
            sched_yield();
            atomic_store(&m.io_has_it, false);
            assert_rc(evloop_io_remove(loop, s[0]), 0);
        } else {
            assert_rc(rc, -EBUSY);
            busy++;
        }
        sched_yield();
    }
    atomic_store(&m.quit, true);
    test_runner_stop(&r);
    print_message("io_add: %d added, %d refused; ops: %llu posted, %llu refused\n", added, busy,
                  (unsigned long long)atomic_load(&m.posted),
                  (unsigned long long)atomic_load(&m.refused));
    assert_int_equal(atomic_load(&m.overlaps), 0);
    assert_int_equal(atomic_load(&m.completed), atomic_load(&m.posted));
    test_loop_free(loop);
    g_runner = NULL;
    close_pair(s);
}

/* ---- bad arguments ---------------------------------------------------------------------- */

/* The fds a bad call is given; bad_arguments() opens them. */
enum bad_fd { CLOSED_FD, FD_MINUS_1, FD_MINUS_3, PIPE_READ, PIPE_WRITE, SOCKET, TCP_NOT_LISTENING };

/* A call refused from either thread, and no callback runs. Its buffer, when it has one, is 4
 * bytes. A call with no_loop or no_cb (NULL passed for the loop or the callback) is made on
 * the test thread in both modes: one without a loop cannot be posted to the loop thread. */
static const struct bad_call {
    const char *name; /* for the failure message */
    int kind;
    enum bad_fd fd;
    bool with_buf;
    size_t len;
    bool no_loop, no_cb;
    int want;
} bad_calls[] = {
    {"recv on a closed fd", RECV, CLOSED_FD, .with_buf = true, .len = 4, .want = -EBADF},
    {"send on a closed fd", SEND, CLOSED_FD, .with_buf = true, .len = 4, .want = -EBADF},
    {"accept on a closed fd", ACCEPT, CLOSED_FD, .want = -EBADF},
    {"recv on fd -1", RECV, FD_MINUS_1, .with_buf = true, .len = 4, .want = -EBADF},
    {"recv on a pipe", RECV, PIPE_READ, .with_buf = true, .len = 4, .want = -ENOTSOCK},
    {"send on a pipe", SEND, PIPE_WRITE, .with_buf = true, .len = 4, .want = -ENOTSOCK},
    {"accept on a pipe", ACCEPT, PIPE_READ, .want = -ENOTSOCK},
    {"recv into NULL", RECV, SOCKET, .len = 4, .want = -EINVAL},
    {"send from NULL", SEND, SOCKET, .len = 4, .want = -EINVAL},
    {"recv of 0 bytes", RECV, SOCKET, .with_buf = true, .len = 0, .want = -EINVAL},
    {"send of 0 bytes", SEND, SOCKET, .with_buf = true, .len = 0, .want = -EINVAL},
    {"accept on a socketpair end (not listening)", ACCEPT, SOCKET, .want = -EINVAL},
    {"accept on a TCP socket not listening", ACCEPT, TCP_NOT_LISTENING, .want = -EINVAL},
    {"cancel with nothing pending", CANCEL, SOCKET, .want = -ENOENT},
    {"cancel on fd -3", CANCEL, FD_MINUS_3, .want = -EBADF},
    {"recv with a NULL loop", RECV, SOCKET, .with_buf = true, .len = 1, .no_loop = true,
     .want = -EINVAL},
    {"recv with a NULL callback", RECV, SOCKET, .with_buf = true, .len = 1, .no_cb = true,
     .want = -EINVAL},
    {"accept with a NULL loop", ACCEPT, SOCKET, .no_loop = true, .want = -EINVAL},
    {"send with a NULL callback", SEND, SOCKET, .with_buf = true, .len = 1, .no_cb = true,
     .want = -EINVAL},
    {"cancel with a NULL loop", CANCEL, SOCKET, .no_loop = true, .want = -EINVAL},
};

static void bad_arguments(void **state)
{
    bool local = calls_are_local(state);
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2], p[2];
    test_socketpair(s);
    test_pipe(p);
    struct done d;
    done_init(&d);
    char buf[4];
    /* The TCP socket first: opened after the closed fd, it would take its number. */
    int tcp = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    assert_true(tcp >= 0);
    int closed = dup(s[0]);
    close(closed);
    int fds[TCP_NOT_LISTENING + 1];
    fds[CLOSED_FD] = closed;
    fds[FD_MINUS_1] = -1;
    fds[FD_MINUS_3] = -3;
    fds[PIPE_READ] = p[0];
    fds[PIPE_WRITE] = p[1];
    fds[SOCKET] = s[0];
    fds[TCP_NOT_LISTENING] = tcp;
    for (size_t i = 0; i < sizeof bad_calls / sizeof bad_calls[0]; i++) {
        const struct bad_call *b = &bad_calls[i];
        void *bp = b->with_buf ? buf : NULL;
        int rc;
        if (b->no_loop || b->no_cb) {
            struct call c = {.loop = b->no_loop ? NULL : loop,
                             .kind = b->kind,
                             .fd = fds[b->fd],
                             .buf = bp,
                             .len = b->len,
                             .cb = b->no_cb ? NULL : on_done,
                             .arg = &d};
            rc = make_call(&c);
        } else {
            rc = call_op(local, loop, b->kind, fds[b->fd], bp, b->len, &d);
        }
        test_assert_rc(rc, b->want, b->name, __FILE__, __LINE__);
    }
    /* none of the refused calls runs its callback; the fd is still free for ops */
    assert_rc(call_op(local, loop, SEND, s[0], "ok", 2, &d), 0);
    assert_int_equal(wait_done(&d), 2);
    end_loop(&r, loop);
    close(tcp);
    close_pair(s);
    close_pair(p);
}

/* ---- cancel ----------------------------------------------------------------------------- */

static void cancel_everything(void **state)
{
    bool local = calls_are_local(state);
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int s[2];
    test_socketpair(s);
    fill_send_buffer(s[0]);
    test_counter order = 0;
    struct done acc, rd, sd[4];
    done_init(&acc);
    done_init(&rd);
    char buf[8];
    assert_rc(call_op(true, loop, ACCEPT, l, NULL, 0, &acc), 0);
    assert_rc(call_op(true, loop, RECV, s[0], buf, sizeof buf, &rd), 0);
    for (int i = 0; i < 4; i++) {
        done_init(&sd[i]);
        sd[i].order = &order;
        assert_rc(call_op(i % 2 == 0, loop, SEND, s[0], "abcdefgh", 8, &sd[i]), 0);
    }
    assert_rc(call_op(local, loop, CANCEL, s[0], NULL, 0, NULL), 0);
    assert_rc(call_op(local, loop, CANCEL, l, NULL, 0, NULL), 0);
    assert_int_equal(wait_done(&acc), -ECANCELED);
    assert_int_equal(wait_done(&rd), -ECANCELED);
    for (int i = 0; i < 4; i++) {
        assert_int_equal(wait_done(&sd[i]), -ECANCELED);
        assert_int_equal(atomic_load(&sd[i].seq), i + 1);
    }
    /* The fd is free again: a new recv is accepted and works. */
    struct done again;
    done_init(&again);
    assert_rc(call_op(local, loop, RECV, s[0], buf, sizeof buf, &again), 0);
    test_drain_fd(s[1]);
    assert_int_equal(write(s[1], "x", 1), 1);
    assert_int_equal(wait_done(&again), 1);
    end_loop(&r, loop);
    close_pair(s);
    close(l);
}

static void test_cancel_on_the_loop_thread_frees_the_recv_slot_at_once(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    char buf[4];
    struct done first, second;
    done_init(&first);
    done_init(&second);
    assert_rc(call_op(true, loop, RECV, s[0], buf, sizeof buf, &first), 0);
    /* cancel and recv again inside one task */
    struct call c[2] = {
        {.loop = loop, .kind = CANCEL, .fd = s[0]},
        {.loop = loop, .kind = RECV, .fd = s[0], .buf = buf, .len = sizeof buf, .cb = on_done,
         .arg = &second},
    };
    struct evloop_task tasks[2] = {{call_task, &c[0]}, {call_task, &c[1]}};
    assert_rc(evloop_submit_batch(loop, tasks, 2), 0);
    assert_true(wait_for_flag(&c[1].returned));
    assert_rc(atomic_load(&c[0].rc), 0);
    assert_rc(atomic_load(&c[1].rc), 0);
    assert_int_equal(wait_done(&first), -ECANCELED);
    assert_int_equal(write(s[1], "k", 1), 1);
    assert_int_equal(wait_done(&second), 1);
    end_loop(&r, loop);
    close_pair(s);
}

#define RACE_ROUNDS 300

/* Cancel from this thread while the peer's byte makes the recv complete: whichever wins,
 * the callback runs exactly once, with 1 or -ECANCELED. */
static void test_cancel_racing_completion_runs_the_callback_exactly_once(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    char buf[4];
    int data = 0, cancelled = 0;
    for (int i = 0; i < TEST_SIZE(RACE_ROUNDS); i++) {
        struct done d;
        done_init(&d);
        int rc;
        while ((rc = call_op(i % 2 == 0, loop, RECV, s[0], buf, 1, &d)) == -EBUSY)
            ; /* the previous round's cancel from this thread is still on its way */
        assert_rc(rc, 0);
        test_write_byte(s[1]);
        int c = evloop_op_cancel(loop, s[0]);
        assert_true(c == 0 || c == -ENOENT);
        int64_t res = wait_done(&d);
        assert_true(res == 1 || res == -ECANCELED);
        if (res == 1)
            data++;
        else
            cancelled++;
        test_drain_fd(s[0]);
        assert_int_equal(atomic_load(&d.calls), 1);
    }
    print_message("cancel race: %d completed, %d cancelled\n", data, cancelled);
    end_loop(&r, loop);
    close_pair(s);
}

/* ---- stop and free ---------------------------------------------------------------------- */

static void test_stop_with_ops_pending_completes_them_with_ecanceled_before_run_returns(
    void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    int l = tcp_listener(&addr);
    int s[2];
    test_socketpair(s);
    fill_send_buffer(s[0]);
    char buf[4];
    struct done acc, rd, sd;
    done_init(&acc);
    done_init(&rd);
    done_init(&sd);
    assert_rc(call_op(false, loop, ACCEPT, l, NULL, 0, &acc), 0);
    assert_rc(call_op(true, loop, RECV, s[0], buf, sizeof buf, &rd), 0);
    assert_rc(call_op(false, loop, SEND, s[0], "abc", 3, &sd), 0);
    assert_rc(evloop_stop(loop), 0);
    assert_rc(test_runner_join(&r), 0);
    /* run has returned: every callback has run, once */
    assert_ran_once_with("accept", &acc, -ECANCELED);
    assert_ran_once_with("recv", &rd, -ECANCELED);
    assert_ran_once_with("send", &sd, -ECANCELED);
    struct done late;
    done_init(&late);
    assert_rc(evloop_recv(loop, s[0], buf, sizeof buf, on_done, &late), -ESHUTDOWN);
    assert_rc(evloop_accept(loop, l, on_done, &late), -ESHUTDOWN);
    test_loop_free(loop);
    assert_int_equal(atomic_load(&late.calls), 0);
    g_runner = NULL;
    close_pair(s);
    close(l);
}

struct repost {
    evloop *loop;
    int fd;
    char buf[4];
    test_counter calls;
    _Atomic int rc;
    _Atomic int64_t res;
};

/* A cancelled op's callback posting again during stop is refused. */
static void repost_on_cancel(void *arg, int fd, int64_t res)
{
    struct repost *p = arg;
    atomic_store(&p->res, res);
    atomic_store(&p->rc, evloop_recv(p->loop, fd, p->buf, sizeof p->buf, repost_on_cancel, p));
    atomic_fetch_add(&p->calls, 1);
}

static void test_callbacks_run_by_stop_cannot_post_new_ops(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    struct repost p = {.loop = loop, .fd = s[0]};
    assert_rc(evloop_recv(loop, s[0], p.buf, sizeof p.buf, repost_on_cancel, &p), 0);
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&p.calls), 1);
    assert_int_equal(atomic_load(&p.res), -ECANCELED);
    assert_rc(atomic_load(&p.rc), -ESHUTDOWN);
    test_loop_free(loop);
    g_runner = NULL;
    close_pair(s);
}

static void test_free_of_a_loop_never_run_completes_its_ops_with_ecanceled(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int s[2];
    test_socketpair(s);
    assert_int_equal(write(s[1], "d", 1), 1);
    char buf[4];
    struct done rd, sd;
    done_init(&rd);
    done_init(&sd);
    assert_rc(evloop_recv(loop, s[0], buf, sizeof buf, on_done, &rd), 0);
    assert_rc(evloop_send(loop, s[0], "e", 1, on_done, &sd), 0);
    test_loop_free(loop);
    assert_ran_once_with("recv", &rd, -ECANCELED);
    assert_ran_once_with("send", &sd, -ECANCELED);
    close_pair(s);
}

/* A loop driven by evloop_run_once on this thread: ops complete through it, and a stop ends
 * the pending ones with -ECANCELED before the call that terminates the loop returns. */
static void test_ops_run_and_stop_through_run_once(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int s[2];
    test_socketpair(s);
    char buf[4];
    struct done d, pending;
    done_init(&d);
    done_init(&pending);
    assert_rc(evloop_recv(loop, s[0], buf, sizeof buf, on_done, &d), 0);
    assert_true(evloop_run_once(loop, 0) >= 0); /* starts it: nothing to read yet */
    assert_int_equal(atomic_load(&d.calls), 0);
    test_write_byte(s[1]);
    for (int i = 0; i < 1000 && atomic_load(&d.calls) == 0; i++)
        assert_true(evloop_run_once(loop, 100000000) >= 0);
    assert_ran_once_with("the recv with data", &d, 1);
    assert_rc(evloop_recv(loop, s[0], buf, sizeof buf, on_done, &pending), 0);
    assert_true(evloop_run_once(loop, 0) >= 0);
    assert_rc(evloop_stop(loop), 0);
    for (int i = 0; i < 1000 && evloop_state(loop) != EVLOOP_TERMINATED; i++)
        assert_true(evloop_run_once(loop, 0) >= 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    assert_ran_once_with("the recv pending at the stop", &pending, -ECANCELED);
    test_loop_free(loop);
    close_pair(s);
}

static void test_a_pending_op_keeps_an_auto_exit_loop_running(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.auto_exit = true;
    evloop *loop = test_loop_new(&cfg);
    int s[2];
    test_socketpair(s);
    char buf[4];
    struct done d;
    done_init(&d);
    assert_rc(evloop_recv(loop, s[0], buf, sizeof buf, on_done, &d), 0);
    struct test_runner r;
    g_runner = &r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    assert_int_equal(evloop_state(loop), EVLOOP_SLEEPING);
    test_write_byte(s[1]);
    assert_int_equal(wait_done(&d), 1);
    assert_rc(test_runner_join(&r), 0); /* nothing left: it exits by itself */
    test_loop_free(loop);
    g_runner = NULL;
    close_pair(s);
}

/* ---- peers ------------------------------------------------------------------------------ */

static void test_a_peer_reset_mid_send_fails_the_pending_sends(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    tcp_pair(s, TCP_NO_READ_TIMEOUT);
    int small = 65536;
    setsockopt(s[0], SOL_SOCKET, SO_SNDBUF, &small, sizeof small);
    size_t big = 32u << 20;
    char *data = calloc(1, big);
    assert_non_null(data);
    struct done d1, d2;
    done_init(&d1);
    done_init(&d2);
    assert_rc(call_op(true, loop, SEND, s[0], data, big, &d1), 0);
    assert_rc(call_op(false, loop, SEND, s[0], data, 16, &d2), 0);
    char some[4096];
    assert_true(read(s[1], some, sizeof some) > 0); /* started, not finished */
    struct linger lg = {1, 0};
    setsockopt(s[1], SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
    close(s[1]); /* RST */
    int64_t r1 = wait_done(&d1), r2 = wait_done(&d2);
    assert_true(r1 == -ECONNRESET || r1 == -EPIPE);
    assert_true(r2 == -ECONNRESET || r2 == -EPIPE);
    end_loop(&r, loop);
    close(s[0]);
    free(data);
}

/* ---- kernel edges ----------------------------------------------------------------------- */

static void on_signal(int sig)
{
    (void)sig;
}

struct storm {
    pthread_t target;
    atomic_bool stop;
    test_counter sent;
};

static void *signal_storm(void *arg)
{
    struct storm *st = arg;
    while (!atomic_load(&st->stop)) {
        pthread_kill(st->target, SIGUSR1);
        atomic_fetch_add(&st->sent, 1);
        usleep(50);
    }
    return NULL;
}

#define ECHO_ROUNDS 2000

/* A ping-pong over ops while signals (no SA_RESTART) hit the loop thread: EINTR anywhere
 * is retried, never reported.
 *
 * Not under valgrind (memcheck.*). Valgrind runs one thread at a time and delivers signals
 * itself; one CI run of memcheck.ops.arena.epoll (2026-11-26) stopped making progress in
 * this test for 600 s, until ctest killed it, with no deadline reached. Every wait here is
 * bounded (TEST_DEADLINE_MS) and both sockets are non-blocking, so a loop that stopped
 * answering fails in 10 s with a message: in 600 s of silence the test thread itself never
 * got to its next check (the likeliest reading: valgrind did not run it). 1,036 runs of
 * this test under valgrind here, under load, and 15,400 rounds of a plain-C storm against
 * an epoll_wait thread did not hang again. The storm runs in the plain, ASan+UBSan, TSan
 * and condvar builds; memcheck still runs every other ops test. */
static void test_ops_survive_a_signal_storm_on_the_loop_thread(void **state)
{
    (void)state;
    if (RUNNING_ON_VALGRIND)
        skip();
    struct sigaction sa = {.sa_handler = on_signal}, old;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, &old);
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    struct storm st = {.target = r.thread};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, signal_storm, &st), 0);
    char buf[8];
    for (int i = 0; i < TEST_SIZE(ECHO_ROUNDS); i++) {
        struct done rd, sd;
        done_init(&rd);
        done_init(&sd);
        assert_rc(call_op(i % 2 == 0, loop, RECV, s[0], buf, sizeof buf, &rd), 0);
        assert_int_equal(write(s[1], "ping", 4), 4);
        assert_int_equal(wait_done(&rd), 4);
        assert_rc(call_op(i % 2 == 1, loop, SEND, s[0], "pong", 4, &sd), 0);
        assert_int_equal(wait_done(&sd), 4);
        char got[4];
        assert_int_equal(read(s[1], got, 4), 4);
    }
    atomic_store(&st.stop, true);
    pthread_join(t, NULL);
    end_loop(&r, loop);
    sigaction(SIGUSR1, &old, NULL);
    close_pair(s);
}

#define MANY 256

/* Many ops complete in one wait with a completion queue of 4 entries (io_uring; other
 * backends ignore the variable): overflow loses nothing. */
static void test_many_completions_at_once_with_a_tiny_completion_queue(void **state)
{
    (void)state;
    setenv("EVLOOP_IO_URING_CQ", "4", 1);
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    unsetenv("EVLOOP_IO_URING_CQ");
    static int s[MANY][2];
    static char buf[MANY][4];
    static struct done d[MANY];
    for (int i = 0; i < MANY; i++) {
        test_socketpair(s[i]);
        done_init(&d[i]);
        assert_rc(call_op(i % 2 == 0, loop, RECV, s[i][0], buf[i], sizeof buf[i], &d[i]), 0);
    }
    struct test_gate g = {0};
    test_gate_hold(&g, loop); /* every peer writes while the loop is held: one big batch */
    for (int i = 0; i < MANY; i++)
        test_write_byte(s[i][1]);
    test_gate_open(&g);
    for (int i = 0; i < MANY; i++)
        assert_int_equal(wait_done(&d[i]), 1);
    end_loop(&r, loop);
    for (int i = 0; i < MANY; i++)
        close_pair(s[i]);
}

/* ---- fairness ----------------------------------------------------------------------------- */

#define CHAIN_BYTES 4096

/* A reader that takes one byte per recv and posts the next recv from its callback. */
struct chain {
    evloop *loop;
    char byte;
    test_counter recvs;       /* recv callbacks so far */
    _Atomic uint64_t at_task; /* recvs when the task posted at the first one ran */
    test_counter task_runs;
};

static void chain_task(void *arg)
{
    struct chain *c = arg;
    atomic_store(&c->at_task, atomic_load(&c->recvs));
    atomic_fetch_add(&c->task_runs, 1);
}

static void chain_recv(void *arg, int fd, int64_t res)
{
    struct chain *c = arg;
    uint64_t n = atomic_fetch_add(&c->recvs, 1) + 1;
    if (n == 1)
        CHECK(evloop_submit(c->loop, chain_task, c) == 0);
    if (res == 1)
        CHECK(evloop_recv(c->loop, fd, &c->byte, 1, chain_recv, c) == 0);
}

/* Recvs whose data is always there complete at once on the emulation; posted from their own
 * callbacks they must not chain on for as long as the data lasts: a task posted meanwhile
 * runs after a bounded number of them (before, after all 4096). */
static void test_recvs_completing_at_once_do_not_starve_the_rest_of_the_loop(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    int s[2];
    test_socketpair(s);
    static char data[CHAIN_BYTES];
    assert_int_equal(write(s[1], data, sizeof data), (ssize_t)sizeof data);
    close(s[1]); /* the last recv reads 0 */
    struct chain c = {.loop = loop};
    assert_rc(evloop_recv(loop, s[0], &c.byte, 1, chain_recv, &c), 0);
    assert_true(wait_for_count(&c.recvs, CHAIN_BYTES + 1));
    assert_true(wait_for_count(&c.task_runs, 1));
    end_loop(&r, loop);
    close(s[0]);
    printf("# the task ran after %llu of %d recv callbacks\n",
           (unsigned long long)atomic_load(&c.at_task), CHAIN_BYTES + 1);
    assert_true(atomic_load(&c.at_task) <= CHAIN_BYTES / 8);
}

/* A server that accepts again after an error (EMFILE: no fd left for the connection) while
 * connections wait: each accept fails at once. They must not chain on in one delivery, or
 * the loop never runs anything else (and nothing else would free an fd). A task posted at the
 * first failure runs after a bounded number of them; the callback stops accepting then, or
 * after ACCEPT_FAILURES_MAX failures in all, so that the test fails instead of hanging. */
#define ACCEPT_FAILURES_MAX 100000
#define REFUSED_CLIENTS 4 /* queued; an accept that gets an fd after all takes one */

struct refused {
    evloop *loop;
    int lfd;
    test_counter failures, others; /* accept callbacks with -EMFILE, with anything else */
    _Atomic uint64_t at_task;      /* failures when the task ran */
    test_counter task_runs;
};

static void refused_task(void *arg)
{
    struct refused *c = arg;
    atomic_store(&c->at_task, atomic_load(&c->failures));
    atomic_fetch_add(&c->task_runs, 1);
}

static void refused_accept(void *arg, int fd, int64_t res)
{
    (void)fd;
    struct refused *c = arg;
    if (res != -EMFILE) {
        /* An fd another thread of the process (a sanitizer's) closed meanwhile. */
        if (res >= 0)
            close((int)res);
        atomic_fetch_add(&c->others, 1);
    } else if (atomic_fetch_add(&c->failures, 1) == 0) {
        CHECK(evloop_submit(c->loop, refused_task, c) == 0);
    }
    if (atomic_load(&c->task_runs) == 0 && atomic_load(&c->failures) < ACCEPT_FAILURES_MAX &&
        atomic_load(&c->others) < REFUSED_CLIENTS)
        CHECK(evloop_accept(c->loop, c->lfd, refused_accept, c) == 0);
}

static void test_accepts_failing_at_once_do_not_starve_the_rest_of_the_loop(void **state)
{
    (void)state;
    struct test_runner r;
    evloop *loop = start_loop(&r, NULL);
    struct sockaddr_in addr;
    struct refused c = {.loop = loop};
    c.lfd = tcp_listener(&addr);
    int clients[REFUSED_CLIENTS];
    for (int i = 0; i < REFUSED_CLIENTS; i++) /* queued: every accept finds one */
        clients[i] = tcp_connect(&addr, TCP_NO_READ_TIMEOUT);
    struct full_fd_table full;
    fd_table_fill(&full);
    assert_rc(evloop_accept(loop, c.lfd, refused_accept, &c), 0);
    bool ran = wait_for_count(&c.task_runs, 1);
    fd_table_release(&full);
    end_loop(&r, loop);
    for (int i = 0; i < REFUSED_CLIENTS; i++)
        close(clients[i]);
    close(c.lfd);
    printf("# the task ran after %llu failed accepts (%llu other results)\n",
           (unsigned long long)atomic_load(&c.at_task),
           (unsigned long long)atomic_load(&c.others));
    assert_true(ran);
    assert_true(atomic_load(&c.others) < REFUSED_CLIENTS);
    assert_true(atomic_load(&c.at_task) <= 1000);
}

/* The provider modes the whole group runs in, one pass each, unless EVLOOP_OPS names one: the
 * backend's own way (native, or the emulation), then the core's native path over the
 * emulation (results held back to the next wait, sends cut into 1000-byte starts), and on
 * io_uring, whose ops may be native, the emulation too. */
static const struct ops_mode {
    const char *group;      /* cmocka's name for the pass */
    const char *evloop_ops; /* EVLOOP_OPS for it; NULL: left unset */
    const char *only_on;    /* the one EVLOOP_BACKEND it runs on; NULL: every backend */
} ops_modes[] = {
    {"ops", NULL, NULL},
    {"ops, EVLOOP_OPS=native-sim", "native-sim", NULL},
    {"ops, EVLOOP_OPS=emulate", "emulate", "io_uring"},
};

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        {"test_recv_on_a_socket_with_data_completes_at_once_local", recv_with_data_waiting, NULL,
         NULL, &on_the_loop_thread},
        {"test_recv_on_a_socket_with_data_completes_from_another_thread", recv_with_data_waiting,
         NULL, NULL, &from_another_thread},
        cmocka_unit_test(test_recv_waits_for_data_and_reports_zero_when_the_peer_closes),
        cmocka_unit_test(test_send_completes_with_its_length_and_the_peer_reads_it),
        cmocka_unit_test(
            test_accept_gives_a_nonblocking_cloexec_fd_and_is_called_again_for_the_next),
        {"test_sends_to_a_slow_reader_complete_in_order_in_many_partial_writes",
         sends_to_a_slow_reader, NULL, NULL, &on_the_loop_thread},
        {"test_sends_from_two_threads_keep_the_order_of_the_calls", sends_to_a_slow_reader, NULL,
         NULL, &from_another_thread},
        cmocka_unit_test(test_a_second_recv_is_refused_while_sends_queue_beside_it),
        cmocka_unit_test(test_io_add_and_ops_refuse_each_other_per_fd),
        cmocka_unit_test(test_io_add_and_remove_racing_ops_on_one_fd_never_hold_it_together),
        {"test_bad_arguments_are_refused_on_the_loop_thread_and_no_callback_runs", bad_arguments,
         NULL, NULL, &on_the_loop_thread},
        {"test_bad_arguments_are_refused_from_another_thread_and_no_callback_runs", bad_arguments,
         NULL, NULL, &from_another_thread},
        {"test_cancel_on_the_loop_thread_ends_every_pending_op_once_with_ecanceled",
         cancel_everything, NULL, NULL, &on_the_loop_thread},
        {"test_cancel_from_another_thread_ends_every_pending_op_once_with_ecanceled",
         cancel_everything, NULL, NULL, &from_another_thread},
        cmocka_unit_test(test_cancel_on_the_loop_thread_frees_the_recv_slot_at_once),
        cmocka_unit_test(test_cancel_racing_completion_runs_the_callback_exactly_once),
        cmocka_unit_test(
            test_stop_with_ops_pending_completes_them_with_ecanceled_before_run_returns),
        cmocka_unit_test(test_callbacks_run_by_stop_cannot_post_new_ops),
        cmocka_unit_test(test_free_of_a_loop_never_run_completes_its_ops_with_ecanceled),
        cmocka_unit_test(test_ops_run_and_stop_through_run_once),
        cmocka_unit_test(test_a_pending_op_keeps_an_auto_exit_loop_running),
        cmocka_unit_test(test_a_peer_reset_mid_send_fails_the_pending_sends),
        cmocka_unit_test(test_ops_survive_a_signal_storm_on_the_loop_thread),
        cmocka_unit_test(test_many_completions_at_once_with_a_tiny_completion_queue),
        cmocka_unit_test(test_recvs_completing_at_once_do_not_starve_the_rest_of_the_loop),
        cmocka_unit_test(test_accepts_failing_at_once_do_not_starve_the_rest_of_the_loop),
    };
    test_require_backend();
    const char *mode = getenv("EVLOOP_OPS");
    if (mode && *mode) /* one mode asked for */
        return cmocka_run_group_tests_name("ops", tests, NULL, NULL);
    const char *backend = getenv("EVLOOP_BACKEND");
    int failed = 0;
    for (size_t i = 0; i < sizeof ops_modes / sizeof ops_modes[0]; i++) {
        const struct ops_mode *m = &ops_modes[i];
        if (m->only_on && !(backend && strcmp(backend, m->only_on) == 0))
            continue;
        if (m->evloop_ops)
            setenv("EVLOOP_OPS", m->evloop_ops, 1);
        failed += cmocka_run_group_tests_name(m->group, tests, NULL, NULL);
    }
    return failed;
}
