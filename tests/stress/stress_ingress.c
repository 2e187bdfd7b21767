/* Exactly-once ingress under load: 8 producer threads submit as fast as they can into a
 * running loop, through each of the three ingress queues (evloop_submit,
 * evloop_submit_internal, evloop_queue_microtask from another thread). Every task runs
 * exactly once and in its producer's order: 0 lost, 0 duplicated, 0 order violations.
 * Figure (issue 6): 8 x 250,000 per variant under TSan, 8 x 2,000,000 in the plain build
 * (EVLOOP_LONG=1); short sizes below. */
#include "stress_util.h"

#define PRODUCERS 8

typedef int (*submit_fn)(evloop *, evloop_cb, void *);

static struct stress_ledger g_ledger;

static void ledger_task(void *arg)
{
    stress_ledger_run(&g_ledger, arg);
}

struct producer {
    pthread_t thread;
    evloop *loop;
    unsigned id;
    uint64_t n;
    submit_fn submit;
    pthread_barrier_t *start;
    uint64_t accepted;
    uint64_t errors;
    int first_error;
};

static void *produce(void *arg)
{
    struct producer *p = arg;
    pthread_barrier_wait(p->start);
    for (uint64_t s = 0; s < p->n; s++) {
        int r = p->submit(p->loop, ledger_task, stress_ledger_arg(p->id, s));
        if (r == 0) {
            p->accepted++;
        } else {
            if (p->errors++ == 0)
                p->first_error = r;
            break; /* the ledger expects seqs in order; a refusal ends this producer */
        }
    }
    return NULL;
}

static void run_producers(const char *what, submit_fn submit, evloop_config cfg, uint64_t n)
{
    evloop *loop = test_loop_new(&cfg);
    stress_ledger_init(&g_ledger, n);
    struct test_runner r;
    test_runner_start(&r, loop);
    pthread_barrier_t start;
    pthread_barrier_init(&start, NULL, PRODUCERS + 1);
    struct producer prod[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++) {
        prod[i] = (struct producer){.loop = loop, .id = i, .n = n, .submit = submit,
                                    .start = &start};
        assert_int_equal(pthread_create(&prod[i].thread, NULL, produce, &prod[i]), 0);
    }
    uint64_t t0 = stress_now_ns();
    pthread_barrier_wait(&start);
    for (unsigned i = 0; i < PRODUCERS; i++)
        pthread_join(prod[i].thread, NULL);
    uint64_t accepted[PRODUCERS], total = 0;
    for (unsigned i = 0; i < PRODUCERS; i++) {
        accepted[i] = prod[i].accepted;
        total += accepted[i];
        if (prod[i].errors)
            print_error("producer %u: submit returned %d (%s)\n", i, prod[i].first_error,
                        evloop_strerror(prod[i].first_error));
    }
    bool drained = stress_wait_progress(&g_ledger.total, total, 30000);
    double secs = (double)(stress_now_ns() - t0) / 1e9;
    test_runner_stop(&r);
    struct evloop_stats st;
    assert_rc(evloop_stats(loop, &st), 0);
    struct stress_tally t = stress_ledger_tally(&g_ledger, accepted, PRODUCERS);
    printf("# figure: ingress %s %s.%s: %u x %llu tasks: lost %llu, duplicated %llu, "
           "order violations %llu, strays %llu, refused %llu; overflows %llu, futex wakes "
           "%llu, poller wakes %llu, %.2f s\n",
           what, EVLOOP_TEST_VARIANT, st.backend, PRODUCERS, (unsigned long long)n,
           (unsigned long long)t.lost, (unsigned long long)t.duplicated,
           (unsigned long long)t.order_violations, (unsigned long long)t.strays,
           (unsigned long long)((uint64_t)PRODUCERS * n - total),
           (unsigned long long)st.ingress_overflows, (unsigned long long)st.futex_wakes,
           (unsigned long long)st.poller_wakes, secs);
    assert_true(drained);
    assert_int_equal(total, (uint64_t)PRODUCERS * n);
    stress_assert_tally_clean(t);
    test_loop_free(loop);
    pthread_barrier_destroy(&start);
    stress_ledger_free(&g_ledger);
}

static uint64_t main_size(void)
{
    return stress_size("tasks per producer",
                       (struct stress_sizes){.plain = 1000000, .asan = 250000, .tsan = 100000,
                                             .long_plain = 2000000, .long_asan = 250000,
                                             .long_tsan = 250000});
}

static void test_eight_producers_submit_each_task_exactly_once_in_producer_order(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    run_producers("submit", evloop_submit, cfg, main_size());
}

static void test_eight_producers_to_a_loop_that_never_spins_lose_nothing(void **state)
{
    (void)state;
    run_producers("submit(spin 0)", evloop_submit, test_config_no_spin(), main_size() / 4);
}

static void test_eight_producers_submit_internal_each_task_exactly_once_in_order(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    run_producers("submit_internal", evloop_submit_internal, cfg, main_size() / 4);
}

static void test_eight_producers_queue_microtasks_each_exactly_once_in_order(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    run_producers("queue_microtask", evloop_queue_microtask, cfg, main_size() / 4);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_eight_producers_submit_each_task_exactly_once_in_producer_order),
        cmocka_unit_test(test_eight_producers_to_a_loop_that_never_spins_lose_nothing),
        cmocka_unit_test(test_eight_producers_submit_internal_each_task_exactly_once_in_order),
        cmocka_unit_test(test_eight_producers_queue_microtasks_each_exactly_once_in_order),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_ingress", tests, NULL, NULL);
}
