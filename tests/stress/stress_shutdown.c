/* Shutdown under load: 4 producers submit in a tight loop (evloop_submit,
 * evloop_submit_internal and evloop_queue_microtask mixed) while the loop is stopped at a
 * random point, by the test thread, by a producer or by a task on the loop thread. Each
 * trial checks: every accepted task ran exactly once, no refused task ran, every refusal
 * was -ESHUTDOWN and once refused a producer is always refused, work the loop thread
 * spawns while draining (microtasks always, tasks until stop) is accounted for, and the
 * states a watcher thread reads only move forward. Figure (issue 6): 200 trials plain,
 * 50 under TSan and ASan (EVLOOP_LONG=1). */
#include "stress_util.h"

#define PRODUCERS 4
#define CAP (1u << 20) /* accepted tasks per producer per trial, at most */

static struct stress_ledger g_ledger;

struct followups {
    _Atomic uint64_t task_accepted, task_ran, task_refused;
    _Atomic uint64_t micro_accepted, micro_ran, micro_refused;
};
static struct followups g_follow;
static evloop *g_loop;

static void followup_task(void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_follow.task_ran, 1);
}

static void followup_micro(void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_follow.micro_ran, 1);
}

static void ledger_task(void *arg)
{
    stress_ledger_run(&g_ledger, arg);
    uint64_t seq = (uint64_t)(uintptr_t)arg & 0xffffff;
    if (seq % 16 == 0) {
        /* From the loop thread: a task is accepted until stop; a microtask until the end. */
        int r = evloop_submit(g_loop, followup_task, NULL);
        if (r == 0)
            atomic_fetch_add(&g_follow.task_accepted, 1);
        else if (r == -ESHUTDOWN)
            atomic_fetch_add(&g_follow.task_refused, 1);
        else
            CHECK_EQ(r, -ESHUTDOWN);
        r = evloop_queue_microtask(g_loop, followup_micro, NULL);
        if (r == 0)
            atomic_fetch_add(&g_follow.micro_accepted, 1);
        else
            atomic_fetch_add(&g_follow.micro_refused, 1);
    }
}

static void stop_task(void *loop)
{
    CHECK_EQ(evloop_stop(loop), 0);
}

enum stopper { STOP_BY_TEST, STOP_BY_PRODUCER, STOP_BY_TASK, STOPPERS };

struct producer {
    pthread_t thread;
    evloop *loop;
    unsigned id;
    uint64_t rng;
    uint64_t accepted, refused, bad_rc, accepted_after_refusal;
    int first_bad;
    uint64_t stop_at; /* STOP_BY_PRODUCER / STOP_BY_TASK: after this many accepted */
    enum stopper stopper;
    pthread_barrier_t *start;
};

static int submit_one(struct producer *p, void *arg)
{
    switch (stress_below(&p->rng, 3)) {
    case 0: return evloop_submit(p->loop, ledger_task, arg);
    case 1: return evloop_submit_internal(p->loop, ledger_task, arg);
    default: return evloop_queue_microtask(p->loop, ledger_task, arg);
    }
}

static void *produce(void *arg)
{
    struct producer *p = arg;
    pthread_barrier_wait(p->start);
    unsigned after = 0; /* attempts since the first refusal */
    while (after < 64) {
        if (p->accepted == p->stop_at && p->id == 0) {
            if (p->stopper == STOP_BY_PRODUCER)
                evloop_stop(p->loop);
            else if (p->stopper == STOP_BY_TASK && evloop_submit(p->loop, stop_task, p->loop))
                evloop_stop(p->loop); /* already stopping: fine */
        }
        if (p->accepted >= CAP) {
            /* Enough for one trial: wait for the stop, then expect refusals. */
            if (evloop_state(p->loop) < EVLOOP_TERMINATING) {
                stress_nap_ns(100000);
                continue;
            }
        }
        int r = submit_one(p, stress_ledger_arg(p->id, p->accepted));
        if (r == 0) {
            if (p->refused)
                p->accepted_after_refusal++;
            p->accepted++;
        } else if (r == -ESHUTDOWN) {
            p->refused++;
        } else {
            if (p->bad_rc++ == 0)
                p->first_bad = r;
        }
        if (p->refused)
            after++;
    }
    return NULL;
}

struct watcher {
    pthread_t thread;
    evloop *loop;
    atomic_bool quit;
    uint64_t samples, backwards;
    int last_rank, max_rank;
};

static void *watch(void *arg)
{
    struct watcher *w = arg;
    w->last_rank = 0;
    w->max_rank = 0;
    while (!atomic_load(&w->quit)) {
        int rank = stress_state_rank(evloop_state(w->loop));
        if (rank < w->last_rank) {
            if (w->backwards++ == 0)
                fprintf(stderr, "state went back: rank %d after %d\n", rank, w->last_rank);
        }
        w->last_rank = rank;
        w->max_rank = rank > w->max_rank ? rank : w->max_rank;
        w->samples++;
        if ((w->samples & 15) == 0)
            sched_yield();
    }
    return NULL;
}

struct totals {
    uint64_t trials, accepted, refused, lost, duplicated, phantom, bad_rc, after_refusal;
    uint64_t backwards, samples, follow_lost, micro_refused;
    uint64_t by[STOPPERS];
};

static void one_trial(uint64_t trial, uint64_t *rng, struct totals *tot)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    if (trial % 2)
        cfg.spin_ns = 0;
    evloop *loop = test_loop_new(&cfg);
    g_loop = loop;
    memset(&g_follow, 0, sizeof g_follow);
    for (int p = 0; p < STRESS_MAX_PRODUCERS; p++) {
        memset(g_ledger.runs[p], 0, g_ledger.n + 1);
        g_ledger.next[p] = 0;
    }
    g_ledger.order_violations = g_ledger.strays = 0;
    atomic_store(&g_ledger.total, 0);

    enum stopper stopper = (enum stopper)(trial % STOPPERS);
    struct watcher w = {.loop = loop};
    atomic_init(&w.quit, false);
    assert_int_equal(pthread_create(&w.thread, NULL, watch, &w), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, PRODUCERS + 1);
    struct producer prod[PRODUCERS];
    uint64_t stop_at = stress_below(rng, 20000);
    for (unsigned i = 0; i < PRODUCERS; i++) {
        prod[i] = (struct producer){.loop = loop, .id = i, .rng = stress_rand(rng) | 1,
                                    .stop_at = stop_at, .stopper = stopper, .start = &start};
        assert_int_equal(pthread_create(&prod[i].thread, NULL, produce, &prod[i]), 0);
    }
    pthread_barrier_wait(&start);
    if (stopper == STOP_BY_TEST) {
        stress_nap_ns((long)stress_below(rng, 3000000));
        assert_rc(evloop_stop(loop), 0);
    }
    for (unsigned i = 0; i < PRODUCERS; i++)
        pthread_join(prod[i].thread, NULL);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    stress_nap_ns(1000000); /* let the watcher see TERMINATED */
    atomic_store(&w.quit, true);
    pthread_join(w.thread, NULL);
    pthread_barrier_destroy(&start);

    uint64_t accepted[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++) {
        accepted[i] = prod[i].accepted;
        tot->accepted += prod[i].accepted;
        tot->refused += prod[i].refused;
        tot->bad_rc += prod[i].bad_rc;
        tot->after_refusal += prod[i].accepted_after_refusal;
        if (prod[i].bad_rc)
            fprintf(stderr, "trial %llu producer %u: a submit returned %d\n",
                    (unsigned long long)trial, i, prod[i].first_bad);
    }
    struct stress_tally t = stress_ledger_tally(&g_ledger, accepted, PRODUCERS);
    tot->lost += t.lost;
    tot->duplicated += t.duplicated;
    tot->phantom += t.phantom + t.strays;
    tot->follow_lost += (atomic_load(&g_follow.task_accepted) != atomic_load(&g_follow.task_ran)) +
                        (atomic_load(&g_follow.micro_accepted) != atomic_load(&g_follow.micro_ran));
    tot->micro_refused += atomic_load(&g_follow.micro_refused);
    tot->backwards += w.backwards;
    tot->samples += w.samples;
    tot->by[stopper]++;
    tot->trials++;
    if (t.lost || t.duplicated || t.phantom || t.strays)
        fprintf(stderr, "trial %llu (stopper %d): lost %llu duplicated %llu phantom %llu\n",
                (unsigned long long)trial, (int)stopper, (unsigned long long)t.lost,
                (unsigned long long)t.duplicated, (unsigned long long)(t.phantom + t.strays));
    test_loop_free(loop);
}

static void test_stop_at_a_random_point_under_four_producers_runs_or_refuses_each_once(
    void **state)
{
    (void)state;
    uint64_t n = stress_size("shutdown trials",
                             (struct stress_sizes){.plain = 60, .asan = 20, .tsan = 12,
                                                   .long_plain = 200, .long_asan = 50,
                                                   .long_tsan = 50});
    uint64_t rng = stress_seed();
    stress_ledger_init(&g_ledger, CAP);
    struct totals tot;
    memset(&tot, 0, sizeof tot);
    uint64_t t0 = stress_now_ns();
    for (uint64_t i = 0; i < n; i++)
        one_trial(i, &rng, &tot);
    printf("# figure: shutdown %s: %llu trials (stopped by test %llu, producer %llu, task %llu), "
           "%llu accepted, %llu refused: lost %llu, duplicated %llu, refused-but-ran %llu, "
           "non-ESHUTDOWN refusals %llu, accepted after a refusal %llu, trials with "
           "loop-thread follow-ups lost %llu, loop-thread microtasks refused %llu, state "
           "went back %llu times in %llu samples, %.1f s\n",
           EVLOOP_TEST_VARIANT, (unsigned long long)tot.trials,
           (unsigned long long)tot.by[STOP_BY_TEST], (unsigned long long)tot.by[STOP_BY_PRODUCER],
           (unsigned long long)tot.by[STOP_BY_TASK], (unsigned long long)tot.accepted,
           (unsigned long long)tot.refused, (unsigned long long)tot.lost,
           (unsigned long long)tot.duplicated, (unsigned long long)tot.phantom,
           (unsigned long long)tot.bad_rc, (unsigned long long)tot.after_refusal,
           (unsigned long long)tot.follow_lost, (unsigned long long)tot.micro_refused,
           (unsigned long long)tot.backwards, (unsigned long long)tot.samples,
           (double)(stress_now_ns() - t0) / 1e9);
    stress_ledger_free(&g_ledger);
    assert_int_equal(tot.lost, 0);
    assert_int_equal(tot.duplicated, 0);
    assert_int_equal(tot.phantom, 0);
    assert_int_equal(tot.bad_rc, 0);
    assert_int_equal(tot.after_refusal, 0);
    assert_int_equal(tot.follow_lost, 0);
    assert_int_equal(tot.micro_refused, 0);
    assert_int_equal(tot.backwards, 0);
}

/* ---- the admission race of tests/model/admission.pml, on an idle loop ---------------------- */

/* evloop_stop() sets `stopping` before it closes the ingress: a loop that finds "stopping,
 * nothing queued" in between returns, while a submit still lands in the open ingress and
 * is accepted; nothing runs it. Many short trials: a loop with little to do, a producer
 * submitting with short pauses, a stop after a random number of accepted tasks. The window
 * is a few instructions wide, so this rarely catches it; the model always does. */
struct racer {
    evloop *loop;
    test_counter *ran;
    _Atomic uint64_t accepted;
    int bad;
    atomic_bool *go;
};

static void *race_submit(void *arg)
{
    struct racer *c = arg;
    while (!atomic_load_explicit(c->go, memory_order_acquire))
        ;
    for (;;) {
        int r = evloop_submit(c->loop, test_count_task, c->ran);
        if (r == 0) {
            atomic_fetch_add_explicit(&c->accepted, 1, memory_order_relaxed);
            /* A short pause: the loop keeps up, so it is often idle when stop comes. */
            for (unsigned k = (unsigned)(c->accepted * 2654435761u) % 512; k > 0; k--)
                __asm__ __volatile__("" ::: "memory");
        } else {
            c->bad += r != -ESHUTDOWN;
            break;
        }
    }
    return NULL;
}

static void test_submit_racing_stop_on_an_idle_loop_is_run_or_refused(void **state)
{
    (void)state;
    uint64_t n = stress_size("stop races on an idle loop",
                             (struct stress_sizes){.plain = 2000, .asan = 500, .tsan = 200,
                                                   .long_plain = 10000, .long_asan = 5000,
                                                   .long_tsan = 2000});
    uint64_t rng = stress_seed() ^ 0x77;
    uint64_t lost = 0, accepted = 0, bad = 0, lossy_trials = 0;
    uint64_t t0 = stress_now_ns();
    for (uint64_t i = 0; i < n; i++) {
        evloop_config cfg;
        evloop_config_init(&cfg);
        evloop *loop = test_loop_new(&cfg);
        test_counter ran;
        atomic_init(&ran, 0);
        atomic_bool go;
        atomic_init(&go, false);
        struct test_runner r;
        test_runner_start(&r, loop);
        struct racer c = {.loop = loop, .ran = &ran, .go = &go};
        pthread_t t;
        assert_int_equal(pthread_create(&t, NULL, race_submit, &c), 0);
        atomic_store_explicit(&go, true, memory_order_release);
        uint64_t want = 1 + stress_below(&rng, 16), end = stress_now_ns() + 100000000u;
        while (atomic_load_explicit(&c.accepted, memory_order_relaxed) < want &&
               stress_now_ns() < end)
            sched_yield();
        assert_rc(evloop_stop(loop), 0);
        pthread_join(t, NULL);
        assert_rc(test_runner_join(&r), 0);
        uint64_t got = atomic_load(&ran), acc = atomic_load(&c.accepted);
        if (got != acc) {
            lossy_trials++;
            if (lossy_trials <= 3)
                fprintf(stderr, "trial %llu: accepted %llu, ran %llu\n", (unsigned long long)i,
                        (unsigned long long)acc, (unsigned long long)got);
        }
        lost += acc > got ? acc - got : got - acc;
        accepted += acc;
        bad += (uint64_t)c.bad;
        test_loop_free(loop);
    }
    printf("# figure: shutdown race %s: %llu stops racing a submitting producer, %llu "
           "accepted: trials losing tasks %llu (tasks lost %llu), non-ESHUTDOWN refusals "
           "%llu, %.1f s\n",
           EVLOOP_TEST_VARIANT, (unsigned long long)n, (unsigned long long)accepted,
           (unsigned long long)lossy_trials, (unsigned long long)lost, (unsigned long long)bad,
           (double)(stress_now_ns() - t0) / 1e9);
    assert_int_equal(lost, 0);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_stop_at_a_random_point_under_four_producers_runs_or_refuses_each_once),
        cmocka_unit_test(test_submit_racing_stop_on_an_idle_loop_is_run_or_refused),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_shutdown", tests, NULL, NULL);
}
