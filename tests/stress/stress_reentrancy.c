/* Re-entrancy: every public function called from every kind of callback (task, internal
 * task, microtask, timer, fd, and a task or microtask running during the shutdown drain)
 * returns its documented result and nothing deadlocks. A probe makes every call; what it
 * expects depends only on whether the loop is draining. Work a probe queues must run once,
 * later, never nested inside the callback that queued it. */
#include "stress_util.h"

#include <fcntl.h>
#include <unistd.h>

struct probe_rig {
    evloop *loop;
    int p[2];         /* registered before the run; a probe modifies it */
    int q[2];         /* a probe adds and removes it */
    int depth;        /* loop thread: callbacks running now */
    int nested;       /* callbacks that started inside another */
    test_counter probes;
    _Atomic uint64_t queued, ran;
    int failures_before;
    int state_wrong; /* probes where evloop_state() did not read RUNNING / TERMINATING */
};

static struct probe_rig g;

static void enter(void)
{
    if (g.depth++ > 0)
        g.nested++;
}

static void leave(void)
{
    g.depth--;
}

static void queued_task(void *arg)
{
    (void)arg;
    enter();
    atomic_fetch_add(&g.ran, 1);
    leave();
}

static void queued_io(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)fd;
    (void)events;
    test_check_failed("the probe's fd was added and removed in one callback", __FILE__,
                      __LINE__);
}

static void make_new_loop_inside(void)
{
    /* evloop_new/evloop_free of another loop, with work: free runs it on this thread. */
    evloop *other = NULL;
    CHECK_EQ(evloop_new(&other, NULL), 0);
    if (!other)
        return;
    test_counter ran;
    atomic_init(&ran, 0);
    CHECK_EQ(evloop_submit(other, test_count_task, &ran), 0);
    CHECK_EQ(evloop_free(other), 0);
    CHECK_EQ(atomic_load(&ran), 1);
}

/* Calls every public function from inside a callback. */
static void probe(const char *where)
{
    evloop *loop = g.loop;
    bool draining = evloop_state(loop) == EVLOOP_TERMINATING;
    int refused = draining ? -ESHUTDOWN : 0;
    int before = test_take_check_failures();

    evloop_config cfg;
    evloop_config_init(&cfg);
    CHECK_EQ(cfg.spin_ns, -1);
    make_new_loop_inside();
    CHECK_EQ(evloop_run(loop), -EBUSY);
    CHECK_EQ(evloop_free(loop), -EBUSY);

    int r = evloop_submit(loop, queued_task, NULL);
    CHECK_EQ(r, refused);
    atomic_fetch_add(&g.queued, r == 0);
    r = evloop_submit_internal(loop, queued_task, NULL);
    CHECK_EQ(r, refused);
    atomic_fetch_add(&g.queued, r == 0);
    r = evloop_queue_microtask(loop, queued_task, NULL); /* on the loop thread: until the end */
    CHECK_EQ(r, 0);
    atomic_fetch_add(&g.queued, r == 0);

    evloop_timer_id id = 0;
    r = evloop_timer_start(loop, 0, 0, queued_task, NULL, &id);
    CHECK_EQ(r, refused);
    if (r == 0) {
        CHECK(id != 0);
        CHECK_EQ(evloop_timer_cancel(loop, id), 0);
        CHECK_EQ(evloop_timer_cancel(loop, id), -ENOENT);
        evloop_timer_id later = 0;
        CHECK_EQ(evloop_timer_start(loop, 0, 0, queued_task, NULL, &later), 0);
        atomic_fetch_add(&g.queued, 1);
    } else {
        CHECK_EQ(evloop_timer_cancel(loop, id), -ENOENT);
    }

    CHECK_EQ(evloop_io_modify(loop, g.p[0], EVLOOP_READABLE | EVLOOP_WRITABLE), refused);
    CHECK_EQ(evloop_io_modify(loop, g.p[0], EVLOOP_READABLE), refused);
    r = evloop_io_add(loop, g.q[0], EVLOOP_READABLE, queued_io, NULL);
    CHECK_EQ(r, refused);
    CHECK_EQ(evloop_io_add(loop, g.q[0], EVLOOP_READABLE, queued_io, NULL),
             draining ? -ESHUTDOWN : -EEXIST);
    CHECK_EQ(evloop_io_remove(loop, g.q[0]), r == 0 ? 0 : -ENOENT);
    CHECK_EQ(evloop_io_remove(loop, g.q[0]), -ENOENT);

    /* Counted apart (see the second test): fd callbacks run while the state reads SLEEPING. */
    enum evloop_state want = draining ? EVLOOP_TERMINATING : EVLOOP_RUNNING, got = evloop_state(loop);
    if (got != want && g.state_wrong++ < 3)
        fprintf(stderr, "probe in %s: evloop_state() read %d, expected %d\n", where, (int)got,
                (int)want);
    CHECK(evloop_backend(loop) != NULL);
    CHECK(strcmp(evloop_ingress(), EVLOOP_TEST_VARIANT) == 0);
    CHECK(evloop_strerror(-ESHUTDOWN) != NULL);
    struct evloop_stats st;
    CHECK_EQ(evloop_stats(loop, &st), 0);
    uint64_t t = evloop_now_ns();
    CHECK(evloop_now_ns() >= t);
    if (draining)
        CHECK_EQ(evloop_stop(loop), 0); /* idempotent */

    int failed = test_take_check_failures();
    if (failed && g.failures_before < 20)
        fprintf(stderr, "probe in %s%s: %d checks failed\n", where, draining ? " (draining)" : "",
                failed);
    g.failures_before += before + failed;
    atomic_fetch_add_explicit(&g.probes, 1, memory_order_release);
}

static void probe_task(void *arg)
{
    enter();
    probe(arg);
    leave();
}

static void probe_io(void *arg, int fd, unsigned events)
{
    (void)fd;
    (void)events;
    enter();
    test_drain_fd(g.p[0]);
    probe(arg);
    leave();
}

static void probe_queueing_microtask(void *arg)
{
    enter();
    CHECK_EQ(evloop_queue_microtask(g.loop, probe_task, "microtask"), 0);
    (void)arg;
    leave();
}

/* Stops the loop from a callback, then probes from a task and a microtask in the drain. */
static void stop_then_probe_in_drain(void *arg)
{
    (void)arg;
    enter();
    CHECK_EQ(evloop_submit(g.loop, probe_task, "task in drain"), 0);
    CHECK_EQ(evloop_submit_internal(g.loop, probe_queueing_microtask, NULL), 0);
    CHECK_EQ(evloop_stop(g.loop), 0);
    CHECK_EQ(evloop_stop(g.loop), 0);
    leave();
}

static void test_every_public_function_from_every_kind_of_callback(void **state)
{
    (void)state;
    uint64_t rounds = stress_size("re-entrancy rounds",
                                  (struct stress_sizes){.plain = 200, .asan = 50, .tsan = 30,
                                                        .long_plain = 2000, .long_asan = 500,
                                                        .long_tsan = 300});
    memset(&g, 0, sizeof g);
    evloop_config cfg = test_config_no_spin();
    g.loop = test_loop_new(&cfg);
    test_pipe(g.p);
    test_pipe(g.q);
    assert_rc(evloop_io_add(g.loop, g.p[0], EVLOOP_READABLE, probe_io, "fd callback"), 0);
    struct test_runner r;
    test_runner_start(&r, g.loop);
    uint64_t expect = 0;
    for (uint64_t i = 0; i < rounds; i++) {
        assert_rc(evloop_submit(g.loop, probe_task, "task"), 0);
        assert_rc(evloop_submit_internal(g.loop, probe_task, "internal task"), 0);
        assert_rc(evloop_submit(g.loop, probe_queueing_microtask, NULL), 0);
        assert_rc(evloop_queue_microtask(g.loop, probe_task, "microtask from another thread"),
                  0);
        assert_rc(evloop_timer_start(g.loop, 0, 0, probe_task, "timer", NULL), 0);
        test_write_byte(g.p[1]);
        expect += 6;
        assert_true(wait_for_count(&g.probes, expect));
    }
    assert_rc(evloop_submit(g.loop, stop_then_probe_in_drain, NULL), 0);
    expect += 2;
    assert_rc(test_runner_join(&r), 0);
    printf("# figure: reentrancy %s.%s: %llu probes of every public function (task, internal "
           "task, microtask, timer, fd callback, task and microtask in the drain): failed "
           "checks %d, callbacks nested %d, queued %llu ran %llu; state not RUNNING inside a "
           "callback %d times\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g.loop),
           (unsigned long long)atomic_load(&g.probes), g.failures_before, g.nested,
           (unsigned long long)atomic_load(&g.queued), (unsigned long long)atomic_load(&g.ran), g.state_wrong);
    assert_int_equal(atomic_load(&g.probes), expect);
    assert_int_equal(g.failures_before, 0);
    assert_int_equal(g.nested, 0);
    /* Timers still pending at the stop are released, so ran may trail by those. */
    assert_true(atomic_load(&g.ran) <= atomic_load(&g.queued));
    test_loop_free(g.loop);
    for (int i = 0; i < 2; i++) {
        close(g.p[i]);
        close(g.q[i]);
    }
}

/* Regression: callbacks of fds reported by the poller wait (and the microtasks drained
 * after them) run inside prepare_sleep(), while evloop_state() still reads SLEEPING. */
static test_counter g_fd_state_calls;
static _Atomic int g_fd_state_seen = -1;

static void state_fire(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)events;
    test_drain_fd(fd);
    atomic_store(&g_fd_state_seen, (int)evloop_state(g.loop));
    atomic_fetch_add(&g_fd_state_calls, 1);
}

static void test_state_reads_running_inside_an_fd_callback_after_a_poller_sleep(void **state)
{
    (void)state;
    memset(&g, 0, sizeof g);
    evloop_config cfg = test_config_no_spin();
    g.loop = test_loop_new(&cfg);
    test_pipe(g.p);
    assert_rc(evloop_io_add(g.loop, g.p[0], EVLOOP_READABLE, state_fire, NULL), 0);
    struct test_runner r;
    test_runner_start(&r, g.loop);
    assert_true(wait_for_sleep(g.loop, 0));
    test_write_byte(g.p[1]);
    assert_true(wait_for_count(&g_fd_state_calls, 1));
    test_runner_stop(&r);
    int seen = atomic_load(&g_fd_state_seen);
    printf("# figure: reentrancy state %s.%s: evloop_state() inside an fd callback after a "
           "poller sleep read %d (%s)\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g.loop), seen,
           seen == EVLOOP_RUNNING ? "RUNNING" : "not RUNNING: bug");
    test_loop_free(g.loop);
    close(g.p[0]);
    close(g.p[1]);
    assert_int_equal(seen, EVLOOP_RUNNING);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_public_function_from_every_kind_of_callback),
        cmocka_unit_test(test_state_reads_running_inside_an_fd_callback_after_a_poller_sleep),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_reentrancy", tests, NULL, NULL);
}
