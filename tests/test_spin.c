/* The spin before sleeping must never make a crowded machine slower: a loop that may run
 * on one CPU only never spins, a loop whose spin loses its CPU to another runnable thread
 * stops spinning for a while (spin_preemptions in the stats), and a loop beside pool threads
 * that fill the CPUs with work does not spin for their replies (src/core/spin.h). */
#include "test_util.h"

#include <sched.h>
#include <time.h>
#include <unistd.h>

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_us(long us)
{
    struct timespec ts = {.tv_sec = 0, .tv_nsec = us * 1000};
    nanosleep(&ts, NULL);
}

static bool pin_to_cpu0(void)
{
    cpu_set_t set;
    CPU_ZERO(&set);
    CPU_SET(0, &set);
    return sched_setaffinity(0, sizeof(set), &set) == 0;
}

/* Submits n tasks one at a time, each after the previous ran and a pause of gap_us: a
 * loop with a spin window sees every task arrive while it spins or sleeps. */
static void trickle(evloop *loop, int n, long gap_us)
{
    test_counter ran = 0;
    for (int i = 0; i < n; i++) {
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
        assert_true(wait_for_count(&ran, (uint64_t)i + 1));
        sleep_us(gap_us);
    }
}

static struct evloop_stats stats_of(const evloop *loop)
{
    struct evloop_stats st;
    assert_rc(evloop_stats(loop, &st), 0);
    return st;
}

static void test_a_loop_confined_to_one_cpu_never_spins(void **state)
{
    (void)state;
    cpu_set_t saved;
    assert_int_equal(sched_getaffinity(0, sizeof(saved), &saved), 0);
    if (!pin_to_cpu0())
        skip();
    evloop *loop = test_loop_new(NULL); /* adaptive spin: the default */
    struct test_runner r;
    test_runner_start(&r, loop); /* the loop thread inherits the one-CPU mask */
    trickle(loop, 50, 20);
    test_runner_stop(&r);
    struct evloop_stats st = stats_of(loop);
    assert_int_equal(sched_setaffinity(0, sizeof(saved), &saved), 0);
    assert_int_equal(st.spin_hits + st.spin_misses + st.spin_preemptions, 0);
    assert_true(st.tasks_run >= 50);
    test_loop_free(loop);
}

/* ---- oversubscribed: the loop thread shares its CPU with a thread that never sleeps ---- */

struct burner {
    pthread_t thread;
    atomic_bool stop;
    atomic_bool pinned;
};

static void *burn(void *arg)
{
    struct burner *b = arg;
    atomic_store(&b->pinned, pin_to_cpu0());
    while (!atomic_load_explicit(&b->stop, memory_order_relaxed))
        ;
    return NULL;
}

static void pin_loop_thread(void *arg)
{
    atomic_store((atomic_bool *)arg, pin_to_cpu0());
}

static void test_a_spin_that_loses_its_cpu_pauses_spinning(void **state)
{
    (void)state;
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    if (cpus < 2)
        skip(); /* one CPU: the loop never spins at all (the test above) */
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.spin_ns = 5000000; /* 5 ms: longer than a scheduler slice, so a spin gets preempted */
    evloop *loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    atomic_bool loop_pinned = false;
    test_counter ran = 0;
    assert_rc(evloop_submit(loop, pin_loop_thread, &loop_pinned), 0);
    assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_true(wait_for_count(&ran, 1));
    /* not_yet: a time before the last look that found no preemption, so before the
     * preemption. The first look comes before the burner starts (the loop's spin after the
     * task above may lose its CPU to it at once); a look that finds a preemption already
     * (other load on the machine) leaves the pause's start unknown. Then up to 2 s of
     * tasks 1 ms apart: each ends in a spin on the shared CPU. */
    uint64_t not_yet = clock_ns();
    struct evloop_stats st = stats_of(loop);
    bool bounded = st.spin_preemptions == 0;
    struct burner b = {0};
    assert_int_equal(pthread_create(&b.thread, NULL, burn, &b), 0);
    for (int i = 0; i <= 2000 && bounded; i++) {
        uint64_t t = clock_ns();
        st = stats_of(loop);
        if (st.spin_preemptions > 0)
            break;
        not_yet = t;
        trickle(loop, 1, 1000);
    }
    uint64_t spins_at_preemption = st.spin_hits + st.spin_misses;
    /* Right after a preemption spinning pauses (10 ms at least): these tasks find the
     * loop asleep, not spinning. Only a trickle whose spins are counted within 10 ms of the
     * preemption can tell; the pause is measured from not_yet, never from after the look
     * that saw the preemption (the test thread may lose its CPU for ms in between, and
     * spinning resumes when the pause ends). */
    trickle(loop, 3, 500);
    struct evloop_stats after = stats_of(loop);
    bool within_pause = bounded && clock_ns() - not_yet < 10000000;
    atomic_store(&b.stop, true);
    assert_int_equal(pthread_join(b.thread, NULL), 0);
    test_runner_stop(&r);
    if (!atomic_load(&loop_pinned) || !atomic_load(&b.pinned)) {
        test_loop_free(loop);
        skip(); /* no affinity control here (a container may refuse it) */
    }
    print_message("# spin preemptions %llu, spins %llu then %llu\n",
                  (unsigned long long)after.spin_preemptions,
                  (unsigned long long)spins_at_preemption,
                  (unsigned long long)(after.spin_hits + after.spin_misses));
    assert_true(after.spin_preemptions >= 1);
    if (within_pause)
        assert_true(after.spin_hits + after.spin_misses - spins_at_preemption <= 1);
    else
        print_message("# %s: its spins prove nothing\n",
                      bounded ? "the trickle outlasted the pause"
                              : "preempted before the burner started");
    test_loop_free(loop);
}

/* ---- beside a busy pool: pool threads with CPU-bound items fill every CPU ---- */

#define BURN_NS 200000

static void burn_cpu(void *arg)
{
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    uint64_t end = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec + BURN_NS;
    for (;;) {
        clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
        if ((uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec >= end)
            return;
    }
}

static void count_done(void *arg, int status)
{
    CHECK_EQ(status, 0);
    atomic_fetch_add((test_counter *)arg, 1);
}

/* The CPUs this thread may run on, or 0 where a pool of one thread per CPU cannot fill
 * them in these tests (one CPU: the loop never spins; over 64: the items take too long). */
static int pool_test_cpus(void)
{
    cpu_set_t set;
    assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
    int cpus = CPU_COUNT(&set);
    return cpus < 2 || cpus > 64 ? 0 : cpus;
}

/* A loop configured with a pool of one thread per CPU, which with items queued stays awake. */
static evloop *loop_with_a_full_pool(int cpus, bool auto_exit)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.auto_exit = auto_exit;
    evloop *loop = test_loop_new(&cfg); /* adaptive spin: the default */
    struct evloop_work_config wc;
    evloop_work_config_init(&wc);
    wc.threads = (unsigned)cpus;
    assert_rc(evloop_work_configure(loop, &wc), 0);
    return loop;
}

static void test_a_loop_beside_a_pool_that_fills_the_cpus_does_not_spin(void **state)
{
    (void)state;
    int cpus = pool_test_cpus();
    if (!cpus)
        skip();
    evloop *loop = loop_with_a_full_pool(cpus, true);
    int n = 100 * cpus;
    test_counter done = 0;
    for (int i = 0; i < n; i++)
        assert_rc(evloop_work_submit(loop, burn_cpu, count_done, &done, NULL), 0);
    assert_rc(test_run_to_end(loop), 0);
    assert_int_equal(atomic_load(&done), n);
    struct evloop_stats st = stats_of(loop);
    print_message("# %d items of %d us on %d threads: %llu spins, %llu sleeps\n", n,
                  BURN_NS / 1000, cpus, (unsigned long long)(st.spin_hits + st.spin_misses),
                  (unsigned long long)(st.futex_sleeps + st.poller_sleeps));
    /* The pool threads start awake and stay so while items are queued: spins come only
     * while the last items run out (a thread idle, its CPU free). A loop that spun for each
     * reply made about n. */
    assert_true(st.spin_hits + st.spin_misses <= (uint64_t)n / 10);
    /* Nor is it woken for each reply: it dozes, a sleep with a bound that replies do not
     * end, and takes them in batches. A loop woken by each reply made about n sleeps, each
     * ended by a pool thread's wake; how many dozes there are follows the wall time (a
     * loaded machine stretches it), so the wakes are what is counted. */
    struct evloop_work_stats ws;
    assert_rc(evloop_work_stats(loop, &ws), 0);
    print_message("# %llu dozes, %llu wakes\n", (unsigned long long)ws.loop_dozes,
                  (unsigned long long)(st.futex_wakes + st.poller_wakes));
    assert_true(st.futex_wakes + st.poller_wakes <= (uint64_t)n / 4);
    test_loop_free(loop);
}

struct burners {
    evloop *loop;
    int n;
    test_counter *done;
    atomic_bool submitted;
};

static void submit_burners(void *arg)
{
    struct burners *b = arg;
    for (int i = 0; i < b->n; i++)
        CHECK_EQ(evloop_work_submit(b->loop, burn_cpu, count_done, b->done, NULL), 0);
    atomic_store(&b->submitted, true);
}

/* A dozing loop is still woken by anything but a reply: its doze is an announced sleep
 * (src/core/work.c, evloop__work_doze). Tasks submitted while the pool is full of CPU-bound
 * items find it dozing and wake it. Not under valgrind: there the loop dozed once and then
 * stayed awake, serialized with the submitting thread, through all 20 submits (woke 0), in
 * a memcheck run beside a build; the other builds run it. */
static void test_a_dozing_loop_is_woken_by_a_submit(void **state)
{
    (void)state;
    int cpus = pool_test_cpus();
    if (!cpus || RUNNING_ON_VALGRIND)
        skip();
    evloop *loop = loop_with_a_full_pool(cpus, false);
    struct test_runner r;
    test_runner_start(&r, loop);
    int n = 250 * cpus; /* about 50 ms of items, one thread per CPU */
    test_counter done = 0;
    struct burners b = {.loop = loop, .n = n, .done = &done};
    atomic_init(&b.submitted, false);
    assert_rc(evloop_submit(loop, submit_burners, &b), 0); /* the pool's calls: loop thread */
    assert_true(wait_for_flag(&b.submitted));
    struct evloop_work_stats ws;
    struct evloop_stats before = stats_of(loop);
    test_counter ran = 0;
    int woke = 0;
    for (int i = 0; i < 20 && atomic_load(&done) < (uint64_t)n / 2; i++) {
        sleep_us(1500);
        uint64_t w0 = stats_of(loop).futex_wakes + stats_of(loop).poller_wakes;
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
        assert_true(wait_for_count(&ran, (uint64_t)i + 1));
        struct evloop_stats now = stats_of(loop);
        woke += now.futex_wakes + now.poller_wakes > w0;
    }
    assert_true(wait_for_count(&done, (uint64_t)n));
    assert_rc(evloop_work_stats(loop, &ws), 0);
    test_runner_stop(&r);
    print_message("# %llu dozes, %d of the submits woke the loop (sleeps %llu)\n",
                  (unsigned long long)ws.loop_dozes, woke,
                  (unsigned long long)(stats_of(loop).futex_sleeps - before.futex_sleeps));
    if (ws.loop_dozes == 0)
        skip(); /* never dozed: the machine too busy for the pool threads to fill the CPUs */
    assert_true(woke > 0);
    test_loop_free(loop);
}

/* A loop with fds watches their readiness while it spins: a byte written while it spins
 * runs its callback from the spin, without a sleep. With a window of 20 ms, a spin that
 * watched only the queues would run the callback after the window, with one sleep. A spin
 * that loses its CPU stops early (spin_preemptions), and a write delayed past the window
 * comes after the spin: such trials prove nothing, so the test makes 20 trials on fresh
 * loops and judges the others. */
/* The fd's callback notes the loop's sleeps as they are when it runs: read later, they may
 * include the next spin's sleep of a loop whose test thread was slow. */
struct spin_seen {
    evloop *loop;
    test_counter runs;
    uint64_t sleeps;
};

static void note_stats_io(void *arg, int fd, unsigned events)
{
    (void)events;
    struct spin_seen *seen = arg;
    char b[16];
    while (read(fd, b, sizeof(b)) > 0) {
    }
    struct evloop_stats st;
    CHECK_EQ(evloop_stats(seen->loop, &st), 0);
    seen->sleeps = st.poller_sleeps + st.futex_sleeps;
    atomic_fetch_add(&seen->runs, 1);
}

static bool spin_trial(bool *from_spin)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.spin_ns = 20000000;
    evloop *loop = test_loop_new(&cfg);
    int p[2];
    test_pipe(p);
    struct spin_seen seen = {.loop = loop};
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, note_stats_io, &seen), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    uint64_t running = clock_ns();
    sleep_us(1000); /* the first tick is done: the loop spins */
    test_write_byte(p[1]);
    /* A test thread kept off its CPU past the window writes after the spin ended: such a
     * trial proves nothing either. Half the window leaves room for the naps of the wait. */
    bool in_window = clock_ns() - running < 10000000;
    assert_true(wait_for_count(&seen.runs, 1));
    struct evloop_stats st = stats_of(loop); /* preemptions: of any spin up to now */
    test_runner_stop(&r);
    test_loop_free(loop); /* the fd went with the loop's termination */
    close(p[0]);
    close(p[1]);
    *from_spin = seen.sleeps == 0; /* it ran before the loop ever slept */
    return in_window && st.spin_preemptions == 0;
}

static void test_a_spinning_loop_answers_a_readable_fd_without_sleeping(void **state)
{
    (void)state;
    if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
        skip(); /* one CPU: the loop never spins */
    int judged = 0, slept = 0;
    for (int i = 0; i < 20; i++) {
        bool from_spin;
        if (!spin_trial(&from_spin))
            continue;
        judged++;
        slept += !from_spin;
    }
    print_message("# %d of 20 trials judged (not preempted, written within the window), %d of "
                  "them slept\n",
                  judged, slept);
    if (judged == 0)
        skip(); /* every spin lost its CPU: a machine too busy to tell */
    assert_int_equal(slept, 0);
}

int main(void)
{
    test_require_backend();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_loop_confined_to_one_cpu_never_spins),
        cmocka_unit_test(test_a_spin_that_loses_its_cpu_pauses_spinning),
        cmocka_unit_test(test_a_loop_beside_a_pool_that_fills_the_cpus_does_not_spin),
        cmocka_unit_test(test_a_dozing_loop_is_woken_by_a_submit),
        cmocka_unit_test(test_a_spinning_loop_answers_a_readable_fd_without_sleeping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
