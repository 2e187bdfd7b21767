/* auto_exit: evloop_run returns by itself once no task, microtask, timer or fd is left, and
 * not before: it waits for pending timers, for work that callbacks keep creating and for
 * registered fds. */
#include "test_util.h"

#include <unistd.h>

#define MS 1000000ull

static evloop *auto_exit_loop(void)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.auto_exit = true;
    return test_loop_new(&cfg);
}

static void test_auto_exit_run_returns_once_the_accepted_tasks_are_done(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    test_counter ran = 0;
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_rc(evloop_submit_internal(loop, test_count_task, &ran), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(atomic_load(&ran), 101);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

static void test_auto_exit_run_with_nothing_to_do_returns_at_once(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

struct timed {
    uint64_t not_before, fired_at;
    test_counter fired;
};

static void timed_fire(void *arg)
{
    struct timed *t = arg;
    t->fired_at = evloop_now_ns();
    atomic_fetch_add(&t->fired, 1);
}

static void test_auto_exit_run_waits_for_a_pending_timer(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    struct timed t = {0};
    atomic_init(&t.fired, 0);
    t.not_before = evloop_now_ns() + 20 * MS;
    assert_rc(evloop_timer_start(loop, 20 * MS, 0, timed_fire, &t, NULL), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(atomic_load(&t.fired), 1);
    assert_true(t.fired_at >= t.not_before);
    assert_true(evloop_now_ns() >= t.not_before);
    test_loop_free(loop);
}

struct interval {
    evloop *loop;
    evloop_timer_id id;
    int fired; /* loop thread only */
    int cancel_rc;
};

static void interval_fire(void *arg)
{
    struct interval *t = arg;
    if (++t->fired == 3)
        t->cancel_rc = evloop_timer_cancel(t->loop, t->id);
}

static void test_auto_exit_run_waits_for_an_interval_timer_until_it_is_cancelled(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    struct interval t = {.loop = loop, .cancel_rc = 1};
    assert_rc(evloop_timer_start(loop, 1 * MS, 1 * MS, interval_fire, &t, &t.id), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_rc(t.cancel_rc, 0);
    assert_int_equal(t.fired, 3);
    test_loop_free(loop);
}

struct canceller {
    evloop *loop;
    evloop_timer_id id;
    int cancel_rc;
};

static void cancel_the_timer(void *arg)
{
    struct canceller *c = arg;
    c->cancel_rc = evloop_timer_cancel(c->loop, c->id);
}

static void test_auto_exit_run_returns_once_its_only_timer_is_cancelled(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    struct canceller c = {.loop = loop, .cancel_rc = 1};
    assert_rc(evloop_timer_start(loop, 3600000 * MS, 0, test_never_task, "1 h timer fired", &c.id),
              0);
    assert_rc(evloop_timer_start(loop, 1 * MS, 0, cancel_the_timer, &c, NULL), 0);
    assert_rc(test_run_to_end(loop), 0); /* the join deadline is far below an hour */
    assert_rc(c.cancel_rc, 0);
    test_loop_free(loop);
}

struct chain {
    evloop *loop;
    int tasks_left, timers_left; /* loop thread only */
    test_counter tasks, microtasks, timers;
};

static void chain_timer(void *arg);

static void chain_task(void *arg)
{
    struct chain *c = arg;
    atomic_fetch_add(&c->tasks, 1);
    CHECK_EQ(evloop_queue_microtask(c->loop, test_count_task, &c->microtasks), 0);
    if (--c->tasks_left > 0)
        CHECK_EQ(evloop_submit(c->loop, chain_task, c), 0);
}

static void chain_timer(void *arg)
{
    struct chain *c = arg;
    atomic_fetch_add(&c->timers, 1);
    if (--c->timers_left > 0)
        CHECK_EQ(evloop_timer_start(c->loop, 100000, 0, chain_timer, c, NULL), 0);
}

static void test_auto_exit_run_waits_for_work_that_callbacks_keep_creating(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    struct chain c = {.loop = loop, .tasks_left = 100, .timers_left = 20};
    atomic_init(&c.tasks, 0);
    atomic_init(&c.microtasks, 0);
    atomic_init(&c.timers, 0);
    assert_rc(evloop_submit(loop, chain_task, &c), 0);
    assert_rc(evloop_timer_start(loop, 0, 0, chain_timer, &c, NULL), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(atomic_load(&c.tasks), 100);
    assert_int_equal(atomic_load(&c.microtasks), 100);
    assert_int_equal(atomic_load(&c.timers), 20);
    test_loop_free(loop);
}

struct self_remover {
    evloop *loop;
    int remove_rc;
    test_counter fired;
};

static void remove_self(void *arg, int fd, unsigned events)
{
    (void)events;
    struct self_remover *s = arg;
    test_drain_fd(fd);
    s->remove_rc = evloop_io_remove(s->loop, fd);
    atomic_fetch_add(&s->fired, 1);
}

static void test_auto_exit_run_waits_for_a_registered_fd_until_it_is_removed(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    int p[2];
    test_pipe(p);
    struct self_remover s = {.loop = loop, .remove_rc = 1};
    atomic_init(&s.fired, 0);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, remove_self, &s), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0)); /* idle with an fd: still inside run */
    assert_int_equal(evloop_state(loop), EVLOOP_SLEEPING);
    test_write_byte(p[1]);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(atomic_load(&s.fired), 1);
    assert_rc(s.remove_rc, 0);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_auto_exit_loop_still_stops_on_evloop_stop(void **state)
{
    (void)state;
    evloop *loop = auto_exit_loop();
    int p[2];
    test_pipe(p);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, "idle pipe fired"), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    test_runner_stop(&r);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_auto_exit_run_returns_once_the_accepted_tasks_are_done),
        cmocka_unit_test(test_auto_exit_run_with_nothing_to_do_returns_at_once),
        cmocka_unit_test(test_auto_exit_run_waits_for_a_pending_timer),
        cmocka_unit_test(test_auto_exit_run_waits_for_an_interval_timer_until_it_is_cancelled),
        cmocka_unit_test(test_auto_exit_run_returns_once_its_only_timer_is_cancelled),
        cmocka_unit_test(test_auto_exit_run_waits_for_work_that_callbacks_keep_creating),
        cmocka_unit_test(test_auto_exit_run_waits_for_a_registered_fd_until_it_is_removed),
        cmocka_unit_test(test_auto_exit_loop_still_stops_on_evloop_stop),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("auto_exit", tests, NULL, NULL);
}
