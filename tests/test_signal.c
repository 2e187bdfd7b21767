/* Signals (issue 13): evloop_signal_start/stop run a callback on the loop thread for each
 * delivery, whichever thread it is delivered to (the loop's, another thread's, a process-
 * directed kill), with the loop awake, asleep on its word or in the poller, or parked between
 * evloop_run_once calls; the previous disposition is back after stop and at termination; the
 * argument goes to the release notification at termination. Uses SIGUSR1 and SIGUSR2, whose
 * default action would end the test program: a delivery that is not caught fails loudly. */
#include "test_util.h"

#include <poll.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct sig_seen {
    test_counter runs;
    atomic_bool wrong_thread;
    evloop *loop;
};

static void on_sig(void *arg)
{
    struct sig_seen *s = arg;
    if (!evloop_on_loop_thread(s->loop))
        atomic_store(&s->wrong_thread, true);
    atomic_fetch_add(&s->runs, 1);
}

/* A handler of the test's own, to see the previous disposition come back. */
static test_counter own_handler_runs;
static void own_handler(int signum)
{
    (void)signum;
    atomic_fetch_add(&own_handler_runs, 1);
}

static void install_own_handler(int signum, struct sigaction *old)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = own_handler;
    sigemptyset(&sa.sa_mask);
    assert_int_equal(sigaction(signum, &sa, old), 0);
}

static void restore(int signum, const struct sigaction *old)
{
    assert_int_equal(sigaction(signum, old, NULL), 0);
}

/* ---- what a test set up, released even when it fails ----------------------------------------- */

/* A failed assertion leaves its test by longjmp: teardown() then stops the runner, frees the
 * loops (which ends their watches) and puts back the dispositions the program started with,
 * so the next test starts clean and one failure reads as one. */
static struct fixture {
    evloop *loops[2];
    struct sig_seen seen[2]; /* the callbacks' arguments: they outlive a failed test's frame */
    struct test_runner runner;
    bool running;
} fx;
static const int used_signals[] = {SIGUSR1, SIGUSR2, SIGWINCH};
static struct sigaction initial[sizeof(used_signals) / sizeof(used_signals[0])];

static evloop *fx_loop_new(const evloop_config *cfg)
{
    evloop *loop = test_loop_new(cfg);
    for (size_t i = 0; i < 2; i++) {
        if (!fx.loops[i]) {
            fx.loops[i] = loop;
            return loop;
        }
    }
    fail_msg("a test of this file makes two loops at most");
    return NULL;
}

static void fx_loop_free(evloop *loop)
{
    for (size_t i = 0; i < 2; i++)
        if (fx.loops[i] == loop)
            fx.loops[i] = NULL;
    test_loop_free(loop);
}

/* The sig_seen of the loop made i-th (0 or 1). */
static struct sig_seen *fx_seen(size_t i)
{
    fx.seen[i] = (struct sig_seen){.loop = fx.loops[i]};
    return &fx.seen[i];
}

static struct test_runner *fx_runner_start(evloop *loop)
{
    test_runner_start(&fx.runner, loop);
    fx.running = true;
    return &fx.runner;
}

static void fx_runner_stop(struct test_runner *r)
{
    fx.running = false;
    test_runner_stop(r);
}

static int save_dispositions(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof(used_signals) / sizeof(used_signals[0]); i++)
        if (sigaction(used_signals[i], NULL, &initial[i]) < 0)
            return -1;
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    int r = 0;
    if (fx.running) {
        evloop_stop(fx.runner.loop);
        if (!wait_for_flag(&fx.runner.done))
            return -1; /* the loop thread hangs: its loop cannot be freed under it */
        pthread_join(fx.runner.thread, NULL);
        fx.running = false;
    }
    for (size_t i = 0; i < 2; i++) {
        if (fx.loops[i] && evloop_free(fx.loops[i]) < 0)
            r = -1;
        fx.loops[i] = NULL;
    }
    for (size_t i = 0; i < sizeof(used_signals) / sizeof(used_signals[0]); i++)
        sigaction(used_signals[i], &initial[i], NULL);
    test_take_check_failures(); /* reported by the test that made them */
    return r;
}

/* ---- delivery ------------------------------------------------------------------------------ */

static void test_a_process_directed_signal_runs_the_callback_on_the_loop_thread(void **state)
{
    (void)state;
    evloop *loop = fx_loop_new(NULL);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, on_sig, s), 0);
    struct test_runner *r = fx_runner_start(loop);
    assert_true(wait_for_running(loop));
    for (uint64_t i = 1; i <= 5; i++) {
        assert_int_equal(kill(getpid(), SIGUSR1), 0);
        assert_true(wait_for_count(&s->runs, i));
    }
    assert_false(atomic_load(&s->wrong_thread));
    fx_runner_stop(r);
    fx_loop_free(loop);
}

struct idle_thread {
    pthread_t thread;
    atomic_bool quit;
};

static void *idle_body(void *arg)
{
    struct idle_thread *t = arg;
    while (!atomic_load(&t->quit)) {
        struct timespec ts = {.tv_sec = 0, .tv_nsec = 1000000};
        nanosleep(&ts, NULL); /* interrupted by the signal: fine, it loops */
    }
    return NULL;
}

static void test_a_signal_delivered_to_another_thread_reaches_the_loop(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = fx_loop_new(&cfg);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR2, on_sig, s), 0);
    static struct idle_thread other; /* outlives the frame if the test fails */
    atomic_store(&other.quit, false);
    assert_int_equal(pthread_create(&other.thread, NULL, idle_body, &other), 0);
    uint64_t sleeps = test_sleeps(loop);
    struct test_runner *r = fx_runner_start(loop);
    assert_true(wait_for_sleep(loop, sleeps)); /* asleep on its word: the handler wakes it */
    for (uint64_t i = 1; i <= 5; i++) {
        assert_int_equal(pthread_kill(other.thread, SIGUSR2), 0);
        assert_true(wait_for_count(&s->runs, i));
    }
    /* And to the test thread itself. */
    assert_int_equal(pthread_kill(pthread_self(), SIGUSR2), 0);
    assert_true(wait_for_count(&s->runs, 6));
    assert_false(atomic_load(&s->wrong_thread));
    atomic_store(&other.quit, true);
    pthread_join(other.thread, NULL);
    fx_runner_stop(r);
    fx_loop_free(loop);
}

static void raise_usr1(void *arg)
{
    (void)arg;
    CHECK_EQ(raise(SIGUSR1), 0);
}

static void test_a_signal_raised_on_the_loop_thread_runs_after_the_callback(void **state)
{
    (void)state;
    evloop *loop = fx_loop_new(NULL);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, on_sig, s), 0);
    struct test_runner *r = fx_runner_start(loop);
    assert_rc(evloop_submit(loop, raise_usr1, NULL), 0);
    assert_true(wait_for_count(&s->runs, 1));
    assert_false(atomic_load(&s->wrong_thread));
    fx_runner_stop(r);
    fx_loop_free(loop);
}

static void test_a_signal_wakes_a_loop_asleep_in_the_poller(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = fx_loop_new(&cfg);
    int p[2];
    test_pipe(p);
    test_counter io = 0;
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_count_io, &io), 0);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, on_sig, s), 0);
    uint64_t sleeps = test_sleeps(loop);
    struct test_runner *r = fx_runner_start(loop);
    for (uint64_t i = 1; i <= 5; i++) {
        assert_true(wait_for_sleep(loop, sleeps));
        sleeps = test_sleeps(loop);
        assert_int_equal(kill(getpid(), SIGUSR1), 0);
        assert_true(wait_for_count(&s->runs, i));
    }
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    fx_runner_stop(r);
    fx_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* Deliveries may coalesce, but one sent after the last callback ran is never lost: rounds of
 * "signal, wait for its callback", from several threads, with the loop asleep or running.
 * A signaller that is done stays until every signaller is: the kernel may hand a process-
 * directed signal to any thread, and one that lands on a thread already in its exit is
 * dropped by ThreadSanitizer, which defers a handler to the thread's next intercepted call,
 * and an exiting thread makes none. */
struct signaller {
    pthread_t thread;
    struct sig_seen *seen;
    int rounds;
    test_counter *done; /* signallers through their rounds */
    uint64_t all;
};

static void *signal_rounds(void *arg)
{
    struct signaller *g = arg;
    for (int i = 0; i < g->rounds; i++) {
        uint64_t before = atomic_load(&g->seen->runs);
        CHECK_EQ(kill(getpid(), SIGUSR2), 0);
        CHECK(wait_for_count(&g->seen->runs, before + 1));
    }
    atomic_fetch_add(g->done, 1);
    CHECK(wait_for_count(g->done, g->all));
    return NULL;
}

static void test_a_signal_sent_after_the_last_callback_is_never_lost(void **state)
{
    (void)state;
    evloop *loop = fx_loop_new(NULL); /* adaptive spin: both sleeps and spins */
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR2, on_sig, s), 0);
    struct test_runner *r = fx_runner_start(loop);
    enum { THREADS = 3 };
    static test_counter done; /* outlives the frame if the test fails */
    atomic_store(&done, 0);
    struct signaller g[THREADS];
    for (int i = 0; i < THREADS; i++) {
        g[i] = (struct signaller){
            .seen = s, .rounds = TEST_SIZE(800), .done = &done, .all = THREADS};
        assert_int_equal(pthread_create(&g[i].thread, NULL, signal_rounds, &g[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(g[i].thread, NULL);
    assert_checks_passed();
    fx_runner_stop(r);
    fx_loop_free(loop);
}

/* Rounds of "signal the loop thread itself, wait for the callback", with the adaptive spin on:
 * deliveries land while the loop runs, spins, announces its sleep or blocks. Under
 * ThreadSanitizer a handler is deferred until its thread enters an intercepted call, so this
 * fails where the loop blocks in one TSan does not intercept (epoll_pwait2, a raw futex)
 * with a deferred handler not yet run. */
static void test_a_signal_delivered_to_the_loop_thread_itself_is_never_lost(void **state)
{
    (void)state;
    evloop *loop = fx_loop_new(NULL);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, on_sig, s), 0);
    struct test_runner *r = fx_runner_start(loop);
    assert_true(wait_for_running(loop));
    for (uint64_t i = 1; i <= (uint64_t)TEST_SIZE(2400); i++) {
        assert_int_equal(pthread_kill(r->thread, SIGUSR1), 0);
        assert_true(wait_for_count(&s->runs, i));
    }
    assert_false(atomic_load(&s->wrong_thread));
    fx_runner_stop(r);
    fx_loop_free(loop);
}

/* ---- dispositions ---------------------------------------------------------------------------- */

static void test_signal_stop_puts_back_the_previous_handler(void **state)
{
    (void)state;
    struct sigaction old;
    install_own_handler(SIGUSR1, &old);
    atomic_store(&own_handler_runs, 0);
    evloop *loop = fx_loop_new(NULL);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, on_sig, s), 0);
    assert_int_equal(raise(SIGUSR1), 0); /* raise returns after the handler ran */
    assert_int_equal(own_handler_runs, 0);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_int_equal(s->runs, 1);
    assert_rc(evloop_signal_stop(loop, SIGUSR1), 0);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(own_handler_runs, 1);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_int_equal(s->runs, 1);
    assert_rc(evloop_signal_stop(loop, SIGUSR1), -ENOENT);
    fx_loop_free(loop);
    restore(SIGUSR1, &old);
}

static test_counter released;
static void count_release(void *arg)
{
    CHECK(arg != NULL);
    atomic_fetch_add(&released, 1);
}

static void test_termination_puts_back_the_previous_handler_and_releases_the_argument(void **state)
{
    (void)state;
    struct sigaction old1, old2;
    install_own_handler(SIGUSR1, &old1);
    install_own_handler(SIGUSR2, &old2);
    atomic_store(&own_handler_runs, 0);
    atomic_store(&released, 0);
    evloop *loop = fx_loop_new(NULL);
    assert_rc(evloop_set_release_cb(loop, count_release), 0);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, on_sig, s), 0);
    assert_rc(evloop_signal_start(loop, SIGUSR2, on_sig, s), 0);
    assert_rc(evloop_signal_stop(loop, SIGUSR2), 0); /* stopped: no release for it */
    assert_rc(evloop_stop(loop), 0);
    assert_rc(evloop_signal_start(loop, SIGUSR2, on_sig, s), -ESHUTDOWN);
    assert_int_equal(raise(SIGUSR1), 0); /* still watched until the loop terminates */
    assert_int_equal(own_handler_runs, 0);
    assert_true(evloop_run_once(loop, 0) >= 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    assert_int_equal(s->runs, 0); /* swallowed after stop */
    assert_int_equal(released, 1);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(own_handler_runs, 1);
    fx_loop_free(loop);
    restore(SIGUSR1, &old1);
    restore(SIGUSR2, &old2);
}

static void test_free_of_a_loop_watching_a_signal_puts_back_the_default(void **state)
{
    (void)state;
    struct sigaction before, after;
    assert_int_equal(sigaction(SIGUSR2, NULL, &before), 0);
    evloop *loop = fx_loop_new(NULL);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR2, on_sig, s), 0);
    fx_loop_free(loop);
    assert_int_equal(sigaction(SIGUSR2, NULL, &after), 0);
    assert_ptr_equal((void *)after.sa_handler, (void *)before.sa_handler);
}

/* ---- one loop per signal, several signals per loop ------------------------------------------- */

static void test_one_signal_one_loop_and_one_loop_many_signals(void **state)
{
    (void)state;
    evloop *a = fx_loop_new(NULL);
    evloop *b = fx_loop_new(NULL);
    struct sig_seen *sa = fx_seen(0), *sb = fx_seen(1);
    assert_rc(evloop_signal_start(a, SIGUSR1, on_sig, sa), 0);
    assert_rc(evloop_signal_start(a, SIGUSR1, on_sig, sa), -EEXIST);
    assert_rc(evloop_signal_start(b, SIGUSR1, on_sig, sb), -EBUSY);
    assert_rc(evloop_signal_stop(b, SIGUSR1), -ENOENT);
    assert_rc(evloop_signal_start(b, SIGUSR2, on_sig, sb), 0);
    assert_rc(evloop_signal_start(a, SIGWINCH, on_sig, sa), 0);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(raise(SIGWINCH), 0);
    assert_int_equal(raise(SIGUSR2), 0);
    int ran = 0;
    while (ran < 2) {
        int r = evloop_run_once(a, 0);
        assert_true(r >= 0);
        ran += r;
    }
    assert_int_equal(sa->runs, 2);
    assert_int_equal(evloop_run_once(b, 0), 1);
    assert_int_equal(sb->runs, 1);
    /* Once a lets SIGUSR1 go, b may take it. */
    assert_rc(evloop_signal_stop(a, SIGUSR1), 0);
    assert_rc(evloop_signal_start(b, SIGUSR1, on_sig, sb), 0);
    fx_loop_free(a);
    fx_loop_free(b);
}

static void stop_own_signal(void *loop)
{
    CHECK_EQ(evloop_signal_stop(loop, SIGUSR1), 0);
}

static void test_a_callback_may_stop_its_own_signal(void **state)
{
    (void)state;
    evloop *loop = fx_loop_new(NULL);
    assert_rc(evloop_signal_start(loop, SIGUSR1, stop_own_signal, loop), 0);
    assert_int_equal(raise(SIGUSR1), 0);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_rc(evloop_signal_stop(loop, SIGUSR1), -ENOENT);
    fx_loop_free(loop);
}

/* ---- embedding and auto_exit ----------------------------------------------------------------- */

static void test_a_signal_makes_the_backend_fd_of_a_parked_loop_readable(void **state)
{
    (void)state;
    evloop *loop = fx_loop_new(NULL);
    int fd = evloop_backend_fd(loop);
    if (fd == -ENOTSUP) {
        fx_loop_free(loop);
        skip();
    }
    assert_true(fd >= 0);
    struct sig_seen *s = fx_seen(0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, on_sig, s), 0);
    assert_true(evloop_run_once(loop, 0) >= 0);
    struct pollfd p = {.fd = fd, .events = POLLIN};
    assert_int_equal(poll(&p, 1, 0), 0);
    assert_int_equal(kill(getpid(), SIGUSR1), 0);
    assert_int_equal(poll(&p, 1, TEST_DEADLINE_MS), 1);
    assert_int_equal(evloop_run_once(loop, 0), 1);
    assert_int_equal(s->runs, 1);
    assert_int_equal(poll(&p, 1, 0), 0);
    fx_loop_free(loop);
}

static void stop_on_signal(void *loop)
{
    CHECK_EQ(evloop_stop(loop), 0);
}

static void *kill_later(void *arg)
{
    (void)arg;
    struct timespec ts = {.tv_sec = 0, .tv_nsec = 20000000};
    nanosleep(&ts, NULL);
    CHECK_EQ(kill(getpid(), SIGUSR2), 0);
    return NULL;
}

static void test_a_watched_signal_keeps_an_auto_exit_loop_running(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    cfg.auto_exit = true;
    evloop *loop = fx_loop_new(&cfg);
    assert_rc(evloop_signal_start(loop, SIGUSR2, stop_on_signal, loop), 0);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, kill_later, NULL), 0);
    assert_rc(test_run_to_end(loop), 0); /* returns only after the signal's stop */
    pthread_join(t, NULL);
    fx_loop_free(loop);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_teardown(test_a_process_directed_signal_runs_the_callback_on_the_loop_thread, teardown),
        cmocka_unit_test_teardown(test_a_signal_delivered_to_another_thread_reaches_the_loop, teardown),
        cmocka_unit_test_teardown(test_a_signal_raised_on_the_loop_thread_runs_after_the_callback, teardown),
        cmocka_unit_test_teardown(test_a_signal_wakes_a_loop_asleep_in_the_poller, teardown),
        cmocka_unit_test_teardown(test_a_signal_sent_after_the_last_callback_is_never_lost, teardown),
        cmocka_unit_test_teardown(test_a_signal_delivered_to_the_loop_thread_itself_is_never_lost,
                                  teardown),
        cmocka_unit_test_teardown(test_signal_stop_puts_back_the_previous_handler, teardown),
        cmocka_unit_test_teardown(test_termination_puts_back_the_previous_handler_and_releases_the_argument, teardown),
        cmocka_unit_test_teardown(test_free_of_a_loop_watching_a_signal_puts_back_the_default, teardown),
        cmocka_unit_test_teardown(test_one_signal_one_loop_and_one_loop_many_signals, teardown),
        cmocka_unit_test_teardown(test_a_callback_may_stop_its_own_signal, teardown),
        cmocka_unit_test_teardown(test_a_signal_makes_the_backend_fd_of_a_parked_loop_readable, teardown),
        cmocka_unit_test_teardown(test_a_watched_signal_keeps_an_auto_exit_loop_running, teardown),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("signal", tests, save_dispositions, NULL);
}
