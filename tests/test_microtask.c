/* evloop_queue_microtask: order, microtasks queued by microtasks, running right after the
 * current callback (never inside it) and before the next task, a storm that must not starve
 * tasks or timers, and microtasks queued from another thread. */
#include "test_util.h"

#include <unistd.h>

/* Tags: tasks 1000+, microtasks below 1000. */

static void queue_hundred_microtasks(void *arg)
{
    test_log_task(arg);
    for (int i = 0; i < 100; i++)
        CHECK_EQ(evloop_queue_microtask(test_log.loop, test_log_task, test_tag(i)), 0);
}

static void test_microtasks_run_in_the_order_they_were_queued(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    assert_rc(evloop_submit(loop, queue_hundred_microtasks, test_tag(1000)), 0);
    assert_rc(evloop_submit(loop, test_log_task, test_tag(2000)), 0);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    int want[102] = {1000};
    for (int i = 0; i < 100; i++)
        want[i + 1] = i;
    want[101] = 2000;
    test_log_expect(want, 102);
    test_loop_free(loop);
}

/* Microtask 1 queues 3, 3 queues 4; the task queues 1 and 2. */
static void chained_microtask(void *arg)
{
    int t = test_tag_of(arg);
    test_log_add(t);
    if (t == 1)
        CHECK_EQ(evloop_queue_microtask(test_log.loop, chained_microtask, test_tag(3)), 0);
    if (t == 3)
        CHECK_EQ(evloop_queue_microtask(test_log.loop, chained_microtask, test_tag(4)), 0);
}

static void queue_chained_microtasks(void *arg)
{
    test_log_task(arg);
    CHECK_EQ(evloop_queue_microtask(test_log.loop, chained_microtask, test_tag(1)), 0);
    CHECK_EQ(evloop_queue_microtask(test_log.loop, chained_microtask, test_tag(2)), 0);
}

static void test_microtasks_queued_by_microtasks_run_before_the_next_task(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    assert_rc(evloop_submit(loop, queue_chained_microtasks, test_tag(1000)), 0);
    assert_rc(evloop_submit(loop, test_log_task, test_tag(2000)), 0);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    const int want[] = {1000, 1, 2, 3, 4, 2000};
    test_log_expect(want, 6);
    test_loop_free(loop);
}

static int g_depth; /* loop thread only */

static void microtask_checks_depth(void *arg)
{
    CHECK_EQ(g_depth, 0);
    g_depth++;
    test_log_task(arg);
    if (test_tag_of(arg) == 1) /* a microtask's microtask is not nested either */
        CHECK_EQ(evloop_queue_microtask(test_log.loop, microtask_checks_depth, test_tag(2)), 0);
    test_log_add(test_tag_of(arg) + 100);
    g_depth--;
}

static void task_queues_microtask_then_finishes(void *arg)
{
    CHECK_EQ(g_depth, 0);
    g_depth++;
    test_log_task(arg);
    CHECK_EQ(evloop_queue_microtask(test_log.loop, microtask_checks_depth, test_tag(1)), 0);
    test_log_add(1001); /* the task's end: before the microtask starts */
    g_depth--;
}

static void test_microtask_runs_after_the_current_callback_never_inside_it(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    g_depth = 0;
    assert_rc(evloop_submit(loop, task_queues_microtask_then_finishes, test_tag(1000)), 0);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    const int want[] = {1000, 1001, 1, 101, 2, 102};
    test_log_expect(want, 6);
    test_loop_free(loop);
}

/* ---- a storm ------------------------------------------------------------------------------ */

#define STORM_MAX 1000000u

struct storm {
    evloop *loop;
    uint64_t requeues; /* loop thread only */
    uint64_t at_external, at_local, at_timer;
    bool external_ran, local_ran, timer_fired; /* loop thread only */
    test_counter done;
};

static struct storm g_storm;

static void storm_microtask(void *arg)
{
    struct storm *s = arg;
    s->requeues++;
    if ((s->external_ran && s->local_ran && s->timer_fired) || s->requeues >= STORM_MAX) {
        atomic_store(&s->done, 1);
        return;
    }
    int r = evloop_queue_microtask(s->loop, storm_microtask, s);
    CHECK_EQ(r, 0);
    if (r != 0)
        atomic_store(&s->done, 1);
}

static void storm_external_probe(void *arg)
{
    struct storm *s = arg;
    s->at_external = s->requeues;
    s->external_ran = true;
}

static void storm_local_probe(void *arg)
{
    struct storm *s = arg;
    s->at_local = s->requeues;
    s->local_ran = true;
}

static void storm_timer_probe(void *arg)
{
    struct storm *s = arg;
    s->at_timer = s->requeues;
    s->timer_fired = true;
}

static void storm_start(void *arg)
{
    struct storm *s = arg;
    CHECK_EQ(evloop_timer_start(s->loop, 0, 0, storm_timer_probe, s, NULL), 0);
    CHECK_EQ(evloop_submit(s->loop, storm_local_probe, s), 0);
    CHECK_EQ(evloop_queue_microtask(s->loop, storm_microtask, s), 0);
}

/* A microtask that requeues itself up to a million times ends its storm as soon as an
 * external task, a task submitted on the loop thread and an expired timer have all run; if
 * the budget does not let them in, the storm runs to the million and the test fails. */
static void test_microtask_storm_does_not_starve_tasks_or_timers(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    g_storm = (struct storm){.loop = loop};
    atomic_init(&g_storm.done, 0);
    assert_rc(evloop_submit(loop, storm_start, &g_storm), 0);
    assert_rc(evloop_submit(loop, storm_external_probe, &g_storm), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&g_storm.done, 1));
    test_runner_stop(&r);
    print_message("# storm ended after %llu microtasks (task at %llu, local at %llu, "
                  "timer at %llu)\n",
                  (unsigned long long)g_storm.requeues, (unsigned long long)g_storm.at_external,
                  (unsigned long long)g_storm.at_local, (unsigned long long)g_storm.at_timer);
    assert_true(g_storm.external_ran);
    assert_true(g_storm.local_ran);
    assert_true(g_storm.timer_fired);
    assert_true(g_storm.requeues < STORM_MAX);
    test_loop_free(loop);
}

/* ---- from another thread ------------------------------------------------------------------ */

static void test_microtasks_from_another_thread_wake_the_loop_and_run_in_order(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    test_log_reset(loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_queue_microtask(loop, test_log_task, test_tag(i)), 0);
    assert_true(wait_for_count(&test_log.count, 100));
    test_runner_stop(&r);
    int want[100];
    for (int i = 0; i < 100; i++)
        want[i] = i;
    test_log_expect(want, 100);
    test_loop_free(loop);
}

static void test_microtask_from_another_thread_wakes_a_loop_asleep_in_the_poller(void **state)
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
    test_counter ran = 0;
    assert_rc(evloop_queue_microtask(loop, test_count_task, &ran), 0);
    assert_true(wait_for_count(&ran, 1));
    test_runner_stop(&r);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_microtask_from_another_thread_runs_after_the_running_callback_first(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    assert_rc(evloop_submit(loop, test_log_task, test_tag(2000)), 0);
    assert_rc(evloop_queue_microtask(loop, test_log_task, test_tag(1)), 0);
    test_gate_open(&g);
    assert_true(wait_for_count(&test_log.count, 2));
    test_runner_stop(&r);
    const int want[] = {1, 2000};
    test_log_expect(want, 2);
    test_loop_free(loop);
}

/* ---- after timer and fd callbacks ------------------------------------------------------------ */

static void timer_queues_microtask_and_task(void *arg)
{
    test_log_task(arg);
    CHECK_EQ(evloop_submit(test_log.loop, test_log_task, test_tag(2000)), 0);
    CHECK_EQ(evloop_queue_microtask(test_log.loop, test_log_task, test_tag(1)), 0);
}

static void io_queues_microtask_and_task(void *arg, int fd, unsigned events)
{
    (void)events;
    test_drain_fd(fd);
    CHECK_EQ(evloop_io_remove(test_log.loop, fd), 0);
    test_log_task(arg);
    CHECK_EQ(evloop_submit(test_log.loop, test_log_task, test_tag(2001)), 0);
    CHECK_EQ(evloop_queue_microtask(test_log.loop, test_log_task, test_tag(2)), 0);
}

static void test_microtasks_queued_in_timer_and_fd_callbacks_run_before_the_next_task(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    int p[2];
    test_pipe(p);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_timer_start(loop, 0, 0, timer_queues_microtask_and_task, test_tag(3000), NULL),
              0);
    assert_true(wait_for_count(&test_log.count, 3));
    assert_rc(
        evloop_io_add(loop, p[0], EVLOOP_READABLE, io_queues_microtask_and_task, test_tag(4000)),
        0);
    test_write_byte(p[1]);
    assert_true(wait_for_count(&test_log.count, 6));
    test_runner_stop(&r);
    const int want[] = {3000, 1, 2000, 4000, 2, 2001};
    test_log_expect(want, 6);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_microtasks_run_in_the_order_they_were_queued),
        cmocka_unit_test(test_microtasks_queued_by_microtasks_run_before_the_next_task),
        cmocka_unit_test(test_microtask_runs_after_the_current_callback_never_inside_it),
        cmocka_unit_test(test_microtask_storm_does_not_starve_tasks_or_timers),
        cmocka_unit_test(test_microtasks_from_another_thread_wake_the_loop_and_run_in_order),
        cmocka_unit_test(test_microtask_from_another_thread_wakes_a_loop_asleep_in_the_poller),
        cmocka_unit_test(test_microtask_from_another_thread_runs_after_the_running_callback_first),
        cmocka_unit_test(test_microtasks_queued_in_timer_and_fd_callbacks_run_before_the_next_task),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("microtask", tests, NULL, NULL);
}
