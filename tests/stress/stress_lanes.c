/* The ingress under the conditions per-producer lanes (arena) and the fence-free submit
 * make new (issue 11); both variants run it, so the chunk variant is held to the same bar.
 *  - rounds of 1,000 short-lived producer threads, each submitting (single and batch) and
 *    exiting: every task runs exactly once, the arena's lanes are reclaimed, memory stays
 *    flat.
 *  - 8 producers mixing evloop_submit and evloop_submit_batch, in both fence modes:
 *    0 lost, 0 duplicated, per-producer order kept within and across batches.
 *  - 4 producers alternating posts now and then (each finding the loop asleep: their lanes
 *    switch to fenced pushes) with streams of 3,000 (the lanes switch back): nothing lost,
 *    per-producer order kept, while the lanes switch mode under the loop.
 *  - a loop freed while its producers live (their lanes cached), who then submit to a new
 *    loop, likely at the same address: clean under ASan, nothing lost.
 *  - membarrier refused by a seccomp filter: a fresh process (this binary re-executed)
 *    installs the filter first; its loops take the seq_cst fallback and work. */
#include "stress_util.h"

#include <malloc.h>
#include <stddef.h>
#include <sys/wait.h>

#if defined(__linux__)
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#define HAVE_SECCOMP 1
#endif

static char *g_self; /* argv[0], to re-execute this binary */

/* ---- 1,000 short-lived producers ---------------------------------------------------- */

#define SHORT_TASKS 24 /* per thread: 8 single submits, then batches of 1, 3, 5, 7 */
#define ROUNDS 5       /* of `threads` threads each */
#define BLOCK_BYTES (128 * 16) /* at least what one 128-task block of either variant takes */

struct churn {
    evloop *loop;
    uint8_t *runs;       /* [thread][task]: times each ran (loop thread only) */
    uint32_t *next;      /* [thread]: next task expected, for the order check */
    uint64_t order_violations;
    test_counter total;
};

static struct churn g_churn;

static void churn_task(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    size_t t = v / SHORT_TASKS, k = v % SHORT_TASKS;
    if (g_churn.runs[v] < 255)
        g_churn.runs[v]++;
    if (g_churn.next[t] != k)
        g_churn.order_violations++;
    g_churn.next[t] = (uint32_t)k + 1;
    atomic_fetch_add_explicit(&g_churn.total, 1, memory_order_release);
}

static void *short_lived(void *arg)
{
    uintptr_t base = (uintptr_t)arg * SHORT_TASKS;
    int k = 0;
    for (; k < 8; k++)
        if (evloop_submit(g_churn.loop, churn_task, (void *)(base + (uintptr_t)k)) != 0)
            return (void *)1;
    for (int m = 1; m <= 7; m += 2) {
        struct evloop_task batch[7];
        for (int i = 0; i < m; i++)
            batch[i] = (struct evloop_task){churn_task, (void *)(base + (uintptr_t)k++)};
        if (evloop_submit_batch(g_churn.loop, batch, (size_t)m) != 0)
            return (void *)1;
    }
    return NULL;
}

static void noop(void *arg)
{
    (void)arg;
}

/* An exited thread's lane is announced, not woken for: the loop reclaims it at its next
 * tick. The nudge (a task from this thread, whose own lane is the one left) is that tick. */
static bool lanes_at_most(void *ctx)
{
    struct evloop_stats st;
    evloop_submit(g_churn.loop, noop, NULL);
    return evloop_stats(g_churn.loop, &st) == 0 && st.lanes <= *(uint64_t *)ctx;
}

/* Runs `threads` short-lived producers in waves; returns the heap in use afterwards. */
static size_t churn_round(size_t first, size_t threads, size_t wave)
{
    for (size_t done = 0; done < threads; done += wave) {
        pthread_t t[64];
        size_t n = threads - done < wave ? threads - done : wave;
        for (size_t i = 0; i < n; i++)
            assert_int_equal(pthread_create(&t[i], NULL, short_lived,
                                            (void *)(uintptr_t)(first + done + i)), 0);
        for (size_t i = 0; i < n; i++) {
            void *failed;
            pthread_join(t[i], &failed);
            assert_null(failed);
        }
    }
    assert_true(stress_wait_progress(&g_churn.total, (first + threads) * SHORT_TASKS, 30000));
    /* Orphaned lanes are reclaimed once drained; the loop sees them on its next ticks. */
    uint64_t one = 1;
    assert_true(wait_until(lanes_at_most, &one, 10000));
    return mallinfo2().uordblks;
}

static void test_a_thousand_short_lived_producers_lose_nothing_and_leave_nothing(void **state)
{
    (void)state;
    size_t threads = (size_t)stress_size("short-lived producer threads per round",
                                         (struct stress_sizes){.plain = 1000, .asan = 1000,
                                                               .tsan = 300, .long_plain = 1000,
                                                               .long_asan = 1000,
                                                               .long_tsan = 1000});
    g_churn = (struct churn){.loop = test_loop_new(NULL)};
    g_churn.runs = calloc(ROUNDS * threads * SHORT_TASKS, 1);
    g_churn.next = calloc(ROUNDS * threads, sizeof(*g_churn.next));
    assert_non_null(g_churn.runs);
    assert_non_null(g_churn.next);
    struct test_runner r;
    test_runner_start(&r, g_churn.loop);
    size_t before = 0, after = 0;
    uint64_t blocks_before = 0;
    struct evloop_stats st;
    for (size_t round = 0; round < ROUNDS; round++) {
        size_t heap = churn_round(round * threads, threads, 50);
        assert_rc(evloop_stats(g_churn.loop, &st), 0);
        if (round == 1) {
            before = heap; /* the pools and caches are warm */
            blocks_before = st.ingress_overflows;
        }
        after = heap;
    }
    /* The segment pool keeps every block it ever held (no cap, no free in steady state):
     * when the loop falls behind a burst of producers, as on a loaded machine, it grows to
     * that burst's high-water mark. Those blocks (counted by ingress_overflows) are not a
     * leak; the rest of the growth is. */
    size_t pool_growth = (size_t)(st.ingress_overflows - blocks_before) * BLOCK_BYTES;
    after = after > pool_growth ? after - pool_growth : 0;
    test_runner_stop(&r);
    uint64_t lost = 0, duplicated = 0;
    for (size_t i = 0; i < ROUNDS * threads * SHORT_TASKS; i++) {
        lost += g_churn.runs[i] == 0;
        duplicated += g_churn.runs[i] > 1 ? g_churn.runs[i] - 1u : 0;
    }
    printf("# figure: lanes %s.%s (fence %s): %d x %zu short-lived producers x %d tasks: lost "
           "%llu, duplicated %llu, order violations %llu; lanes left %llu; heap in use after "
           "round 2 %zu B, after round %d %zu B less the segment pool's growth\n",
           EVLOOP_TEST_VARIANT, st.backend, st.fence, ROUNDS, threads, SHORT_TASKS,
           (unsigned long long)lost, (unsigned long long)duplicated,
           (unsigned long long)g_churn.order_violations, (unsigned long long)st.lanes, before,
           ROUNDS, after);
    test_loop_free(g_churn.loop);
    free(g_churn.runs);
    free(g_churn.next);
    assert_int_equal(lost, 0);
    assert_int_equal(duplicated, 0);
    assert_int_equal(g_churn.order_violations, 0);
    /* Flat: 3 more rounds (3 x threads exits) after the warm ones leave the heap, less the
     * pool's growth, within 64 KiB: a leak of ~24 bytes per thread exit fails it. */
    assert_true(after <= before + 64 * 1024);
}

/* ---- 8 producers mixing single and batch submits, both fence modes ---------------------- */

#define PRODUCERS 8

static struct stress_ledger g_ledger;

static void ledger_task(void *arg)
{
    stress_ledger_run(&g_ledger, arg);
}

/* A producer thread of the ledger tests: body(p) submits tasks p->id/0, 1, ... and sets
 * accepted to how many it got accepted (in order). */
struct mixer {
    pthread_t thread;
    evloop *loop;
    unsigned id;
    uint64_t n, accepted, seed; /* n: what body reads it as (tasks, rounds) */
    int error;
};

struct ledger_run {
    bool drained;
    double secs;
    uint64_t total; /* tasks accepted */
    struct evloop_stats st;
    struct stress_tally t;
};

/* Runs count producers of body on a running loop (r), each with n, until they are done and
 * every accepted task ran (or progress stalls for 30 s); then stops the loop and tallies
 * g_ledger (which the caller initialised for as many tasks as a producer may submit). */
static struct ledger_run run_producers(struct test_runner *r, void *(*body)(void *),
                                       unsigned count, uint64_t n)
{
    struct mixer m[PRODUCERS];
    uint64_t accepted[PRODUCERS];
    struct ledger_run run = {0};
    assert_true(count <= PRODUCERS);
    uint64_t seed = stress_seed(), t0 = stress_now_ns();
    for (unsigned i = 0; i < count; i++) {
        m[i] = (struct mixer){.loop = r->loop, .id = i, .n = n, .seed = seed + i};
        assert_int_equal(pthread_create(&m[i].thread, NULL, body, &m[i]), 0);
    }
    for (unsigned i = 0; i < count; i++) {
        pthread_join(m[i].thread, NULL);
        accepted[i] = m[i].accepted;
        run.total += accepted[i];
        if (m[i].error)
            print_error("producer %u: %d (%s)\n", i, m[i].error, evloop_strerror(m[i].error));
    }
    run.drained = stress_wait_progress(&g_ledger.total, run.total, 30000);
    run.secs = (double)(stress_now_ns() - t0) / 1e9;
    assert_rc(evloop_stats(r->loop, &run.st), 0);
    test_runner_stop(r);
    run.t = stress_ledger_tally(&g_ledger, accepted, count);
    return run;
}

/* Every accepted task ran once, in its producer's order, and all `want` were accepted. */
static void assert_ledger_clean(const struct ledger_run *run, uint64_t want)
{
    assert_true(run->drained);
    assert_int_equal(run->total, want);
    stress_assert_tally_clean(run->t);
}

static void *mix(void *arg)
{
    struct mixer *p = arg;
    struct evloop_task batch[100];
    uint64_t s = 0;
    while (s < p->n && p->error == 0) {
        uint64_t m = stress_below(&p->seed, 100) + 1;
        if (m > p->n - s)
            m = p->n - s;
        if (m < 20) { /* singles */
            for (uint64_t i = 0; i < m && p->error == 0; i++, s++)
                p->error = evloop_submit(p->loop, ledger_task, stress_ledger_arg(p->id, s));
        } else {
            for (uint64_t i = 0; i < m; i++)
                batch[i] = (struct evloop_task){ledger_task, stress_ledger_arg(p->id, s + i)};
            p->error = evloop_submit_batch(p->loop, batch, (size_t)m);
            if (p->error == 0)
                s += m;
        }
    }
    p->accepted = s;
    return NULL;
}

static void run_mixers(const char *fence)
{
    uint64_t n = stress_size("tasks per producer",
                             (struct stress_sizes){.plain = 250000, .asan = 100000, .tsan = 50000,
                                                   .long_plain = 250000, .long_asan = 250000,
                                                   .long_tsan = 250000});
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.fence = fence;
    evloop *loop = test_loop_new(&cfg);
    stress_ledger_init(&g_ledger, n);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct ledger_run run = run_producers(&r, mix, PRODUCERS, n);
    const struct stress_tally *t = &run.t;
    printf("# figure: mixed single+batch %s.%s fence %s (%s): %u x %llu tasks: lost %llu, "
           "duplicated %llu, order violations %llu, strays %llu, phantom %llu, %.2f s\n",
           EVLOOP_TEST_VARIANT, run.st.backend, run.st.fence, run.st.fence_reason, PRODUCERS,
           (unsigned long long)n, (unsigned long long)t->lost, (unsigned long long)t->duplicated,
           (unsigned long long)t->order_violations, (unsigned long long)t->strays,
           (unsigned long long)t->phantom, run.secs);
    assert_ledger_clean(&run, (uint64_t)PRODUCERS * n);
    test_loop_free(loop);
    stress_ledger_free(&g_ledger);
}

static void test_mixed_batches_keep_producer_order_with_membarrier(void **state)
{
    (void)state;
    run_mixers(test_fence_membarrier()); /* where available; seq_cst under TSan */
}

static void test_mixed_batches_keep_producer_order_with_seq_cst_fences(void **state)
{
    (void)state;
    run_mixers("seq_cst");
}

/* ---- lanes switching between plain and fenced pushes ------------------------------------- */

#define SWITCHERS 4
#define POSTS 8        /* posts now and then per round: two that wake the loop switch */
#define STREAM 3000    /* a stream per round: 1,024 pushes into a held lane switch back */

/* n: rounds of POSTS posts, each followed by a nap, then a stream of STREAM. */
static void *post_then_stream(void *arg)
{
    struct mixer *p = arg;
    uint64_t s = 0;
    for (uint64_t round = 0; round < p->n && p->error == 0; round++) {
        for (int i = 0; i < POSTS && p->error == 0; i++, s++) {
            p->error = evloop_submit(p->loop, ledger_task, stress_ledger_arg(p->id, s));
            usleep((useconds_t)(50 + stress_below(&p->seed, 250))); /* the loop goes to sleep */
        }
        for (int i = 0; i < STREAM && p->error == 0; i++, s++)
            p->error = evloop_submit(p->loop, ledger_task, stress_ledger_arg(p->id, s));
    }
    p->accepted = s;
    return NULL;
}

static void test_lanes_switching_between_plain_and_fenced_pushes_lose_nothing(void **state)
{
    (void)state;
    uint64_t rounds = stress_size("rounds", (struct stress_sizes){.plain = 30, .asan = 15,
                                                                   .tsan = 6, .long_plain = 300,
                                                                   .long_asan = 100,
                                                                   .long_tsan = 30});
    uint64_t n = rounds * (POSTS + STREAM);
    evloop_config cfg = test_config_no_spin(); /* an idle loop sleeps at once */
    evloop *loop = test_loop_new(&cfg);
    stress_ledger_init(&g_ledger, n);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct ledger_run run = run_producers(&r, post_then_stream, SWITCHERS, rounds);
    const struct evloop_stats *st = &run.st;
    printf("# figure: switching lanes %s.%s fence %s: %u x %llu rounds of %d posts + %d: "
           "lost %llu, duplicated %llu, order violations %llu; %llu sleeps, %llu wakes, "
           "%llu membarriers, %.2f s\n",
           EVLOOP_TEST_VARIANT, st->backend, st->fence, SWITCHERS, (unsigned long long)rounds,
           POSTS, STREAM, (unsigned long long)run.t.lost, (unsigned long long)run.t.duplicated,
           (unsigned long long)run.t.order_violations,
           (unsigned long long)(st->futex_sleeps + st->poller_sleeps),
           (unsigned long long)(st->futex_wakes + st->poller_wakes),
           (unsigned long long)st->membarriers, run.secs);
    assert_ledger_clean(&run, (uint64_t)SWITCHERS * n);
    test_loop_free(loop);
    stress_ledger_free(&g_ledger);
}

/* ---- a loop freed under its producers' cached lanes -------------------------------------- */

struct survivor {
    pthread_t thread;
    evloop **loop;   /* the loop to use in the current phase */
    pthread_barrier_t *phase;
    test_counter *ran;
    int error;
};

static void *survive(void *arg)
{
    struct survivor *s = arg;
    for (int phase = 0; phase < 3; phase++) {
        pthread_barrier_wait(s->phase); /* the main thread has made a new loop */
        for (int i = 0; i < 1000 && s->error == 0; i++)
            s->error = evloop_submit(*s->loop, test_count_task, s->ran);
        pthread_barrier_wait(s->phase); /* done; the main thread frees the loop */
    }
    return NULL;
}

static void test_producers_outlive_a_freed_loop_and_submit_to_the_next(void **state)
{
    (void)state;
    enum { THREADS = 4 };
    evloop *loop = NULL;
    test_counter ran = 0;
    pthread_barrier_t phase;
    pthread_barrier_init(&phase, NULL, THREADS + 1);
    struct survivor s[THREADS];
    for (int i = 0; i < THREADS; i++) {
        s[i] = (struct survivor){.loop = &loop, .phase = &phase, .ran = &ran};
        assert_int_equal(pthread_create(&s[i].thread, NULL, survive, &s[i]), 0);
    }
    for (int p = 0; p < 3; p++) {
        loop = test_loop_new(NULL); /* often at the address the last one had */
        atomic_store(&ran, 0);
        pthread_barrier_wait(&phase);
        pthread_barrier_wait(&phase);
        /* Never run: free runs what was accepted on this thread, then frees. The
         * producers are alive and idle, their lanes for this loop still cached. */
        test_loop_free(loop);
        assert_int_equal(atomic_load(&ran), THREADS * 1000);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(s[i].thread, NULL);
        assert_int_equal(s[i].error, 0);
    }
    pthread_barrier_destroy(&phase);
}

/* ---- membarrier refused by seccomp ---------------------------------------------------- */

#ifdef HAVE_SECCOMP
/* Makes membarrier(2) fail with EPERM, as a container's filter would; allows the rest. */
static int refuse_membarrier(void)
{
    struct sock_filter code[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_membarrier, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {.len = sizeof(code) / sizeof(code[0]), .filter = code};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    return prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) == 0 ? 0 : -errno;
}

/* The child: a fresh process whose first act is the filter. Exit 0 when all holds. */
static int seccomp_child(void)
{
    int r = refuse_membarrier();
    if (r < 0) {
        fprintf(stderr, "seccomp filter: %s\n", strerror(-r));
        return 77;
    }
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.fence = "membarrier";
    evloop *loop = NULL;
    if ((r = evloop_new(&loop, &cfg)) != -ENOTSUP) {
        fprintf(stderr, "fence=membarrier under the filter: %d, want -ENOTSUP\n", r);
        return 1;
    }
    if ((r = evloop_new(&loop, NULL)) != 0)
        return 2;
    struct evloop_stats st;
    evloop_stats(loop, &st);
    printf("# seccomp child: fence %s (%s)\n", st.fence, st.fence_reason);
    if (strcmp(st.fence, "seq_cst") != 0 || !*st.fence_reason)
        return 3;
    /* Work through the fallback: floods from 4 threads and wake rounds on a sleeping loop. */
    test_counter ran = 0;
    struct test_runner run;
    test_runner_start(&run, loop);
    for (int round = 0; round < 2000; round++) {
        if (round % 2 == 0 && !wait_for_state(loop, EVLOOP_SLEEPING))
            return 4; /* every other round hands a task to a loop asleep on its word */
        if (evloop_submit(loop, test_count_task, &ran) != 0)
            return 5;
        if (!wait_for_count(&ran, (uint64_t)round + 1))
            return 6; /* a lost wake */
    }
    evloop_stop(loop);
    if (test_runner_join(&run) != 0 || evloop_free(loop) != 0)
        return 7;
    printf("# figure: seccomp child: 2000 wake rounds through the seq_cst fallback, 0 lost\n");
    return 0;
}
#endif

static void test_membarrier_refused_by_seccomp_falls_back_to_fences(void **state)
{
    (void)state;
#if defined(HAVE_SECCOMP) && !STRESS_TSAN
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        execl(g_self, g_self, "--seccomp-child", (char *)NULL);
        _exit(127);
    }
    int status;
    assert_int_equal(waitpid(pid, &status, 0), pid);
    assert_true(WIFEXITED(status));
    if (WEXITSTATUS(status) == 77) {
        print_message("# seccomp filters not allowed here: skipped\n");
        return;
    }
    assert_int_equal(WEXITSTATUS(status), 0);
#else
    print_message("# no seccomp here, or a TSan build (always seq_cst): skipped\n");
#endif
}

int main(int argc, char **argv)
{
    g_self = argv[0];
#ifdef HAVE_SECCOMP
    if (argc > 1 && strcmp(argv[1], "--seccomp-child") == 0)
        return seccomp_child();
#else
    (void)argc;
#endif
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_thousand_short_lived_producers_lose_nothing_and_leave_nothing),
        cmocka_unit_test(test_mixed_batches_keep_producer_order_with_membarrier),
        cmocka_unit_test(test_mixed_batches_keep_producer_order_with_seq_cst_fences),
        cmocka_unit_test(test_lanes_switching_between_plain_and_fenced_pushes_lose_nothing),
        cmocka_unit_test(test_producers_outlive_a_freed_loop_and_submit_to_the_next),
        cmocka_unit_test(test_membarrier_refused_by_seccomp_falls_back_to_fences),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_lanes", tests, NULL, NULL);
}
