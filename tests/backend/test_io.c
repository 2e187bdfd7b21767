/* Fd readiness as every backend must deliver it, run under each one: level-triggered reports,
 * no report for an fd removed while its readiness was already collected by the kernel (an
 * io_uring CQE, an epoll or kqueue event), registrations and modifications made from another
 * thread while the loop is asleep in the poller, a removed fd's file released at once, more
 * ready fds than one wait reports, poller-mode timers never early, the wake a submit uses
 * for a loop asleep in the poller, and a loop run by one thread, then by another. */
#include "backend_util.h"

#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct watch {
    int fd;
    bool drain;
    bt_counter calls;
    _Atomic unsigned events;
};

static void watch_cb(void *arg, int fd, unsigned events)
{
    struct watch *w = arg;
    CHECK(fd == w->fd);
    atomic_fetch_or(&w->events, events);
    if (w->drain)
        bt_drain(fd);
    atomic_fetch_add(&w->calls, 1);
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

/* Waits until the loop sleeps in the poller, after more than `after` such sleeps. */
static void wait_poller_sleep(evloop *loop, uint64_t after)
{
    struct poller_goal g = {loop, after};
    assert_true(bt_wait(asleep_in_poller, &g));
}

static void test_fd_left_readable_is_reported_on_every_wait(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int p[2];
    bt_pipe(p);
    struct watch w = {.fd = p[0]};
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_cb, &w), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    bt_write_byte(p[1]);
    assert_true(bt_wait_count(&w.calls, 5)); /* nobody reads the byte */
    assert_int_equal(evloop_io_remove(loop, p[0]), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

struct gate {
    int fd; /* the gate task returns once this fd is readable and the gate is open */
    atomic_bool entered, polled, open;
};

static void gate_task(void *arg)
{
    struct gate *g = arg;
    atomic_store(&g->entered, true);
    /* Blocking in poll() also lets io_uring run the poll's task work on this thread, so the
     * readiness is in the CQ before the loop gets back to its wait. */
    struct pollfd pfd = {.fd = g->fd, .events = POLLIN};
    CHECK(poll(&pfd, 1, BT_DEADLINE_MS) == 1);
    atomic_store(&g->polled, true);
    while (!atomic_load(&g->open)) {
        struct timespec ts = {0, 100000};
        nanosleep(&ts, NULL);
    }
}

static bool gate_entered(void *ctx)
{
    return atomic_load(&((struct gate *)ctx)->entered);
}

static bool gate_polled(void *ctx)
{
    return atomic_load(&((struct gate *)ctx)->polled);
}

static void test_fd_removed_with_its_readiness_collected_gets_no_callback(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int p[2];
    bt_pipe(p);
    struct watch stale = {.fd = p[0]}, fresh = {.fd = p[0], .drain = true};
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_cb, &stale), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    wait_poller_sleep(loop, 0);
    struct gate g = {.fd = p[0]};
    assert_int_equal(evloop_submit(loop, gate_task, &g), 0);
    assert_true(bt_wait(gate_entered, &g));
    bt_write_byte(p[1]);
    /* The loop holds the readiness in the gate; remove the fd and register the same number
     * again: the old report must be dropped, the new registration must see the byte. */
    assert_int_equal(evloop_io_remove(loop, p[0]), 0);
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_cb, &fresh), 0);
    atomic_store(&g.open, true);
    assert_true(bt_wait_count(&fresh.calls, 1));
    assert_int_equal(atomic_load(&stale.calls), 0);
    assert_int_equal(evloop_io_remove(loop, p[0]), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* Regression (io_uring): a CQE carries the readiness seen when it was posted; one whose data
 * is gone by the time the loop collects it must not become a callback (epoll and kqueue check
 * again when they hand events out). */
static void test_readiness_gone_before_the_loop_collects_it_is_not_reported(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int p[2], q[2];
    bt_pipe(p);
    bt_pipe(q);
    struct watch gone = {.fd = p[0]}, sentinel = {.fd = q[0], .drain = true};
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_cb, &gone), 0);
    assert_int_equal(evloop_io_add(loop, q[0], EVLOOP_READABLE, watch_cb, &sentinel), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    wait_poller_sleep(loop, 0);
    for (uint64_t i = 1; i <= 20; i++) {
        struct gate g = {.fd = p[0]};
        assert_int_equal(evloop_submit(loop, gate_task, &g), 0);
        assert_true(bt_wait(gate_entered, &g));
        bt_write_byte(p[1]);
        assert_true(bt_wait(gate_polled, &g)); /* the loop thread has seen it: CQE posted */
        assert_int_equal(bt_drain(p[0]), 1);   /* consumed behind the loop's back */
        atomic_store(&g.open, true);
        bt_write_byte(q[1]); /* once its callback ran, the loop has collected the above */
        assert_true(bt_wait_count(&sentinel.calls, i));
    }
    assert_int_equal(atomic_load(&gone.calls), 0);
    assert_int_equal(evloop_io_remove(loop, p[0]), 0);
    assert_int_equal(evloop_io_remove(loop, q[0]), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    int fds[] = {p[0], p[1], q[0], q[1]};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        close(fds[i]);
}

/* Readiness that arrives while a task runs and still holds when the loop collects it is
 * reported, once per byte (io_uring's re-check of what was queued before a wait must not
 * drop it). */
static void test_readiness_queued_while_a_task_runs_and_still_true_is_reported(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int p[2];
    bt_pipe(p);
    struct watch w = {.fd = p[0], .drain = true};
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_cb, &w), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    wait_poller_sleep(loop, 0);
    for (uint64_t i = 1; i <= 20; i++) {
        struct gate g = {.fd = p[0]};
        assert_int_equal(evloop_submit(loop, gate_task, &g), 0);
        assert_true(bt_wait(gate_entered, &g));
        bt_write_byte(p[1]);
        assert_true(bt_wait(gate_polled, &g)); /* the loop thread has seen it: CQE posted */
        atomic_store(&g.open, true);
        assert_true(bt_wait_count(&w.calls, i));
    }
    assert_int_equal(atomic_load(&w.calls), 20); /* each byte once */
    assert_int_equal(evloop_io_remove(loop, p[0]), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_fds_added_and_modified_from_another_thread_reach_a_sleeping_loop(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int idle[2], p[2], sv[2];
    bt_pipe(idle);
    bt_pipe(p);
    bt_socketpair(sv);
    struct watch never = {.fd = idle[0]}, readable = {.fd = p[0], .drain = true};
    struct watch sock = {.fd = sv[0]};
    assert_int_equal(evloop_io_add(loop, idle[0], EVLOOP_READABLE, watch_cb, &never), 0);
    assert_int_equal(evloop_io_add(loop, sv[0], EVLOOP_READABLE, watch_cb, &sock), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    wait_poller_sleep(loop, 0);
    uint64_t slept = bt_stats(loop).poller_sleeps;
    bt_write_byte(p[1]);
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_cb, &readable), 0);
    assert_true(bt_wait_count(&readable.calls, 1));
    wait_poller_sleep(loop, slept);                /* asleep again after that callback */
    assert_int_equal(atomic_load(&sock.calls), 0); /* nothing to read yet */
    assert_int_equal(evloop_io_modify(loop, sv[0], EVLOOP_READABLE | EVLOOP_WRITABLE), 0);
    assert_true(bt_wait_count(&sock.calls, 1));
    assert_true(atomic_load(&sock.events) & EVLOOP_WRITABLE);
    assert_int_equal(atomic_load(&never.calls), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    int fds[] = {idle[0], idle[1], p[0], p[1], sv[0], sv[1]};
    for (size_t i = 0; i < sizeof(fds) / sizeof(fds[0]); i++)
        close(fds[i]);
}

static bool peer_sees_eof(void *ctx)
{
    char c;
    return read(*(int *)ctx, &c, 1) == 0;
}

static void remove_task(void *arg)
{
    void **a = arg;
    CHECK(evloop_io_remove(a[0], *(int *)a[1]) == 0);
    close(*(int *)a[1]);
}

static void test_removed_fd_closed_at_once_really_closes(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int a[2], b[2];
    bt_socketpair(a);
    bt_socketpair(b);
    struct watch wa = {.fd = a[0]}, wb = {.fd = b[0]};
    assert_int_equal(evloop_io_add(loop, a[0], EVLOOP_READABLE, watch_cb, &wa), 0);
    assert_int_equal(evloop_io_add(loop, b[0], EVLOOP_READABLE, watch_cb, &wb), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    wait_poller_sleep(loop, 0);
    /* From another thread while the loop sleeps (an io_uring poll holds its file until it is
     * cancelled), then from the loop thread itself. */
    assert_int_equal(evloop_io_remove(loop, a[0]), 0);
    close(a[0]);
    assert_true(bt_wait(peer_sees_eof, &a[1]));
    void *args[] = {loop, &b[0]};
    assert_int_equal(evloop_submit(loop, remove_task, args), 0);
    assert_true(bt_wait(peer_sees_eof, &b[1]));
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(a[1]);
    close(b[1]);
}

#define MANY 150 /* more than one wait reports (EVLOOP__IO_EVENTS_MAX) */

static void test_more_ready_fds_than_one_wait_reports_are_all_reported(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    static int p[MANY][2];
    static struct watch w[MANY];
    for (int i = 0; i < MANY; i++) {
        bt_pipe(p[i]);
        w[i] = (struct watch){.fd = p[i][0], .drain = true};
        atomic_init(&w[i].calls, 0);
        assert_int_equal(evloop_io_add(loop, p[i][0], EVLOOP_READABLE, watch_cb, &w[i]), 0);
        bt_write_byte(p[i][1]);
    }
    struct bt_runner r;
    bt_runner_start(&r, loop);
    for (int i = 0; i < MANY; i++)
        assert_true(bt_wait_count(&w[i].calls, 1));
    bt_runner_stop(&r);
    bt_loop_free(loop);
    for (int i = 0; i < MANY; i++) {
        close(p[i][0]);
        close(p[i][1]);
    }
}

struct deadline {
    uint64_t due;
    bt_counter fired;
};

static void deadline_cb(void *arg)
{
    struct deadline *d = arg;
    CHECK(evloop_now_ns() >= d->due); /* never early; how late is not asserted */
    atomic_fetch_add(&d->fired, 1);
}

static void test_timers_in_poller_mode_never_fire_early(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int idle[2];
    bt_pipe(idle);
    struct watch never = {.fd = idle[0]};
    assert_int_equal(evloop_io_add(loop, idle[0], EVLOOP_READABLE, watch_cb, &never), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    /* Sub-millisecond parts: a poller that rounds its timeout down to ms would fire early. */
    static const uint64_t delays[] = {300000, 1000700, 2500000, 7000300, 20000000};
    struct deadline d[5];
    wait_poller_sleep(loop, 0);
    for (int i = 0; i < 5; i++) {
        atomic_init(&d[i].fired, 0);
        d[i].due = evloop_now_ns() + delays[i];
        assert_int_equal(evloop_timer_start(loop, delays[i], 0, deadline_cb, &d[i], NULL), 0);
        assert_true(bt_wait_count(&d[i].fired, 1));
    }
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(idle[0]);
    close(idle[1]);
}

static void test_submit_wakes_a_loop_asleep_in_the_poller(void **state)
{
    (void)state;
    evloop *loop = bt_loop_new();
    int idle[2];
    bt_pipe(idle);
    struct watch never = {.fd = idle[0]};
    assert_int_equal(evloop_io_add(loop, idle[0], EVLOOP_READABLE, watch_cb, &never), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    struct evloop_stats st0 = bt_stats(loop), st = st0;
    bt_counter ran = 0;
    /* A loop seen asleep may still be between announcing sleep and blocking; then the submit
     * needs no wake call. Try until one did. */
    for (int i = 1;
         i <= 100 && st.futex_wakes + st.poller_wakes == st0.futex_wakes + st0.poller_wakes; i++) {
        wait_poller_sleep(loop, i == 1 ? 0 : st.poller_sleeps);
        st = bt_stats(loop);
        assert_int_equal(evloop_submit(loop, bt_count_task, &ran), 0);
        assert_true(bt_wait_count(&ran, (uint64_t)i));
        st = bt_stats(loop);
    }
    const char *b = evloop_backend(loop);
    if (strcmp(b, "io_uring") == 0) /* futex or poller wake: test_uring.c pins which */
        assert_true((st.futex_wakes > st0.futex_wakes) != (st.poller_wakes > st0.poller_wakes));
    else
        assert_true(st.poller_wakes > st0.poller_wakes && st.futex_wakes == st0.futex_wakes);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(idle[0]);
    close(idle[1]);
}

struct hand_over {
    evloop *loop;
    int rounds;          /* run_once calls with a short timeout: the wait arms and times out */
    atomic_bool ran;     /* the first thread made them */
    atomic_bool go_home; /* the first thread may exit */
    bt_counter *until;   /* the second thread runs until this reaches `want` */
    uint64_t want;
};

static void *run_briefly_then_stay(void *arg)
{
    struct hand_over *h = arg;
    for (int i = 0; i < h->rounds; i++)
        CHECK(evloop_run_once(h->loop, 1000000) >= 0);
    atomic_store(&h->ran, true);
    while (!atomic_load(&h->go_home)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

static bool first_ran(void *ctx)
{
    return atomic_load(&((struct hand_over *)ctx)->ran);
}

static void *run_until(void *arg)
{
    struct hand_over *h = arg;
    while (atomic_load(h->until) < h->want)
        CHECK(evloop_run_once(h->loop, 100000000) >= 0);
    return NULL;
}

/* evloop_run_once may run a loop from any thread, one at a time. What the first thread armed
 * (io_uring: a futex wait, a POLL_ADD on its epoll set, whose completions are task work of that
 * thread) must not keep readiness or wakes from the second, whether the first stays (busy
 * elsewhere) or exits. */
static void test_a_loop_run_by_one_thread_then_another_gets_readiness_and_wakes(void **state)
{
    (void)state;
    for (int exits = 0; exits < 2; exits++) {
        evloop *loop = bt_loop_new();
        int p[2];
        bt_pipe(p);
        struct watch w = {.fd = p[0], .drain = true};
        assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_cb, &w), 0);
        struct hand_over first = {.loop = loop, .rounds = 3};
        pthread_t t1, t2;
        assert_int_equal(pthread_create(&t1, NULL, run_briefly_then_stay, &first), 0);
        assert_true(bt_wait(first_ran, &first));
        if (exits) {
            atomic_store(&first.go_home, true);
            assert_int_equal(pthread_join(t1, NULL), 0);
        }
        bt_counter ran = 0;
        struct hand_over second = {.loop = loop, .until = &ran, .want = 2};
        assert_int_equal(pthread_create(&t2, NULL, run_until, &second), 0);
        bt_write_byte(p[1]);
        assert_true(bt_wait_count(&w.calls, 1));
        wait_poller_sleep(loop, bt_stats(loop).poller_sleeps);
        assert_int_equal(evloop_submit(loop, bt_count_task, &ran), 0);
        assert_true(bt_wait_count(&ran, 1));
        bt_write_byte(p[1]);
        assert_true(bt_wait_count(&w.calls, 2));
        assert_int_equal(evloop_submit(loop, bt_count_task, &ran), 0);
        assert_int_equal(pthread_join(t2, NULL), 0);
        if (!exits) {
            atomic_store(&first.go_home, true);
            assert_int_equal(pthread_join(t1, NULL), 0);
        }
        assert_int_equal(evloop_io_remove(loop, p[0]), 0);
        bt_loop_free(loop);
        close(p[0]);
        close(p[1]);
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fd_left_readable_is_reported_on_every_wait),
        cmocka_unit_test(test_fd_removed_with_its_readiness_collected_gets_no_callback),
        cmocka_unit_test(test_readiness_gone_before_the_loop_collects_it_is_not_reported),
        cmocka_unit_test(test_readiness_queued_while_a_task_runs_and_still_true_is_reported),
        cmocka_unit_test(test_fds_added_and_modified_from_another_thread_reach_a_sleeping_loop),
        cmocka_unit_test(test_removed_fd_closed_at_once_really_closes),
        cmocka_unit_test(test_more_ready_fds_than_one_wait_reports_are_all_reported),
        cmocka_unit_test(test_timers_in_poller_mode_never_fire_early),
        cmocka_unit_test(test_submit_wakes_a_loop_asleep_in_the_poller),
        cmocka_unit_test(test_a_loop_run_by_one_thread_then_another_gets_readiness_and_wakes),
    };
    evloop_free(bt_loop_new()); /* exits 77 when the backend cannot start */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
