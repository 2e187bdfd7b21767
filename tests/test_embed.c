/* The embedding API (issue 13): evloop_run_once on a thread of the caller's, the fd and
 * timeout an outer loop waits on (evloop_backend_fd, evloop_backend_timeout_ns), stop
 * through run_once, hooks, evloop_timer_again, the release notification,
 * evloop_on_loop_thread and evloop_version. Signals: test_signal.c; bad arguments:
 * test_embed_errors.c. */
#include "test_util.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#ifndef EVLOOP_TEST_PROJECT_VERSION
#define EVLOOP_TEST_PROJECT_VERSION "unknown"
#endif

static uint64_t now_ns(void)
{
    return evloop_now_ns();
}

/* Readable within wait_ms (0: now)? */
static bool fd_readable(int fd, int wait_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, wait_ms) == 1 && (p.revents & POLLIN);
}

/* The loop's backend fd, or skip the test when this backend offers none. */
static int backend_fd_or_skip(evloop *loop)
{
    int fd = evloop_backend_fd(loop);
    if (fd == -ENOTSUP) {
        printf("# evloop_backend_fd: not supported on backend %s\n", evloop_backend(loop));
        test_loop_free(loop);
        skip();
    }
    assert_true(fd >= 0);
    return fd;
}

/* ---- version and loop thread ------------------------------------------------------------- */

static void test_version_matches_the_header_and_the_project(void **state)
{
    (void)state;
    char want[64];
    snprintf(want, sizeof(want), "%d.%d.%d", EVLOOP_VERSION_MAJOR, EVLOOP_VERSION_MINOR,
             EVLOOP_VERSION_PATCH);
    assert_string_equal(evloop_version(), want);
    assert_string_equal(evloop_version(), EVLOOP_TEST_PROJECT_VERSION);
}

static void check_on_loop_thread(void *loop)
{
    CHECK(evloop_on_loop_thread(loop));
}

static void test_on_loop_thread_is_true_only_inside_run_or_run_once(void **state)
{
    (void)state;
    assert_false(evloop_on_loop_thread(NULL));
    evloop *loop = test_loop_new(NULL);
    assert_false(evloop_on_loop_thread(loop));
    assert_rc(evloop_submit(loop, check_on_loop_thread, loop), 0);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_false(evloop_on_loop_thread(loop)); /* between calls no thread is */
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_false(evloop_on_loop_thread(loop));
    assert_rc(evloop_submit(loop, check_on_loop_thread, loop), 0);
    test_runner_stop(&r);
    test_loop_free(loop);
}

/* ---- evloop_run_once ----------------------------------------------------------------------- */

static void test_run_once_with_no_loop_thread_runs_what_was_submitted(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter n = 0;
    for (int i = 0; i < 3; i++)
        assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    assert_rc(evloop_queue_microtask(loop, test_count_task, &n), 0);
    assert_int_equal(evloop_run_once(loop, 0), 4);
    assert_int_equal(n, 4);
    assert_int_equal(evloop_state(loop), EVLOOP_AWAKE);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    test_loop_free(loop);
}

static void test_run_once_zero_on_an_idle_loop_returns_zero(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    for (int i = 0; i < 3; i++)
        assert_int_equal(evloop_run_once(loop, 0), 0);
    test_loop_free(loop);
}

static void test_run_once_minus_one_waits_for_a_timer_and_runs_it(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter n = 0;
    uint64_t start = now_ns();
    assert_rc(evloop_timer_start(loop, 5000000, 0, test_count_task, &n, NULL), 0);
    assert_int_equal(evloop_run_once(loop, -1), 1);
    assert_int_equal(n, 1);
    assert_true(now_ns() - start >= 5000000); /* never early */
    test_loop_free(loop);
}

static void test_run_once_with_a_timeout_returns_zero_once_it_passed(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    uint64_t start = now_ns();
    assert_int_equal(evloop_run_once(loop, 2000000), 0);
    assert_true(now_ns() - start >= 2000000);
    /* A timer due later than the timeout does not run. */
    test_counter n = 0;
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_count_task, &n, NULL), 0);
    assert_int_equal(evloop_run_once(loop, 1000000), 0);
    assert_int_equal(n, 0);
    test_loop_free(loop);
}

struct delayed_submit {
    evloop *loop;
    test_counter *counter;
    int delay_ms;
    int count;
};

static void *submit_later(void *arg)
{
    struct delayed_submit *d = arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = (long)d->delay_ms * 1000000};
    nanosleep(&ts, NULL);
    for (int i = 0; i < d->count; i++)
        CHECK_EQ(evloop_submit(d->loop, test_count_task, d->counter), 0);
    return NULL;
}

static void test_run_once_minus_one_wakes_for_a_submit_from_another_thread(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    test_counter n = 0;
    struct delayed_submit d = {loop, &n, 20, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, submit_later, &d), 0);
    int ran = 0;
    while (ran == 0) /* a wake-up may come for nothing; never more than one here */
        ran = evloop_run_once(loop, -1);
    assert_int_equal(ran, 1);
    pthread_join(t, NULL);
    test_loop_free(loop);
}

static void test_run_once_runs_fd_callbacks(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    test_counter n = 0;
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_count_io, &n), 0);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    test_write_byte(p[1]);
    assert_int_equal(evloop_run_once(loop, -1), 1);
    assert_int_equal(n, 1);
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void run_once_from_callback(void *loop)
{
    CHECK_EQ(evloop_run_once(loop, 0), -EBUSY);
    CHECK_EQ(evloop_run(loop), -EBUSY);
}

static void test_run_once_is_ebusy_while_another_thread_runs_the_loop(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_submit(loop, run_once_from_callback, loop), 0);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_run_once(loop, 0), -EBUSY);
    assert_rc(evloop_run_once(loop, -1), -EBUSY);
    test_runner_stop(&r);
    assert_rc(evloop_run_once(loop, 0), -ESHUTDOWN);
    test_loop_free(loop);
}

static void test_run_once_then_run_then_run_once_is_eshutdown(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter n = 0;
    assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(evloop_run(loop), 0);
    assert_int_equal(n, 2);
    assert_rc(evloop_run_once(loop, 0), -ESHUTDOWN);
    test_loop_free(loop);
}

/* ---- stop through run_once --------------------------------------------------------------------
 */

static test_counter released;
static void count_release(void *arg)
{
    (void)arg;
    atomic_fetch_add(&released, 1);
}

static void test_stop_through_run_once_runs_what_was_accepted_then_terminates(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    atomic_store(&released, 0);
    assert_rc(evloop_set_release_cb(loop, count_release), 0);
    test_counter n = 0, never = 0;
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_count_task, &never, NULL), 0);
    for (int i = 0; i < 1000; i++)
        assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    assert_rc(evloop_stop(loop), 0);
    assert_rc(evloop_submit(loop, test_count_task, &n), -ESHUTDOWN);
    int calls = 0, r;
    while ((r = evloop_run_once(loop, -1)) >= 0) { /* never waits once stopped */
        assert_true(++calls < 1000);
        if (evloop_state(loop) == EVLOOP_TERMINATED)
            break;
    }
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    assert_int_equal(n, 1000);
    assert_int_equal(never, 0);
    assert_int_equal(released, 1); /* the timer's argument */
    assert_rc(evloop_run_once(loop, 0), -ESHUTDOWN);
    assert_rc(evloop_run_once(loop, -1), -ESHUTDOWN);
    test_loop_free(loop);
}

static void *stop_later(void *loop)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000000};
    nanosleep(&ts, NULL);
    CHECK_EQ(evloop_stop(loop), 0);
    return NULL;
}

static void test_stop_from_another_thread_ends_a_run_once_wait(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, stop_later, loop), 0);
    for (int i = 0; i < 100 && evloop_state(loop) != EVLOOP_TERMINATED; i++)
        assert_true(evloop_run_once(loop, -1) >= 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    pthread_join(t, NULL);
    test_loop_free(loop);
}

static void test_auto_exit_through_run_once_terminates_when_nothing_is_left(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    cfg.auto_exit = true;
    evloop *loop = test_loop_new(&cfg);
    test_counter n = 0;
    assert_rc(evloop_timer_start(loop, 1000000, 0, test_count_task, &n, NULL), 0);
    assert_int_equal(evloop_run_once(loop, -1), 1);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

static void test_free_after_run_once_runs_what_was_accepted(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter n = 0;
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    int fd = evloop_backend_fd(loop); /* parks the loop from now on, where it can */
    assert_true(fd >= 0 || fd == -ENOTSUP);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    test_loop_free(loop);
    assert_int_equal(n, 2);
}

/* ---- evloop_backend_fd and evloop_backend_timeout_ns ----------------------------------------- */

static void
test_backend_fd_is_quiet_when_idle_readable_after_a_submit_and_quiet_after_run_once(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int fd = backend_fd_or_skip(loop);
    assert_int_equal(evloop_backend_fd(loop), fd); /* the same fd every time */
    assert_true(fd_readable(fd, 0));               /* not parked yet */
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_false(fd_readable(fd, 0));
    assert_false(fd_readable(fd, 50)); /* idle: nothing makes it readable */
    assert_int_equal(evloop_backend_timeout_ns(loop), -1);

    /* From another thread. */
    test_counter n = 0;
    struct delayed_submit d = {loop, &n, 0, 1};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, submit_later, &d), 0);
    pthread_join(t, NULL);
    assert_true(fd_readable(fd, TEST_DEADLINE_MS));
    assert_int_equal(evloop_backend_timeout_ns(loop), 0);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_false(fd_readable(fd, 0));
    assert_int_equal(evloop_backend_timeout_ns(loop), -1);

    /* From this thread, which is not the loop thread between calls. */
    assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    assert_true(fd_readable(fd, 0));
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_false(fd_readable(fd, 0));
    assert_int_equal(n, 2);
    test_loop_free(loop);
}

static void submit_one_more(void *counter)
{
    test_count_task(counter);
    CHECK_EQ(evloop_submit(test_log.loop, test_count_task, counter), 0);
}

static void test_backend_fd_stays_readable_while_work_is_left_after_run_once(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    int fd = backend_fd_or_skip(loop);
    test_counter n = 0;
    assert_rc(evloop_submit(loop, submit_one_more, &n), 0);
    assert_int_equal(evloop_run_once(loop, 0), 1); /* its task waits for the next iteration */
    assert_true(fd_readable(fd, 0));
    assert_int_equal(evloop_backend_timeout_ns(loop), 0);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_false(fd_readable(fd, 0));
    test_loop_free(loop);
}

static void test_backend_fd_is_readable_when_a_registered_fd_is_ready(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int fd = backend_fd_or_skip(loop);
    int p[2];
    test_pipe(p);
    test_counter n = 0;
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_count_io, &n), 0);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_false(fd_readable(fd, 0));
    test_write_byte(p[1]);
    assert_true(fd_readable(fd, TEST_DEADLINE_MS));
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_int_equal(n, 1);
    assert_false(fd_readable(fd, 0)); /* the callback drained the pipe */
    /* The last fd removed: the backend's fd leaves the set at the next park. */
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    test_write_byte(p[1]);
    assert_false(fd_readable(fd, 0));
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

struct remote_change {
    evloop *loop;
    int fd;
    test_counter *counter;
};

static void *add_fd_from_thread(void *arg)
{
    struct remote_change *c = arg;
    CHECK_EQ(evloop_io_add(c->loop, c->fd, EVLOOP_READABLE, test_count_io, c->counter), 0);
    return NULL;
}

static void *start_timer_from_thread(void *arg)
{
    struct remote_change *c = arg;
    CHECK_EQ(evloop_timer_start(c->loop, 1000000, 0, test_count_task, c->counter, NULL), 0);
    return NULL;
}

static void
test_backend_fd_is_readable_after_a_timer_start_or_fd_add_from_another_thread(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int fd = backend_fd_or_skip(loop);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_false(fd_readable(fd, 0));
    test_counter n = 0;
    int p[2];
    test_pipe(p);
    struct remote_change c = {loop, p[0], &n};
    pthread_t t;
    /* A timer: the outer loop must read the (shorter) timeout again. */
    assert_int_equal(pthread_create(&t, NULL, start_timer_from_thread, &c), 0);
    pthread_join(t, NULL);
    assert_true(fd_readable(fd, TEST_DEADLINE_MS));
    int ran = evloop_run_once(loop, 0); /* 1 if the timer is due already (a slow machine) */
    assert_true(ran == 0 || ran == 1);
    if (ran == 0) {
        int64_t timeout = evloop_backend_timeout_ns(loop);
        assert_true(timeout >= 0 && timeout <= 1000000);
        assert_int_equal(evloop_run_once(loop, -1), 1);
    }
    /* A first fd: the backend's fd must join the set. */
    assert_int_equal(pthread_create(&t, NULL, add_fd_from_thread, &c), 0);
    pthread_join(t, NULL);
    assert_true(fd_readable(fd, TEST_DEADLINE_MS));
    assert_int_equal(evloop_run_once(loop, 0), 0);
    test_write_byte(p[1]);
    assert_true(fd_readable(fd, TEST_DEADLINE_MS));
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_int_equal(n, 2);
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_backend_timeout_is_the_delay_of_the_next_timer(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    backend_fd_or_skip(loop);
    assert_int_equal(evloop_backend_timeout_ns(loop), 0); /* not parked yet: call run_once */
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_int_equal(evloop_backend_timeout_ns(loop), -1);
    test_counter n = 0;
    assert_rc(evloop_timer_start(loop, 3000000000ull, 0, test_count_task, &n, NULL), 0);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    int64_t t = evloop_backend_timeout_ns(loop);
    assert_true(t > 0 && t <= 3000000000ll);
    assert_rc(evloop_timer_start(loop, 0, 0, test_count_task, &n, NULL), 0);
    assert_int_equal(evloop_backend_timeout_ns(loop), 0);
    test_loop_free(loop);
}

static void test_backend_fd_stays_readable_after_the_loop_terminated(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int fd = backend_fd_or_skip(loop);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_false(fd_readable(fd, 0));
    assert_rc(evloop_stop(loop), 0);
    assert_true(fd_readable(fd, 0)); /* stop wakes it */
    assert_true(evloop_run_once(loop, 0) >= 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    for (int i = 0; i < 2; i++) {
        assert_true(fd_readable(fd, 0));
        assert_rc(evloop_run_once(loop, 0), -ESHUTDOWN);
    }
    test_loop_free(loop);
}

/* An outer loop of the test's own: epoll on the backend fd with the backend timeout, until
 * *counter reaches want. */
static int run_outer_loop(evloop *loop, int fd, test_counter *counter, uint64_t want,
                          unsigned *idle_wakes)
{
    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = {.events = EPOLLIN};
    if (ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ev) < 0)
        return -errno;
    uint64_t end = now_ns() + (uint64_t)TEST_DEADLINE_MS * 1000000u;
    *idle_wakes = 0;
    while (atomic_load(counter) < want && now_ns() < end) {
        int64_t t = evloop_backend_timeout_ns(loop);
        if (t < -1)
            return (int)t;
        int ms = t < 0 ? 100 : (int)((t + 999999) / 1000000);
        struct epoll_event got;
        epoll_wait(ep, &got, 1, ms);
        int r = evloop_run_once(loop, 0);
        if (r < 0)
            return r;
        if (r == 0)
            (*idle_wakes)++;
    }
    close(ep);
    return atomic_load(counter) >= want ? 0 : -ETIMEDOUT;
}

struct producer {
    evloop *loop;
    test_counter *counter;
    int n;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    for (int i = 0; i < p->n; i++) {
        CHECK_EQ(evloop_submit(p->loop, test_count_task, p->counter), 0);
        if (i % 64 == 0)
            sched_yield();
    }
    return NULL;
}

static void test_an_outer_epoll_loop_runs_timers_and_tasks_of_other_threads(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    int fd = backend_fd_or_skip(loop);
    test_counter n = 0;
    assert_rc(evloop_timer_start(loop, 2000000, 0, test_count_task, &n, NULL), 0);
    assert_rc(evloop_timer_start(loop, 4000000, 1000000, test_count_task, &n, NULL), 0);
    enum { PRODUCERS = 4 };
    int per = TEST_SIZE(20000);
    struct producer p = {loop, &n, per};
    pthread_t t[PRODUCERS];
    for (int i = 0; i < PRODUCERS; i++)
        assert_int_equal(pthread_create(&t[i], NULL, produce, &p), 0);
    unsigned idle;
    /* Every task, the one-shot timer and at least three periods: nothing lost, no hang. */
    assert_rc(run_outer_loop(loop, fd, &n, (uint64_t)PRODUCERS * per + 4, &idle), 0);
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(t[i], NULL);
    test_loop_free(loop);
}

/* Rounds of "the outer loop is blocked; another thread submits one task": each must wake
 * it (a lost wake-up is a hang the deadline catches). */
static void test_every_submit_to_a_parked_loop_makes_the_fd_readable(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    int fd = backend_fd_or_skip(loop);
    test_counter n = 0;
    int rounds = TEST_SIZE(2000);
    for (int i = 0; i < rounds; i++) {
        assert_true(evloop_run_once(loop, 0) >= 0);
        struct delayed_submit d = {loop, &n, 0, 1};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, submit_later, &d), 0);
        assert_true(fd_readable(fd, TEST_DEADLINE_MS));
        pthread_join(t, NULL);
        while (atomic_load(&n) < (uint64_t)i + 1)
            assert_true(evloop_run_once(loop, 0) >= 0);
    }
    test_loop_free(loop);
}

/* ---- hooks ---------------------------------------------------------------------------------- */

static void log_hook(void *tag)
{
    test_log_add(test_tag_of(tag));
}

/* A PREPARE hook that also starts the timer the wait is for: started here, after the call's
 * timers ran, it cannot be due before the wait however slow the machine (under valgrind, a
 * 1 ms timer started before evloop_run_once was sometimes due at its start). */
static void log_hook_and_start_timer(void *tag)
{
    test_log_add(test_tag_of(tag));
    CHECK_EQ(evloop_timer_start(test_log.loop, 1000000, 0, test_log_task, test_tag(9), NULL), 0);
}

static void test_prepare_and_check_hooks_run_around_the_wait_in_the_order_added(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, log_hook_and_start_timer, test_tag(1)),
              0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, log_hook, test_tag(3)), 0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, log_hook, test_tag(2)), 0);
    assert_int_equal(evloop_run_once(loop, -1), 1); /* hooks are not counted */
    int want[] = {1, 2, 3, 9};
    test_log_expect(want, 4);
    test_loop_free(loop);
}

static void submit_from_hook(void *counter)
{
    CHECK_EQ(evloop_submit(test_log.loop, test_count_task, counter), 0);
}

static void test_a_prepare_hook_that_submits_keeps_the_loop_from_blocking(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    test_counter n = 0;
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, submit_from_hook, &n), 0);
    /* Each call: the hook submits, the wait does not block, and the task runs before the
     * call returns. */
    assert_int_equal(evloop_run_once(loop, -1), 1);
    assert_int_equal(evloop_run_once(loop, -1), 1);
    assert_int_equal(n, 2);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_PREPARE, submit_from_hook, &n), 0);
    test_loop_free(loop);
}

static void remove_self_and_other(void *tag)
{
    test_log_add(test_tag_of(tag));
    CHECK_EQ(evloop_hook_remove(test_log.loop, EVLOOP_HOOK_PREPARE, remove_self_and_other, tag), 0);
    CHECK_EQ(evloop_hook_remove(test_log.loop, EVLOOP_HOOK_PREPARE, log_hook, test_tag(2)), 0);
    CHECK_EQ(evloop_hook_add(test_log.loop, EVLOOP_HOOK_PREPARE, log_hook, test_tag(4)), 0);
}

static void test_a_hook_may_remove_itself_and_others_and_add_one(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, remove_self_and_other, test_tag(1)), 0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, log_hook, test_tag(2)), 0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, log_hook, test_tag(3)), 0);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    int want[] = {1, 3, 3, 4}; /* 2 removed before its turn; 4 from the next iteration */
    test_log_expect(want, 4);
    test_loop_free(loop);
}

static void test_hooks_run_under_evloop_run_too(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter prepares = 0, checks = 0;
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, test_count_task, &prepares), 0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, test_count_task, &checks), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, log_hook, NULL), -EBUSY);
    test_counter n = 0;
    for (int i = 0; i < 3; i++) {
        assert_rc(evloop_submit(loop, test_count_task, &n), 0);
        assert_true(wait_for_count(&n, (uint64_t)i + 1));
    }
    test_runner_stop(&r);
    assert_true(atomic_load(&prepares) >= 1);
    assert_true(atomic_load(&checks) >= 1);
    test_loop_free(loop);
}

/* ---- evloop_timer_again ---------------------------------------------------------------------- */

static void test_timer_again_moves_a_timer_later_and_earlier(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    evloop_timer_id a, b;
    assert_rc(evloop_timer_start(loop, 1000000, 0, test_log_task, test_tag(1), &a), 0);
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_log_task, test_tag(2), &b), 0);
    assert_rc(evloop_timer_again(loop, a, 10000000000ull), 0); /* 1 ms -> 10 s */
    assert_rc(evloop_timer_again(loop, b, 2000000), 0);        /* 10 s -> 2 ms */
    /* Started after the moves, so it is due after b however long they took (under valgrind
     * and load, 18 ms between a start before them and b's move made it due first). */
    assert_rc(evloop_timer_start(loop, 20000000, 0, test_log_task, test_tag(3), NULL), 0);
    while (test_log.len < 2)
        assert_true(evloop_run_once(loop, -1) >= 0);
    int want[] = {2, 3};
    test_log_expect(want, 2);
    assert_rc(evloop_timer_again(loop, b, 0), -ENOENT); /* fired */
    assert_rc(evloop_timer_cancel(loop, a), 0);
    assert_rc(evloop_timer_again(loop, a, 0), -ENOENT); /* cancelled */
    test_loop_free(loop);
}

static void test_timer_again_keeps_the_interval_of_an_interval_timer(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter n = 0;
    evloop_timer_id id;
    assert_rc(evloop_timer_start(loop, 10000000000ull, 1000000, test_count_task, &n, &id), 0);
    assert_rc(evloop_timer_again(loop, id, 1000000), 0);
    while (atomic_load(&n) < 3)
        assert_true(evloop_run_once(loop, -1) >= 0);
    assert_rc(evloop_timer_again(loop, id, 10000000000ull), 0); /* still live */
    assert_rc(evloop_timer_cancel(loop, id), 0);
    test_loop_free(loop);
}

static void *again_from_thread(void *arg)
{
    struct remote_change *c = arg;
    evloop_timer_id id = (evloop_timer_id)(uintptr_t)c->counter;
    CHECK_EQ(evloop_timer_again(c->loop, id, 1000000), 0);
    return NULL;
}

static void test_timer_again_from_another_thread_shortens_a_sleep(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    test_counter n = 0;
    evloop_timer_id id;
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_count_task, &n, &id), 0);
    struct test_runner r;
    uint64_t sleeps = test_sleeps(loop);
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, sleeps));
    struct remote_change c = {loop, -1, (test_counter *)(uintptr_t)id};
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, again_from_thread, &c), 0);
    pthread_join(t, NULL);
    assert_true(wait_for_count(&n, 1));
    test_runner_stop(&r);
    test_loop_free(loop);
}

/* ---- the release notification -------------------------------------------------------------- */

static test_counter release_tags[8];
static void release_tag(void *tag)
{
    atomic_fetch_add(&release_tags[test_tag_of(tag)], 1);
}

static void test_release_is_called_once_for_each_argument_left_at_termination(void **state)
{
    (void)state;
    memset(release_tags, 0, sizeof(release_tags));
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_set_release_cb(loop, release_tag), 0);
    int p[2], q[2];
    test_pipe(p);
    test_pipe(q);
    evloop_timer_id cancelled;
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_never_task, test_tag(1), NULL), 0);
    assert_rc(evloop_timer_start(loop, 10000000000ull, 5, test_never_task, test_tag(2), NULL), 0);
    assert_rc(evloop_timer_start(loop, 0, 0, test_log_task, test_tag(7), NULL), 0);
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_never_task, test_tag(7), &cancelled),
              0);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, test_tag(3)), 0);
    assert_rc(evloop_io_add(loop, q[0], EVLOOP_READABLE, test_never_io, test_tag(7)), 0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, log_hook, test_tag(4)), 0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, log_hook, test_tag(7)), 0);
    test_log_reset(loop);
    assert_true(evloop_run_once(loop, 0) >= 1); /* the due timer fired: no release for it */
    assert_rc(evloop_timer_cancel(loop, cancelled), 0);
    assert_rc(evloop_io_remove(loop, q[0]), 0);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_PREPARE, log_hook, test_tag(7)), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(release_tags[i], 0);
    assert_rc(evloop_stop(loop), 0);
    while (evloop_state(loop) != EVLOOP_TERMINATED)
        assert_true(evloop_run_once(loop, 0) >= 0);
    int want[8] = {0, 1, 1, 1, 1, 0, 0, 0};
    for (int i = 0; i < 8; i++)
        assert_int_equal(release_tags[i], want[i]);
    test_loop_free(loop);
    close(p[0]), close(p[1]), close(q[0]), close(q[1]);
}

static pthread_t release_thread;
static void note_release_thread(void *arg)
{
    (void)arg;
    release_thread = pthread_self();
    atomic_fetch_add(&released, 1);
}

static void test_free_of_a_never_run_loop_releases_on_the_freeing_thread(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    atomic_store(&released, 0);
    assert_rc(evloop_set_release_cb(loop, note_release_thread), 0);
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_never_task, NULL, NULL), 0);
    test_loop_free(loop);
    assert_int_equal(released, 1);
    assert_true(pthread_equal(release_thread, pthread_self()));
}

static void test_release_off_means_no_call(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    atomic_store(&released, 0);
    assert_rc(evloop_set_release_cb(loop, count_release), 0);
    assert_rc(evloop_set_release_cb(loop, NULL), 0);
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_never_task, NULL, NULL), 0);
    test_loop_free(loop);
    assert_int_equal(released, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_version_matches_the_header_and_the_project),
        cmocka_unit_test(test_on_loop_thread_is_true_only_inside_run_or_run_once),
        cmocka_unit_test(test_run_once_with_no_loop_thread_runs_what_was_submitted),
        cmocka_unit_test(test_run_once_zero_on_an_idle_loop_returns_zero),
        cmocka_unit_test(test_run_once_minus_one_waits_for_a_timer_and_runs_it),
        cmocka_unit_test(test_run_once_with_a_timeout_returns_zero_once_it_passed),
        cmocka_unit_test(test_run_once_minus_one_wakes_for_a_submit_from_another_thread),
        cmocka_unit_test(test_run_once_runs_fd_callbacks),
        cmocka_unit_test(test_run_once_is_ebusy_while_another_thread_runs_the_loop),
        cmocka_unit_test(test_run_once_then_run_then_run_once_is_eshutdown),
        cmocka_unit_test(test_stop_through_run_once_runs_what_was_accepted_then_terminates),
        cmocka_unit_test(test_stop_from_another_thread_ends_a_run_once_wait),
        cmocka_unit_test(test_auto_exit_through_run_once_terminates_when_nothing_is_left),
        cmocka_unit_test(test_free_after_run_once_runs_what_was_accepted),
        cmocka_unit_test(
            test_backend_fd_is_quiet_when_idle_readable_after_a_submit_and_quiet_after_run_once),
        cmocka_unit_test(test_backend_fd_stays_readable_while_work_is_left_after_run_once),
        cmocka_unit_test(test_backend_fd_is_readable_when_a_registered_fd_is_ready),
        cmocka_unit_test(
            test_backend_fd_is_readable_after_a_timer_start_or_fd_add_from_another_thread),
        cmocka_unit_test(test_backend_timeout_is_the_delay_of_the_next_timer),
        cmocka_unit_test(test_backend_fd_stays_readable_after_the_loop_terminated),
        cmocka_unit_test(test_an_outer_epoll_loop_runs_timers_and_tasks_of_other_threads),
        cmocka_unit_test(test_every_submit_to_a_parked_loop_makes_the_fd_readable),
        cmocka_unit_test(test_prepare_and_check_hooks_run_around_the_wait_in_the_order_added),
        cmocka_unit_test(test_a_prepare_hook_that_submits_keeps_the_loop_from_blocking),
        cmocka_unit_test(test_a_hook_may_remove_itself_and_others_and_add_one),
        cmocka_unit_test(test_hooks_run_under_evloop_run_too),
        cmocka_unit_test(test_timer_again_moves_a_timer_later_and_earlier),
        cmocka_unit_test(test_timer_again_keeps_the_interval_of_an_interval_timer),
        cmocka_unit_test(test_timer_again_from_another_thread_shortens_a_sleep),
        cmocka_unit_test(test_release_is_called_once_for_each_argument_left_at_termination),
        cmocka_unit_test(test_free_of_a_never_run_loop_releases_on_the_freeing_thread),
        cmocka_unit_test(test_release_off_means_no_call),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("embed", tests, NULL, NULL);
}
