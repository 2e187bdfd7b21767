/* Graceful shutdown: evloop_stop drains everything accepted (tasks and the microtasks they
 * spawn), then refuses new work with -ESHUTDOWN from every entry point; timers pending at
 * stop never fire and are released; stop is idempotent, callable from callbacks, wakes a
 * sleeping loop in either mode; and a submit racing stop runs or is refused, never both,
 * never neither. */
#include "test_util.h"

#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HOUR_NS (3600ull * 1000000000u)

/* ---- drain ------------------------------------------------------------------------------- */

struct drain {
    evloop *loop;
    test_counter tasks, microtasks;
};

static void task_spawning_a_microtask(void *arg)
{
    struct drain *d = arg;
    atomic_fetch_add(&d->tasks, 1);
    CHECK_EQ(evloop_queue_microtask(d->loop, test_count_task, &d->microtasks), 0);
}

static void test_stop_runs_every_accepted_task_and_the_microtasks_they_spawn(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct drain d = {.loop = loop};
    atomic_init(&d.tasks, 0);
    atomic_init(&d.microtasks, 0);
    test_counter internal = 0, foreign_microtasks = 0;
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    for (int i = 0; i < 1000; i++)
        assert_rc(evloop_submit(loop, task_spawning_a_microtask, &d), 0);
    for (int i = 0; i < 100; i++) {
        assert_rc(evloop_submit_internal(loop, test_count_task, &internal), 0);
        assert_rc(evloop_queue_microtask(loop, test_count_task, &foreign_microtasks), 0);
    }
    assert_rc(evloop_stop(loop), 0);
    assert_rc(evloop_submit(loop, test_never_task, "task submitted after stop ran"), -ESHUTDOWN);
    test_gate_open(&g);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(atomic_load(&d.tasks), 1000);
    assert_int_equal(atomic_load(&d.microtasks), 1000);
    assert_int_equal(atomic_load(&internal), 100);
    assert_int_equal(atomic_load(&foreign_microtasks), 100);
    test_loop_free(loop);
}

/* ---- refusal ----------------------------------------------------------------------------- */

static void assert_every_entry_point_refuses(evloop *loop)
{
    int p[2];
    test_pipe(p);
    assert_rc(evloop_submit(loop, test_never_task, "refused submit ran"), -ESHUTDOWN);
    assert_rc(evloop_submit_internal(loop, test_never_task, "refused internal ran"), -ESHUTDOWN);
    assert_rc(evloop_queue_microtask(loop, test_never_task, "refused microtask ran"), -ESHUTDOWN);
    evloop_timer_id id = 0;
    assert_rc(evloop_timer_start(loop, 0, 0, test_never_task, "refused timer fired", &id),
              -ESHUTDOWN);
    assert_rc(evloop_timer_start(loop, 0, 1000, test_never_task, "refused timer fired", NULL),
              -ESHUTDOWN);
    test_write_byte(p[1]);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, "refused fd fired"),
              -ESHUTDOWN);
    close(p[0]);
    close(p[1]);
}

static void test_every_entry_point_refuses_with_eshutdown_while_draining_and_after(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    assert_rc(evloop_stop(loop), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATING);
    assert_every_entry_point_refuses(loop);
    test_gate_open(&g);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    assert_every_entry_point_refuses(loop);
    test_loop_free(loop);
}

static void test_every_entry_point_refuses_after_stop_of_a_loop_never_run(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_stop(loop), 0);
    assert_every_entry_point_refuses(loop);
    test_loop_free(loop);
}

struct draining {
    evloop *loop;
    int pipe_rd;
    int submit_rc, internal_rc, timer_rc, io_add_rc, microtask_rc;
    test_counter microtask_ran, done;
};

static void try_everything_while_draining(void *arg)
{
    struct draining *d = arg;
    d->submit_rc = evloop_submit(d->loop, test_never_task, "refused submit ran");
    d->internal_rc = evloop_submit_internal(d->loop, test_never_task, "refused internal ran");
    d->timer_rc = evloop_timer_start(d->loop, 0, 0, test_never_task, "refused timer", NULL);
    d->io_add_rc =
        evloop_io_add(d->loop, d->pipe_rd, EVLOOP_READABLE, test_never_io, "refused fd fired");
    d->microtask_rc = evloop_queue_microtask(d->loop, test_count_task, &d->microtask_ran);
    atomic_store(&d->done, 1);
}

/* A draining callback may still queue microtasks (they are part of what was accepted); any
 * other new work is refused, so the drain ends. */
static void test_draining_callback_may_queue_microtasks_but_nothing_else(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    test_write_byte(p[1]);
    struct draining d = {.loop = loop, .pipe_rd = p[0]};
    atomic_init(&d.microtask_ran, 0);
    atomic_init(&d.done, 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    assert_rc(evloop_submit(loop, try_everything_while_draining, &d), 0);
    assert_rc(evloop_stop(loop), 0);
    test_gate_open(&g);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(atomic_load(&d.done), 1);
    assert_rc(d.submit_rc, -ESHUTDOWN);
    assert_rc(d.internal_rc, -ESHUTDOWN);
    assert_rc(d.timer_rc, -ESHUTDOWN);
    assert_rc(d.io_add_rc, -ESHUTDOWN);
    assert_rc(d.microtask_rc, 0);
    assert_int_equal(atomic_load(&d.microtask_ran), 1);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

struct resubmitter {
    evloop *loop;
    uint64_t ran, accepted; /* loop thread only */
    int last_rc;
};

static void resubmit_forever(void *arg)
{
    struct resubmitter *s = arg;
    s->ran++;
    s->last_rc = evloop_submit(s->loop, resubmit_forever, s);
    if (s->last_rc == 0)
        s->accepted++;
}

static void test_self_resubmitting_task_cannot_keep_a_stopped_loop_alive(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct resubmitter s = {.loop = loop, .last_rc = 1};
    assert_rc(evloop_submit(loop, resubmit_forever, &s), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    test_runner_stop(&r);
    assert_rc(s.last_rc, -ESHUTDOWN);
    assert_int_equal(s.ran, s.accepted + 1); /* every accepted one ran, the first was ours */
    test_loop_free(loop);
}

/* ---- timers at stop ----------------------------------------------------------------------- */

static void test_timers_pending_at_stop_never_fire_and_are_released(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    evloop_timer_id ids[4];
    assert_rc(evloop_timer_start(loop, HOUR_NS, 0, test_never_task, "1 h timer fired", &ids[0]), 0);
    assert_rc(
        evloop_timer_start(loop, HOUR_NS, HOUR_NS, test_never_task, "interval fired", &ids[1]), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_timer_start(loop, 60ull * 1000000000u, 0, test_never_task, "60 s timer fired",
                                 &ids[2]),
              0);
    assert_rc(evloop_timer_start(loop, HOUR_NS, 1, test_never_task, "interval fired", &ids[3]), 0);
    test_runner_stop(&r); /* returns without waiting for them */
    for (int i = 0; i < 4; i++)
        assert_rc(evloop_timer_cancel(loop, ids[i]), -ENOENT);
    test_loop_free(loop); /* LSan: released */
}

/* ---- stop itself --------------------------------------------------------------------------- */

static void test_stop_is_idempotent_from_any_thread(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_stop(loop), 0);
    assert_rc(evloop_stop(loop), 0);
    assert_rc(evloop_stop(loop), 0);
    assert_rc(test_runner_join(&r), 0);
    assert_rc(evloop_stop(loop), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    test_loop_free(loop);
}

static void test_stop_from_a_callback_ends_run_after_the_accepted_tasks(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter ran = 0;
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0); /* twice: idempotent */
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(atomic_load(&ran), 100);
    test_loop_free(loop);
}

static void test_stop_wakes_a_loop_asleep_on_its_futex(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_stop_wakes_a_loop_asleep_in_the_poller(void **state)
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
    test_runner_stop(&r);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* A stop that lands while the loop is going to sleep (announcing sleep, re-checking its
 * queues) must not be lost; a lost one leaves evloop_run blocked and the join fails. */
static void test_stop_racing_a_loop_falling_asleep_is_never_lost(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    for (int i = 0; i < TEST_SIZE(200); i++) {
        evloop *loop = test_loop_new(&cfg);
        int p[2] = {-1, -1};
        if (i % 2) { /* half of the rounds sleep in the poller */
            test_pipe(p);
            assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, "idle fired"), 0);
        }
        struct test_runner r;
        test_runner_start(&r, loop);
        if (i % 4 < 2) /* and half stop at once, half once it has begun running */
            assert_true(wait_for_running(loop));
        test_runner_stop(&r);
        test_loop_free(loop);
        if (p[0] >= 0) {
            close(p[0]);
            close(p[1]);
        }
    }
}

/* ---- the race -------------------------------------------------------------------------------- */

#define RACE_PRODUCERS 4
#define RACE_MAX (1u << 18)
#define RACE_SEQ_BITS 24

static signed char g_race_rc[RACE_PRODUCERS][RACE_MAX];    /* 0 accepted, 1 refused, 2 other */
static unsigned char g_race_ran[RACE_PRODUCERS][RACE_MAX]; /* loop thread only */
static test_counter g_race_total;

static void race_task(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    unsigned p = (unsigned)(v >> RACE_SEQ_BITS);
    size_t i = v & ((1u << RACE_SEQ_BITS) - 1);
    if (g_race_ran[p][i] < 255)
        g_race_ran[p][i]++;
    atomic_fetch_add_explicit(&g_race_total, 1, memory_order_relaxed);
}

static const char *race_entry_point(size_t i)
{
    return i % 3 == 0 ? "submit" : i % 3 == 1 ? "submit_internal" : "queue_microtask";
}

struct racer {
    pthread_t thread;
    evloop *loop;
    unsigned id;
    bool paced; /* yield after each call, so the loop often finds its queues empty */
    size_t attempts;
    int other_rc;
};

static void *race(void *arg)
{
    struct racer *t = arg;
    size_t refused = 0;
    for (size_t i = 0; i < RACE_MAX && refused < 100; i++) {
        void *task = (void *)(((uintptr_t)t->id << RACE_SEQ_BITS) | i);
        int rc;
        switch (i % 3) {
        case 0: rc = evloop_submit(t->loop, race_task, task); break;
        case 1: rc = evloop_submit_internal(t->loop, race_task, task); break;
        default: rc = evloop_queue_microtask(t->loop, race_task, task); break;
        }
        g_race_rc[t->id][i] = rc == 0 ? 0 : rc == -ESHUTDOWN ? 1 : 2;
        if (rc != 0 && rc != -ESHUTDOWN)
            t->other_rc = rc;
        if (rc == -ESHUTDOWN)
            refused++;
        t->attempts = i + 1;
        if (t->paced)
            sched_yield();
    }
    return NULL;
}

static void race_once(uint64_t stop_after, bool paced, bool refusal_must_be_final)
{
    memset(g_race_rc, 0, sizeof g_race_rc);
    memset(g_race_ran, 0, sizeof g_race_ran);
    atomic_store(&g_race_total, 0);
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct racer ts[RACE_PRODUCERS];
    for (unsigned i = 0; i < RACE_PRODUCERS; i++) {
        ts[i] = (struct racer){.loop = loop, .id = i, .paced = paced};
        assert_int_equal(pthread_create(&ts[i].thread, NULL, race, &ts[i]), 0);
    }
    assert_true(wait_for_count(&g_race_total, stop_after));
    assert_rc(evloop_stop(loop), 0);
    for (unsigned i = 0; i < RACE_PRODUCERS; i++)
        assert_int_equal(pthread_join(ts[i].thread, NULL), 0);
    assert_rc(test_runner_join(&r), 0);
    /* Tally every kind of violation by entry point, then report them all at once. */
    size_t accepted = 0, refused = 0;
    size_t lost[3] = {0}, repeated[3] = {0}, refused_ran[3] = {0}, late[3] = {0};
    long first_bad = -1;
    unsigned first_bad_p = 0;
    for (unsigned p = 0; p < RACE_PRODUCERS; p++) {
        assert_rc(ts[p].other_rc, 0);
        bool seen_refusal = false;
        for (size_t i = 0; i < ts[p].attempts; i++) {
            int rc = g_race_rc[p][i];
            int ran = g_race_ran[p][i];
            bool bad = false;
            if (rc == 0 && ran == 0)
                bad = ++lost[i % 3];
            if (rc == 0 && ran > 1)
                bad = ++repeated[i % 3];
            if (rc == 1 && ran != 0)
                bad = ++refused_ran[i % 3];
            if (rc == 0 && seen_refusal && refusal_must_be_final)
                bad = ++late[i % 3];
            if (bad && first_bad < 0) {
                first_bad = (long)i;
                first_bad_p = p;
            }
            seen_refusal |= rc == 1;
            accepted += rc == 0;
            refused += rc == 1;
        }
        /* every producer raced the stop, unless it ran out of room first */
        assert_true(seen_refusal || ts[p].attempts == RACE_MAX);
    }
    test_loop_free(loop); /* first, so a failure below leaks nothing */
    if (first_bad >= 0) {
        for (int k = 0; k < 3; k++)
            print_error("%s: %zu accepted never ran, %zu accepted ran more than once, "
                        "%zu refused ran, %zu accepted after a refusal\n",
                        race_entry_point((size_t)k), lost[k], repeated[k], refused_ran[k], late[k]);
        fail_msg("first violation: producer %u call %ld (%s); %zu accepted, %zu refused",
                 first_bad_p, first_bad, race_entry_point((size_t)first_bad), accepted, refused);
    }
    assert_int_equal(atomic_load(&g_race_total), accepted);
}

/* Many short rounds: the window a lost task needs is narrow, so chances add up. */
#define RACE_ROUNDS (TEST_SLOWDOWN > 1 ? 6 : 24)

/* Odd rounds are paced (see struct racer): they stop early, the others later. */
static uint64_t race_stop_after(int round)
{
    return round % 2 ? 500 + (uint64_t)(round % 4) * 250 : 1000 + (uint64_t)(round % 8) * 2000;
}

/* Four threads rotate through submit, submit_internal and queue_microtask while the test
 * thread stops the loop: every call that returned 0 ran exactly once, every refused one
 * never ran. */
static void test_submit_racing_stop_runs_or_refuses_never_both(void **state)
{
    (void)state;
    for (int round = 0; round < RACE_ROUNDS; round++)
        race_once(race_stop_after(round), round % 2, false);
}

/* The same race, stricter: once one entry point refused a thread, no later call of that
 * thread, to any entry point, is accepted (stop takes effect at one point for all). */
static void test_refusal_after_a_racing_stop_is_final_for_every_entry_point(void **state)
{
    (void)state;
    for (int round = 0; round < RACE_ROUNDS; round++)
        race_once(race_stop_after(round), round % 2, true);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stop_runs_every_accepted_task_and_the_microtasks_they_spawn),
        cmocka_unit_test(test_every_entry_point_refuses_with_eshutdown_while_draining_and_after),
        cmocka_unit_test(test_every_entry_point_refuses_after_stop_of_a_loop_never_run),
        cmocka_unit_test(test_draining_callback_may_queue_microtasks_but_nothing_else),
        cmocka_unit_test(test_self_resubmitting_task_cannot_keep_a_stopped_loop_alive),
        cmocka_unit_test(test_timers_pending_at_stop_never_fire_and_are_released),
        cmocka_unit_test(test_stop_is_idempotent_from_any_thread),
        cmocka_unit_test(test_stop_from_a_callback_ends_run_after_the_accepted_tasks),
        cmocka_unit_test(test_stop_wakes_a_loop_asleep_on_its_futex),
        cmocka_unit_test(test_stop_wakes_a_loop_asleep_in_the_poller),
        cmocka_unit_test(test_stop_racing_a_loop_falling_asleep_is_never_lost),
        cmocka_unit_test(test_submit_racing_stop_runs_or_refuses_never_both),
        cmocka_unit_test(test_refusal_after_a_racing_stop_is_final_for_every_entry_point),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("shutdown", tests, NULL, NULL);
}
