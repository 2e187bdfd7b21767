/* Bad input, as a table: every error of the API contract (shared api.md, include/evloop.h)
 * from every entry point, on loops in each state (never run, running, terminated), each
 * call checked against its documented code. The whole table is printed; any mismatch
 * fails. Sanitizer builds turn every row into a memory and UB check too. -ENOMEM is
 * covered by stress_faults.c. */
#include "stress_util.h"

#include <fcntl.h>
#include <limits.h>
#include <unistd.h>

struct row {
    const char *entry, *input;
    long long got, want;
    bool either; /* backend-dependent: want or 0 */
};

#define MAX_ROWS 160
static struct row g_rows[MAX_ROWS];
static int g_nrows;

static void add_row(const char *entry, const char *input, long long got, long long want,
                    bool either)
{
    if (g_nrows < MAX_ROWS)
        g_rows[g_nrows++] = (struct row){entry, input, got, want, either};
}

#define ROW(entry, input, expr, want) add_row(entry, input, (long long)(expr), (long long)(want), false)

static void noop(void *arg)
{
    (void)arg;
}

static void noop_io(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)fd;
    (void)events;
}

static evloop *new_loop(const char *backend, int64_t spin, int *rc)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = backend;
    cfg.spin_ns = spin;
    evloop *loop = NULL;
    *rc = evloop_new(&loop, &cfg);
    return loop;
}

static void new_rows(void)
{
    int rc;
    evloop *l;
    ROW("evloop_new", "out NULL", evloop_new(NULL, NULL), -EINVAL);
    l = new_loop("bogus", -1, &rc);
    ROW("evloop_new", "backend \"bogus\"", rc, -EINVAL);
    ROW("evloop_new", "backend \"bogus\": *out", l != NULL, 0);
    l = new_loop("kqueue", -1, &rc);
    ROW("evloop_new", "backend \"kqueue\" on Linux", rc, -ENOTSUP);
    evloop_free(l);
    l = new_loop(NULL, -2, &rc);
    ROW("evloop_new", "spin_ns -2", rc, -EINVAL);
    evloop_free(l);
    l = new_loop(NULL, INT64_MIN, &rc);
    ROW("evloop_new", "spin_ns INT64_MIN", rc, -EINVAL);
    evloop_free(l);
    l = new_loop("", -1, &rc);
    ROW("evloop_new", "backend \"\" (auto)", rc, 0);
    evloop_free(l);
    l = new_loop("auto", INT64_MAX, &rc);
    ROW("evloop_new", "backend \"auto\", spin_ns INT64_MAX", rc, 0);
    evloop_free(l);
    evloop_config_init(NULL); /* must not crash */
    ROW("evloop_config_init", "NULL", 0, 0);
}

static void stopped_rows(evloop *dead, int fd)
{
    ROW("evloop_run", "terminated loop", evloop_run(dead), -ESHUTDOWN);
    ROW("evloop_stop", "terminated loop", evloop_stop(dead), 0);
    ROW("evloop_submit", "terminated loop", evloop_submit(dead, noop, NULL), -ESHUTDOWN);
    ROW("evloop_submit", "terminated loop, cb NULL", evloop_submit(dead, NULL, NULL), -EINVAL);
    ROW("evloop_submit_internal", "terminated loop", evloop_submit_internal(dead, noop, NULL),
        -ESHUTDOWN);
    ROW("evloop_queue_microtask", "terminated loop", evloop_queue_microtask(dead, noop, NULL),
        -ESHUTDOWN);
    ROW("evloop_timer_start", "terminated loop", evloop_timer_start(dead, 0, 0, noop, NULL, NULL),
        -ESHUTDOWN);
    ROW("evloop_timer_cancel", "terminated loop, id 1", evloop_timer_cancel(dead, 1), -ENOENT);
    ROW("evloop_io_add", "terminated loop", evloop_io_add(dead, fd, EVLOOP_READABLE, noop_io, NULL),
        -ESHUTDOWN);
    ROW("evloop_io_modify", "terminated loop", evloop_io_modify(dead, fd, EVLOOP_READABLE),
        -ESHUTDOWN);
    ROW("evloop_io_remove", "terminated loop, fd never added", evloop_io_remove(dead, fd), -ENOENT);
    ROW("evloop_state", "terminated loop", evloop_state(dead), EVLOOP_TERMINATED);
}

static void null_rows(void)
{
    struct evloop_stats st;
    evloop_timer_id id = 0;
    ROW("evloop_free", "NULL", evloop_free(NULL), 0);
    ROW("evloop_run", "NULL", evloop_run(NULL), -EINVAL);
    ROW("evloop_stop", "NULL", evloop_stop(NULL), -EINVAL);
    ROW("evloop_submit", "loop NULL", evloop_submit(NULL, noop, NULL), -EINVAL);
    ROW("evloop_submit_internal", "loop NULL", evloop_submit_internal(NULL, noop, NULL), -EINVAL);
    ROW("evloop_queue_microtask", "loop NULL", evloop_queue_microtask(NULL, noop, NULL), -EINVAL);
    ROW("evloop_timer_start", "loop NULL", evloop_timer_start(NULL, 0, 0, noop, NULL, &id), -EINVAL);
    ROW("evloop_timer_cancel", "loop NULL", evloop_timer_cancel(NULL, 1), -EINVAL);
    ROW("evloop_io_add", "loop NULL", evloop_io_add(NULL, 0, EVLOOP_READABLE, noop_io, NULL),
        -EINVAL);
    ROW("evloop_io_modify", "loop NULL", evloop_io_modify(NULL, 0, EVLOOP_READABLE), -EINVAL);
    ROW("evloop_io_remove", "loop NULL", evloop_io_remove(NULL, 0), -EINVAL);
    ROW("evloop_state", "NULL", evloop_state(NULL), EVLOOP_TERMINATED);
    ROW("evloop_backend", "NULL", evloop_backend(NULL) != NULL, 0);
    ROW("evloop_stats", "loop NULL", evloop_stats(NULL, &st), -EINVAL);
    const int codes[] = {0, -EINVAL, -ESHUTDOWN, -ENOTSUP, -EBADF, -EEXIST, -ENOENT, -EBUSY,
                         -ENOMEM, -EPERM, 1, -4095, -100000, INT_MIN, INT_MAX};
    int bad = 0;
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *m = evloop_strerror(codes[i]);
        bad += !m || !*m;
    }
    ROW("evloop_strerror", "every code, 1, -4095, -100000, INT_MIN, INT_MAX: NULL or empty",
        bad, 0);
}

static void running_rows(evloop *loop, const int p[2], int closed_fd, int regular_fd)
{
    struct evloop_stats st;
    const char *backend = evloop_backend(loop);
    ROW("evloop_run", "already running", evloop_run(loop), -EBUSY);
    ROW("evloop_free", "running", evloop_free(loop), -EBUSY);
    ROW("evloop_stats", "out NULL", evloop_stats(loop, NULL), -EINVAL);
    ROW("evloop_stats", "valid", evloop_stats(loop, &st), 0);
    ROW("evloop_submit", "cb NULL", evloop_submit(loop, NULL, NULL), -EINVAL);
    ROW("evloop_submit_internal", "cb NULL", evloop_submit_internal(loop, NULL, NULL), -EINVAL);
    ROW("evloop_queue_microtask", "cb NULL", evloop_queue_microtask(loop, NULL, NULL), -EINVAL);
    ROW("evloop_timer_start", "cb NULL", evloop_timer_start(loop, 0, 0, NULL, NULL, NULL), -EINVAL);
    ROW("evloop_timer_start", "out NULL", evloop_timer_start(loop, UINT64_MAX, 0, noop, NULL, NULL),
        0);
    evloop_timer_id id = 0;
    ROW("evloop_timer_start", "valid", evloop_timer_start(loop, UINT64_MAX, 0, noop, NULL, &id), 0);
    ROW("evloop_timer_start", "id never 0", id != 0, 1);
    ROW("evloop_timer_cancel", "id 0", evloop_timer_cancel(loop, 0), -ENOENT);
    ROW("evloop_timer_cancel", "id UINT64_MAX", evloop_timer_cancel(loop, UINT64_MAX), -ENOENT);
    ROW("evloop_timer_cancel", "right slot, wrong generation",
        evloop_timer_cancel(loop, id + (UINT64_C(1) << 32)), -ENOENT);
    ROW("evloop_timer_cancel", "slot far beyond the slab", evloop_timer_cancel(loop, id | 0xfffff),
        -ENOENT);
    ROW("evloop_timer_cancel", "valid", evloop_timer_cancel(loop, id), 0);
    ROW("evloop_timer_cancel", "twice", evloop_timer_cancel(loop, id), -ENOENT);

    const unsigned bad_events[] = {0, EVLOOP_HANGUP, EVLOOP_ERROR, EVLOOP_READABLE | EVLOOP_HANGUP,
                                   0x10, 0x80000000u, ~0u};
    const char *bad_names[] = {"events 0", "events HANGUP (reported only)",
                               "events ERROR (reported only)", "events READABLE|HANGUP",
                               "events 0x10", "events 0x80000000", "events ~0"};
    for (size_t i = 0; i < sizeof bad_events / sizeof bad_events[0]; i++) {
        ROW("evloop_io_add", bad_names[i], evloop_io_add(loop, p[0], bad_events[i], noop_io, NULL),
            -EINVAL);
    }
    ROW("evloop_io_add", "cb NULL", evloop_io_add(loop, p[0], EVLOOP_READABLE, NULL, NULL), -EINVAL);
    ROW("evloop_io_add", "fd -1", evloop_io_add(loop, -1, EVLOOP_READABLE, noop_io, NULL), -EBADF);
    ROW("evloop_io_add", "fd INT_MIN", evloop_io_add(loop, INT_MIN, EVLOOP_READABLE, noop_io, NULL),
        -EBADF);
    ROW("evloop_io_add", "fd INT_MAX", evloop_io_add(loop, INT_MAX, EVLOOP_READABLE, noop_io, NULL),
        -EBADF);
    ROW("evloop_io_add", "closed fd",
        evloop_io_add(loop, closed_fd, EVLOOP_READABLE, noop_io, NULL), -EBADF);
    int rc = evloop_io_add(loop, regular_fd, EVLOOP_READABLE, noop_io, NULL);
    if (strcmp(backend, "epoll") == 0) {
        ROW("evloop_io_add", "regular file (epoll)", rc, -EPERM);
    } else {
        add_row("evloop_io_add", "regular file (not epoll: -EPERM or 0)", rc, -EPERM, true);
        if (rc == 0)
            evloop_io_remove(loop, regular_fd);
    }
    ROW("evloop_io_add", "valid", evloop_io_add(loop, p[0], EVLOOP_READABLE, noop_io, NULL), 0);
    ROW("evloop_io_add", "twice", evloop_io_add(loop, p[0], EVLOOP_WRITABLE, noop_io, NULL), -EEXIST);
    for (size_t i = 0; i < sizeof bad_events / sizeof bad_events[0]; i++)
        ROW("evloop_io_modify", bad_names[i], evloop_io_modify(loop, p[0], bad_events[i]), -EINVAL);
    ROW("evloop_io_modify", "fd -1", evloop_io_modify(loop, -1, EVLOOP_READABLE), -EBADF);
    ROW("evloop_io_modify", "closed fd", evloop_io_modify(loop, closed_fd, EVLOOP_READABLE), -EBADF);
    ROW("evloop_io_modify", "fd INT_MAX", evloop_io_modify(loop, INT_MAX, EVLOOP_READABLE), -EBADF);
    ROW("evloop_io_modify", "open fd not registered", evloop_io_modify(loop, p[1], EVLOOP_WRITABLE),
        -ENOENT);
    ROW("evloop_io_modify", "valid", evloop_io_modify(loop, p[0], EVLOOP_READABLE), 0);
    ROW("evloop_io_remove", "fd -1", evloop_io_remove(loop, -1), -EBADF);
    ROW("evloop_io_remove", "fd INT_MIN", evloop_io_remove(loop, INT_MIN), -EBADF);
    ROW("evloop_io_remove", "fd INT_MAX", evloop_io_remove(loop, INT_MAX), -ENOENT);
    ROW("evloop_io_remove", "open fd not registered", evloop_io_remove(loop, p[1]), -ENOENT);
    ROW("evloop_io_remove", "valid", evloop_io_remove(loop, p[0]), 0);
    ROW("evloop_io_remove", "twice", evloop_io_remove(loop, p[0]), -ENOENT);
    ROW("evloop_io_modify", "after remove", evloop_io_modify(loop, p[0], EVLOOP_READABLE), -ENOENT);
}

static void test_every_documented_error_from_every_entry_point(void **state)
{
    (void)state;
    g_nrows = 0;
    new_rows();
    null_rows();

    int p[2];
    test_pipe(p);
    int closed[1] = {1000}; /* a number no one holds: never opened in this test */
    while (fcntl(closed[0], F_GETFD) != -1)
        closed[0]++;
    int regular = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
    assert_true(regular >= 0);

    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    running_rows(loop, p, closed[0], regular);
    test_runner_stop(&r);
    stopped_rows(loop, p[0]);
    /* A never-run loop that was stopped: accepted work still runs in free, new is refused. */
    evloop *fresh = test_loop_new(&cfg);
    test_counter ran;
    atomic_init(&ran, 0);
    ROW("evloop_submit", "never-run loop", evloop_submit(fresh, test_count_task, &ran), 0);
    ROW("evloop_stop", "never-run loop", evloop_stop(fresh), 0);
    ROW("evloop_state", "never-run loop after stop", evloop_state(fresh), EVLOOP_TERMINATING);
    ROW("evloop_submit", "never-run loop after stop", evloop_submit(fresh, noop, NULL), -ESHUTDOWN);
    ROW("evloop_free", "never-run stopped loop", evloop_free(fresh), 0);
    ROW("evloop_free", "... ran the accepted task", atomic_load(&ran), 1);

    int bad = 0;
    printf("# %-24s %-58s %8s %8s\n", "entry point", "input", "got", "want");
    for (int i = 0; i < g_nrows; i++) {
        struct row *w = &g_rows[i];
        bool ok = w->got == w->want || (w->either && w->got == 0);
        bad += !ok;
        printf("# %-24s %-58s %8lld %8lld %s\n", w->entry, w->input, w->got, w->want,
               ok ? "" : "MISMATCH");
    }
    printf("# figure: badinput %s.%s: %d table rows, %d mismatches\n", EVLOOP_TEST_VARIANT,
           evloop_backend(loop), g_nrows, bad);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
    close(regular);
    assert_int_equal(bad, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_documented_error_from_every_entry_point),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_badinput", tests, NULL, NULL);
}
