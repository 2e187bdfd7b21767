/* Timers: one-shot never early, interval re-armed from its deadline, cancel from another
 * thread and from inside callbacks, -ENOENT for unknown or spent ids, ids never 0, many
 * timers in deadline order, and a sleeping loop woken by a new, earlier timer. No test
 * asserts that a timer is on time: only that it is never early and that order holds. */
#include "test_util.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define MS 1000000ull

/* ---- never early ------------------------------------------------------------------------- */

struct early_probe {
    uint64_t not_before; /* evloop_now_ns() before the start call + delay */
    uint64_t fired_at;
    test_counter *fired;
};

static void early_probe_fire(void *arg)
{
    struct early_probe *p = arg;
    p->fired_at = evloop_now_ns();
    CHECK(p->fired_at >= p->not_before);
    atomic_fetch_add(p->fired, 1);
}

static const uint64_t early_delays[] = {0,      1,      1000,    100000, 1 * MS,
                                        2 * MS, 5 * MS, 10 * MS, 20 * MS};
#define N_EARLY (sizeof early_delays / sizeof early_delays[0])

static struct early_probe g_early[2 * N_EARLY];
static test_counter g_early_fired;

static void start_early_probes_on_the_loop_thread(void *arg)
{
    evloop *loop = arg;
    for (size_t i = 0; i < N_EARLY; i++) {
        struct early_probe *p = &g_early[N_EARLY + i];
        p->fired = &g_early_fired;
        p->not_before = evloop_now_ns() + early_delays[i];
        CHECK_EQ(evloop_timer_start(loop, early_delays[i], 0, early_probe_fire, p, NULL), 0);
    }
}

static void test_one_shot_timer_never_fires_before_its_delay(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    atomic_store(&g_early_fired, 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    for (size_t i = 0; i < N_EARLY; i++) { /* from another thread */
        struct early_probe *p = &g_early[i];
        p->fired = &g_early_fired;
        p->not_before = evloop_now_ns() + early_delays[i];
        assert_rc(evloop_timer_start(loop, early_delays[i], 0, early_probe_fire, p, NULL), 0);
    }
    assert_rc(evloop_submit(loop, start_early_probes_on_the_loop_thread, loop), 0);
    assert_true(wait_for_count(&g_early_fired, 2 * N_EARLY));
    test_runner_stop(&r);
    for (size_t i = 0; i < 2 * N_EARLY; i++)
        assert_true(g_early[i].fired_at >= g_early[i].not_before);
    test_loop_free(loop);
}

/* ---- interval ------------------------------------------------------------------------------ */

#define INTERVAL_FIRINGS 6

struct interval {
    evloop *loop;
    evloop_timer_id id;
    uint64_t start, delay, interval;
    uint64_t at[INTERVAL_FIRINGS];
    int fired; /* loop thread only */
    int cancel_rc;
    test_counter done;
};

static void interval_fire(void *arg)
{
    struct interval *t = arg;
    if (t->fired < INTERVAL_FIRINGS)
        t->at[t->fired] = evloop_now_ns();
    if (++t->fired == INTERVAL_FIRINGS) {
        t->cancel_rc = evloop_timer_cancel(t->loop, t->id);
        atomic_store(&t->done, 1);
    }
}

static void test_interval_timer_fires_repeatedly_counted_from_its_deadlines(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct interval t = {.loop = loop, .delay = 2 * MS, .interval = 3 * MS};
    atomic_init(&t.done, 0);
    t.start = evloop_now_ns();
    assert_rc(evloop_timer_start(loop, t.delay, t.interval, interval_fire, &t, &t.id), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&t.done, 1));
    test_runner_stop(&r);
    assert_rc(t.cancel_rc, 0);
    assert_int_equal(t.fired, INTERVAL_FIRINGS);
    for (int n = 0; n < INTERVAL_FIRINGS; n++) {
        uint64_t not_before = t.start + t.delay + (uint64_t)n * t.interval;
        if (t.at[n] < not_before)
            fail_msg("firing %d came %llu ns early", n + 1,
                     (unsigned long long)(not_before - t.at[n]));
    }
    test_loop_free(loop);
}

/* ---- cancel -------------------------------------------------------------------------------- */

static void test_timer_cancelled_from_another_thread_fires_only_if_cancel_said_enoent(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    test_counter fired = 0, sentinel = 0;
    evloop_timer_id id = 0;
    assert_rc(evloop_timer_start(loop, 50 * MS, 0, test_count_task, &fired, &id), 0);
    assert_rc(evloop_timer_start(loop, 100 * MS, 0, test_count_task, &sentinel, NULL), 0);
    int rc = evloop_timer_cancel(loop, id);
    assert_true(rc == 0 || rc == -ENOENT);
    assert_true(wait_for_count(&sentinel, 1)); /* later deadline: the first is decided */
    test_runner_stop(&r);
    /* Cancelled in time: never fires. Too late (the machine stalled 50 ms): it fired. */
    assert_int_equal(atomic_load(&fired), rc == 0 ? 0 : 1);
    test_loop_free(loop);
}

struct started_count {
    test_counter started;
};

static void count_start(void *arg)
{
    atomic_fetch_add(&((struct started_count *)arg)->started, 1);
}

static void test_interval_timer_cancelled_from_another_thread_starts_no_callback_after(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct started_count c = {0};
    evloop_timer_id id = 0;
    assert_rc(evloop_timer_start(loop, 0, 1 * MS, count_start, &c, &id), 0);
    assert_true(wait_for_count(&c.started, 3));
    assert_rc(evloop_timer_cancel(loop, id), 0);
    uint64_t at_cancel = atomic_load(&c.started);
    test_counter sentinel = 0;
    assert_rc(evloop_timer_start(loop, 20 * MS, 0, test_count_task, &sentinel, NULL), 0);
    assert_true(wait_for_count(&sentinel, 1));
    test_runner_stop(&r);
    /* One callback may have been starting while cancel ran; none may start after. */
    assert_true(atomic_load(&c.started) <= at_cancel + 1);
    assert_rc(evloop_timer_cancel(loop, id), -ENOENT);
    test_loop_free(loop);
}

static bool clock_passed(void *ctx)
{
    return evloop_now_ns() >= *(const uint64_t *)ctx;
}

/* The loop is held in a callback while the timer comes due, so the cancel meets an expired
 * timer that has not run yet; it must not run after the callback ends. */
static void test_expired_timer_cancelled_while_the_loop_is_busy_never_fires(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct started_count c = {0};
    evloop_timer_id one_shot = 0, interval = 0;
    struct test_gate g;
    test_gate_hold(&g, loop);
    uint64_t due = evloop_now_ns() + 2 * MS;
    assert_rc(evloop_timer_start(loop, 1 * MS, 0, count_start, &c, &one_shot), 0);
    assert_rc(evloop_timer_start(loop, 1 * MS, 1 * MS, count_start, &c, &interval), 0);
    assert_true(wait_until(clock_passed, &due, TEST_DEADLINE_MS)); /* both are due now */
    assert_rc(evloop_timer_cancel(loop, one_shot), 0);
    assert_rc(evloop_timer_cancel(loop, interval), 0);
    test_counter sentinel = 0;
    assert_rc(evloop_timer_start(loop, 5 * MS, 0, test_count_task, &sentinel, NULL), 0);
    test_gate_open(&g);
    assert_true(wait_for_count(&sentinel, 1));
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&c.started), 0);
    test_loop_free(loop);
}

struct self_cancel {
    evloop *loop;
    evloop_timer_id id;
    int fired; /* loop thread only */
    int cancel_rc;
    int fired_at_sentinel;
    test_counter done;
};

static void self_cancel_sentinel(void *arg)
{
    struct self_cancel *s = arg;
    s->fired_at_sentinel = s->fired;
    atomic_store(&s->done, 1);
}

static void self_cancel_fire(void *arg)
{
    struct self_cancel *s = arg;
    if (++s->fired == 3) {
        s->cancel_rc = evloop_timer_cancel(s->loop, s->id);
        CHECK_EQ(evloop_timer_start(s->loop, 20 * MS, 0, self_cancel_sentinel, s, NULL), 0);
    }
}

static void test_interval_timer_cancelled_inside_its_own_callback_stops(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct self_cancel s = {.loop = loop, .cancel_rc = 1};
    atomic_init(&s.done, 0);
    assert_rc(evloop_timer_start(loop, 1 * MS, 1 * MS, self_cancel_fire, &s, &s.id), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&s.done, 1));
    test_runner_stop(&r);
    assert_rc(s.cancel_rc, 0);
    assert_int_equal(s.fired_at_sentinel, 3);
    assert_int_equal(s.fired, 3);
    test_loop_free(loop);
}

static void one_shot_cancels_itself(void *arg)
{
    struct self_cancel *s = arg;
    s->fired++;
    s->cancel_rc = evloop_timer_cancel(s->loop, s->id);
    atomic_store(&s->done, 1);
}

static void test_one_shot_timer_cancelling_itself_in_its_callback_is_harmless(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct self_cancel s = {.loop = loop, .cancel_rc = 1};
    atomic_init(&s.done, 0);
    assert_rc(evloop_timer_start(loop, 0, 0, one_shot_cancels_itself, &s, &s.id), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&s.done, 1));
    test_runner_stop(&r);
    assert_int_equal(s.fired, 1);
    assert_true(s.cancel_rc == 0 || s.cancel_rc == -ENOENT);
    test_loop_free(loop);
}

/* Two timers due in the same tick: whichever runs first cancels the other, which must then
 * not run (the same generation safety as for fds). */
struct pair {
    evloop *loop;
    evloop_timer_id id[2];
    int ran[2];
    int cancel_rc;
    test_counter done;
};

static struct pair g_pair;

static void pair_fire(void *arg)
{
    int me = test_tag_of(arg);
    g_pair.ran[me]++;
    if (g_pair.ran[0] + g_pair.ran[1] == 1)
        g_pair.cancel_rc = evloop_timer_cancel(g_pair.loop, g_pair.id[1 - me]);
    atomic_fetch_add(&g_pair.done, 1);
}

static void test_timer_cancelled_by_a_timer_due_in_the_same_tick_does_not_fire(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    g_pair = (struct pair){.loop = loop, .cancel_rc = 1};
    atomic_init(&g_pair.done, 0);
    assert_rc(evloop_timer_start(loop, 0, 0, pair_fire, test_tag(0), &g_pair.id[0]), 0);
    assert_rc(evloop_timer_start(loop, 0, 0, pair_fire, test_tag(1), &g_pair.id[1]), 0);
    test_counter sentinel = 0;
    assert_rc(evloop_timer_start(loop, 10 * MS, 0, test_count_task, &sentinel, NULL), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&sentinel, 1));
    test_runner_stop(&r);
    assert_rc(g_pair.cancel_rc, 0);
    assert_int_equal(g_pair.ran[0] + g_pair.ran[1], 1);
    test_loop_free(loop);
}

static void test_cancel_of_an_unknown_timer_id_returns_enoent(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_timer_cancel(loop, 0), -ENOENT);
    assert_rc(evloop_timer_cancel(loop, 1), -ENOENT);
    assert_rc(evloop_timer_cancel(loop, 12345), -ENOENT);
    assert_rc(evloop_timer_cancel(loop, UINT64_MAX), -ENOENT);
    evloop_timer_id id = 0;
    assert_rc(evloop_timer_start(loop, 3600000 * MS, 0, test_never_task, NULL, &id), 0);
    assert_rc(evloop_timer_cancel(loop, id + 1000), -ENOENT);
    assert_rc(evloop_timer_cancel(loop, id), 0);
    test_loop_free(loop);
}

static void test_cancel_twice_returns_enoent_the_second_time(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    evloop_timer_id id = 0;
    assert_rc(evloop_timer_start(loop, 3600000 * MS, 0, test_never_task, NULL, &id), 0);
    assert_rc(evloop_timer_cancel(loop, id), 0);
    assert_rc(evloop_timer_cancel(loop, id), -ENOENT);
    /* and while running, from another thread */
    assert_rc(evloop_timer_start(loop, 3600000 * MS, 1 * MS, test_never_task, NULL, &id), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_timer_cancel(loop, id), 0);
    assert_rc(evloop_timer_cancel(loop, id), -ENOENT);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_cancel_of_a_fired_one_shot_timer_returns_enoent(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter fired = 0;
    evloop_timer_id id = 0;
    assert_rc(evloop_timer_start(loop, 0, 0, test_count_task, &fired, &id), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&fired, 1));
    assert_rc(evloop_timer_cancel(loop, id), -ENOENT);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static int compare_ids(const void *a, const void *b)
{
    evloop_timer_id x = *(const evloop_timer_id *)a, y = *(const evloop_timer_id *)b;
    return x < y ? -1 : x > y;
}

static void test_timer_ids_are_never_zero_and_never_repeat(void **state)
{
    (void)state;
    enum { N = 1000 };
    evloop *loop = test_loop_new(NULL);
    static evloop_timer_id ids[N], sorted[N];
    for (int i = 0; i < N; i++) {
        ids[i] = 0;
        assert_rc(evloop_timer_start(loop, (uint64_t)(3600000 + i) * MS, i % 3 ? 0 : 1000 * MS,
                                     test_never_task, NULL, &ids[i]),
                  0);
        assert_true(ids[i] != 0);
        /* cancel a few so ids of dead timers have a chance to be handed out again */
        if (i % 10 == 9)
            assert_rc(evloop_timer_cancel(loop, ids[i]), 0);
    }
    memcpy(sorted, ids, sizeof ids);
    qsort(sorted, N, sizeof sorted[0], compare_ids);
    for (int i = 1; i < N; i++)
        assert_true(sorted[i] != sorted[i - 1]);
    /* the rest are released by evloop_free (LSan checks) */
    test_loop_free(loop);
}

/* ---- order ----------------------------------------------------------------------------------- */

#define N_ORDER 2000

struct ordered {
    uint64_t lo, hi; /* bounds of the deadline: [before start + delay, after start + delay] */
};

static struct ordered g_ordered[N_ORDER];
static int g_fire_order[N_ORDER]; /* loop thread only */
static test_counter g_ordered_fired;

static void ordered_fire(void *arg)
{
    int i = test_tag_of(arg);
    CHECK(evloop_now_ns() >= g_ordered[i].lo);
    uint64_t n = atomic_load(&g_ordered_fired);
    if (n < N_ORDER)
        g_fire_order[n] = i;
    atomic_fetch_add(&g_ordered_fired, 1);
}

/* Order is checked only where it is certain: timer b firing after timer a is wrong when b's
 * deadline was surely earlier (b's upper bound below a's lower bound). */
static void test_many_timers_fire_in_deadline_order(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    atomic_store(&g_ordered_fired, 0);
    for (int i = 0; i < N_ORDER; i++) {
        /* a permutation of delays up to 10 ms, in 10 us steps, each used twice (ties) */
        uint64_t delay = (uint64_t)((i * 7919) % N_ORDER / 2) * 10000;
        g_ordered[i].lo = evloop_now_ns() + delay;
        assert_rc(evloop_timer_start(loop, delay, 0, ordered_fire, test_tag(i), NULL), 0);
        g_ordered[i].hi = evloop_now_ns() + delay;
    }
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&g_ordered_fired, N_ORDER));
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&g_ordered_fired), N_ORDER);
    int latest = g_fire_order[0]; /* the fired timer with the highest lower bound so far */
    for (int y = 1; y < N_ORDER; y++) {
        struct ordered *b = &g_ordered[g_fire_order[y]];
        if (b->hi < g_ordered[latest].lo)
            fail_msg("timer %d (deadline <= %llu) fired after timer %d (deadline >= %llu)",
                     g_fire_order[y], (unsigned long long)b->hi, latest,
                     (unsigned long long)g_ordered[latest].lo);
        if (b->lo > g_ordered[latest].lo)
            latest = g_fire_order[y];
    }
    test_loop_free(loop);
}

/* ---- timers and sleep
 * ---------------------------------------------------------------------------- */

static void test_timer_started_from_another_thread_wakes_a_loop_asleep_without_timers(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    test_counter fired = 0;
    assert_rc(evloop_timer_start(loop, 1 * MS, 0, test_count_task, &fired, NULL), 0);
    assert_true(wait_for_count(&fired, 1));
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void
test_earlier_timer_started_from_another_thread_wakes_a_loop_asleep_for_a_later_one(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    assert_rc(
        evloop_timer_start(loop, 3600000 * MS, 0, test_never_task, "the 1 h timer fired", NULL), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    test_counter fired = 0;
    assert_rc(evloop_timer_start(loop, 1 * MS, 0, test_count_task, &fired, NULL), 0);
    assert_true(wait_for_count(&fired, 1));
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_timer_started_from_another_thread_wakes_a_loop_asleep_in_the_poller(void **state)
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
    test_counter fired = 0;
    assert_rc(evloop_timer_start(loop, 1 * MS, 0, test_count_task, &fired, NULL), 0);
    assert_true(wait_for_count(&fired, 1));
    test_runner_stop(&r);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* Deadlines that would overflow 64 bits saturate: such a timer never fires (and an interval
 * of UINT64_MAX never fires a second time), instead of wrapping around into the past. */
static void test_timers_with_the_largest_delay_or_interval_never_fire_again(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter once = 0, sentinel = 0;
    evloop_timer_id never = 0, interval = 0;
    assert_rc(
        evloop_timer_start(loop, UINT64_MAX, 0, test_never_task, "UINT64_MAX delay fired", &never),
        0);
    assert_rc(evloop_timer_start(loop, UINT64_MAX - 1, UINT64_MAX, test_never_task,
                                 "near-UINT64_MAX delay fired", NULL),
              0);
    assert_rc(evloop_timer_start(loop, 0, UINT64_MAX, test_count_task, &once, &interval), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&once, 1));
    assert_rc(evloop_timer_start(loop, 20 * MS, 0, test_count_task, &sentinel, NULL), 0);
    assert_true(wait_for_count(&sentinel, 1));
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&once), 1);
    test_loop_free(loop);
}

struct chain {
    evloop *loop;
    int left; /* loop thread only */
    test_counter fired;
};

static void chain_fire(void *arg)
{
    struct chain *c = arg;
    atomic_fetch_add(&c->fired, 1);
    if (--c->left > 0)
        CHECK_EQ(evloop_timer_start(c->loop, c->left % 2 ? 0 : 100000, 0, chain_fire, c, NULL), 0);
}

static void test_timer_callbacks_may_start_timers(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct chain c = {.loop = loop, .left = 100};
    atomic_init(&c.fired, 0);
    assert_rc(evloop_timer_start(loop, 0, 0, chain_fire, &c, NULL), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&c.fired, 100));
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&c.fired), 100);
    test_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_one_shot_timer_never_fires_before_its_delay),
        cmocka_unit_test(test_interval_timer_fires_repeatedly_counted_from_its_deadlines),
        cmocka_unit_test(test_timer_cancelled_from_another_thread_fires_only_if_cancel_said_enoent),
        cmocka_unit_test(
            test_interval_timer_cancelled_from_another_thread_starts_no_callback_after),
        cmocka_unit_test(test_expired_timer_cancelled_while_the_loop_is_busy_never_fires),
        cmocka_unit_test(test_interval_timer_cancelled_inside_its_own_callback_stops),
        cmocka_unit_test(test_one_shot_timer_cancelling_itself_in_its_callback_is_harmless),
        cmocka_unit_test(test_timer_cancelled_by_a_timer_due_in_the_same_tick_does_not_fire),
        cmocka_unit_test(test_cancel_of_an_unknown_timer_id_returns_enoent),
        cmocka_unit_test(test_cancel_twice_returns_enoent_the_second_time),
        cmocka_unit_test(test_cancel_of_a_fired_one_shot_timer_returns_enoent),
        cmocka_unit_test(test_timer_ids_are_never_zero_and_never_repeat),
        cmocka_unit_test(test_many_timers_fire_in_deadline_order),
        cmocka_unit_test(test_timer_started_from_another_thread_wakes_a_loop_asleep_without_timers),
        cmocka_unit_test(
            test_earlier_timer_started_from_another_thread_wakes_a_loop_asleep_for_a_later_one),
        cmocka_unit_test(test_timer_started_from_another_thread_wakes_a_loop_asleep_in_the_poller),
        cmocka_unit_test(test_timers_with_the_largest_delay_or_interval_never_fire_again),
        cmocka_unit_test(test_timer_callbacks_may_start_timers),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("timer", tests, NULL, NULL);
}
