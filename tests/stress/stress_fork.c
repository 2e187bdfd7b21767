/* fork policy: a child process must not use its parent's loop at all: no call on it, not
 * even evloop_free (the poller and its wake fd are shared with the parent through the fork,
 * so the child would unregister the parent's fds, steal its wake-ups, or run the parent's
 * accepted tasks a second time). A child may _exit, exec, or create and run loops of its
 * own. Every fd a loop owns is close-on-exec, so nothing of the loop survives an exec.
 *
 * Tests: every fd a loop owns (after creation, after registering an fd, after running) has
 * FD_CLOEXEC, and a program exec'd from a fork sees none of them open; a child that keeps to
 * the policy runs a loop of its own while the parent's loop keeps working, in both sleep
 * modes, many times over. The last test only observes (no assertion) what happens when a
 * child breaks the policy, so the policy's reasons stay demonstrated; see the report. */
#include "stress_util.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

static char *g_self;

/* ---- fds ---------------------------------------------------------------------------------- */

#define MAX_FDS 1024

static int list_fds(int *out, int max)
{
    int n = 0;
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    int dfd = dirfd(d);
    struct dirent *e;
    while ((e = readdir(d)) != NULL && n < max) {
        if (e->d_name[0] == '.')
            continue;
        int fd = atoi(e->d_name);
        if (fd != dfd)
            out[n++] = fd;
    }
    closedir(d);
    return n;
}

static bool in_list(const int *fds, int n, int fd)
{
    for (int i = 0; i < n; i++)
        if (fds[i] == fd)
            return true;
    return false;
}

/* fds open now that were not open in before[] and are not in mine[]. */
static int new_fds(const int *before, int nbefore, const int *mine, int nmine, int *out)
{
    int now[MAX_FDS];
    int n = list_fds(now, MAX_FDS), k = 0;
    for (int i = 0; i < n; i++)
        if (!in_list(before, nbefore, now[i]) && !in_list(mine, nmine, now[i]))
            out[k++] = now[i];
    return k;
}

static void describe_fd(int fd, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, buf, len - 1);
    buf[n > 0 ? n : 0] = '\0';
}

/* exec'd as `self --expect-closed fd...`: exits 0 when none of the fds is open. */
static int expect_closed_main(int argc, char **argv)
{
    int open_ones = 0;
    for (int i = 2; i < argc; i++) {
        int fd = atoi(argv[i]);
        if (fcntl(fd, F_GETFD) != -1) {
            fprintf(stderr, "fd %d survived exec\n", fd);
            open_ones++;
        }
    }
    return open_ones ? 1 : 0;
}

static void idle_fire(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)fd;
    (void)events;
}

static void test_every_fd_the_loop_owns_is_close_on_exec_and_gone_after_exec(void **state)
{
    (void)state;
    int before[MAX_FDS];
    int nbefore = list_fds(before, MAX_FDS);
    assert_true(nbefore >= 0);
    int p[2];
    test_pipe(p);
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    /* Poller mode and a run, so fds a backend creates lazily exist too. */
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, idle_fire, NULL), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_sleep(loop, 0));
    static test_counter one_task;
    assert_rc(evloop_submit(loop, test_count_task, &one_task), 0);
    assert_true(wait_for_sleep(loop, 1));

    int owned[MAX_FDS];
    int n = new_fds(before, nbefore, p, 2, owned);
    char argv_buf[MAX_FDS][12];
    char *args[MAX_FDS + 3];
    args[0] = g_self;
    args[1] = "--expect-closed";
    int without_cloexec = 0;
    printf("# the loop (backend %s) owns %d fds:", evloop_backend(loop), n);
    for (int i = 0; i < n; i++) {
        char what[128];
        describe_fd(owned[i], what, sizeof what);
        int flags = fcntl(owned[i], F_GETFD);
        printf(" %d=%s%s", owned[i], what, flags >= 0 && (flags & FD_CLOEXEC) ? "" : "(NO CLOEXEC)");
        if (flags < 0 || !(flags & FD_CLOEXEC))
            without_cloexec++;
        snprintf(argv_buf[i], sizeof argv_buf[i], "%d", owned[i]);
        args[2 + i] = argv_buf[i];
    }
    args[2 + n] = NULL;
    printf("\n");

    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0) {
        execv("/proc/self/exe", args);
        _exit(127);
    }
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    printf("# figure: fork cloexec %s.%s: %d loop fds, %d without FD_CLOEXEC, exec'd child "
           "saw them %s\n",
           EVLOOP_TEST_VARIANT, evloop_backend(loop), n, without_cloexec,
           WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "all closed" : "OPEN");
    test_runner_stop(&r);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
    assert_true(n >= 1);
    assert_int_equal(without_cloexec, 0);
    assert_true(WIFEXITED(status));
    assert_int_equal(WEXITSTATUS(status), 0);
}

/* ---- a child that keeps to the policy ------------------------------------------------------- */

static void child_stop(void *loop)
{
    evloop_stop(loop);
}

/* In the child: a loop of its own, run on this (the only) thread: no thread is created,
 * which keeps TSan's fork rules. Returns the exit status. */
static int child_runs_its_own_loop(void)
{
    evloop *mine = NULL;
    if (evloop_new(&mine, NULL) != 0)
        return 2;
    test_counter ran;
    atomic_init(&ran, 0);
    int p[2];
    if (pipe2(p, O_NONBLOCK | O_CLOEXEC) != 0)
        return 3;
    if (write(p[1], "x", 1) != 1)
        return 3;
    if (evloop_io_add(mine, p[0], EVLOOP_READABLE, idle_fire, NULL) != 0)
        return 4;
    for (int i = 0; i < 100; i++)
        if (evloop_submit(mine, test_count_task, &ran) != 0)
            return 5;
    if (evloop_timer_start(mine, 1000000, 0, child_stop, mine, NULL) != 0)
        return 6;
    if (evloop_run(mine) != 0)
        return 7;
    if (atomic_load(&ran) != 100)
        return 8;
    if (evloop_free(mine) != 0)
        return 9;
    return 0;
}

struct parent_rig {
    int p[2];
    test_counter fd_calls;
};

static void parent_fire(void *arg, int fd, unsigned events)
{
    struct parent_rig *g = arg;
    (void)events;
    test_drain_fd(fd);
    atomic_fetch_add(&g->fd_calls, 1);
}

static void forks_leave_the_parent_loop_working(bool poller)
{
    uint64_t forks = stress_size("forks", (struct stress_sizes){.plain = 50, .asan = 20,
                                                                .tsan = 10, .long_plain = 200,
                                                                .long_asan = 50, .long_tsan = 50});
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct parent_rig g;
    test_pipe(g.p);
    atomic_init(&g.fd_calls, 0);
    if (poller)
        assert_rc(evloop_io_add(loop, g.p[0], EVLOOP_READABLE, parent_fire, &g), 0);
    test_counter ran;
    atomic_init(&ran, 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    uint64_t child_failures = 0;
    /* Under TSan a child that sets up an io_uring loop dies inside TSan ("dup thread with
     * used id"): a TSan limit after a multi-threaded fork, so that child only exits. */
    bool child_loop = !(STRESS_TSAN && strcmp(evloop_backend(loop), "io_uring") == 0);
    for (uint64_t i = 0; i < forks; i++) {
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
        pid_t child = fork();
        assert_true(child >= 0);
        if (child == 0)
            _exit(child_loop ? child_runs_its_own_loop() : 0);
        /* While the child runs: the parent's loop still takes work and readiness. */
        assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
        if (poller)
            test_write_byte(g.p[1]);
        int status = 0;
        assert_int_equal(waitpid(child, &status, 0), child);
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            child_failures++;
            fprintf(stderr, "fork %llu: child status %#x\n", (unsigned long long)i, status);
        }
        assert_true(wait_for_count(&ran, 2 * (i + 1)));
        if (poller)
            assert_true(wait_for_count(&g.fd_calls, i + 1));
        /* And after the child exited (its copies of the loop's fds closed). */
        assert_true(wait_for_sleep(loop, 0));
    }
    test_runner_stop(&r);
    printf("# figure: fork %s %s.%s: %llu forks, children %s failed %llu; parent tasks "
           "%llu/%llu, parent fd callbacks %llu\n",
           poller ? "poller mode" : "futex mode", EVLOOP_TEST_VARIANT, evloop_backend(loop),
           (unsigned long long)forks,
           child_loop ? "running their own loop" : "that only exit (TSan)",
           (unsigned long long)child_failures,
           (unsigned long long)atomic_load(&ran), (unsigned long long)(2 * forks),
           (unsigned long long)atomic_load(&g.fd_calls));
    test_loop_free(loop);
    close(g.p[0]);
    close(g.p[1]);
    assert_int_equal(child_failures, 0);
}

static void test_children_that_keep_off_the_parent_loop_leave_it_working_in_futex_mode(
    void **state)
{
    (void)state;
    forks_leave_the_parent_loop_working(false);
}

static void test_children_that_keep_off_the_parent_loop_leave_it_working_in_poller_mode(
    void **state)
{
    (void)state;
    forks_leave_the_parent_loop_working(true);
}

/* ---- observation: a child that breaks the policy ----------------------------------------- */

static void observe_task(void *arg)
{
    int fd = *(int *)arg;
    /* Runs in whichever process drains the loop: say which. */
    char msg[32];
    int n = snprintf(msg, sizeof msg, "%d\n", (int)getpid());
    if (write(fd, msg, (size_t)n) < 0)
        return;
}

/* A loop created and given work but not yet run, then fork; the child calls evloop_free on
 * its copy (which stops and drains it there), then the parent runs its loop. Printed: which
 * processes ran the accepted task, and whether the parent still gets its fd's readiness. */
static void test_observe_a_child_that_frees_its_copy_of_the_parent_loop(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct parent_rig g;
    test_pipe(g.p);
    atomic_init(&g.fd_calls, 0);
    assert_rc(evloop_io_add(loop, g.p[0], EVLOOP_READABLE, parent_fire, &g), 0);
    int report[2];
    test_pipe(report);
    assert_rc(evloop_submit(loop, observe_task, &report[1]), 0);
    pid_t child = fork();
    assert_true(child >= 0);
    if (child == 0)
        _exit(evloop_free(loop) == 0 ? 0 : 1);
    int status = 0;
    assert_int_equal(waitpid(child, &status, 0), child);
    struct test_runner r;
    test_runner_start(&r, loop);
    test_write_byte(g.p[1]);
    uint64_t end = stress_now_ns() + 500000000u;
    while (atomic_load(&g.fd_calls) == 0 && stress_now_ns() < end)
        stress_nap_ns(1000000);
    uint64_t fd_calls = atomic_load(&g.fd_calls);
    test_runner_stop(&r);
    char buf[256] = {0};
    ssize_t n = read(report[0], buf, sizeof buf - 1);
    int runs = 0;
    for (ssize_t i = 0; i < n; i++)
        runs += buf[i] == '\n';
    printf("# observation: fork %s.%s: child evloop_free(parent's copy) returned %s; the one "
           "accepted task ran %d times (parent pid %d; pids: %s); parent fd readiness after "
           "the child freed its copy: %s\n",
           EVLOOP_TEST_VARIANT, evloop_backend(loop),
           WIFEXITED(status) && WEXITSTATUS(status) == 0 ? "0" : "an error", runs, (int)getpid(),
           n > 0 ? strtok(buf, "\n") : "-", fd_calls ? "delivered" : "LOST (not within 500 ms)");
    test_loop_free(loop);
    close(g.p[0]);
    close(g.p[1]);
    close(report[0]);
    close(report[1]);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "--expect-closed") == 0)
        return expect_closed_main(argc, argv);
    g_self = argv[0];
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_fd_the_loop_owns_is_close_on_exec_and_gone_after_exec),
        cmocka_unit_test(
            test_children_that_keep_off_the_parent_loop_leave_it_working_in_futex_mode),
        cmocka_unit_test(
            test_children_that_keep_off_the_parent_loop_leave_it_working_in_poller_mode),
        cmocka_unit_test(test_observe_a_child_that_frees_its_copy_of_the_parent_loop),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_fork", tests, NULL, NULL);
}
