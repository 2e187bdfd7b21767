/* What only the io_uring backend does: what runs (readiness from an epoll set, harvested with
 * epoll_pwait2) and that evloop_stats() says so; "auto" taking epoll, which ties io_uring's fd
 * round trip and comes first in its order; readiness and native op completions kept through a
 * CQ overflow (EVLOOP_IO_URING_CQ makes the CQ tiny), and the unified wait: a loop asleep in
 * the poller is woken by the futex wake on its sleep word (stats.futex_wakes moves,
 * poller_wakes does not), also when the process was single-threaded when the futex wait was
 * armed. Under EVLOOP_IO_URING_WAKE=eventfd the same cases run with the eventfd wake. */
#include "backend_util.h"

#include <liburing.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef BT_WAKE
#define BT_WAKE "futex" /* the build's fast-wake primitive, from CMake */
#endif

/* True when the loop should sleep in the poller on its futex word. */
static bool expect_futex_wait(void)
{
    const char *env = getenv("EVLOOP_IO_URING_WAKE");
    if (strcmp(BT_WAKE, "futex") != 0 || (env && strcmp(env, "eventfd") == 0))
        return false;
    struct io_uring_probe *p = io_uring_get_probe();
    bool has = p && io_uring_opcode_supported(p, 51 /* IORING_OP_FUTEX_WAIT */);
    io_uring_free_probe(p);
    return has;
}

/* A loop whose ring has a CQ of `entries` (0: the default). */
static evloop *uring_loop(unsigned entries)
{
    char v[16];
    snprintf(v, sizeof(v), "%u", entries);
    if (entries)
        setenv("EVLOOP_IO_URING_CQ", v, 1);
    evloop *loop = bt_loop_new();
    unsetenv("EVLOOP_IO_URING_CQ");
    return loop;
}

#define NFDS 64

struct fds {
    int p[NFDS][2];
    bt_counter calls[NFDS];
    bool drain;
};

static void fds_cb(void *arg, int fd, unsigned events)
{
    struct fds *f = arg;
    CHECK(events & EVLOOP_READABLE);
    for (int i = 0; i < NFDS; i++) {
        if (f->p[i][0] != fd)
            continue;
        if (f->drain)
            bt_drain(fd);
        atomic_fetch_add(&f->calls[i], 1);
    }
}

static void fds_open(struct fds *f, evloop *loop, bool drain)
{
    f->drain = drain;
    for (int i = 0; i < NFDS; i++) {
        bt_pipe(f->p[i]);
        atomic_init(&f->calls[i], 0);
        assert_int_equal(evloop_io_add(loop, f->p[i][0], EVLOOP_READABLE, fds_cb, f), 0);
    }
}

static void fds_close(struct fds *f, evloop *loop)
{
    for (int i = 0; i < NFDS; i++) {
        assert_int_equal(evloop_io_remove(loop, f->p[i][0]), 0);
        close(f->p[i][0]);
        close(f->p[i][1]);
    }
}

static void test_cq_overflow_loses_no_readiness(void **state)
{
    (void)state;
    evloop *loop = uring_loop(4);
    static struct fds f;
    fds_open(&f, loop, false); /* never drained: each stays ready and must keep coming */
    for (int i = 0; i < NFDS; i++)
        bt_write_byte(f.p[i][1]);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    for (int i = 0; i < NFDS; i++)
        assert_true(bt_wait_count(&f.calls[i], 3));
    fds_close(&f, loop);
    bt_runner_stop(&r);
    bt_loop_free(loop);
}

static void never_cb(void *arg, int fd, unsigned events)
{
    (void)arg, (void)fd, (void)events;
    CHECK(!"an idle fd was reported");
}

struct poller_goal {
    evloop *loop;
    uint64_t after;
};

static bool asleep_in_poller(void *ctx)
{
    struct poller_goal *g = ctx;
    return evloop_state(g->loop) == EVLOOP_SLEEPING && bt_stats(g->loop).poller_sleeps > g->after;
}

static void test_submit_wakes_a_loop_asleep_in_the_poller_with_the_expected_wake(void **state)
{
    (void)state;
    evloop *loop = uring_loop(0);
    int idle[2];
    bt_pipe(idle);
    assert_int_equal(evloop_io_add(loop, idle[0], EVLOOP_READABLE, never_cb, NULL), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    bt_counter ran = 0;
    struct evloop_stats st0 = bt_stats(loop), st = st0;
    for (uint64_t i = 1; i <= 100 && st.futex_wakes + st.poller_wakes == 0; i++) {
        struct poller_goal g = {loop, i == 1 ? 0 : st.poller_sleeps};
        assert_true(bt_wait(asleep_in_poller, &g));
        st = bt_stats(loop);
        assert_int_equal(evloop_submit(loop, bt_count_task, &ran), 0);
        assert_true(bt_wait_count(&ran, i));
        st = bt_stats(loop);
    }
    if (expect_futex_wait()) {
        assert_true(st.futex_wakes > 0); /* the same futex wake as in fast-wake mode */
        assert_int_equal(st.poller_wakes, 0);
    } else {
        assert_true(st.poller_wakes > 0);
        assert_int_equal(st.futex_wakes, 0);
    }
    assert_int_equal(st.futex_sleeps, 0); /* it never slept outside the poller */
    assert_int_equal(evloop_io_remove(loop, idle[0]), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(idle[0]);
    close(idle[1]);
}

static void stop_task(void *loop)
{
    CHECK(evloop_stop(loop) == 0);
}

static void *submit_stop(void *loop)
{
    CHECK(evloop_submit(loop, stop_task, loop) == 0);
    return NULL;
}

static pthread_t helper;

static void spawn_submitter(void *loop)
{
    CHECK(pthread_create(&helper, NULL, submit_stop, loop) == 0);
}

/* In a fresh single-threaded process: the loop thread arms its futex wait, a timer callback
 * then creates the process's first other thread, which submits the stop. Linux 6.16+ would
 * look for that wake in a per-process futex hash the armed wait is not in. */
static void test_futex_wait_armed_while_single_threaded_still_wakes(void **state)
{
    (void)state;
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(BT_DEADLINE_MS / 1000);
        evloop *loop = uring_loop(0);
        int idle[2];
        bt_pipe(idle);
        int r = evloop_io_add(loop, idle[0], EVLOOP_READABLE, never_cb, NULL);
        r = r ? r : evloop_timer_start(loop, 20000000, 0, spawn_submitter, loop, NULL);
        r = r ? r : evloop_run(loop);
        pthread_join(helper, NULL);
        r = r ? r : evloop_free(loop);
        _exit(r == 0 && bt_check_failures() == 0 ? 0 : 1);
    }
    int status = 0;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status)); /* killed by SIGALRM: the wake was lost */
    assert_int_equal(WEXITSTATUS(status), 0);
}

struct recv_slot {
    char buf[16];
    bt_counter calls;
    _Atomic int64_t res;
};

static void recv_done(void *arg, int fd, int64_t res)
{
    struct recv_slot *r = arg;
    (void)fd;
    atomic_store(&r->res, res);
    atomic_fetch_add(&r->calls, 1);
}

/* Native recvs on 64 sockets completing at once through a CQ of 2 entries: the kernel keeps
 * what overflows (IORING_FEAT_NODROP) until the backend flushes it; every completion must be
 * reported once, with its result. */
static void test_op_completions_overflowing_a_tiny_cq_all_arrive_once(void **state)
{
    (void)state;
    evloop *loop = uring_loop(2);
    static int sv[NFDS][2];
    static struct recv_slot slot[NFDS];
    for (int i = 0; i < NFDS; i++)
        bt_socketpair(sv[i]);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    for (uint64_t round = 1; round <= 5; round++) {
        uint64_t slept = bt_stats(loop).poller_sleeps;
        for (int i = 0; i < NFDS; i++)
            assert_int_equal(
                evloop_recv(loop, sv[i][0], slot[i].buf, sizeof(slot[i].buf), recv_done, &slot[i]),
                0);
        struct poller_goal g = {loop, slept};
        assert_true(bt_wait(asleep_in_poller, &g)); /* the recvs are in the kernel */
        for (int i = 0; i < NFDS; i++)
            bt_write_byte(sv[i][1]);
        for (int i = 0; i < NFDS; i++) {
            assert_true(bt_wait_count(&slot[i].calls, round));
            assert_int_equal(atomic_load(&slot[i].res), 1);
        }
    }
    for (int i = 0; i < NFDS; i++)
        assert_int_equal(atomic_load(&slot[i].calls), 5);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    for (int i = 0; i < NFDS; i++) {
        close(sv[i][0]);
        close(sv[i][1]);
    }
}

static void test_stats_say_which_implementation_runs(void **state)
{
    (void)state;
    evloop *loop = uring_loop(0);
    struct evloop_stats st = bt_stats(loop);
    printf("# io_uring: %s\n", st.backend_reason);
    assert_string_equal(st.backend, "io_uring");
    assert_non_null(strstr(st.backend_reason, "readiness from epoll_pwait2"));
    bt_loop_free(loop);
}

/* io_uring's fd round trip ties epoll's and does not beat it (docs/design.md, "Backends"), so
 * "auto" takes epoll, first in its order, and says so; naming io_uring still gets it. */
static void test_auto_takes_epoll_and_naming_io_uring_gets_it(void **state)
{
    (void)state;
    const char *was = getenv("EVLOOP_BACKEND");
    char *backend = was ? strdup(was) : NULL;
    unsetenv("EVLOOP_BACKEND");
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.profile = ""; /* no $EVLOOP_PROFILE: auto's own order */
    evloop *loop = NULL;
    assert_int_equal(evloop_new(&loop, &cfg), 0);
    struct evloop_stats st = bt_stats(loop);
    printf("# auto: %s (%s); fallback: \"%s\"\n", st.backend, st.backend_reason, st.fallback);
    assert_string_equal(st.backend, "epoll");
    assert_non_null(strstr(st.backend_reason, "auto"));
    assert_string_equal(st.fallback, "");
    assert_int_equal(evloop_free(loop), 0);
    cfg.backend = "io_uring";
    assert_int_equal(evloop_new(&loop, &cfg), 0);
    assert_string_equal(bt_stats(loop).backend, "io_uring");
    assert_non_null(strstr(bt_stats(loop).backend_reason, "config.backend"));
    assert_int_equal(evloop_free(loop), 0);
    if (backend)
        setenv("EVLOOP_BACKEND", backend, 1);
    free(backend);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_futex_wait_armed_while_single_threaded_still_wakes),
        cmocka_unit_test(test_stats_say_which_implementation_runs),
        cmocka_unit_test(test_auto_takes_epoll_and_naming_io_uring_gets_it),
        cmocka_unit_test(test_cq_overflow_loses_no_readiness),
        cmocka_unit_test(test_op_completions_overflowing_a_tiny_cq_all_arrive_once),
        cmocka_unit_test(test_submit_wakes_a_loop_asleep_in_the_poller_with_the_expected_wake),
    };
    evloop_free(bt_loop_new()); /* exits 77 when io_uring cannot start */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
