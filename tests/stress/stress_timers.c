/* Timers under re-entrancy and at the edges: a timer cancelling itself, callbacks
 * cancelling timers due in the same run (a random storm checked against the cancel return
 * codes), zero-delay re-arming inside a callback while tasks and fd readiness still make
 * progress, and delays/intervals so large that the deadline saturates. */
#include "stress_util.h"

#include <fcntl.h>
#include <unistd.h>

static evloop *g_loop;

/* ---- cancel self ---------------------------------------------------------------------- */

struct self_cancel {
    evloop_timer_id id;
    _Atomic int fired;
    _Atomic int rc;
};

static void cancel_self(void *arg)
{
    struct self_cancel *s = arg;
    atomic_fetch_add(&s->fired, 1);
    atomic_store(&s->rc, evloop_timer_cancel(g_loop, s->id));
}

static void test_timers_cancelling_themselves_return_their_documented_codes(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    g_loop = test_loop_new(&cfg);
    struct self_cancel one = {0}, every = {0};
    /* Started before run, so the ids are stored before any callback can read them. */
    assert_rc(evloop_timer_start(g_loop, 1000000, 0, cancel_self, &one, &one.id), 0);
    assert_rc(evloop_timer_start(g_loop, 1000000, 1000000, cancel_self, &every, &every.id), 0);
    struct test_runner r;
    test_runner_start(&r, g_loop);
    test_counter later;
    atomic_init(&later, 0);
    /* A timer well after several intervals: by then a non-cancelled interval would refire. */
    assert_rc(evloop_timer_start(g_loop, 20000000, 0, test_count_task, &later, NULL), 0);
    assert_true(wait_for_count(&later, 1));
    test_runner_stop(&r);
    test_loop_free(g_loop);
    assert_int_equal(atomic_load(&one.fired), 1);
    assert_rc(atomic_load(&one.rc), -ENOENT); /* a one-shot has fired: unknown now */
    assert_int_equal(atomic_load(&every.fired), 1);
    assert_rc(atomic_load(&every.rc), 0);
}

/* ---- cancel storm among timers due in the same run ------------------------------------- */

#define STORM_TIMERS 64

struct storm_timer {
    evloop_timer_id id;
    int fired;
    bool cancelled;   /* a cancel of it returned 0 */
    bool interval;
};

struct cancel_storm {
    struct storm_timer t[STORM_TIMERS];
    uint64_t rng;
    uint64_t fired_after_cancel, bad_rc, cancels_ok, cancels_enoent, fired;
    test_counter done;
};

static struct cancel_storm g_cs;

static void storm_fire(void *arg)
{
    struct storm_timer *me = arg;
    me->fired++;
    g_cs.fired++;
    if (me->cancelled)
        g_cs.fired_after_cancel++;
    for (int k = 0; k < 2; k++) {
        struct storm_timer *v = &g_cs.t[stress_below(&g_cs.rng, STORM_TIMERS)];
        int rc = evloop_timer_cancel(g_loop, v->id);
        /* Pending: not cancelled yet, and either an interval timer or not fired yet; the
         * running one-shot itself is no longer pending. */
        bool pending = !v->cancelled && (v->interval || (v->fired == 0));
        if (v == me && !me->interval)
            pending = false;
        if (rc == 0) {
            g_cs.cancels_ok++;
            v->cancelled = true;
        } else {
            g_cs.cancels_enoent++;
        }
        if ((rc == 0) != pending || (rc != 0 && rc != -ENOENT)) {
            if (g_cs.bad_rc++ < 5)
                fprintf(stderr, "cancel of timer %d returned %d, pending %d\n",
                        (int)(v - g_cs.t), rc, (int)pending);
        }
    }
}

static void storm_end(void *arg);

static void storm_setup(void *arg)
{
    (void)arg;
    for (int i = 0; i < STORM_TIMERS; i++) {
        struct storm_timer *t = &g_cs.t[i];
        *t = (struct storm_timer){.interval = stress_below(&g_cs.rng, 4) == 0};
        uint64_t delay = stress_below(&g_cs.rng, 3) * 100000; /* 0, 0.1 or 0.2 ms */
        CHECK_EQ(evloop_timer_start(g_loop, delay, t->interval ? 100000 : 0, storm_fire, t, &t->id),
                 0);
    }
    /* The end of the round, started here so it cannot run before the round began. */
    CHECK_EQ(evloop_timer_start(g_loop, 3000000, 0, storm_end, NULL, NULL), 0);
    /* Hold the loop past every deadline, so they are all due in the next run. */
    stress_nap_ns(1000000);
}

static void storm_end(void *arg)
{
    (void)arg;
    for (int i = 0; i < STORM_TIMERS; i++)
        if (!g_cs.t[i].cancelled)
            evloop_timer_cancel(g_loop, g_cs.t[i].id); /* interval timers still running */
    atomic_fetch_add_explicit(&g_cs.done, 1, memory_order_release);
}

static void test_callbacks_cancelling_timers_due_in_the_same_run_never_see_them_fire(
    void **state)
{
    (void)state;
    uint64_t rounds = stress_size("cancel storm rounds",
                                  (struct stress_sizes){.plain = 500, .asan = 200, .tsan = 100,
                                                        .long_plain = 5000, .long_asan = 1000,
                                                        .long_tsan = 1000});
    evloop_config cfg = test_config_no_spin();
    g_loop = test_loop_new(&cfg);
    memset(&g_cs, 0, sizeof g_cs);
    g_cs.rng = stress_seed() | 1;
    atomic_init(&g_cs.done, 0);
    struct test_runner r;
    test_runner_start(&r, g_loop);
    for (uint64_t i = 0; i < rounds; i++) {
        assert_rc(evloop_submit(g_loop, storm_setup, NULL), 0);
        assert_true(wait_for_count(&g_cs.done, i + 1));
    }
    test_runner_stop(&r);
    printf("# figure: timers cancel storm %s.%s: %llu rounds of %d timers due together: fired "
           "%llu, cancels 0 %llu, -ENOENT %llu: fired after a successful cancel %llu, cancel "
           "codes against the model wrong %llu\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g_loop), (unsigned long long)rounds, STORM_TIMERS,
           (unsigned long long)g_cs.fired, (unsigned long long)g_cs.cancels_ok,
           (unsigned long long)g_cs.cancels_enoent, (unsigned long long)g_cs.fired_after_cancel,
           (unsigned long long)g_cs.bad_rc);
    test_loop_free(g_loop);
    assert_int_equal(g_cs.fired_after_cancel, 0);
    assert_int_equal(g_cs.bad_rc, 0);
}

/* ---- zero-delay re-arm does not starve tasks and fds ------------------------------------ */

struct rearm {
    _Atomic uint64_t fired;
    atomic_bool quit;
    test_counter tasks, io;
    int p[2];
};

static struct rearm g_ra;

static void rearm_fire(void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_ra.fired, 1);
    if (!atomic_load(&g_ra.quit)) {
        int rc = evloop_timer_start(g_loop, 0, 0, rearm_fire, NULL, NULL);
        /* The test sets quit, then stops the loop: a stop between the check and the call
         * refuses the timer, as documented. */
        CHECK(rc == 0 || (rc == -ESHUTDOWN && atomic_load(&g_ra.quit)));
    }
}

static void rearm_io(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)events;
    test_drain_fd(fd);
    atomic_fetch_add_explicit(&g_ra.io, 1, memory_order_release);
}

static void test_zero_delay_rearm_inside_a_callback_lets_tasks_and_io_progress(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    g_loop = test_loop_new(&cfg);
    memset(&g_ra, 0, sizeof g_ra);
    test_pipe(g_ra.p);
    assert_rc(evloop_io_add(g_loop, g_ra.p[0], EVLOOP_READABLE, rearm_io, NULL), 0);
    assert_rc(evloop_timer_start(g_loop, 0, 0, rearm_fire, NULL, NULL), 0);
    struct test_runner r;
    test_runner_start(&r, g_loop);
    for (uint64_t i = 1; i <= 200; i++) {
        assert_rc(evloop_submit(g_loop, test_count_task, &g_ra.tasks), 0);
        test_write_byte(g_ra.p[1]);
        if (!wait_for_count(&g_ra.tasks, i) || !wait_for_count(&g_ra.io, i))
            fail_msg("round %llu: tasks %llu io %llu: starved by re-arming timers",
                     (unsigned long long)i, (unsigned long long)atomic_load(&g_ra.tasks),
                     (unsigned long long)atomic_load(&g_ra.io));
    }
    uint64_t fired = atomic_load(&g_ra.fired);
    atomic_store(&g_ra.quit, true);
    test_runner_stop(&r);
    printf("# figure: timers rearm %s.%s: 200 tasks and 200 fd readiness delivered while a "
           "0-delay timer re-armed itself %llu times\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g_loop), (unsigned long long)fired);
    test_loop_free(g_loop);
    close(g_ra.p[0]);
    close(g_ra.p[1]);
    assert_true(fired >= 200); /* each round took at least one tick */
}

/* Regression: an interval timer whose interval is shorter than a tick falls behind its
 * deadlines for good; it is re-armed at most once per tick, but while it is the heap top
 * and already re-armed in this tick, pop_due() ends the whole run, so a timer due D ns
 * after it waits until the tiny one has fired D / interval times. Checked in ticks, not
 * time: when the 10 ms one-shot fires, the 1 ns timer must have fired far fewer than the
 * 10,000,000 times the starvation needs (a correct loop: one per tick for 10 ms). */
static test_counter g_tiny_fired;
static _Atomic uint64_t g_tiny_at_other = UINT64_MAX;

static void other_fire(void *arg)
{
    (void)arg;
    atomic_store(&g_tiny_at_other, atomic_load(&g_tiny_fired));
}

static void test_tiny_interval_timer_does_not_starve_other_due_timers(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    g_loop = test_loop_new(&cfg);
    atomic_store(&g_tiny_fired, 0);
    atomic_store(&g_tiny_at_other, UINT64_MAX);
    const uint64_t delay = 10000000, starved = delay / 2; /* in fires of a 1 ns timer */
    evloop_timer_id tiny;
    assert_rc(evloop_timer_start(g_loop, 0, 1, test_count_task, &g_tiny_fired, &tiny), 0);
    assert_rc(evloop_timer_start(g_loop, delay, 0, other_fire, NULL, NULL), 0);
    struct test_runner r;
    test_runner_start(&r, g_loop);
    uint64_t end = stress_now_ns() + 3000000000u;
    while (atomic_load(&g_tiny_at_other) == UINT64_MAX && stress_now_ns() < end)
        stress_nap_ns(1000000);
    uint64_t at = atomic_load(&g_tiny_at_other);
    assert_rc(evloop_timer_cancel(g_loop, tiny), 0);
    test_runner_stop(&r);
    printf("# figure: timers tiny interval %s.%s: a 10 ms one-shot beside a 1 ns interval "
           "timer fired after %s%llu fires of the tiny one (starvation needs %llu): %s\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g_loop), at == UINT64_MAX ? "more than " : "",
           (unsigned long long)(at == UINT64_MAX ? atomic_load(&g_tiny_fired) : at),
           (unsigned long long)delay, at >= starved ? "STARVED: bug" : "ok");
    test_loop_free(g_loop);
    assert_true(at < starved);
}

/* ---- huge delays saturate ------------------------------------------------------------------ */

static test_counter g_huge_fired;

static void test_huge_delays_and_intervals_saturate_never_fire_and_stay_cancellable(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    g_loop = test_loop_new(&cfg);
    const uint64_t delays[] = {UINT64_MAX, UINT64_MAX - 1, (uint64_t)INT64_MAX + 1, INT64_MAX,
                               UINT64_MAX / 2, 1ull << 62};
    const size_t nd = sizeof delays / sizeof delays[0];
    evloop_timer_id ids[2 * 6];
    for (size_t i = 0; i < nd; i++) {
        assert_rc(evloop_timer_start(g_loop, delays[i], 0, test_never_task, "huge delay", &ids[i]),
                  0);
        /* Fires at once, then its next deadline saturates. */
        assert_rc(evloop_timer_start(g_loop, 0, delays[i], test_count_task, &g_huge_fired,
                                     &ids[nd + i]),
                  0);
    }
    struct test_runner r;
    test_runner_start(&r, g_loop);
    assert_true(wait_for_sleep(g_loop, 0));
    /* Asleep with only saturated deadlines: it must really sleep, not spin on a timeout. */
    struct evloop_stats a, b;
    assert_rc(evloop_stats(g_loop, &a), 0);
    stress_nap_ns(100000000);
    assert_rc(evloop_stats(g_loop, &b), 0);
    /* And a short timer from another thread still wakes it. */
    test_counter shorter;
    atomic_init(&shorter, 0);
    assert_rc(evloop_timer_start(g_loop, 1000000, 0, test_count_task, &shorter, NULL), 0);
    assert_true(wait_for_count(&shorter, 1));
    for (size_t i = 0; i < 2 * nd; i++)
        assert_rc(evloop_timer_cancel(g_loop, ids[i]), 0);
    test_runner_stop(&r);
    printf("# figure: timers huge %s.%s: %zu saturating timers: ticks while idle for 100 ms: "
           "%llu\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g_loop), 2 * nd,
           (unsigned long long)(b.ticks - a.ticks));
    test_loop_free(g_loop);
    assert_true(b.ticks - a.ticks < 100);
}

/* Regression: a timer whose deadline saturates at UINT64_MAX is the heap top, and the heap
 * publishes UINT64_MAX as "no timer": an auto_exit loop then thinks nothing is left. */
static void test_auto_exit_loop_with_only_a_saturated_timer_left_keeps_running(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    cfg.auto_exit = true;
    g_loop = test_loop_new(&cfg);
    evloop_timer_id huge;
    test_counter fired;
    atomic_init(&fired, 0);
    assert_rc(evloop_timer_start(g_loop, UINT64_MAX, 0, test_never_task, "saturated", &huge), 0);
    assert_rc(evloop_timer_start(g_loop, 1000000, 0, test_count_task, &fired, NULL), 0);
    struct test_runner r;
    test_runner_start(&r, g_loop);
    assert_true(wait_for_count(&fired, 1));
    stress_nap_ns(100000000);
    enum evloop_state s = evloop_state(g_loop);
    int cancel_rc = evloop_timer_cancel(g_loop, huge);
    printf("# figure: timers saturated+auto_exit %s.%s: state 100 ms after the short timer: %d "
           "(%s), cancel of the saturated timer returned %d\n",
           EVLOOP_TEST_VARIANT, evloop_backend(g_loop), (int)s,
           s >= EVLOOP_TERMINATING ? "EXITED with a timer pending: bug" : "running", cancel_rc);
    evloop_stop(g_loop);
    test_runner_join(&r);
    test_loop_free(g_loop);
    assert_true(s < EVLOOP_TERMINATING);
    assert_rc(cancel_rc, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_timers_cancelling_themselves_return_their_documented_codes),
        cmocka_unit_test(
            test_callbacks_cancelling_timers_due_in_the_same_run_never_see_them_fire),
        cmocka_unit_test(test_zero_delay_rearm_inside_a_callback_lets_tasks_and_io_progress),
        cmocka_unit_test(test_tiny_interval_timer_does_not_starve_other_due_timers),
        cmocka_unit_test(
            test_huge_delays_and_intervals_saturate_never_fire_and_stay_cancellable),
        cmocka_unit_test(test_auto_exit_loop_with_only_a_saturated_timer_left_keeps_running),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_timers", tests, NULL, NULL);
}
