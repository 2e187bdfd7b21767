/* Wake protocol rounds: wait until the loop announces sleep, then hand it one piece of work
 * from another thread, and give the loop a watchdog (1 s plain, 10 s under sanitizers) to
 * run it. An expiry is a lost wake-up. Both sleep modes (futex word: no fd registered;
 * poller: one idle pipe registered), every backend (ctest entry per backend).
 *
 * Each round varies what is handed over (submit, submit_internal, a microtask, a 0-delay
 * timer, an fd that is already readable) and when: right as evloop_state() reads SLEEPING
 * (the loop is between announcing sleep and blocking), after a random short spin, or after
 * a nap of 20-100 us (it has most likely blocked). A second test races two
 * producers at the same sleeping loop, so only one of them may make the wake call.
 * Figure (issue 6): 100,000 rounds per mode and backend, 0 expiries (EVLOOP_LONG=1). */
#include "stress_util.h"

#include <fcntl.h>
#include <unistd.h>

enum handoff { BY_SUBMIT, BY_INTERNAL, BY_MICROTASK, BY_TIMER, BY_FD, HANDOFF_KINDS };
static const char *const handoff_name[] = {"submit", "submit_internal", "microtask", "timer",
                                           "fd"};

struct wake_rig {
    evloop *loop;
    test_counter ran;
    int idle[2];     /* registered in poller mode, never written */
    int ready[2];    /* BY_FD: written, then added; its callback removes it */
    int io_remove_rc;
    uint64_t expiries, late, rounds;
    uint64_t expiries_by_kind[HANDOFF_KINDS];
};

static void ran_task(void *arg)
{
    struct wake_rig *w = arg;
    atomic_fetch_add_explicit(&w->ran, 1, memory_order_release);
}

static void ready_fire(void *arg, int fd, unsigned events)
{
    struct wake_rig *w = arg;
    (void)events;
    test_drain_fd(fd);
    int r = evloop_io_remove(w->loop, fd);
    CHECK_EQ(r, 0);
    atomic_fetch_add_explicit(&w->ran, 1, memory_order_release);
}

static void idle_fire(void *arg, int fd, unsigned events)
{
    (void)arg;
    fprintf(stderr, "idle fd %d reported events %#x\n", fd, events);
    test_check_failed("the idle pipe was never written", __FILE__, __LINE__);
}

static int hand_over(struct wake_rig *w, enum handoff kind)
{
    switch (kind) {
    case BY_SUBMIT: return evloop_submit(w->loop, ran_task, w);
    case BY_INTERNAL: return evloop_submit_internal(w->loop, ran_task, w);
    case BY_MICROTASK: return evloop_queue_microtask(w->loop, ran_task, w);
    case BY_TIMER: return evloop_timer_start(w->loop, 0, 0, ran_task, w, NULL);
    case BY_FD:
        test_write_byte(w->ready[1]);
        return evloop_io_add(w->loop, w->ready[0], EVLOOP_READABLE, ready_fire, w);
    default: return -EINVAL;
    }
}

static bool loop_sleeping(const evloop *loop)
{
    return evloop_state(loop) == EVLOOP_SLEEPING;
}

/* Spins (yielding) until the loop reads SLEEPING; false after the watchdog. */
static bool wait_sleeping(struct wake_rig *w, int64_t watchdog_ms)
{
    uint64_t end = stress_now_ns() + (uint64_t)watchdog_ms * 1000000u;
    for (unsigned i = 0;; i++) {
        if (loop_sleeping(w->loop))
            return true;
        if ((i & 63) == 63) {
            if (stress_now_ns() > end)
                return false;
            sched_yield();
        }
    }
}

static bool wait_ran(struct wake_rig *w, uint64_t goal, int64_t ms)
{
    uint64_t end = stress_now_ns() + (uint64_t)ms * 1000000u;
    for (unsigned i = 0;; i++) {
        if (atomic_load_explicit(&w->ran, memory_order_acquire) >= goal)
            return true;
        if ((i & 63) == 63) {
            if (stress_now_ns() > end)
                return atomic_load(&w->ran) >= goal;
            if (i > 4096)
                stress_nap_ns(20000);
            else
                sched_yield();
        }
    }
}

/* One expiry: the task did not run within the watchdog. If it never runs, the loop is
 * stuck for good (a lost wake-up): report and stop the program, nothing can rescue it. */
static void on_expiry(struct wake_rig *w, enum handoff kind, uint64_t round, uint64_t goal)
{
    w->expiries++;
    w->expiries_by_kind[kind]++;
    struct evloop_stats st;
    evloop_stats(w->loop, &st);
    fprintf(stderr,
            "round %llu (%s): watchdog expired; state %d, ticks %llu, futex sleeps %llu wakes "
            "%llu, poller sleeps %llu wakes %llu\n",
            (unsigned long long)round, handoff_name[kind], (int)evloop_state(w->loop),
            (unsigned long long)st.ticks, (unsigned long long)st.futex_sleeps,
            (unsigned long long)st.futex_wakes, (unsigned long long)st.poller_sleeps,
            (unsigned long long)st.poller_wakes);
    if (wait_ran(w, goal, 30000)) {
        w->late++;
        return;
    }
    fprintf(stderr, "round %llu: the loop never ran the hand-off: lost wake-up, loop stuck\n",
            (unsigned long long)round);
    fflush(NULL);
    _exit(1);
}

/* evloop_config.fence of the rig's loop: membarrier where available (set in main), or
 * seq_cst for the fence tests */
static const char *g_fence;

static void rig_open(struct wake_rig *w, bool poller_mode)
{
    memset(w, 0, sizeof *w);
    evloop_config cfg = test_config_no_spin();
    cfg.fence = g_fence;
    w->loop = test_loop_new(&cfg);
    atomic_init(&w->ran, 0);
    test_pipe(w->ready);
    w->idle[0] = w->idle[1] = -1;
    if (poller_mode) {
        test_pipe(w->idle);
        assert_rc(evloop_io_add(w->loop, w->idle[0], EVLOOP_READABLE, idle_fire, w), 0);
    }
}

static void rig_close(struct wake_rig *w, struct test_runner *r, const char *what, double secs)
{
    test_runner_stop(r);
    struct evloop_stats st;
    assert_rc(evloop_stats(w->loop, &st), 0);
    printf("# figure: wake %s %s.%s fence %s: %llu rounds, watchdog %lld ms: expiries %llu "
           "(submit %llu, internal %llu, microtask %llu, timer %llu, fd %llu), late %llu; "
           "futex sleeps %llu wakes %llu, poller sleeps %llu wakes %llu, %.1f s\n",
           what, EVLOOP_TEST_VARIANT, st.backend, st.fence, (unsigned long long)w->rounds,
           (long long)stress_watchdog_ms(), (unsigned long long)w->expiries,
           (unsigned long long)w->expiries_by_kind[BY_SUBMIT],
           (unsigned long long)w->expiries_by_kind[BY_INTERNAL],
           (unsigned long long)w->expiries_by_kind[BY_MICROTASK],
           (unsigned long long)w->expiries_by_kind[BY_TIMER],
           (unsigned long long)w->expiries_by_kind[BY_FD], (unsigned long long)w->late,
           (unsigned long long)st.futex_sleeps, (unsigned long long)st.futex_wakes,
           (unsigned long long)st.poller_sleeps, (unsigned long long)st.poller_wakes, secs);
    test_loop_free(w->loop);
    for (int i = 0; i < 2; i++) {
        close(w->ready[i]);
        if (w->idle[i] >= 0)
            close(w->idle[i]);
    }
    assert_int_equal(w->expiries, 0);
}

static uint64_t rounds_size(void)
{
    return stress_size("wake rounds per mode",
                       (struct stress_sizes){.plain = 20000, .asan = 10000, .tsan = 5000,
                                             .long_plain = 100000, .long_asan = 100000,
                                             .long_tsan = 100000});
}

/* Waits for the loop to announce sleep, at one of three moments chosen by the round. */
static void wait_for_the_moment(struct wake_rig *w, uint64_t *rng, uint64_t round)
{
    if (!wait_sleeping(w, stress_watchdog_ms() * 10))
        fail_msg("round %llu: the loop never went to sleep (state %d)", (unsigned long long)round,
                 (int)evloop_state(w->loop));
    switch (round % 3) {
    case 0:
        break; /* at once: the loop may still be re-checking its queues */
    case 1:
        for (uint64_t i = stress_below(rng, 2000); i > 0; i--)
            __asm__ __volatile__("" ::: "memory");
        break;
    default:
        /* A moment later: the loop has most likely blocked in its wait by then. */
        stress_nap_ns(20000 + (long)stress_below(rng, 80000));
        break;
    }
}

static void one_producer_rounds(bool poller_mode)
{
    struct wake_rig w;
    rig_open(&w, poller_mode);
    uint64_t rng = stress_seed() ^ (poller_mode ? 0x9e3779b97f4a7c15ULL : 0);
    uint64_t n = rounds_size();
    int64_t watchdog = stress_watchdog_ms();
    struct test_runner r;
    test_runner_start(&r, w.loop);
    uint64_t t0 = stress_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        enum handoff kind = (enum handoff)((i / 3) % HANDOFF_KINDS);
        wait_for_the_moment(&w, &rng, i);
        int rc = hand_over(&w, kind);
        if (rc != 0)
            fail_msg("round %llu: %s returned %d", (unsigned long long)i, handoff_name[kind], rc);
        if (!wait_ran(&w, i + 1, watchdog))
            on_expiry(&w, kind, i, i + 1);
        w.rounds++;
    }
    rig_close(&w, &r, poller_mode ? "one producer, poller mode" : "one producer, futex mode",
              (double)(stress_now_ns() - t0) / 1e9);
}

/* ---- two producers racing at one sleeping loop ------------------------------------------ */

struct racer {
    pthread_t thread;
    struct wake_rig *w;
    _Atomic uint64_t go;   /* round number to run, written by the test thread */
    _Atomic uint64_t done; /* rounds handed over */
    atomic_bool quit;
    int errors;
};

static void *race(void *arg)
{
    struct racer *c = arg;
    uint64_t next = 1;
    while (!atomic_load(&c->quit)) {
        if (atomic_load_explicit(&c->go, memory_order_acquire) < next) {
            sched_yield();
            continue;
        }
        if (evloop_submit(c->w->loop, ran_task, c->w) != 0)
            c->errors++;
        atomic_store_explicit(&c->done, next, memory_order_release);
        next++;
    }
    return NULL;
}

static void two_producer_rounds(bool poller_mode)
{
    struct wake_rig w;
    rig_open(&w, poller_mode);
    uint64_t rng = stress_seed() ^ 0x5bd1e995;
    uint64_t n = rounds_size() / 4;
    int64_t watchdog = stress_watchdog_ms();
    struct racer c[2];
    for (int k = 0; k < 2; k++) {
        c[k] = (struct racer){.w = &w};
        atomic_init(&c[k].go, 0);
        atomic_init(&c[k].done, 0);
        atomic_init(&c[k].quit, false);
        assert_int_equal(pthread_create(&c[k].thread, NULL, race, &c[k]), 0);
    }
    struct test_runner r;
    test_runner_start(&r, w.loop);
    uint64_t t0 = stress_now_ns();
    for (uint64_t i = 1; i <= n; i++) {
        wait_for_the_moment(&w, &rng, i);
        atomic_store_explicit(&c[0].go, i, memory_order_release);
        atomic_store_explicit(&c[1].go, i, memory_order_release);
        if (!wait_ran(&w, 2 * i, watchdog))
            on_expiry(&w, BY_SUBMIT, i, 2 * i);
        w.rounds++;
    }
    for (int k = 0; k < 2; k++) {
        atomic_store(&c[k].quit, true);
        pthread_join(c[k].thread, NULL);
        assert_int_equal(c[k].errors, 0);
    }
    rig_close(&w, &r, poller_mode ? "two producers, poller mode" : "two producers, futex mode",
              (double)(stress_now_ns() - t0) / 1e9);
}

static void test_handoff_to_a_loop_asleep_on_its_futex_word_never_expires(void **state)
{
    (void)state;
    one_producer_rounds(false);
}

static void test_handoff_to_a_loop_asleep_in_the_poller_never_expires(void **state)
{
    (void)state;
    one_producer_rounds(true);
}

static void test_two_producers_racing_at_a_loop_asleep_on_its_word_never_expire(void **state)
{
    (void)state;
    two_producer_rounds(false);
}

static void test_two_producers_racing_at_a_loop_asleep_in_the_poller_never_expire(void **state)
{
    (void)state;
    two_producer_rounds(true);
}

/* The same rounds with producers paying a seq_cst fence (the fallback where membarrier is
 * refused, and the chunk variant's auto); the tests above run membarrier where a loop can
 * take it (seq_cst under TSan). */
static void test_handoff_to_a_loop_asleep_on_its_word_with_fences_never_expires(void **state)
{
    (void)state;
    const char *was = g_fence;
    g_fence = "seq_cst";
    one_producer_rounds(false);
    g_fence = was;
}

static void test_handoff_to_a_loop_asleep_in_the_poller_with_fences_never_expires(void **state)
{
    (void)state;
    const char *was = g_fence;
    g_fence = "seq_cst";
    one_producer_rounds(true);
    g_fence = was;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_handoff_to_a_loop_asleep_on_its_futex_word_never_expires),
        cmocka_unit_test(test_handoff_to_a_loop_asleep_in_the_poller_never_expires),
        cmocka_unit_test(test_two_producers_racing_at_a_loop_asleep_on_its_word_never_expire),
        cmocka_unit_test(test_two_producers_racing_at_a_loop_asleep_in_the_poller_never_expire),
        cmocka_unit_test(test_handoff_to_a_loop_asleep_on_its_word_with_fences_never_expires),
        cmocka_unit_test(test_handoff_to_a_loop_asleep_in_the_poller_with_fences_never_expires),
    };
    test_require_backend();
    g_fence = test_fence_membarrier();
    return cmocka_run_group_tests_name("stress_wake", tests, NULL, NULL);
}
