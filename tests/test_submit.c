/* evloop_submit and evloop_submit_internal: exactly-once and per-producer FIFO from several
 * threads, bursts far beyond the preallocated ingress, submissions from callbacks (never
 * nested), internal tasks before waiting external ones, no lost wake-up, and the fence that
 * auto picks for each variant. */
#include "test_util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- per-producer FIFO bookkeeping ------------------------------------------------------ */

/* A task's argument encodes (producer, seq): seq in the low 24 bits (16M tasks). */
#define SEQ_BITS 24
#define MAX_PRODUCERS 8

typedef int (*submit_fn)(evloop *, evloop_cb, void *);

struct fifo {
    uint64_t next[MAX_PRODUCERS]; /* loop thread only: next seq expected per producer */
    uint64_t violations;          /* loop thread only */
    unsigned first_producer;
    uint64_t first_seq, first_expected;
    test_counter total; /* tasks run, read by the test thread while the loop runs */
};

static struct fifo g_fifo;

static void fifo_reset(void)
{
    memset(g_fifo.next, 0, sizeof g_fifo.next);
    g_fifo.violations = 0;
    atomic_store(&g_fifo.total, 0);
}

static void *fifo_arg(unsigned producer, uint64_t seq)
{
    return (void *)(((uintptr_t)producer << SEQ_BITS) | (uintptr_t)seq);
}

static void fifo_task(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    unsigned p = (unsigned)(v >> SEQ_BITS);
    uint64_t seq = v & ((1u << SEQ_BITS) - 1);
    if (p >= MAX_PRODUCERS || seq != g_fifo.next[p]) {
        if (g_fifo.violations++ == 0) {
            g_fifo.first_producer = p;
            g_fifo.first_seq = seq;
            g_fifo.first_expected = p < MAX_PRODUCERS ? g_fifo.next[p] : 0;
        }
    }
    if (p < MAX_PRODUCERS)
        g_fifo.next[p] = seq + 1;
    atomic_fetch_add_explicit(&g_fifo.total, 1, memory_order_release);
}

/* After the loop thread is joined: every producer's n tasks ran once, in order. */
static void assert_fifo_complete(unsigned producers, uint64_t n)
{
    if (g_fifo.violations)
        fail_msg("%llu order violations; first: producer %u ran seq %llu, expected %llu",
                 (unsigned long long)g_fifo.violations, g_fifo.first_producer,
                 (unsigned long long)g_fifo.first_seq, (unsigned long long)g_fifo.first_expected);
    for (unsigned p = 0; p < producers; p++)
        assert_int_equal(g_fifo.next[p], n);
    assert_int_equal(atomic_load(&g_fifo.total), (uint64_t)producers * n);
}

struct producer {
    pthread_t thread;
    evloop *loop;
    unsigned id;
    uint64_t n;
    submit_fn submit;
    pthread_barrier_t *start;
    test_counter progress; /* tasks submitted so far */
    uint64_t failures;
    int first_error;
};

/* What producers submit: fifo_task, or a variant of it set before they start. */
static evloop_cb g_produced_task = fifo_task;

static void *produce(void *arg)
{
    struct producer *p = arg;
    pthread_barrier_wait(p->start);
    for (uint64_t i = 0; i < p->n; i++) {
        int r = p->submit(p->loop, g_produced_task, fifo_arg(p->id, i));
        if (r != 0 && p->failures++ == 0)
            p->first_error = r;
        atomic_store_explicit(&p->progress, i + 1, memory_order_release);
    }
    return NULL;
}

static void producers_start(struct producer *ps, unsigned count, pthread_barrier_t *start,
                            evloop *loop, uint64_t n, submit_fn submit)
{
    assert_int_equal(pthread_barrier_init(start, NULL, count), 0);
    for (unsigned i = 0; i < count; i++) {
        ps[i] = (struct producer){.loop = loop, .id = i, .n = n, .submit = submit, .start = start};
        atomic_init(&ps[i].progress, 0);
        assert_int_equal(pthread_create(&ps[i].thread, NULL, produce, &ps[i]), 0);
    }
}

static void producers_join(struct producer *ps, unsigned count, pthread_barrier_t *start)
{
    for (unsigned i = 0; i < count; i++)
        assert_int_equal(pthread_join(ps[i].thread, NULL), 0);
    pthread_barrier_destroy(start);
    for (unsigned i = 0; i < count; i++) {
        if (ps[i].failures)
            fail_msg("producer %u: %llu submits failed, first with %d (%s)", i,
                     (unsigned long long)ps[i].failures, ps[i].first_error,
                     evloop_strerror(ps[i].first_error));
    }
}

static void run_producers_against_a_running_loop(const evloop_config *cfg, unsigned count,
                                                 uint64_t n, submit_fn submit)
{
    fifo_reset();
    evloop *loop = test_loop_new(cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct producer ps[MAX_PRODUCERS];
    pthread_barrier_t start;
    producers_start(ps, count, &start, loop, n, submit);
    producers_join(ps, count, &start);
    assert_true(wait_for_count(&g_fifo.total, (uint64_t)count * n));
    test_runner_stop(&r);
    assert_fifo_complete(count, n);
    test_loop_free(loop);
}

static void test_submit_from_several_threads_runs_each_task_once_in_per_producer_order(void **state)
{
    (void)state;
    run_producers_against_a_running_loop(NULL, 4, TEST_SIZE(100000), evloop_submit);
}

static void
test_submit_internal_from_several_threads_runs_each_task_once_in_producer_order(void **state)
{
    (void)state;
    run_producers_against_a_running_loop(NULL, 4, TEST_SIZE(20000), evloop_submit_internal);
}

static void test_submit_keeps_per_producer_order_with_a_batch_budget_of_one(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.batch_budget = 1;
    run_producers_against_a_running_loop(&cfg, 2, TEST_SIZE(20000), evloop_submit);
}

static void
test_burst_far_beyond_preallocated_capacity_before_run_loses_nothing_in_order(void **state)
{
    (void)state;
    const unsigned count = 2;
    const uint64_t n = TEST_SIZE(500000);
    fifo_reset();
    evloop *loop = test_loop_new(NULL);
    struct producer ps[MAX_PRODUCERS];
    pthread_barrier_t start;
    producers_start(ps, count, &start, loop, n, evloop_submit);
    producers_join(ps, count, &start);
    assert_int_equal(evloop_state(loop), EVLOOP_AWAKE);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&g_fifo.total, count * n));
    test_runner_stop(&r);
    assert_fifo_complete(count, n);
    struct evloop_stats st;
    assert_rc(evloop_stats(loop, &st), 0);
    print_message("# %s: overflows %llu after a burst of %llu tasks\n", evloop_ingress(),
                  (unsigned long long)st.ingress_overflows, (unsigned long long)(count * n));
    test_loop_free(loop);
}

struct progress_goal {
    struct producer *ps;
    unsigned count;
    uint64_t at_least;
};

static bool producers_progressed(void *ctx)
{
    struct progress_goal *g = ctx;
    for (unsigned i = 0; i < g->count; i++)
        if (atomic_load_explicit(&g->ps[i].progress, memory_order_acquire) < g->at_least)
            return false;
    return true;
}

/* The loop is held in a callback while producers fill the ingress past its preallocated
 * part, then let go while they keep pushing: the consumer drains the preallocated part
 * while the spill-over is not empty, which is where a ring + overflow design can reorder. */
static void test_burst_that_spills_while_the_loop_drains_keeps_per_producer_order(void **state)
{
    (void)state;
    /* Not scaled down under TSan: the held part must exceed any preallocated ring. */
    const unsigned count = 2;
    const uint64_t n = 200000;
    fifo_reset();
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    struct producer ps[MAX_PRODUCERS];
    pthread_barrier_t start;
    producers_start(ps, count, &start, loop, n, evloop_submit);
    struct progress_goal goal = {ps, count, n / 2};
    bool progressed = wait_until(producers_progressed, &goal, TEST_DEADLINE_MS);
    test_gate_open(&g);
    producers_join(ps, count, &start);
    assert_true(progressed);
    assert_true(wait_for_count(&g_fifo.total, count * n));
    test_runner_stop(&r);
    assert_fifo_complete(count, n);
    test_loop_free(loop);
}

/* Every 1024th task holds the loop for 100 us: long enough for a producer on a full ring
 * to give up waiting and spill, short enough that the loop soon takes the spill and the
 * producers go back to the ring. Many spill episodes, each with ring pushes around it. */
static void stalling_fifo_task(void *arg)
{
    fifo_task(arg);
    if ((atomic_load_explicit(&g_fifo.total, memory_order_relaxed) & 1023) == 0)
        usleep(100);
}

static void test_producers_that_spill_again_and_again_keep_per_producer_order(void **state)
{
    (void)state;
    const unsigned count = 4;
    const uint64_t n = TEST_SIZE(200000);
    g_produced_task = stalling_fifo_task;
    run_producers_against_a_running_loop(NULL, count, n, evloop_submit);
    g_produced_task = fifo_task;
}

/* ---- submissions from callbacks -------------------------------------------------------- */

struct nest {
    evloop *loop;
    int depth;        /* loop thread only */
    int max_depth;    /* loop thread only */
    int submits_left; /* loop thread only */
    test_counter ran;
};

static void nest_task(void *arg)
{
    struct nest *n = arg;
    if (++n->depth > n->max_depth)
        n->max_depth = n->depth;
    for (int k = 0; k < 2 && n->submits_left > 0; k++) {
        n->submits_left--;
        int r = n->submits_left % 2 ? evloop_submit(n->loop, nest_task, n)
                                    : evloop_submit_internal(n->loop, nest_task, n);
        CHECK_EQ(r, 0);
    }
    n->depth--;
    atomic_fetch_add_explicit(&n->ran, 1, memory_order_release);
}

static void test_tasks_submitted_from_a_callback_run_after_it_never_nested(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct nest n = {.loop = loop, .depth = 0, .max_depth = 0, .submits_left = 2000};
    atomic_init(&n.ran, 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_submit(loop, nest_task, &n), 0);
    assert_true(wait_for_count(&n.ran, 2001));
    test_runner_stop(&r);
    assert_int_equal(n.max_depth, 1);
    assert_int_equal(n.submits_left, 0);
    assert_int_equal(atomic_load(&n.ran), 2001);
    test_loop_free(loop);
}

/* ---- order ------------------------------------------------------------------------------ */

static void submit_many_from_the_loop_thread(void *arg)
{
    int n = (int)(intptr_t)arg;
    for (int i = 0; i < n; i++)
        CHECK_EQ(evloop_submit(test_log.loop, test_log_task, test_tag(i)), 0);
}

static void test_tasks_submitted_on_the_loop_thread_run_in_submission_order(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_submit(loop, submit_many_from_the_loop_thread, test_tag(1000)), 0);
    assert_true(wait_for_count(&test_log.count, 1000));
    test_runner_stop(&r);
    int want[1000];
    for (int i = 0; i < 1000; i++)
        want[i] = i;
    test_log_expect(want, 1000);
    test_loop_free(loop);
}

static void test_internal_task_runs_before_external_tasks_submitted_before_run(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_submit(loop, test_log_task, test_tag(i)), 0);
    assert_rc(evloop_submit_internal(loop, test_log_task, test_tag(1000)), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&test_log.count, 101));
    test_runner_stop(&r);
    int want[101] = {1000};
    for (int i = 0; i < 100; i++)
        want[i + 1] = i;
    test_log_expect(want, 101);
    test_loop_free(loop);
}

static void
test_internal_task_runs_before_external_tasks_waiting_behind_a_busy_callback(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_log_reset(loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct test_gate g;
    test_gate_hold(&g, loop);
    for (int i = 0; i < 100; i++)
        assert_rc(evloop_submit(loop, test_log_task, test_tag(i)), 0);
    assert_rc(evloop_submit_internal(loop, test_log_task, test_tag(1000)), 0);
    assert_rc(evloop_submit_internal(loop, test_log_task, test_tag(1001)), 0);
    test_gate_open(&g);
    assert_true(wait_for_count(&test_log.count, 102));
    test_runner_stop(&r);
    int want[102] = {1000, 1001};
    for (int i = 0; i < 100; i++)
        want[i + 2] = i;
    test_log_expect(want, 102);
    test_loop_free(loop);
}

/* ---- wake-ups -------------------------------------------------------------------------------- */

static void ping_pong(const evloop_config *cfg, int rounds)
{
    evloop *loop = test_loop_new(cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    test_counter ran = 0;
    for (int i = 0; i < rounds; i++) {
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
        if (!wait_for_count(&ran, (uint64_t)i + 1))
            fail_msg("task %d of the ping-pong never ran (lost wake-up?), loop state %d", i,
                     (int)evloop_state(loop));
    }
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_ping_pong_with_a_loop_that_sleeps_at_once_never_loses_a_wake_up(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    ping_pong(&cfg, TEST_SIZE(2000));
}

static void test_ping_pong_with_the_adaptive_spin_never_loses_a_wake_up(void **state)
{
    (void)state;
    ping_pong(NULL, TEST_SIZE(2000));
}

struct round_tripper {
    pthread_t thread;
    evloop *loop;
    int rounds;
    test_counter ran;
    int lost_at; /* 0, or the round whose task never ran */
    int submit_error;
};

static void *round_trips(void *arg)
{
    struct round_tripper *t = arg;
    for (int i = 0; i < t->rounds; i++) {
        int r = evloop_submit(t->loop, test_count_task, &t->ran);
        if (r != 0) {
            t->submit_error = r;
            return NULL;
        }
        if (!wait_for_count(&t->ran, (uint64_t)i + 1)) {
            t->lost_at = i + 1;
            return NULL;
        }
    }
    return NULL;
}

static void test_producers_each_waiting_for_their_own_task_never_lose_a_wake_up(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct round_tripper ts[4];
    for (int i = 0; i < 4; i++) {
        ts[i] = (struct round_tripper){.loop = loop, .rounds = TEST_SIZE(1000)};
        atomic_init(&ts[i].ran, 0);
        assert_int_equal(pthread_create(&ts[i].thread, NULL, round_trips, &ts[i]), 0);
    }
    for (int i = 0; i < 4; i++)
        assert_int_equal(pthread_join(ts[i].thread, NULL), 0);
    test_runner_stop(&r);
    for (int i = 0; i < 4; i++) {
        assert_rc(ts[i].submit_error, 0);
        assert_int_equal(ts[i].lost_at, 0);
        assert_int_equal(atomic_load(&ts[i].ran), (uint64_t)TEST_SIZE(1000));
    }
    test_loop_free(loop);
}

/* ---- the heavy barrier ------------------------------------------------------------------ */

/* Posts one task to a sleeping loop, and waits until it ran and the loop sleeps again. */
static void post_to_a_sleeping_loop(evloop *loop, test_counter *ran, uint64_t i)
{
    uint64_t sleeps = test_sleeps(loop);
    assert_rc(evloop_submit(loop, test_count_task, ran), 0);
    if (!wait_for_count(ran, i + 1))
        fail_msg("post %llu never ran (lost wake-up?)", (unsigned long long)i);
    assert_true(wait_for_sleep(loop, sleeps));
}

/* A producer that posts now and then, finding the loop asleep each time. Its lane is on
 * probation once drained, so each sleep after a post paid a membarrier (about 10 us on a
 * VM while another thread runs); after two posts that woke the loop the lane switches to
 * fenced pushes, and the loop lets it go at once: its sleeps need no membarrier at all. */
static void test_a_producer_that_keeps_waking_the_loop_stops_costing_a_membarrier(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct evloop_stats st;
    assert_rc(evloop_stats(loop, &st), 0);
    if (strcmp(st.fence, "membarrier") != 0 || strcmp(st.ingress, "arena") != 0) {
        printf("# fence %s, ingress %s: only arena lanes in membarrier mode switch\n", st.fence,
               st.ingress);
        test_loop_free(loop);
        skip();
    }
    struct test_runner r;
    test_runner_start(&r, loop);
    test_counter ran = 0;
    assert_true(wait_for_sleep(loop, 0));
    uint64_t i = 0;
    for (; i < 4; i++) /* two wakes make the switch; the loop acts on it at its next drain */
        post_to_a_sleeping_loop(loop, &ran, i);
    assert_rc(evloop_stats(loop, &st), 0);
    uint64_t before = st.membarriers;
    for (; i < 40; i++)
        post_to_a_sleeping_loop(loop, &ran, i);
    assert_rc(evloop_stats(loop, &st), 0);
    printf("# membarriers over 36 posts to a sleeping loop: %llu\n",
           (unsigned long long)(st.membarriers - before));
    assert_int_equal(st.membarriers - before, 0);
    test_runner_stop(&r);
    test_loop_free(loop);
}

/* The fence (evloop_stats().fence) of a loop made with cfg.fence = fence, $EVLOOP_FENCE =
 * env (NULL: unset); NULL when evloop_new refused it with -ENOTSUP (membarrier unavailable). */
static const char *fence_of(const char *fence, const char *env, char *reason, size_t cap)
{
    if (env)
        setenv("EVLOOP_FENCE", env, 1);
    else
        unsetenv("EVLOOP_FENCE");
    evloop_config cfg = test_config_no_spin();
    cfg.fence = fence;
    evloop *loop = NULL;
    int r = evloop_new(&loop, &cfg);
    if (r == -ENOTSUP)
        return NULL;
    assert_rc(r, 0);
    struct evloop_stats st;
    assert_rc(evloop_stats(loop, &st), 0);
    const char *got = strcmp(st.fence, "seq_cst") == 0 ? "seq_cst" : "membarrier";
    snprintf(reason, cap, "%s", st.fence_reason);
    assert_rc(evloop_free(loop), 0);
    return got;
}

/* Auto is the variant's pick: chunk loops take seq_cst (their pushes order the wake by the
 * queue's mutex, so membarrier would buy them nothing, design.md); arena
 * loops take membarrier where the kernel allows it (their lanes switch to fenced pushes by
 * themselves). config.fence and, under auto, $EVLOOP_FENCE still decide when set. */
static void test_auto_fence_is_the_variants_pick_and_config_or_env_override_it(void **state)
{
    (void)state;
    const char *saved = getenv("EVLOOP_FENCE");
    char *keep = saved ? strdup(saved) : NULL;
    char reason[160];
    const char *ingress = evloop_ingress();
    const char *got = fence_of(NULL, NULL, reason, sizeof(reason));
    printf("# %s, auto: %s (%s)\n", ingress, got, reason);
    if (strcmp(ingress, "chunk") == 0) {
        assert_string_equal(got, "seq_cst");
        assert_non_null(strstr(reason, "chunk"));
    } else { /* membarrier, or seq_cst for a reason that is not the chunk variant's */
        assert_true(strcmp(got, "membarrier") == 0 || reason[0] != '\0');
        assert_null(strstr(reason, "chunk"));
    }
    char env_reason[160];
    const char *env_auto = fence_of(NULL, "auto", env_reason, sizeof(env_reason));
    assert_string_equal(env_auto, got); /* $EVLOOP_FENCE=auto is auto: the variant's pick */
    assert_string_equal(env_reason, reason);
    assert_string_equal(fence_of("seq_cst", NULL, reason, sizeof(reason)), "seq_cst");
    const char *asked = fence_of("membarrier", NULL, reason, sizeof(reason));
    if (asked)
        assert_string_equal(asked, "membarrier");
    const char *by_env = fence_of(NULL, "membarrier", reason, sizeof(reason));
    if (by_env)
        assert_string_equal(by_env, "membarrier");
    assert_string_equal(fence_of("auto", "seq_cst", reason, sizeof(reason)), "seq_cst");
    if (keep)
        setenv("EVLOOP_FENCE", keep, 1);
    else
        unsetenv("EVLOOP_FENCE");
    free(keep);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_submit_from_several_threads_runs_each_task_once_in_per_producer_order),
        cmocka_unit_test(
            test_submit_internal_from_several_threads_runs_each_task_once_in_producer_order),
        cmocka_unit_test(test_submit_keeps_per_producer_order_with_a_batch_budget_of_one),
        cmocka_unit_test(
            test_burst_far_beyond_preallocated_capacity_before_run_loses_nothing_in_order),
        cmocka_unit_test(test_burst_that_spills_while_the_loop_drains_keeps_per_producer_order),
        cmocka_unit_test(test_producers_that_spill_again_and_again_keep_per_producer_order),
        cmocka_unit_test(test_tasks_submitted_from_a_callback_run_after_it_never_nested),
        cmocka_unit_test(test_tasks_submitted_on_the_loop_thread_run_in_submission_order),
        cmocka_unit_test(test_internal_task_runs_before_external_tasks_submitted_before_run),
        cmocka_unit_test(
            test_internal_task_runs_before_external_tasks_waiting_behind_a_busy_callback),
        cmocka_unit_test(test_ping_pong_with_a_loop_that_sleeps_at_once_never_loses_a_wake_up),
        cmocka_unit_test(test_ping_pong_with_the_adaptive_spin_never_loses_a_wake_up),
        cmocka_unit_test(test_producers_each_waiting_for_their_own_task_never_lose_a_wake_up),
        cmocka_unit_test(test_a_producer_that_keeps_waking_the_loop_stops_costing_a_membarrier),
        cmocka_unit_test(test_auto_fence_is_the_variants_pick_and_config_or_env_override_it),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("submit", tests, NULL, NULL);
}
