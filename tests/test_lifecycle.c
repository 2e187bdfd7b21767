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

/* ---- what a running loop refuses ---------------------------------------------------------- */

/* evloop_run or evloop_free on a running loop, called from another thread or from inside one
 * of its callbacks: -EBUSY, and the loop goes on (nothing was freed). One cmocka test a row,
 * named in main(). */
struct busy_case {
    const char *name; /* the call and where it is made, for the failure message */
    int (*call)(evloop *loop);
    bool inside_callback;
};

static struct busy_case run_while_running = {"evloop_run from another thread", evloop_run, false};
static struct busy_case run_inside_a_callback = {"evloop_run inside a callback", evloop_run, true};
static struct busy_case free_while_running = {"evloop_free from another thread", evloop_free,
                                              false};
static struct busy_case free_inside_a_callback = {"evloop_free inside a callback", evloop_free,
                                                  true};

struct call_inside {
    const struct busy_case *c;
    evloop *loop;
    atomic_int rc;
    test_counter done;
};

static void make_call_inside(void *arg)
{
    struct call_inside *n = arg;
    atomic_store(&n->rc, n->c->call(n->loop));
    atomic_fetch_add(&n->done, 1);
}

static void refused_while_running(void **state)
{
    const struct busy_case *c = *state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    struct call_inside n = {.c = c, .loop = loop, .rc = 1, .done = 0};
    if (c->inside_callback) {
        assert_rc(evloop_submit(loop, make_call_inside, &n), 0);
        assert_true(wait_for_count(&n.done, 1));
    } else {
        atomic_store(&n.rc, c->call(loop));
    }
    test_assert_rc(atomic_load(&n.rc), -EBUSY, c->name, __FILE__, __LINE__);
    /* The loop goes on: it still reads running, and a task submitted now runs. */
    assert_true(evloop_state(loop) == EVLOOP_RUNNING || evloop_state(loop) == EVLOOP_SLEEPING);
    test_counter ran = 0;
    assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_true(wait_for_count(&ran, 1));
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

/* The ways to hand a loop a task, each with a callback that notes its thread (arg: a struct
 * on_thread). */
static const struct task_way {
    const char *name; /* for the failure message */
    int (*submit)(evloop *loop, evloop_cb cb, void *arg);
    evloop_cb cb;
    int runs;          /* note_thread calls per task: the microtask it queues counts too */
    int before_a_free; /* how many the free of a loop never run gets */
} task_ways[] = {
    {"evloop_submit", evloop_submit, note_thread, 1, 1000},
    {"evloop_submit_internal", evloop_submit_internal, note_thread, 1, 10},
    {"evloop_queue_microtask", evloop_queue_microtask, note_thread, 1, 10},
    {"evloop_submit of a task that queues a microtask while draining", evloop_submit,
     note_thread_and_queue_microtask, 2, 10},
};
static const size_t n_task_ways = sizeof task_ways / sizeof task_ways[0];

/* Submits `times` tasks each way (before_a_free of each when times is 0); returns how many
 * note_thread calls they make. */
static uint64_t submit_each_way(evloop *loop, struct on_thread *t, int times)
{
    uint64_t runs = 0;
    for (size_t w = 0; w < n_task_ways; w++) {
        const struct task_way *way = &task_ways[w];
        int n = times ? times : way->before_a_free;
        for (int i = 0; i < n; i++)
            test_assert_rc(way->submit(loop, way->cb, t), 0, way->name, __FILE__, __LINE__);
        runs += (uint64_t)n * (uint64_t)way->runs;
    }
    return runs;
}

static void
test_free_of_a_loop_never_run_runs_its_accepted_tasks_on_the_calling_thread(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct on_thread t = {.expected = pthread_self(), .ran = 0, .wrong_thread = 0, .loop = loop};
    uint64_t runs = submit_each_way(loop, &t, 0);
    /* A pending timer does not fire; the free releases it (LSan checks). */
    assert_rc(evloop_timer_start(loop, 3600ull * 1000000000u, 0, test_never_task,
                                 "timer fired during free", NULL),
              0);
    test_loop_free(loop);
    assert_int_equal(atomic_load(&t.ran), runs);
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
    uint64_t runs = submit_each_way(loop, &t, 1);
    assert_rc(evloop_timer_start(loop, 1000000, 0, on_timer_note_thread, &t, NULL), 0);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, on_io_note_thread, &t), 0);
    test_write_byte(p[1]);
    assert_true(wait_for_count(&t.ran, runs + 2)); /* and the timer's and the fd's */
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
        {"test_run_while_running_returns_ebusy", refused_while_running, NULL, NULL,
         &run_while_running},
        {"test_run_inside_a_callback_returns_ebusy", refused_while_running, NULL, NULL,
         &run_inside_a_callback},
        {"test_free_while_running_returns_ebusy_and_frees_nothing", refused_while_running, NULL,
         NULL, &free_while_running},
        {"test_free_inside_a_callback_returns_ebusy", refused_while_running, NULL, NULL,
         &free_inside_a_callback},
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
