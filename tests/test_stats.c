/* evloop_stats: counters start at zero and move with what the loop does (every callback
 * counted once, by kind), the sleep and wake counters show the two sleep modes, the
 * configured budget and spin are reported, and reading them from another thread while the
 * loop runs is safe and monotonic. */
#include "test_util.h"

#include <string.h>
#include <unistd.h>

static struct evloop_stats stats_of(const evloop *loop)
{
    struct evloop_stats st;
    memset(&st, 0, sizeof st);
    assert_rc(evloop_stats(loop, &st), 0);
    return st;
}

static void test_stats_of_a_new_loop_are_zero_and_name_its_backend_and_ingress(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct evloop_stats st = stats_of(loop);
    assert_int_equal(st.tasks_run, 0);
    assert_int_equal(st.microtasks_run, 0);
    assert_int_equal(st.timers_fired, 0);
    assert_int_equal(st.io_callbacks, 0);
    assert_int_equal(st.ticks, 0);
    assert_int_equal(st.futex_sleeps, 0);
    assert_int_equal(st.futex_wakes, 0);
    assert_int_equal(st.poller_sleeps, 0);
    assert_int_equal(st.poller_wakes, 0);
    assert_int_equal(st.spin_hits, 0);
    assert_int_equal(st.spin_misses, 0);
    assert_int_equal(st.ingress_overflows, 0);
    assert_non_null(st.backend);
    assert_string_equal(st.backend, evloop_backend(loop));
    assert_non_null(st.ingress);
    assert_string_equal(st.ingress, EVLOOP_TEST_VARIANT);
    assert_non_null(st.fallback);
    test_loop_free(loop);
}

/* ---- every callback counted ------------------------------------------------------------------ */

struct tally {
    evloop *loop;
    evloop_timer_id interval_id;
    int interval_fired; /* loop thread only */
    test_counter callbacks;
};

static void tally_task(void *arg)
{
    atomic_fetch_add(&((struct tally *)arg)->callbacks, 1);
}

static void tally_task_spawning(void *arg)
{
    struct tally *t = arg;
    CHECK_EQ(evloop_submit(t->loop, tally_task, t), 0); /* loop-local */
    CHECK_EQ(evloop_queue_microtask(t->loop, tally_task, t), 0);
    tally_task(t);
}

static void tally_interval(void *arg)
{
    struct tally *t = arg;
    if (++t->interval_fired == 4)
        CHECK_EQ(evloop_timer_cancel(t->loop, t->interval_id), 0);
    tally_task(t);
}

static void tally_io(void *arg, int fd, unsigned events)
{
    (void)events;
    struct tally *t = arg;
    test_drain_fd(fd);
    CHECK_EQ(evloop_io_remove(t->loop, fd), 0);
    tally_task(t);
}

static void test_stats_count_every_callback_once_by_kind(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct tally t = {.loop = loop};
    atomic_init(&t.callbacks, 0);
    int p[2];
    test_pipe(p);
    /* tasks: 1000 external + 100 internal + 50 spawning (each one more loop-local task) */
    for (int i = 0; i < 1000; i++)
        assert_rc(evloop_submit(loop, tally_task, &t), 0);
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_submit_internal(loop, tally_task, &t), 0);
    for (int i = 0; i < 50; i++)
        assert_rc(evloop_submit(loop, tally_task_spawning, &t), 0);
    /* microtasks: 20 from here + 50 from the spawning tasks */
    for (int i = 0; i < 20; i++)
        assert_rc(evloop_queue_microtask(loop, tally_task, &t), 0);
    /* timers: 3 one-shot + an interval cancelled after its 4th firing */
    for (int i = 0; i < 3; i++)
        assert_rc(evloop_timer_start(loop, 0, 0, tally_task, &t, NULL), 0);
    assert_rc(evloop_timer_start(loop, 0, 1000000, tally_interval, &t, &t.interval_id), 0);
    /* fd: one callback, which removes it */
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, tally_io, &t), 0);
    test_write_byte(p[1]);
    const uint64_t tasks = 1000 + 100 + 50 + 50, microtasks = 20 + 50, timers = 3 + 4, io = 1;
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&t.callbacks, tasks + microtasks + timers + io));
    test_runner_stop(&r);
    struct evloop_stats st = stats_of(loop);
    assert_int_equal(st.tasks_run, tasks);
    assert_int_equal(st.microtasks_run, microtasks);
    assert_int_equal(st.timers_fired, timers);
    assert_int_equal(st.io_callbacks, io);
    assert_true(st.ticks >= 1);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* ---- config ------------------------------------------------------------------------------------
 */

static void test_stats_report_a_fixed_budget_and_spin_from_the_config(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.batch_budget = 64;
    cfg.spin_ns = 0;
    evloop *loop = test_loop_new(&cfg);
    struct evloop_stats st = stats_of(loop);
    assert_int_equal(st.batch_budget, 64);
    assert_true(st.spin_ns == 0);
    test_counter ran = 0;
    for (int i = 0; i < 1000; i++)
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&ran, 1000));
    assert_true(wait_for_sleep(loop, 0));
    test_runner_stop(&r);
    st = stats_of(loop);
    assert_int_equal(st.batch_budget, 64); /* fixed: not adapted */
    assert_true(st.spin_ns == 0);
    assert_int_equal(st.spin_hits, 0); /* spin 0 = never spins */
    assert_int_equal(st.spin_misses, 0);
    assert_true(st.ticks >= 1000 / 64); /* at most 64 external tasks per tick */
    test_loop_free(loop);
}

static void test_stats_report_an_adaptive_budget_and_spin_in_force(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct evloop_stats st = stats_of(loop);
    assert_true(st.batch_budget > 0);
    assert_true(st.spin_ns >= 0);
    test_loop_free(loop);
}

/* ---- sleeps and wakes --------------------------------------------------------------------------
 */

/* Submits to a sleeping loop until a producer-side wake is counted (a submit may legally meet
 * the loop just before it blocks, so one try proves nothing; 50 tries do). The loop must be
 * asleep when this is called. */
static struct evloop_stats wake_a_sleeping_loop(evloop *loop)
{
    test_counter ran = 0;
    for (int i = 0; i < 50; i++) {
        uint64_t sleeps = test_sleeps(loop);
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
        assert_true(wait_for_count(&ran, (uint64_t)i + 1));
        struct evloop_stats st = stats_of(loop);
        if (st.futex_wakes + st.poller_wakes > 0)
            return st;
        assert_true(wait_for_sleep(loop, sleeps)); /* asleep again before the next try */
    }
    return stats_of(loop);
}

static void test_a_loop_without_fds_sleeps_and_is_woken_on_its_futex(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    struct evloop_stats st = wake_a_sleeping_loop(loop);
    test_runner_stop(&r);
    assert_true(st.futex_sleeps >= 1);
    assert_true(st.futex_wakes >= 1);
    assert_int_equal(st.poller_sleeps, 0);
    assert_int_equal(st.poller_wakes, 0);
    test_loop_free(loop);
}

static void test_a_loop_with_fds_sleeps_and_is_woken_in_the_poller(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    int p[2];
    test_pipe(p);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, "idle pipe fired"), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    uint64_t futex_sleeps = stats_of(loop).futex_sleeps;
    struct evloop_stats st = wake_a_sleeping_loop(loop);
    test_runner_stop(&r);
    assert_true(st.poller_sleeps >= 1);
    /* io_uring may wake its poller through the futex word: either wake counter may move */
    assert_true(st.poller_wakes + st.futex_wakes >= 1);
    assert_int_equal(st.futex_sleeps, futex_sleeps); /* never slept on the futex with an fd */
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* ---- ingress overflows ------------------------------------------------------------------- */

struct hammer {
    pthread_t thread;
    evloop *loop;
    int n;
    test_counter *ran;
};

static void *hammer_submit(void *arg)
{
    struct hammer *h = arg;
    for (int i = 0; i < h->n; i++)
        CHECK_EQ(evloop_submit(h->loop, test_count_task, h->ran), 0);
    return NULL;
}

/* ingress_overflows, as the header defines it: the 128-task blocks (arena segments, chunk
 * chunks) allocated beyond the preallocated pool. A burst into a loop that is not running
 * cannot drain, so it needs n / 128 blocks; the pool holds a few thousand tasks. */
static void test_ingress_overflows_count_what_went_past_the_preallocated_ingress(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter ran = 0;
    const int n = TEST_SIZE(400000);
    struct hammer h = {.loop = loop, .n = n, .ran = &ran};
    assert_int_equal(pthread_create(&h.thread, NULL, hammer_submit, &h), 0);
    assert_int_equal(pthread_join(h.thread, NULL), 0);
    struct evloop_stats st = stats_of(loop);
    print_message("# %s: overflows %llu after a burst of %d tasks\n", st.ingress,
                  (unsigned long long)st.ingress_overflows, n);
    test_loop_free(loop); /* runs them; first, so a failure below leaks nothing */
    assert_int_equal(atomic_load(&ran), n);
    assert_true(st.ingress_overflows >= (uint64_t)n / 128 / 2);
    assert_true(st.ingress_overflows <= (uint64_t)n / 128 + 1);
}

/* ---- reading while running ----------------------------------------------------------------------
 */

struct watcher {
    const evloop *loop;
    struct evloop_stats prev;
    test_counter *ran;
    uint64_t n;
};

/* Reads the stats on every poll: they only grow, and never count more than was submitted. */
static bool stats_grow_until_done(void *ctx)
{
    struct watcher *w = ctx;
    struct evloop_stats st;
    CHECK_EQ(evloop_stats(w->loop, &st), 0);
    CHECK(st.tasks_run >= w->prev.tasks_run);
    CHECK(st.ticks >= w->prev.ticks);
    CHECK(st.futex_sleeps >= w->prev.futex_sleeps);
    CHECK(st.poller_sleeps >= w->prev.poller_sleeps);
    CHECK(st.tasks_run <= w->n);
    w->prev = st;
    return atomic_load(w->ran) >= w->n;
}

static void test_stats_read_from_another_thread_while_running_only_grow(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter ran = 0;
    struct test_runner r;
    test_runner_start(&r, loop);
    const int n = TEST_SIZE(100000);
    struct hammer h = {.loop = loop, .n = n, .ran = &ran};
    struct watcher w = {.loop = loop, .prev = stats_of(loop), .ran = &ran, .n = (uint64_t)n};
    assert_int_equal(pthread_create(&h.thread, NULL, hammer_submit, &h), 0);
    bool done = wait_until(stats_grow_until_done, &w, TEST_DEADLINE_MS);
    assert_int_equal(pthread_join(h.thread, NULL), 0);
    assert_true(done);
    test_runner_stop(&r);
    assert_int_equal(stats_of(loop).tasks_run, n);
    test_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stats_of_a_new_loop_are_zero_and_name_its_backend_and_ingress),
        cmocka_unit_test(test_stats_count_every_callback_once_by_kind),
        cmocka_unit_test(test_stats_report_a_fixed_budget_and_spin_from_the_config),
        cmocka_unit_test(test_stats_report_an_adaptive_budget_and_spin_in_force),
        cmocka_unit_test(test_a_loop_without_fds_sleeps_and_is_woken_on_its_futex),
        cmocka_unit_test(test_a_loop_with_fds_sleeps_and_is_woken_in_the_poller),
        cmocka_unit_test(test_ingress_overflows_count_what_went_past_the_preallocated_ingress),
        cmocka_unit_test(test_stats_read_from_another_thread_while_running_only_grow),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stats", tests, NULL, NULL);
}
