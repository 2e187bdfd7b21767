/* Lifecycle and states of a loop: AWAKE after evloop_new, RUNNING or SLEEPING inside
 * evloop_run, TERMINATING while a stop drains, TERMINATED after; what evloop_run and
 * evloop_free do in each state, and on which thread callbacks run. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void test_new_loop_is_awake(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_int_equal(evloop_state(loop), EVLOOP_AWAKE);
    test_loop_free(loop);
}

static void test_new_loop_names_its_backend_and_the_linked_ingress_variant(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    const char *b = evloop_backend(loop);
    assert_non_null(b);
    assert_true(strcmp(b, "epoll") == 0 || strcmp(b, "io_uring") == 0 || strcmp(b, "kqueue") == 0);
    const char *want = getenv("EVLOOP_BACKEND");
    if (want && *want && strcmp(want, "auto") != 0)
        assert_string_equal(b, want);
    assert_string_equal(evloop_ingress(), EVLOOP_TEST_VARIANT);
    test_loop_free(loop);
}

static void test_running_loop_reads_running_or_sleeping_from_another_thread(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_idle_loop_reads_sleeping(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL); /* default, adaptive spin: it must still sleep */
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_state(loop, EVLOOP_SLEEPING));
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_loop_inside_a_callback_reads_running(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    assert_int_equal(evloop_state(loop), EVLOOP_RUNNING);
    test_gate_open(&g);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_stopped_loop_reads_terminating_while_it_drains(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    assert_rc(evloop_stop(loop), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATING);
    test_gate_open(&g);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

static void test_loop_reads_terminated_after_run_returns(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

static void test_run_on_a_terminated_loop_returns_eshutdown(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_rc(evloop_run(loop), -ESHUTDOWN);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

static void test_stop_before_run_makes_run_drain_accepted_tasks_and_return(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter ran = 0;
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_rc(evloop_stop(loop), 0);
    assert_rc(evloop_submit(loop, test_never_task, "submit after stop ran"), -ESHUTDOWN);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(atomic_load(&ran), 100);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

static void test_run_while_running_returns_ebusy(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_run(loop), -EBUSY);
    assert_true(evloop_state(loop) == EVLOOP_RUNNING || evloop_state(loop) == EVLOOP_SLEEPING);
    test_runner_stop(&r);
    test_loop_free(loop);
}

struct nested_run {
    evloop *loop;
    atomic_int rc;
    test_counter done;
};

static void run_inside_a_callback(void *arg)
{
    struct nested_run *n = arg;
    atomic_store(&n->rc, evloop_run(n->loop));
    atomic_fetch_add(&n->done, 1);
}

static void test_run_inside_a_callback_returns_ebusy(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct nested_run n = {.loop = loop, .rc = 1, .done = 0};
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_submit(loop, run_inside_a_callback, &n), 0);
    assert_true(wait_for_count(&n.done, 1));
    assert_rc(atomic_load(&n.rc), -EBUSY);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_free_while_running_returns_ebusy_and_frees_nothing(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_free(loop), -EBUSY);
    /* The loop still works: a task submitted now runs. */
    test_counter ran = 0;
    assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_true(wait_for_count(&ran, 1));
    test_runner_stop(&r);
    test_loop_free(loop);
}

struct free_inside {
    evloop *loop;
    atomic_int rc;
    test_counter done;
};

static void free_inside_a_callback(void *arg)
{
    struct free_inside *f = arg;
    atomic_store(&f->rc, evloop_free(f->loop));
    atomic_fetch_add(&f->done, 1);
}

static void test_free_inside_a_callback_returns_ebusy(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct free_inside f = {.loop = loop, .rc = 1, .done = 0};
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_submit(loop, free_inside_a_callback, &f), 0);
    assert_true(wait_for_count(&f.done, 1));
    assert_rc(atomic_load(&f.rc), -EBUSY);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_free_of_null_is_a_no_op(void **state)
{
    (void)state;
    assert_rc(evloop_free(NULL), 0);
}

struct on_thread {
    pthread_t expected;
    test_counter ran;
    test_counter wrong_thread;
    evloop *loop;
};

static void note_thread(void *arg)
{
    struct on_thread *t = arg;
    if (!pthread_equal(pthread_self(), t->expected))
        atomic_fetch_add(&t->wrong_thread, 1);
    atomic_fetch_add(&t->ran, 1);
}

static void note_thread_and_queue_microtask(void *arg)
{
    struct on_thread *t = arg;
    note_thread(arg);
    CHECK_EQ(evloop_queue_microtask(t->loop, note_thread, t), 0);
}

static void
test_free_of_a_loop_never_run_runs_its_accepted_tasks_on_the_calling_thread(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct on_thread t = {.expected = pthread_self(), .ran = 0, .wrong_thread = 0, .loop = loop};
    for (int i = 0; i < 1000; i++)
        assert_rc(evloop_submit(loop, note_thread, &t), 0);
    for (int i = 0; i < 10; i++)
        assert_rc(evloop_submit_internal(loop, note_thread, &t), 0);
    for (int i = 0; i < 10; i++)
        assert_rc(evloop_queue_microtask(loop, note_thread, &t), 0);
    for (int i = 0; i < 10; i++) /* each also queues a microtask while draining */
        assert_rc(evloop_submit(loop, note_thread_and_queue_microtask, &t), 0);
    /* A pending timer does not fire; the free releases it (LSan checks). */
    assert_rc(evloop_timer_start(loop, 3600ull * 1000000000u, 0, test_never_task,
                                 "timer fired during free", NULL),
              0);
    test_loop_free(loop);
    assert_int_equal(atomic_load(&t.ran), 1000 + 10 + 10 + 10 + 10);
    assert_int_equal(atomic_load(&t.wrong_thread), 0);
}

static void test_free_of_a_stopped_loop_never_run_runs_its_accepted_tasks(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter ran = 0;
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_rc(evloop_stop(loop), 0);
    test_loop_free(loop);
    assert_int_equal(atomic_load(&ran), 100);
}

static void on_timer_note_thread(void *arg)
{
    note_thread(arg);
}

static void on_io_note_thread(void *arg, int fd, unsigned events)
{
    (void)events;
    test_drain_fd(fd);
    note_thread(arg);
}

static void test_every_kind_of_callback_runs_on_the_thread_inside_run(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    struct test_runner r;
    struct on_thread t = {.ran = 0, .wrong_thread = 0, .loop = loop};
    test_runner_start(&r, loop);
    t.expected = r.thread;
    assert_true(wait_for_running(loop));
    assert_rc(evloop_submit(loop, note_thread, &t), 0);
    assert_rc(evloop_submit_internal(loop, note_thread, &t), 0);
    assert_rc(evloop_queue_microtask(loop, note_thread, &t), 0);
    assert_rc(evloop_submit(loop, note_thread_and_queue_microtask, &t), 0);
    assert_rc(evloop_timer_start(loop, 1000000, 0, on_timer_note_thread, &t, NULL), 0);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, on_io_note_thread, &t), 0);
    test_write_byte(p[1]);
    assert_true(wait_for_count(&t.ran, 7));
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&t.wrong_thread), 0);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_a_loop_can_be_created_run_and_freed_many_times(void **state)
{
    (void)state;
    for (int i = 0; i < 50; i++) {
        evloop *loop = test_loop_new(NULL);
        test_counter ran = 0;
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
        assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
        assert_rc(test_run_to_end(loop), 0);
        assert_int_equal(atomic_load(&ran), 1);
        test_loop_free(loop);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_loop_is_awake),
        cmocka_unit_test(test_new_loop_names_its_backend_and_the_linked_ingress_variant),
        cmocka_unit_test(test_running_loop_reads_running_or_sleeping_from_another_thread),
        cmocka_unit_test(test_idle_loop_reads_sleeping),
        cmocka_unit_test(test_loop_inside_a_callback_reads_running),
        cmocka_unit_test(test_stopped_loop_reads_terminating_while_it_drains),
        cmocka_unit_test(test_loop_reads_terminated_after_run_returns),
        cmocka_unit_test(test_run_on_a_terminated_loop_returns_eshutdown),
        cmocka_unit_test(test_stop_before_run_makes_run_drain_accepted_tasks_and_return),
        cmocka_unit_test(test_run_while_running_returns_ebusy),
        cmocka_unit_test(test_run_inside_a_callback_returns_ebusy),
        cmocka_unit_test(test_free_while_running_returns_ebusy_and_frees_nothing),
        cmocka_unit_test(test_free_inside_a_callback_returns_ebusy),
        cmocka_unit_test(test_free_of_null_is_a_no_op),
        cmocka_unit_test(
            test_free_of_a_loop_never_run_runs_its_accepted_tasks_on_the_calling_thread),
        cmocka_unit_test(test_free_of_a_stopped_loop_never_run_runs_its_accepted_tasks),
        cmocka_unit_test(test_every_kind_of_callback_runs_on_the_thread_inside_run),
        cmocka_unit_test(test_a_loop_can_be_created_run_and_freed_many_times),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("lifecycle", tests, NULL, NULL);
}
