/* The work pool (evloop_work_submit, _cancel, _configure, _stats): work on a pool thread and
 * done on the loop thread, start order, done callbacks never nested and followed by their
 * microtasks, cancel before start and while running, stop and free with items pending (every
 * accepted item reported once), the thread rules, bad input, placement, sleeping pool
 * threads woken (also when the pool shares the loop's CPU and its wakes wait for the end of
 * the tick), and evloop_run_once. */
#include "test_util.h"

#include <poll.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>

#define MAX_JOBS 20000

struct job {
    evloop *loop;
    int index;
    struct test_gate *gate; /* work waits on it when set */
    atomic_int work_calls, done_calls;
    atomic_bool work_on_loop_thread, done_off_loop_thread, done_before_work;
    atomic_int status;
    atomic_int cpu;
};

static struct job g_jobs[MAX_JOBS];
static test_counter g_done;   /* done callbacks run */
static int g_order[MAX_JOBS]; /* work order (one pool thread) */
static atomic_int g_order_len;
static struct evloop_work_config g_cfg;

static void jobs_reset(evloop *loop, int n)
{
    for (int i = 0; i < n; i++) {
        struct job *j = &g_jobs[i];
        memset(j, 0, sizeof(*j));
        j->loop = loop;
        j->index = i;
        atomic_init(&j->status, 1);
    }
    atomic_store(&g_done, 0);
    atomic_store(&g_order_len, 0);
}

static void job_work(void *arg)
{
    struct job *j = arg;
    if (j->loop && evloop_on_loop_thread(j->loop))
        atomic_store(&j->work_on_loop_thread, true);
    int at = atomic_fetch_add(&g_order_len, 1);
    if (at < MAX_JOBS)
        g_order[at] = j->index;
#ifdef __linux__
    atomic_store(&j->cpu, sched_getcpu());
#endif
    if (j->gate)
        test_gate_task(j->gate);
    atomic_fetch_add(&j->work_calls, 1);
}

static void job_done(void *arg, int status)
{
    struct job *j = arg;
    if (!evloop_on_loop_thread(j->loop))
        atomic_store(&j->done_off_loop_thread, true);
    if (status == 0 && atomic_load(&j->work_calls) == 0)
        atomic_store(&j->done_before_work, true);
    atomic_store(&j->status, status);
    atomic_fetch_add(&j->done_calls, 1);
    atomic_fetch_add_explicit(&g_done, 1, memory_order_release);
}

/* After the loop has ended: every one of the n jobs had its done once, on the loop thread,
 * with 0 after its work ran once, or with -ECANCELED and no work. Returns how many ran. */
static int assert_jobs_reported_once(int n)
{
    int ran = 0;
    for (int i = 0; i < n; i++) {
        struct job *j = &g_jobs[i];
        if (atomic_load(&j->done_calls) != 1)
            fail_msg("job %d: done ran %d times", i, atomic_load(&j->done_calls));
        assert_false(atomic_load(&j->done_off_loop_thread));
        assert_false(atomic_load(&j->work_on_loop_thread));
        assert_false(atomic_load(&j->done_before_work));
        int status = atomic_load(&j->status);
        if (status == 0) {
            assert_int_equal(atomic_load(&j->work_calls), 1);
            ran++;
        } else {
            assert_int_equal(status, -ECANCELED);
            assert_int_equal(atomic_load(&j->work_calls), 0);
        }
    }
    return ran;
}

static void gate_init(struct test_gate *g)
{
    atomic_init(&g->entered, false);
    atomic_init(&g->release, false);
}

static evloop *new_loop(bool auto_exit)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.auto_exit = auto_exit;
    return test_loop_new(&cfg);
}

static void configure(evloop *loop, unsigned threads, int64_t spin_ns)
{
    evloop_work_config_init(&g_cfg);
    g_cfg.threads = threads;
    g_cfg.spin_ns = spin_ns;
    assert_rc(evloop_work_configure(loop, &g_cfg), 0);
}

/* Runs fn(loop) on the loop thread (as a task) and waits until it has returned. */
struct on_loop {
    void (*fn)(evloop *loop);
    evloop *loop;
    atomic_bool done;
};

static void on_loop_task(void *arg)
{
    struct on_loop *o = arg;
    o->fn(o->loop);
    atomic_store_explicit(&o->done, true, memory_order_release);
}

static void run_on_loop(evloop *loop, void (*fn)(evloop *))
{
    struct on_loop o = {.fn = fn, .loop = loop};
    atomic_init(&o.done, false);
    assert_rc(evloop_submit(loop, on_loop_task, &o), 0);
    assert_true(wait_for_flag(&o.done));
}

static void submit_jobs(evloop *loop, int from, int to)
{
    for (int i = from; i < to; i++)
        CHECK_EQ(evloop_work_submit(loop, job_work, job_done, &g_jobs[i], NULL), 0);
}

/* ---- where things run, and when ------------------------------------------------------------ */

static void test_work_runs_on_a_pool_thread_and_done_on_the_loop_thread(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    jobs_reset(loop, 64);
    submit_jobs(loop, 0, 64); /* before the run: the one thread allowed while none runs it */
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(assert_jobs_reported_once(64), 64);
    struct evloop_work_stats st;
    assert_rc(evloop_work_stats(loop, &st), 0);
    assert_int_equal(st.submitted, 64);
    assert_int_equal(st.completed, 64);
    assert_int_equal(st.pending, 0);
    assert_true(st.threads >= 1);
    test_loop_free(loop);
}

static void submit_and_wait_for_work_in_a_task(evloop *loop)
{
    jobs_reset(loop, 1);
    CHECK_EQ(evloop_work_submit(loop, job_work, job_done, &g_jobs[0], NULL), 0);
    /* The work runs meanwhile; its done must wait until this callback has returned. */
    uint64_t end = evloop_now_ns() + (uint64_t)TEST_DEADLINE_MS * 1000000u;
    while (atomic_load(&g_jobs[0].work_calls) == 0 && evloop_now_ns() < end)
        sched_yield();
    CHECK_EQ(atomic_load(&g_jobs[0].work_calls), 1);
    CHECK_EQ(atomic_load(&g_jobs[0].done_calls), 0);
}

static void test_done_runs_after_the_callback_that_submitted_never_nested(void **state)
{
    (void)state;
    evloop *loop = new_loop(false);
    struct test_runner r;
    test_runner_start(&r, loop);
    run_on_loop(loop, submit_and_wait_for_work_in_a_task);
    assert_true(wait_for_count(&g_done, 1));
    test_runner_stop(&r);
    assert_int_equal(assert_jobs_reported_once(1), 1);
    test_loop_free(loop);
}

static void test_items_start_in_submit_order_past_the_queues_capacity(void **state)
{
    (void)state;
    int n = TEST_SIZE(12000) > 5000 ? TEST_SIZE(12000) : 5000; /* the ring holds 4096 */
    evloop *loop = new_loop(true);
    configure(loop, 1, -1);
    jobs_reset(loop, n);
    /* The one pool thread is held in the first item while the rest fill the queue. */
    struct test_gate gate;
    gate_init(&gate);
    g_jobs[0].gate = &gate;
    submit_jobs(loop, 0, 1);
    assert_true(wait_for_flag(&gate.entered));
    submit_jobs(loop, 1, n);
    test_gate_open(&gate);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(assert_jobs_reported_once(n), n);
    assert_int_equal(atomic_load(&g_order_len), n);
    for (int i = 0; i < n; i++)
        if (g_order[i] != i)
            fail_msg("position %d ran item %d", i, g_order[i]);
    struct evloop_work_stats st;
    assert_rc(evloop_work_stats(loop, &st), 0);
    assert_int_equal(st.threads, 1);
    assert_true(st.overflows > 0);
    test_loop_free(loop);
}

/* ---- many items, from the loop thread and from done callbacks ------------------------------- */

static atomic_int g_chain_left;
static void chain_done(void *arg, int status);

static void chain_next(evloop *loop)
{
    int i = atomic_fetch_sub(&g_chain_left, 1) - 1;
    if (i >= 0)
        CHECK_EQ(evloop_work_submit(loop, job_work, chain_done, &g_jobs[i], NULL), 0);
}

static void chain_done(void *arg, int status)
{
    job_done(arg, status);
    chain_next(((struct job *)arg)->loop);
}

static void test_many_items_on_several_threads_each_report_once(void **state)
{
    (void)state;
    int n = TEST_SIZE(16000), chained = n / 4;
    evloop *loop = new_loop(true);
    configure(loop, 4, -1);
    jobs_reset(loop, n);
    submit_jobs(loop, chained, n);
    atomic_store(&g_chain_left, chained);
    for (int k = 0; k < 8; k++)
        chain_next(loop); /* eight chains: each done submits the next item */
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(assert_jobs_reported_once(n), n);
    struct evloop_work_stats st;
    assert_rc(evloop_work_stats(loop, &st), 0);
    assert_int_equal(st.submitted, (uint64_t)n);
    assert_int_equal(st.completed, (uint64_t)n);
    assert_int_equal(st.threads, 4);
    test_loop_free(loop);
}

/* ---- order rules of done callbacks ------------------------------------------------------------
 */

static void log_micro(void *arg)
{
    test_log_add(test_tag_of(arg));
}

static void logging_done(void *arg, int status)
{
    CHECK_EQ(status, 0);
    int tag = test_tag_of(arg);
    test_log_add(tag);
    CHECK_EQ(evloop_queue_microtask(test_log.loop, log_micro, test_tag(tag + 100)), 0);
    atomic_fetch_add(&g_done, 1);
}

static void noop_work(void *arg)
{
    (void)arg;
}

static void test_a_done_callbacks_microtasks_run_before_the_next_done(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    configure(loop, 1, -1);
    test_log_reset(loop);
    atomic_store(&g_done, 0);
    for (int i = 1; i <= 3; i++)
        assert_rc(evloop_work_submit(loop, noop_work, logging_done, test_tag(i), NULL), 0);
    assert_rc(test_run_to_end(loop), 0);
    const int want[] = {1, 101, 2, 102, 3, 103};
    test_log_expect(want, 6);
    test_loop_free(loop);
}

static void test_a_null_done_is_allowed_and_the_work_still_runs(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    jobs_reset(loop, 8);
    for (int i = 0; i < 8; i++)
        assert_rc(evloop_work_submit(loop, job_work, NULL, &g_jobs[i], NULL), 0);
    assert_rc(test_run_to_end(loop), 0);
    for (int i = 0; i < 8; i++)
        assert_int_equal(atomic_load(&g_jobs[i].work_calls), 1);
    test_loop_free(loop);
}

/* ---- cancel --------------------------------------------------------------------------------- */

static bool job_started(void *arg)
{
    return atomic_load(&g_order_len) > ((struct job *)arg)->index;
}

/* One pool thread held inside job 0's work; jobs 1 and 2 queued behind it. The loop is not
 * running: the test thread may call the loop-thread functions. */
static void hold_one_thread(evloop *loop, struct test_gate *gate, evloop_work_id ids[3])
{
    configure(loop, 1, 0);
    jobs_reset(loop, 3);
    gate_init(gate);
    g_jobs[0].gate = gate;
    for (int i = 0; i < 3; i++)
        assert_rc(evloop_work_submit(loop, job_work, job_done, &g_jobs[i], &ids[i]), 0);
    assert_true(wait_for_flag(&gate->entered));
}

static void test_cancel_before_start_reports_ecanceled_and_the_work_never_runs(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    struct test_gate gate;
    evloop_work_id ids[3];
    hold_one_thread(loop, &gate, ids);
    assert_rc(evloop_work_cancel(loop, ids[1]), 0);
    assert_rc(evloop_work_cancel(loop, ids[1]), -EALREADY);  /* its done has not run yet */
    assert_int_equal(atomic_load(&g_jobs[1].done_calls), 0); /* never inside the call */
    test_gate_open(&gate);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(assert_jobs_reported_once(3), 2);
    assert_int_equal(atomic_load(&g_jobs[1].status), -ECANCELED);
    assert_int_equal(atomic_load(&g_jobs[2].status), 0);
    assert_rc(evloop_work_cancel(loop, ids[1]), -ENOENT); /* its done has run */
    struct evloop_work_stats st;
    assert_rc(evloop_work_stats(loop, &st), 0);
    assert_int_equal(st.cancelled, 1);
    assert_int_equal(st.completed, 2);
    test_loop_free(loop);
}

static void test_cancel_while_running_is_ebusy_and_done_reports_success(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    struct test_gate gate;
    evloop_work_id ids[3];
    hold_one_thread(loop, &gate, ids);
    assert_rc(evloop_work_cancel(loop, ids[0]), -EBUSY);
    test_gate_open(&gate);
    /* Once job 2's work has returned, its cancel says -EALREADY (before the loop ran its
     * done): wait for the work, then for the pool thread to mark it finished. */
    assert_true(wait_until(job_started, &g_jobs[2], TEST_DEADLINE_MS));
    int r = -EBUSY;
    uint64_t end = evloop_now_ns() + (uint64_t)TEST_DEADLINE_MS * 1000000u;
    while ((r = evloop_work_cancel(loop, ids[2])) == -EBUSY && evloop_now_ns() < end)
        sched_yield();
    assert_rc(r, -EALREADY);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(assert_jobs_reported_once(3), 3);
    test_loop_free(loop);
}

static void test_cancel_of_an_unknown_or_reused_id_is_enoent(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    assert_rc(evloop_work_cancel(loop, 0), -ENOENT); /* no pool yet */
    jobs_reset(loop, 2);
    evloop_work_id id;
    assert_rc(evloop_work_submit(loop, job_work, job_done, &g_jobs[0], &id), 0);
    assert_int_not_equal(id, 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_rc(evloop_work_cancel(loop, id), -ENOENT);
    assert_rc(evloop_work_cancel(loop, 0), -ENOENT);
    assert_rc(evloop_work_cancel(loop, id + (UINT64_C(1) << 32)), -ENOENT); /* another gen */
    assert_rc(evloop_work_cancel(loop, UINT64_MAX), -ENOENT);
    assert_rc(evloop_work_cancel(loop, (UINT64_C(1) << 32) | 0xffffff), -ENOENT);
    test_loop_free(loop);
}

/* Cancels race the pool threads' claims: each item is reported once, and a cancel that
 * returned 0 means its work never ran. */
static int g_race_n;
static atomic_int g_race_cancel_rc[MAX_JOBS];

static void submit_and_cancel_every_other(evloop *loop)
{
    evloop_work_id id;
    for (int i = 0; i < g_race_n; i++) {
        CHECK_EQ(evloop_work_submit(loop, job_work, job_done, &g_jobs[i], &id), 0);
        if (i % 2 == 1) {
            int r = evloop_work_cancel(loop, id);
            CHECK(r == 0 || r == -EBUSY || r == -EALREADY);
            atomic_store(&g_race_cancel_rc[i], r);
        }
    }
}

static void test_cancel_racing_the_pool_threads_reports_each_item_once(void **state)
{
    (void)state;
    g_race_n = TEST_SIZE(4000) > 500 ? TEST_SIZE(4000) : 500;
    for (int round = 0; round < 3; round++) {
        evloop *loop = new_loop(false);
        configure(loop, 3, round == 0 ? 0 : -1);
        jobs_reset(loop, g_race_n);
        struct test_runner r;
        test_runner_start(&r, loop);
        run_on_loop(loop, submit_and_cancel_every_other);
        assert_true(wait_for_count(&g_done, (uint64_t)g_race_n));
        test_runner_stop(&r);
        assert_jobs_reported_once(g_race_n);
        for (int i = 1; i < g_race_n; i += 2)
            if (atomic_load(&g_race_cancel_rc[i]) == 0)
                assert_int_equal(atomic_load(&g_jobs[i].status), -ECANCELED);
            else
                assert_int_equal(atomic_load(&g_jobs[i].status), 0);
        test_loop_free(loop);
    }
}

/* ---- stop and free with items pending ----------------------------------------------------- */

static struct test_gate g_stop_gate;
static int g_stop_n;

static void submit_gated_then_many(evloop *loop)
{
    g_jobs[0].gate = &g_stop_gate;
    submit_jobs(loop, 0, g_stop_n);
}

static void test_stop_with_items_pending_runs_or_reports_every_one(void **state)
{
    (void)state;
    g_stop_n = 200;
    evloop *loop = new_loop(false);
    configure(loop, 1, -1);
    jobs_reset(loop, g_stop_n);
    gate_init(&g_stop_gate);
    struct test_runner r;
    test_runner_start(&r, loop);
    run_on_loop(loop, submit_gated_then_many);
    assert_true(wait_for_flag(&g_stop_gate.entered));
    assert_rc(evloop_stop(loop), 0);
    /* Everything queued is cancelled, but the run waits for the item that is running. */
    assert_true(wait_for_count(&g_done, (uint64_t)g_stop_n - 1));
    assert_false(atomic_load(&r.done));
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATING);
    test_gate_open(&g_stop_gate);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(assert_jobs_reported_once(g_stop_n), 1);
    assert_int_equal(atomic_load(&g_jobs[0].status), 0);
    jobs_reset(loop, 1);
    assert_rc(evloop_work_submit(loop, job_work, job_done, &g_jobs[0], NULL), -ESHUTDOWN);
    assert_rc(evloop_work_configure(loop, &g_cfg), -ESHUTDOWN);
    test_loop_free(loop);
    assert_int_equal(atomic_load(&g_jobs[0].done_calls), 0);
}

static void test_free_without_a_run_reports_every_submitted_item(void **state)
{
    (void)state;
    evloop *loop = new_loop(false);
    configure(loop, 2, -1);
    jobs_reset(loop, 300);
    submit_jobs(loop, 0, 300);
    /* evloop_free stops the loop and drains it on this thread: done callbacks run here. */
    test_loop_free(loop);
    int ran = 0;
    for (int i = 0; i < 300; i++) {
        assert_int_equal(atomic_load(&g_jobs[i].done_calls), 1);
        ran += atomic_load(&g_jobs[i].status) == 0;
        assert_int_equal(atomic_load(&g_jobs[i].work_calls), atomic_load(&g_jobs[i].status) == 0);
    }
    (void)ran;
}

/* Stop lands at any point of a stream of items submitted from done callbacks: every item
 * accepted is reported once, and the counts add up. */
static atomic_int g_racing_submitted;
static void racing_done(void *arg, int status);

static void racing_submit(evloop *loop)
{
    int i = atomic_load(&g_racing_submitted);
    if (i >= TEST_SIZE(MAX_JOBS))
        return;
    int r = evloop_work_submit(loop, job_work, racing_done, &g_jobs[i], NULL);
    CHECK(r == 0 || r == -ESHUTDOWN);
    if (r == 0)
        atomic_store(&g_racing_submitted, i + 1);
}

static void racing_done(void *arg, int status)
{
    job_done(arg, status);
    evloop *loop = ((struct job *)arg)->loop;
    racing_submit(loop);
    racing_submit(loop);
}

static void racing_start(evloop *loop)
{
    for (int k = 0; k < 4; k++)
        racing_submit(loop);
}

static void test_stop_racing_a_stream_of_items_loses_none(void **state)
{
    (void)state;
    for (int round = 0; round < 5; round++) {
        evloop *loop = new_loop(false);
        configure(loop, 3, round % 2 ? 0 : -1);
        jobs_reset(loop, MAX_JOBS);
        atomic_store(&g_racing_submitted, 0);
        struct test_runner r;
        test_runner_start(&r, loop);
        run_on_loop(loop, racing_start);
        assert_true(wait_for_count(&g_done, (uint64_t)(50 + round * 200)));
        assert_rc(evloop_stop(loop), 0);
        assert_rc(test_runner_join(&r), 0);
        int n = atomic_load(&g_racing_submitted);
        assert_int_equal(atomic_load(&g_done), (uint64_t)n);
        assert_jobs_reported_once(n);
        struct evloop_work_stats st;
        assert_rc(evloop_work_stats(loop, &st), 0);
        assert_int_equal(st.submitted, (uint64_t)n);
        assert_int_equal(st.completed + st.cancelled, (uint64_t)n);
        assert_int_equal(st.pending, 0);
        test_loop_free(loop);
    }
}

static void test_an_auto_exit_loop_waits_for_a_running_item(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    configure(loop, 1, 0);
    jobs_reset(loop, 1);
    struct test_gate gate;
    gate_init(&gate);
    g_jobs[0].gate = &gate;
    assert_rc(evloop_work_submit(loop, job_work, job_done, &g_jobs[0], NULL), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_flag(&gate.entered));
    assert_true(wait_for_sleep(loop, 0)); /* asleep, not returned: the item holds it */
    assert_false(atomic_load(&r.done));
    test_gate_open(&gate);
    assert_rc(test_runner_join(&r), 0);
    assert_int_equal(assert_jobs_reported_once(1), 1);
    test_loop_free(loop);
}

/* ---- threads, bad input ------------------------------------------------------------------- */

static void test_calls_from_another_thread_while_the_loop_runs_are_ebusy(void **state)
{
    (void)state;
    evloop *loop = new_loop(false);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    jobs_reset(loop, 1);
    struct evloop_work_config cfg;
    evloop_work_config_init(&cfg);
    assert_rc(evloop_work_submit(loop, job_work, job_done, &g_jobs[0], NULL), -EBUSY);
    assert_rc(evloop_work_cancel(loop, 1), -EBUSY);
    assert_rc(evloop_work_configure(loop, &cfg), -EBUSY);
    struct evloop_work_stats st;
    assert_rc(evloop_work_stats(loop, &st), 0); /* any thread */
    test_runner_stop(&r);
    test_loop_free(loop);
    assert_int_equal(atomic_load(&g_jobs[0].done_calls), 0);
}

static void test_bad_input_gets_a_negative_errno(void **state)
{
    (void)state;
    evloop *loop = new_loop(true);
    struct evloop_work_config cfg;
    evloop_work_config_init(&cfg);
    assert_true(cfg.threads >= 2 && cfg.threads <= 64);
    assert_int_equal(cfg.spin_ns, -1);
    evloop_work_config_init(NULL);
    jobs_reset(loop, 1);
    assert_rc(evloop_work_submit(NULL, job_work, job_done, &g_jobs[0], NULL), -EINVAL);
    assert_rc(evloop_work_submit(loop, NULL, job_done, &g_jobs[0], NULL), -EINVAL);
    assert_rc(evloop_work_cancel(NULL, 1), -EINVAL);
    assert_rc(evloop_work_configure(NULL, &cfg), -EINVAL);
    assert_rc(evloop_work_configure(loop, NULL), -EINVAL);
    struct evloop_work_stats st;
    assert_rc(evloop_work_stats(NULL, &st), -EINVAL);
    assert_rc(evloop_work_stats(loop, NULL), -EINVAL);
    assert_rc(evloop_work_stats(loop, &st), 0);
    assert_int_equal(st.threads, 0);
    struct evloop_work_config bad = cfg;
    bad.threads = 0;
    assert_rc(evloop_work_configure(loop, &bad), -EINVAL);
    bad.threads = EVLOOP_WORK_THREADS_MAX + 1;
    assert_rc(evloop_work_configure(loop, &bad), -EINVAL);
    bad = cfg;
    bad.spin_ns = -2;
    assert_rc(evloop_work_configure(loop, &bad), -EINVAL);
    bad.spin_ns = EVLOOP_WORK_SPIN_MAX_NS + 1;
    assert_rc(evloop_work_configure(loop, &bad), -EINVAL);
    bad = cfg;
    bad.ncpus = 1;
    assert_rc(evloop_work_configure(loop, &bad), -EINVAL); /* cpus NULL */
    int cpus[2] = {0, -1};
    bad.cpus = cpus;
    bad.ncpus = 2;
    assert_rc(evloop_work_configure(loop, &bad), -EINVAL);
    cpus[1] = 1 << 20;
    assert_rc(evloop_work_configure(loop, &bad), -EINVAL);
    assert_rc(evloop_work_configure(loop, &cfg), 0);
    assert_rc(evloop_work_configure(loop, &cfg), 0); /* again, before the pool starts */
    assert_rc(evloop_work_submit(loop, job_work, job_done, &g_jobs[0], NULL), 0);
    assert_rc(evloop_work_configure(loop, &cfg), -EBUSY); /* the pool has started */
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(assert_jobs_reported_once(1), 1);
    test_loop_free(loop);
}

/* ---- placement, sleep and wake, evloop_run_once ------------------------------------------- */

static void test_placement_pins_pool_threads_to_the_cpus_given(void **state)
{
    (void)state;
#ifdef __linux__
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
    int cpu = -1;
    for (int c = CPU_SETSIZE - 1; c >= 0; c--)
        if (CPU_ISSET(c, &set))
            cpu = c;
    evloop *loop = new_loop(true);
    struct evloop_work_config cfg;
    evloop_work_config_init(&cfg);
    cfg.threads = 2;
    cfg.cpus = &cpu;
    cfg.ncpus = 1;
    assert_rc(evloop_work_configure(loop, &cfg), 0);
    jobs_reset(loop, 16);
    submit_jobs(loop, 0, 16);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(assert_jobs_reported_once(16), 16);
    for (int i = 0; i < 16; i++)
        assert_int_equal(atomic_load(&g_jobs[i].cpu), cpu);
    test_loop_free(loop);
#else
    skip();
#endif
}

struct sleeps_goal {
    evloop *loop;
    uint64_t at_least;
};

static bool pool_slept(void *arg)
{
    struct sleeps_goal *g = arg;
    struct evloop_work_stats st;
    evloop_work_stats(g->loop, &st);
    return st.sleeps >= g->at_least;
}

static void submit_one(evloop *loop)
{
    int i = (int)atomic_load(&g_done);
    CHECK_EQ(evloop_work_submit(loop, job_work, job_done, &g_jobs[i], NULL), 0);
}

static void test_idle_pool_threads_sleep_and_a_submit_wakes_one(void **state)
{
    (void)state;
    evloop *loop = new_loop(false);
    configure(loop, 2, 0); /* no spin: idle means asleep */
    jobs_reset(loop, 8);
    struct test_runner r;
    test_runner_start(&r, loop);
    for (uint64_t k = 1; k <= 4; k++) {
        struct sleeps_goal g = {loop, k + 1};
        run_on_loop(loop, submit_one);
        assert_true(wait_for_count(&g_done, k));
        assert_true(wait_until(pool_slept, &g, TEST_DEADLINE_MS));
    }
    test_runner_stop(&r);
    struct evloop_work_stats st;
    assert_rc(evloop_work_stats(loop, &st), 0);
    /* Once both had slept, only a wake could bring one back for the next item. */
    assert_true(st.wakes >= 1);
    assert_int_equal(assert_jobs_reported_once(4), 4);
    test_loop_free(loop);
}

/* ---- the deferred wake: the pool on the loop's one CPU (issue 31) ------------------------- */

#ifdef __linux__
/* The first CPU this thread may use. */
static int first_cpu(cpu_set_t *mask)
{
    assert_int_equal(sched_getaffinity(0, sizeof(*mask), mask), 0);
    for (int c = 0; c < CPU_SETSIZE; c++)
        if (CPU_ISSET(c, mask))
            return c;
    fail_msg("no CPU in the affinity mask");
    return -1;
}

static int g_one_cpu;

/* On the loop thread, before the pool starts: the loop gets the CPU its pool threads are
 * placed on, so the pool defers its wakes to the end of the tick. */
static void pin_loop_thread(evloop *loop)
{
    (void)loop;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(g_one_cpu, &one);
    CHECK_EQ(sched_setaffinity(0, sizeof(one), &one), 0);
}

static void configure_on_cpu(evloop *loop, int *cpu)
{
    evloop_work_config_init(&g_cfg);
    g_cfg.threads = 2;
    g_cfg.spin_ns = 0; /* idle means asleep: only a wake brings a pool thread back */
    g_cfg.cpus = cpu;
    g_cfg.ncpus = 1;
    assert_rc(evloop_work_configure(loop, &g_cfg), 0);
}

static void chain_start(evloop *loop)
{
    chain_next(loop);
}
#endif

/* Each done submits the next item, then the loop has nothing left to do and sleeps: the
 * wake the submit deferred must be made before that sleep, or the item waits forever with
 * every pool thread asleep (the deadline ends the test). */
static void test_a_submit_from_a_done_is_woken_before_the_loop_sleeps(void **state)
{
    (void)state;
#ifdef __linux__
    cpu_set_t mask;
    g_one_cpu = first_cpu(&mask);
    int n = TEST_SIZE(400) > 50 ? TEST_SIZE(400) : 50;
    evloop *loop = new_loop(false);
    configure_on_cpu(loop, &g_one_cpu);
    jobs_reset(loop, n);
    atomic_store(&g_chain_left, n);
    struct test_runner r;
    test_runner_start(&r, loop);
    run_on_loop(loop, pin_loop_thread);
    run_on_loop(loop, chain_start); /* the pool starts here, on the loop thread */
    assert_true(wait_for_count(&g_done, (uint64_t)n));
    test_runner_stop(&r);
    assert_int_equal(assert_jobs_reported_once(n), n);
    test_loop_free(loop);
#else
    skip();
#endif
}

#ifdef __linux__
static void timer_submit(void *arg)
{
    struct job *j = arg;
    CHECK_EQ(evloop_work_submit(j->loop, job_work, job_done, j, NULL), 0);
}
#endif

/* The same under evloop_run_once with evloop_backend_fd: a timer that fires during the wait
 * of a call (its callback then runs in the call's second half) submits an item; the outer
 * loop then waits on the fd, which becomes readable only when that item's reply arrives, so
 * evloop_run_once must wake the pool before it returns. */
static void test_run_once_wakes_the_pool_for_a_submit_before_it_returns(void **state)
{
    (void)state;
#ifdef __linux__
    cpu_set_t mask;
    g_one_cpu = first_cpu(&mask);
    evloop *loop = new_loop(false);
    int fd = evloop_backend_fd(loop);
    if (fd == -ENOTSUP) {
        test_loop_free(loop);
        skip();
    }
    assert_true(fd >= 0);
    configure_on_cpu(loop, &g_one_cpu);
    int n = TEST_SIZE(40) > 10 ? TEST_SIZE(40) : 10;
    jobs_reset(loop, n);
    pin_loop_thread(loop); /* this thread runs the loop; the pool starts on it */
    for (int k = 0; k < n; k++) {
        assert_rc(evloop_timer_start(loop, 1000000, 0, timer_submit, &g_jobs[k], NULL), 0);
        assert_true(evloop_run_once(loop, (int64_t)TEST_DEADLINE_MS * 1000000) >= 0);
        while (atomic_load(&g_done) < (uint64_t)k + 1) {
            struct pollfd p = {.fd = fd, .events = POLLIN};
            if (poll(&p, 1, TEST_DEADLINE_MS) != 1)
                fail_msg("item %d submitted, and the backend fd stays quiet", k);
            assert_true(evloop_run_once(loop, 0) >= 0);
        }
    }
    assert_int_equal(sched_setaffinity(0, sizeof(mask), &mask), 0);
    assert_int_equal(assert_jobs_reported_once(n), n);
    test_loop_free(loop);
#else
    skip();
#endif
}

static void test_run_once_delivers_done_callbacks(void **state)
{
    (void)state;
    evloop *loop = new_loop(false);
    jobs_reset(loop, 32);
    submit_jobs(loop, 0, 32);
    for (int i = 0; i < 100000 && atomic_load(&g_done) < 32; i++)
        assert_true(evloop_run_once(loop, 100000000) >= 0);
    assert_int_equal(atomic_load(&g_done), 32);
    assert_int_equal(assert_jobs_reported_once(32), 32);
    test_loop_free(loop);
}

int main(void)
{
    test_require_backend();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_work_runs_on_a_pool_thread_and_done_on_the_loop_thread),
        cmocka_unit_test(test_done_runs_after_the_callback_that_submitted_never_nested),
        cmocka_unit_test(test_items_start_in_submit_order_past_the_queues_capacity),
        cmocka_unit_test(test_many_items_on_several_threads_each_report_once),
        cmocka_unit_test(test_a_done_callbacks_microtasks_run_before_the_next_done),
        cmocka_unit_test(test_a_null_done_is_allowed_and_the_work_still_runs),
        cmocka_unit_test(test_cancel_before_start_reports_ecanceled_and_the_work_never_runs),
        cmocka_unit_test(test_cancel_while_running_is_ebusy_and_done_reports_success),
        cmocka_unit_test(test_cancel_of_an_unknown_or_reused_id_is_enoent),
        cmocka_unit_test(test_cancel_racing_the_pool_threads_reports_each_item_once),
        cmocka_unit_test(test_stop_with_items_pending_runs_or_reports_every_one),
        cmocka_unit_test(test_free_without_a_run_reports_every_submitted_item),
        cmocka_unit_test(test_stop_racing_a_stream_of_items_loses_none),
        cmocka_unit_test(test_an_auto_exit_loop_waits_for_a_running_item),
        cmocka_unit_test(test_calls_from_another_thread_while_the_loop_runs_are_ebusy),
        cmocka_unit_test(test_bad_input_gets_a_negative_errno),
        cmocka_unit_test(test_placement_pins_pool_threads_to_the_cpus_given),
        cmocka_unit_test(test_idle_pool_threads_sleep_and_a_submit_wakes_one),
        cmocka_unit_test(test_a_submit_from_a_done_is_woken_before_the_loop_sleeps),
        cmocka_unit_test(test_run_once_wakes_the_pool_for_a_submit_before_it_returns),
        cmocka_unit_test(test_run_once_delivers_done_callbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
