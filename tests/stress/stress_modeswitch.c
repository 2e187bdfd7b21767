/* Mode switch under load: the loop sleeps on its futex word while no fd is registered and
 * in the poller while one is; every add of the first fd and removal of the last switches
 * mode. Cycles of "add fd / write / remove" run from the test thread (and, in some cycles,
 * the removal from the fd's own callback) while two producers submit without pause:
 * every task runs exactly once in producer order, and every readiness is delivered exactly
 * once (one callback per cycle, reading the one byte written, never a callback for a
 * cycle that is over). Figure (issue 6): 10,000 cycles (EVLOOP_LONG=1).
 *
 * The last test pins down a race in the fd count: io_add and io_remove change the loop's
 * count of registered fds after releasing the fd table lock, so a remote add racing a
 * removal on the loop thread can make the count read 0 while an fd is registered. */
#include "stress_util.h"

#include <fcntl.h>
#include <unistd.h>

#define PRODUCERS 2

static struct stress_ledger g_ledger;

static void ledger_task(void *arg)
{
    stress_ledger_run(&g_ledger, arg);
}

struct submitter {
    pthread_t thread;
    evloop *loop;
    unsigned id;
    uint64_t cap, accepted;
    atomic_bool *quit;
    int errors;
};

static void *submit_until_quit(void *arg)
{
    struct submitter *s = arg;
    while (!atomic_load_explicit(s->quit, memory_order_relaxed) && s->accepted < s->cap) {
        int r = evloop_submit(s->loop, ledger_task, stress_ledger_arg(s->id, s->accepted));
        if (r == 0)
            s->accepted++;
        else
            s->errors++;
        if ((s->accepted & 255) == 0)
            sched_yield(); /* let the test thread and the loop share the two cores */
    }
    return NULL;
}

struct cycle {
    _Atomic uint32_t calls;
    _Atomic uint32_t bytes;
    atomic_bool over; /* set by the test thread once the cycle's fd was removed */
    _Atomic uint32_t late_calls;
};

struct rig {
    evloop *loop;
    int p[2];
    struct cycle *cycles;
    test_counter delivered;
    atomic_bool remove_in_callback;
    _Atomic int remove_rc;
};

static struct rig g_rig;

static void cycle_fire(void *arg, int fd, unsigned events)
{
    struct cycle *c = arg;
    (void)events;
    if (atomic_load_explicit(&c->over, memory_order_acquire))
        atomic_fetch_add(&c->late_calls, 1);
    size_t n = test_drain_fd(fd);
    atomic_fetch_add(&c->bytes, (uint32_t)n);
    atomic_fetch_add(&c->calls, 1);
    if (atomic_load(&g_rig.remove_in_callback))
        atomic_store(&g_rig.remove_rc, evloop_io_remove(g_rig.loop, fd));
    atomic_fetch_add_explicit(&g_rig.delivered, 1, memory_order_release);
}

static void test_add_write_remove_cycles_with_two_producers_deliver_everything_once(void **state)
{
    (void)state;
    uint64_t n = stress_size("mode switch cycles",
                             (struct stress_sizes){.plain = 10000, .asan = 4000, .tsan = 2000,
                                                   .long_plain = 10000, .long_asan = 10000,
                                                   .long_tsan = 10000});
    struct rig *g = &g_rig;
    memset(g, 0, sizeof *g);
    evloop_config cfg = test_config_no_spin();
    g->loop = test_loop_new(&cfg);
    test_pipe(g->p);
    g->cycles = calloc(n, sizeof *g->cycles);
    assert_non_null(g->cycles);
    uint64_t cap = 1u << 22;
    stress_ledger_init(&g_ledger, cap);
    atomic_bool quit;
    atomic_init(&quit, false);
    struct test_runner r;
    test_runner_start(&r, g->loop);
    struct submitter sub[PRODUCERS];
    for (unsigned i = 0; i < PRODUCERS; i++) {
        sub[i] = (struct submitter){.loop = g->loop, .id = i, .cap = cap, .quit = &quit};
        assert_int_equal(pthread_create(&sub[i].thread, NULL, submit_until_quit, &sub[i]), 0);
    }
    uint64_t t0 = stress_now_ns(), stuck = 0;
    for (uint64_t i = 0; i < n; i++) {
        struct cycle *c = &g->cycles[i];
        int kind = (int)(i % 3);
        atomic_store(&g->remove_in_callback, kind == 2);
        atomic_store(&g->remove_rc, 1);
        if (kind == 0)
            test_write_byte(g->p[1]); /* ready before it is added */
        assert_rc(evloop_io_add(g->loop, g->p[0], EVLOOP_READABLE, cycle_fire, c), 0);
        if (kind != 0)
            test_write_byte(g->p[1]);
        if (!wait_for_count(&g->delivered, i + 1)) {
            stuck++;
            fail_msg("cycle %llu (kind %d): readiness not delivered", (unsigned long long)i,
                     kind);
        }
        if (kind == 2)
            assert_rc(atomic_load(&g->remove_rc), 0);
        else
            assert_rc(evloop_io_remove(g->loop, g->p[0]), 0);
        atomic_store_explicit(&c->over, true, memory_order_release);
    }
    atomic_store(&quit, true);
    uint64_t accepted[PRODUCERS], total = 0;
    for (unsigned i = 0; i < PRODUCERS; i++) {
        pthread_join(sub[i].thread, NULL);
        accepted[i] = sub[i].accepted;
        total += accepted[i];
        assert_int_equal(sub[i].errors, 0);
    }
    assert_true(stress_wait_progress(&g_ledger.total, total, 30000));
    test_runner_stop(&r);
    double secs = (double)(stress_now_ns() - t0) / 1e9;
    uint64_t wrong_calls = 0, wrong_bytes = 0, late = 0;
    for (uint64_t i = 0; i < n; i++) {
        wrong_calls += atomic_load(&g->cycles[i].calls) != 1;
        wrong_bytes += atomic_load(&g->cycles[i].bytes) != 1;
        late += atomic_load(&g->cycles[i].late_calls);
    }
    struct stress_tally t = stress_ledger_tally(&g_ledger, accepted, PRODUCERS);
    struct evloop_stats st;
    assert_rc(evloop_stats(g->loop, &st), 0);
    printf("# figure: modeswitch %s.%s: %llu cycles: cycles without exactly one callback "
           "%llu, without exactly one byte %llu, callbacks after removal %llu; %llu tasks "
           "from %d producers: lost %llu, duplicated %llu, order violations %llu; futex "
           "sleeps %llu, poller sleeps %llu, %.1f s\n",
           EVLOOP_TEST_VARIANT, st.backend, (unsigned long long)n,
           (unsigned long long)wrong_calls, (unsigned long long)wrong_bytes,
           (unsigned long long)late, (unsigned long long)total, PRODUCERS,
           (unsigned long long)t.lost, (unsigned long long)t.duplicated,
           (unsigned long long)t.order_violations, (unsigned long long)st.futex_sleeps,
           (unsigned long long)st.poller_sleeps, secs);
    assert_int_equal(stuck, 0);
    assert_int_equal(wrong_calls, 0);
    assert_int_equal(wrong_bytes, 0);
    assert_int_equal(late, 0);
    assert_int_equal(t.lost + t.duplicated + t.order_violations + t.strays + t.phantom, 0);
    test_loop_free(g->loop);
    close(g->p[0]);
    close(g->p[1]);
    free(g->cycles);
    stress_ledger_free(&g_ledger);
}

/* ---- the fd count seen from the loop while an fd is always registered ------------------- */

static void idle_fire(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)fd;
    (void)events;
    test_check_failed("the idle pipe was never written", __FILE__, __LINE__);
}

static void remove_self_fire(void *arg, int fd, unsigned events)
{
    (void)events;
    test_drain_fd(fd);
    CHECK_EQ(evloop_io_remove(g_rig.loop, fd), 0);
    atomic_fetch_add_explicit((test_counter *)arg, 1, memory_order_release);
}

/* With one fd registered for the whole test, the loop must never sleep on its futex word
 * (that sleep does not watch fds) and an auto_exit loop must never exit. A second fd is
 * added from the test thread, readable at once, and removes itself in its callback. */
static void test_loop_with_an_fd_always_registered_never_counts_zero_fds(void **state)
{
    (void)state;
    uint64_t n = stress_size("add/remove-in-callback rounds",
                             (struct stress_sizes){.plain = 2000, .asan = 1000, .tsan = 300,
                                                   .long_plain = 10000, .long_asan = 10000,
                                                   .long_tsan = 10000});
    evloop_config cfg = test_config_no_spin();
    cfg.auto_exit = true;
    evloop *loop = test_loop_new(&cfg);
    g_rig.loop = loop;
    int idle[2], q[2];
    test_pipe(idle);
    test_pipe(q);
    assert_rc(evloop_io_add(loop, idle[0], EVLOOP_READABLE, idle_fire, NULL), 0);
    test_counter fired;
    atomic_init(&fired, 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    uint64_t rounds = 0;
    int add_rc = 0;
    for (uint64_t i = 0; i < n; i++) {
        test_write_byte(q[1]);
        add_rc = evloop_io_add(loop, q[0], EVLOOP_READABLE, remove_self_fire, &fired);
        if (add_rc != 0)
            break; /* -ESHUTDOWN: the auto_exit loop stopped with idle[0] registered */
        if (!wait_for_count(&fired, i + 1))
            fail_msg("round %llu: readiness not delivered", (unsigned long long)i);
        rounds++;
        if (evloop_state(loop) >= EVLOOP_TERMINATING)
            break;
    }
    enum evloop_state at_end = evloop_state(loop);
    struct evloop_stats st;
    assert_rc(evloop_stats(loop, &st), 0);
    printf("# figure: fd count %s.%s: %llu rounds with an fd always registered: futex sleeps "
           "%llu (expected 0), poller sleeps %llu, auto_exit loop state after the rounds %d "
           "(%s), last add returned %d\n",
           EVLOOP_TEST_VARIANT, st.backend, (unsigned long long)rounds,
           (unsigned long long)st.futex_sleeps, (unsigned long long)st.poller_sleeps,
           (int)at_end, at_end >= EVLOOP_TERMINATING ? "EXITED: bug" : "still running",
           add_rc);
    evloop_stop(loop);
    test_runner_join(&r);
    test_loop_free(loop);
    for (int i = 0; i < 2; i++) {
        close(idle[i]);
        close(q[i]);
    }
    assert_int_equal(add_rc, 0);
    assert_true(at_end < EVLOOP_TERMINATING);
    assert_int_equal(st.futex_sleeps, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(
            test_add_write_remove_cycles_with_two_producers_deliver_everything_once),
        cmocka_unit_test(test_loop_with_an_fd_always_registered_never_counts_zero_fds),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_modeswitch", tests, NULL, NULL);
}
