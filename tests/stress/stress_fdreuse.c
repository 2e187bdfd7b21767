/* fd close and number reuse with readiness pending. Two shapes, 10,000 iterations each per
 * backend in the long mode (issue 6):
 *  - same batch: two pipes are ready before one poll; the first callback removes the
 *    other, closes it, frees its callback argument, and registers a fresh pipe that gets
 *    the same fd number. The other's collected readiness must not reach anyone: not the
 *    freed argument (ASan reports a use after free), not the fresh pipe (never written).
 *  - another thread: ready pipes that are never drained keep firing; a second thread
 *    removes one, marks its argument dead, closes it, reopens the number and registers it
 *    again. A callback that begins on a dead argument started after io_remove() returned,
 *    which the header promises never happens.
 * Arguments are marked dead and, under ASan, freed, so a stale callback is caught either way. */
#include "stress_util.h"

#include <fcntl.h>
#include <unistd.h>

#define MAGIC_LIVE 0x4c495645u
#define MAGIC_DEAD 0x44454144u

struct watch_arg {
    _Atomic uint32_t magic;
    int fd;
    bool fresh; /* registered in place of a removed fd and never written */
};

static struct watch_arg *arg_new(int fd, bool fresh)
{
    struct watch_arg *a = malloc(sizeof *a);
    assert_non_null(a);
    atomic_init(&a->magic, MAGIC_LIVE);
    a->fd = fd;
    a->fresh = fresh;
    return a;
}

/* Marks dead; under ASan the memory is freed, so touching it later is a report. */
static void arg_kill(struct watch_arg *a)
{
    atomic_store_explicit(&a->magic, MAGIC_DEAD, memory_order_release);
#if STRESS_ASAN
    free(a);
#endif
}

static void arg_free_if_kept(struct watch_arg *a)
{
#if !STRESS_ASAN
    free(a);
#else
    (void)a;
#endif
}

/* ---- same batch, on the loop thread ------------------------------------------------------ */

struct batch_rig {
    evloop *loop;
    int p[2][2];
    struct watch_arg *arg[2];
    int fresh[2];
    struct watch_arg *fresh_arg;
    struct watch_arg *dead; /* kept (not freed) only outside ASan, freed at the end */
    int first;
    uint64_t stale, fresh_calls, reused, iterations;
    test_counter done;
};

static struct batch_rig g_b;

static void fresh_fire(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)fd;
    (void)events;
    g_b.fresh_calls++; /* nothing was ever written to the fresh pipe */
}

static void batch_fire(void *arg, int fd, unsigned events)
{
    struct watch_arg *a = arg;
    (void)events;
    if (atomic_load_explicit(&a->magic, memory_order_acquire) != MAGIC_LIVE) {
        g_b.stale++;
        return;
    }
    test_drain_fd(fd);
    if (g_b.first >= 0)
        return;
    int me = a == g_b.arg[0] ? 0 : 1, other = 1 - me;
    g_b.first = me;
    int ofd = g_b.p[other][0];
    CHECK_EQ(evloop_io_remove(g_b.loop, ofd), 0);
    close(ofd);
    g_b.p[other][0] = -1;
    arg_kill(g_b.arg[other]);
    g_b.dead = g_b.arg[other];
    g_b.arg[other] = NULL;
    CHECK_EQ(pipe2(g_b.fresh, O_NONBLOCK | O_CLOEXEC), 0);
    if (g_b.fresh[0] == ofd)
        g_b.reused++;
    g_b.fresh_arg = arg_new(g_b.fresh[0], true);
    CHECK_EQ(evloop_io_add(g_b.loop, g_b.fresh[0], EVLOOP_READABLE, fresh_fire, g_b.fresh_arg),
             0);
    atomic_fetch_add_explicit(&g_b.done, 1, memory_order_release);
}

/* Loop thread: sets up one iteration; both pipes are ready before the next poll. */
static void batch_setup(void *unused)
{
    (void)unused;
    g_b.first = -1;
    for (int i = 0; i < 2; i++) {
        CHECK_EQ(pipe2(g_b.p[i], O_NONBLOCK | O_CLOEXEC), 0);
        CHECK_EQ(write(g_b.p[i][1], "x", 1), 1);
        g_b.arg[i] = arg_new(g_b.p[i][0], false);
        CHECK_EQ(evloop_io_add(g_b.loop, g_b.p[i][0], EVLOOP_READABLE, batch_fire, g_b.arg[i]), 0);
    }
}

/* Loop thread: after one more poll (a later tick), removes and closes what is left. */
static void batch_cleanup(void *unused)
{
    (void)unused;
    for (int i = 0; i < 2; i++) {
        if (g_b.p[i][0] >= 0) {
            CHECK_EQ(evloop_io_remove(g_b.loop, g_b.p[i][0]), 0);
            close(g_b.p[i][0]);
        }
        close(g_b.p[i][1]);
        if (g_b.arg[i])
            free(g_b.arg[i]);
        g_b.arg[i] = NULL;
    }
    CHECK_EQ(evloop_io_remove(g_b.loop, g_b.fresh[0]), 0);
    close(g_b.fresh[0]);
    close(g_b.fresh[1]);
    free(g_b.fresh_arg);
    if (g_b.dead)
        arg_free_if_kept(g_b.dead);
    g_b.dead = NULL;
    g_b.iterations++;
    atomic_fetch_add_explicit(&g_b.done, 1, memory_order_release);
}

static uint64_t iterations(void)
{
    return stress_size("fd reuse iterations",
                       (struct stress_sizes){.plain = 5000, .asan = 2000, .tsan = 1000,
                                             .long_plain = 10000, .long_asan = 10000,
                                             .long_tsan = 10000});
}

static void test_fd_removed_closed_and_reused_inside_a_callback_of_the_same_batch_is_never_stale(
    void **state)
{
    (void)state;
    uint64_t n = iterations();
    memset(&g_b, 0, sizeof g_b);
    atomic_init(&g_b.done, 0);
    evloop_config cfg = test_config_no_spin();
    g_b.loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, g_b.loop);
    uint64_t t0 = stress_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        assert_rc(evloop_submit(g_b.loop, batch_setup, NULL), 0);
        if (!wait_for_count(&g_b.done, 2 * i + 1))
            fail_msg("iteration %llu: no callback ran", (unsigned long long)i);
        /* A timer 0 ns away runs on the next tick, after the poll that follows. */
        assert_rc(evloop_timer_start(g_b.loop, 0, 0, batch_cleanup, NULL, NULL), 0);
        if (!wait_for_count(&g_b.done, 2 * i + 2))
            fail_msg("iteration %llu: cleanup did not run", (unsigned long long)i);
    }
    test_runner_stop(&r);
    printf("# figure: fdreuse same-batch %s.%s: %llu iterations, fd number reused %llu: "
           "stale callbacks %llu, callbacks on the fresh never-written pipe %llu, %.1f s\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g_b.loop), (unsigned long long)g_b.iterations,
           (unsigned long long)g_b.reused, (unsigned long long)g_b.stale,
           (unsigned long long)g_b.fresh_calls, (double)(stress_now_ns() - t0) / 1e9);
    test_loop_free(g_b.loop);
    assert_int_equal(g_b.iterations, n);
    assert_int_equal(g_b.stale, 0);
    assert_int_equal(g_b.fresh_calls, 0);
}

/* ---- removal and reuse from another thread while readiness keeps coming ----------------- */

#define HOT_FDS 8

struct hot_rig {
    evloop *loop;
    int p[HOT_FDS][2];
    struct watch_arg *arg[HOT_FDS];
    test_counter calls;
    _Atomic uint64_t stale;
};

static struct hot_rig g_h;

static void hot_fire(void *arg, int fd, unsigned events)
{
    struct watch_arg *a = arg;
    (void)fd;
    (void)events;
    /* Never drained: the pipe stays readable, so the callback runs on every poll. */
    if (atomic_load_explicit(&a->magic, memory_order_acquire) != MAGIC_LIVE)
        atomic_fetch_add(&g_h.stale, 1);
    atomic_fetch_add_explicit(&g_h.calls, 1, memory_order_release);
}

static void test_fd_removed_closed_and_reused_from_another_thread_gets_no_callback_after_remove(
    void **state)
{
    (void)state;
    uint64_t n = iterations();
    memset(&g_h, 0, sizeof g_h);
    evloop_config cfg = test_config_no_spin();
    g_h.loop = test_loop_new(&cfg);
    atomic_init(&g_h.calls, 0);
    atomic_init(&g_h.stale, 0);
    for (int i = 0; i < HOT_FDS; i++) {
        test_pipe(g_h.p[i]);
        test_write_byte(g_h.p[i][1]);
        g_h.arg[i] = arg_new(g_h.p[i][0], false);
        assert_rc(evloop_io_add(g_h.loop, g_h.p[i][0], EVLOOP_READABLE, hot_fire, g_h.arg[i]), 0);
    }
    struct test_runner r;
    test_runner_start(&r, g_h.loop);
    uint64_t rng = stress_seed(), reused = 0;
    struct watch_arg **kept = calloc(n, sizeof *kept);
    assert_non_null(kept);
    uint64_t t0 = stress_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        int k = (int)stress_below(&rng, HOT_FDS);
        int old = g_h.p[k][0];
        if (i % 64 == 0)
            assert_true(wait_for_count(&g_h.calls, atomic_load(&g_h.calls) + HOT_FDS));
        assert_rc(evloop_io_remove(g_h.loop, old), 0);
        arg_kill(g_h.arg[k]);
        kept[i] = g_h.arg[k];
        close(old);
        close(g_h.p[k][1]);
        test_pipe(g_h.p[k]);
        reused += g_h.p[k][0] == old;
        test_write_byte(g_h.p[k][1]);
        g_h.arg[k] = arg_new(g_h.p[k][0], false);
        assert_rc(evloop_io_add(g_h.loop, g_h.p[k][0], EVLOOP_READABLE, hot_fire, g_h.arg[k]), 0);
    }
    test_runner_stop(&r);
    uint64_t stale = atomic_load(&g_h.stale);
    printf("# figure: fdreuse cross-thread %s.%s: %llu remove/close/reopen/add iterations "
           "against %d always-ready fds, fd number reused %llu, %llu callbacks: callbacks "
           "started after io_remove returned %llu, %.1f s\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g_h.loop), (unsigned long long)n, HOT_FDS,
           (unsigned long long)reused, (unsigned long long)atomic_load(&g_h.calls),
           (unsigned long long)stale, (double)(stress_now_ns() - t0) / 1e9);
    test_loop_free(g_h.loop);
    for (int i = 0; i < HOT_FDS; i++) {
        close(g_h.p[i][0]);
        close(g_h.p[i][1]);
        free(g_h.arg[i]);
    }
    for (uint64_t i = 0; i < n; i++)
        arg_free_if_kept(kept[i]);
    free(kept);
    assert_int_equal(stale, 0);
}

/* ---- events narrowed by io_modify inside a callback of the same batch --------------------- */

/* Two sockets, both readable and writable, watched for both; the first callback narrows
 * the other to READABLE. The other's readiness was collected in the same poll with
 * WRITABLE in it: after io_modify returned, WRITABLE must not be delivered for it. */
struct narrow {
    evloop *loop;
    int s[2][2];
    int first;
    unsigned events_after[2];
    int calls[2];
    test_counter any;
};
static struct narrow g_n;

static void narrow_fire(void *arg, int fd, unsigned events)
{
    int me = (int)(intptr_t)arg;
    (void)fd;
    g_n.calls[me]++;
    if (g_n.first < 0) {
        g_n.first = me;
        CHECK_EQ(evloop_io_modify(g_n.loop, g_n.s[1 - me][0], EVLOOP_READABLE), 0);
    } else if (me != g_n.first) {
        g_n.events_after[me] |= events;
    }
    atomic_fetch_add_explicit(&g_n.any, 1, memory_order_release);
}

static void test_events_narrowed_by_modify_in_a_callback_are_not_delivered_from_the_same_batch(
    void **state)
{
    (void)state;
    uint64_t n = 200, wrong = 0;
    for (uint64_t i = 0; i < n; i++) {
        memset(&g_n, 0, sizeof g_n);
        g_n.first = -1;
        atomic_init(&g_n.any, 0);
        evloop_config cfg = test_config_no_spin();
        g_n.loop = test_loop_new(&cfg);
        for (int k = 0; k < 2; k++) {
            test_socketpair(g_n.s[k]);
            test_write_byte(g_n.s[k][1]); /* readable, and a socket is writable */
            assert_rc(evloop_io_add(g_n.loop, g_n.s[k][0], EVLOOP_READABLE | EVLOOP_WRITABLE,
                                    narrow_fire, (void *)(intptr_t)k),
                      0);
        }
        struct test_runner r;
        test_runner_start(&r, g_n.loop);
        assert_true(wait_for_count(&g_n.any, 2));
        test_runner_stop(&r);
        int other = 1 - g_n.first;
        if (g_n.events_after[other] & EVLOOP_WRITABLE)
            wrong++;
        test_loop_free(g_n.loop);
        for (int k = 0; k < 2; k++) {
            close(g_n.s[k][0]);
            close(g_n.s[k][1]);
        }
    }
    printf("# figure: fdreuse narrowed events %s.%s: %llu rounds: WRITABLE delivered after "
           "io_modify(READABLE) returned %llu times\n",
           EVLOOP_TEST_VARIANT, getenv("EVLOOP_BACKEND") ? getenv("EVLOOP_BACKEND") : "auto",
           (unsigned long long)n, (unsigned long long)wrong);
    assert_int_equal(wrong, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_fd_removed_closed_and_reused_inside_a_callback_of_the_same_batch_is_never_stale),
        cmocka_unit_test(
            test_fd_removed_closed_and_reused_from_another_thread_gets_no_callback_after_remove),
        cmocka_unit_test(
            test_events_narrowed_by_modify_in_a_callback_are_not_delivered_from_the_same_batch),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_fdreuse", tests, NULL, NULL);
}
