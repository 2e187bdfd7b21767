/* Every error of api.md from every entry point: -EINVAL (NULL loop or callback, unknown or
 * no event bits, unknown backend name, bad config), -ENOTSUP (a backend that cannot exist
 * here), -EBADF (negative and closed fds), -EEXIST, -ENOENT, -EBUSY, -ESHUTDOWN; a failed
 * call never schedules its callback; evloop_strerror has a message for everything.
 * (State-specific errors are also covered in depth by test_lifecycle and test_shutdown.) */
#include "test_util.h"

#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A loop whose rejected calls are checked at the end: run it to its end, so a callback a
 * failed call scheduled anyway would run (test_never_* CHECK-fail), then free it. */
static void run_and_free(evloop *loop)
{
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    test_loop_free(loop);
}

/* The detail must contain want (a substring), else the test fails and prints it with the
 * case's name. */
static void assert_detail_has(const char *name, const char *want)
{
    const char *d = evloop_last_error();
    assert_non_null(d);
    if (!strstr(d, want))
        fail_msg("%s: evloop_last_error() is \"%s\", expected it to contain \"%s\"", name, d, want);
}

/* A variable of the environment, saved and restored around a call that changes it. */
struct saved_env {
    const char *name;
    char value[512];
    bool set;
};

static void env_save(struct saved_env *e, const char *name)
{
    e->name = name;
    const char *v = getenv(name);
    e->set = v != NULL;
    snprintf(e->value, sizeof e->value, "%s", v ? v : "");
}

static void env_restore(const struct saved_env *e)
{
    if (e->set)
        setenv(e->name, e->value, 1);
    else
        unsetenv(e->name);
}

/* ---- evloop_new and the config ----------------------------------------------------------------
 */

/* evloop_new with one thing wrong, as a row: what it returns (out stays NULL) and what
 * evloop_last_error() then contains. The config is evloop_config_init's but where the row
 * says otherwise. */
struct refused_new {
    const char *name;            /* what is wrong, for the failure message */
    bool no_out, no_cfg;         /* pass NULL as out, as cfg */
    const char *backend;         /* config.backend, unless NULL */
    const char *profile;         /* config.profile, unless NULL */
    int64_t spin_ns;             /* config.spin_ns, unless 0 */
    const char *env, *env_value; /* a variable set for the call alone, unless env is NULL */
    int want;
    const char *detail[3]; /* substrings of the last error, up to the first NULL */
};

static void expect_new_refused(const struct refused_new *rows, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const struct refused_new *row = &rows[i];
        evloop_config cfg;
        evloop_config_init(&cfg);
        if (row->backend)
            cfg.backend = row->backend;
        if (row->profile)
            cfg.profile = row->profile;
        if (row->spin_ns)
            cfg.spin_ns = row->spin_ns;
        struct saved_env env;
        if (row->env) {
            env_save(&env, row->env);
            setenv(row->env, row->env_value, 1);
        }
        evloop *loop = NULL;
        int rc = evloop_new(row->no_out ? NULL : &loop, row->no_cfg ? NULL : &cfg);
        if (row->env)
            env_restore(&env);
        if (rc == 0)
            evloop_free(loop);
        test_assert_rc(rc, row->want, row->name, __FILE__, __LINE__);
        if (loop)
            fail_msg("%s: evloop_new failed but set *out", row->name);
        for (size_t d = 0; d < sizeof row->detail / sizeof row->detail[0] && row->detail[d]; d++)
            assert_detail_has(row->name, row->detail[d]);
    }
}

static void test_new_with_null_out_returns_einval(void **state)
{
    (void)state;
    static const struct refused_new rows[] = {
        {"NULL out, NULL config", .no_out = true, .no_cfg = true, .want = -EINVAL},
        {"NULL out, a config", .no_out = true, .want = -EINVAL},
    };
    expect_new_refused(rows, sizeof rows / sizeof rows[0]);
}

static void test_new_with_an_unknown_backend_name_returns_einval(void **state)
{
    (void)state;
    static const struct refused_new rows[] = {
        {"backend \"nonsense\"", .backend = "nonsense", .want = -EINVAL},
        {"backend \"epol\"", .backend = "epol", .want = -EINVAL},
        {"backend \"EPOLL \"", .backend = "EPOLL ", .want = -EINVAL},
        {"backend \"io-uring\"", .backend = "io-uring", .want = -EINVAL},
        {"backend \"select\"", .backend = "select", .want = -EINVAL},
    };
    expect_new_refused(rows, sizeof rows / sizeof rows[0]);
}

static void test_new_with_a_spin_below_minus_one_returns_einval(void **state)
{
    (void)state;
    static const struct refused_new rows[] = {
        {"spin_ns -2", .spin_ns = -2, .want = -EINVAL},
        {"spin_ns INT64_MIN", .spin_ns = INT64_MIN, .want = -EINVAL},
    };
    expect_new_refused(rows, sizeof rows / sizeof rows[0]);
}

/* evloop_new with a backend named in the config: a loop on that backend, or -ENOTSUP where
 * it cannot exist here. One cmocka test a row, named in main(). */
struct named_backend {
    const char *backend;
    bool linux_only;     /* the row holds on Linux; elsewhere its test skips */
    int want;            /* 0: the loop runs on the backend named */
    bool may_be_missing; /* -ENOTSUP is right too (a kernel or a build without it) */
};

static struct named_backend kqueue_on_linux = {"kqueue", true, -ENOTSUP, false};
static struct named_backend epoll_on_linux = {"epoll", true, 0, false};
static struct named_backend io_uring_anywhere = {"io_uring", false, 0, true};

static void new_with_a_named_backend(void **state)
{
    const struct named_backend *b = *state;
#ifndef __linux__
    if (b->linux_only)
        skip();
#endif
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = b->backend;
    evloop *loop = NULL;
    int rc = evloop_new(&loop, &cfg);
    if (b->may_be_missing && rc == -ENOTSUP)
        return;
    test_assert_rc(rc, b->want, b->backend, __FILE__, __LINE__);
    if (rc == 0) {
        assert_string_equal(evloop_backend(loop), b->backend);
        test_loop_free(loop);
    }
}

static void test_config_init_sets_the_documented_defaults(void **state)
{
    (void)state;
    evloop_config cfg;
    memset(&cfg, 0x5a, sizeof cfg);
    evloop_config_init(&cfg);
    assert_true(cfg.backend == NULL || strcmp(cfg.backend, "auto") == 0);
    assert_int_equal(cfg.batch_budget, 0);
    assert_true(cfg.spin_ns == -1);
    assert_false(cfg.auto_exit);
    evloop_config_init(NULL); /* ignored */
}

/* ---- evloop_last_error: which argument, variable or file (issue 13, item 6) --------------------
 */

static void test_last_error_is_never_null(void **state)
{
    (void)state;
    assert_non_null(evloop_last_error());
}

static void test_last_error_names_a_missing_profile_from_the_environment(void **state)
{
    (void)state;
    static const struct refused_new rows[] = {
        {"EVLOOP_PROFILE naming no file", .no_cfg = true, .env = "EVLOOP_PROFILE",
         .env_value = "/nonexistent-evloop-dir/stale-profile", .want = -ENOENT,
         .detail = {"EVLOOP_PROFILE=/nonexistent-evloop-dir/stale-profile"}},
    };
    expect_new_refused(rows, sizeof rows / sizeof rows[0]);
    assert_detail_has(rows[0].name, strerror(ENOENT));
}

static void test_last_error_names_the_config_profile_and_a_malformed_file(void **state)
{
    (void)state;
    char path[] = "/tmp/evloop-test-bad-profile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char junk[] = "this is not a profile\n";
    assert_int_equal(write(fd, junk, sizeof junk - 1), (ssize_t)(sizeof junk - 1));
    close(fd);
    const struct refused_new rows[] = {
        {"config.profile naming no file", .profile = "/nonexistent-evloop-dir/p", .want = -ENOENT,
         .detail = {"config.profile=/nonexistent-evloop-dir/p"}},
        {"config.profile naming a malformed file", .profile = path, .want = -EINVAL,
         .detail = {"config.profile=", path, "not a valid evloop profile"}},
    };
    expect_new_refused(rows, sizeof rows / sizeof rows[0]);
    unlink(path);
}

static void test_last_error_names_an_unknown_backend_and_where_it_came_from(void **state)
{
    (void)state;
    static const struct refused_new rows[] = {
        {"config.backend \"foo\"", .backend = "foo", .want = -EINVAL,
         .detail = {"config.backend \"foo\": unknown backend", "epoll, io_uring, kqueue, auto"}},
        {"EVLOOP_BACKEND \"epol\"", .no_cfg = true, .env = "EVLOOP_BACKEND", .env_value = "epol",
         .want = -EINVAL, .detail = {"EVLOOP_BACKEND \"epol\": unknown backend"}},
    };
    expect_new_refused(rows, sizeof rows / sizeof rows[0]);
}

static void test_last_error_says_a_backend_is_not_built_here(void **state)
{
    (void)state;
#ifdef __linux__
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "kqueue";
    evloop *loop = NULL;
    int rc = evloop_new(&loop, &cfg);
    if (rc == 0) { /* built against libkqueue (EVLOOP_WITH_KQUEUE) */
        test_loop_free(loop);
        skip();
    }
    assert_rc(rc, -ENOTSUP);
    assert_detail_has("kqueue", "config.backend \"kqueue\": not built into this library");
#else
    skip();
#endif
}

static void test_last_error_names_a_spin_below_minus_one(void **state)
{
    (void)state;
    static const struct refused_new rows[] = {
        {"spin_ns -7", .spin_ns = -7, .want = -EINVAL, .detail = {"config.spin_ns -7"}},
        {"NULL out", .no_out = true, .no_cfg = true, .want = -EINVAL, .detail = {"out: NULL"}},
    };
    expect_new_refused(rows, sizeof rows / sizeof rows[0]);
}

static void test_last_error_is_empty_after_a_success(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "foo";
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
    assert_true(strlen(evloop_last_error()) > 0);
    loop = test_loop_new(NULL);
    assert_string_equal(evloop_last_error(), "");
    test_loop_free(loop);
}

static void *fail_a_new(void *arg)
{
    (void)arg;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "from-another-thread";
    evloop *loop = NULL;
    return (void *)(intptr_t)evloop_new(&loop, &cfg);
}

static void test_last_error_is_per_thread(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "this-thread";
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, fail_a_new, NULL), 0);
    void *rc = NULL;
    assert_int_equal(pthread_join(t, &rc), 0);
    assert_int_equal((int)(intptr_t)rc, -EINVAL);
    assert_detail_has("this thread", "\"this-thread\"");
    assert_null(strstr(evloop_last_error(), "another-thread"));
}

/* ---- every entry point, one row each ------------------------------------------------------------
 */

enum entry {
    RUN,
    STOP,
    SUBMIT,
    SUBMIT_INTERNAL,
    QUEUE_MICROTASK,
    TIMER_START,
    TIMER_CANCEL,
    IO_ADD,
    IO_MODIFY,
    IO_REMOVE,
    STATS
};

/* A call to an entry point. Its callback is test_never_task or test_never_io (NULL where
 * the caller says so), its arg NULL, its fd the caller's, its events EVLOOP_READABLE, a timer
 * one due at once, cancelled id 1. */
struct entry_call {
    const char *name; /* for the failure message */
    enum entry entry;
    uint64_t interval_ns; /* TIMER_START */
    bool want_id;         /* TIMER_START: pass an id out (else NULL) */
};

static int call_entry(const struct entry_call *c, evloop *loop, bool null_cb, int fd)
{
    evloop_cb task = null_cb ? NULL : test_never_task;
    evloop_io_cb io = null_cb ? NULL : test_never_io;
    evloop_timer_id id = 0;
    struct evloop_stats st;
    switch (c->entry) {
    case RUN: return evloop_run(loop);
    case STOP: return evloop_stop(loop);
    case SUBMIT: return evloop_submit(loop, task, NULL);
    case SUBMIT_INTERNAL: return evloop_submit_internal(loop, task, NULL);
    case QUEUE_MICROTASK: return evloop_queue_microtask(loop, task, NULL);
    case TIMER_START:
        return evloop_timer_start(loop, 0, c->interval_ns, task, NULL, c->want_id ? &id : NULL);
    case TIMER_CANCEL: return evloop_timer_cancel(loop, 1);
    case IO_ADD: return evloop_io_add(loop, fd, EVLOOP_READABLE, io, NULL);
    case IO_MODIFY: return evloop_io_modify(loop, fd, EVLOOP_READABLE);
    case IO_REMOVE: return evloop_io_remove(loop, fd);
    default: /* STATS */ return evloop_stats(loop, &st);
    }
}

/* Makes each call and asserts it returns want; a failure names the call. */
static void expect_each(const struct entry_call *calls, size_t n, evloop *loop, bool null_cb,
                        int fd, int want)
{
    for (size_t i = 0; i < n; i++)
        test_assert_rc(call_entry(&calls[i], loop, null_cb, fd), want, calls[i].name, __FILE__,
                       __LINE__);
}

static void test_every_entry_point_returns_einval_for_a_null_loop(void **state)
{
    (void)state;
    int p[2];
    test_pipe(p);
    static const struct entry_call calls[] = {
        {.name = "evloop_run", .entry = RUN},
        {.name = "evloop_stop", .entry = STOP},
        {.name = "evloop_submit", .entry = SUBMIT},
        {.name = "evloop_submit_internal", .entry = SUBMIT_INTERNAL},
        {.name = "evloop_queue_microtask", .entry = QUEUE_MICROTASK},
        {.name = "evloop_timer_start", .entry = TIMER_START, .want_id = true},
        {.name = "evloop_timer_cancel", .entry = TIMER_CANCEL},
        {.name = "evloop_io_add", .entry = IO_ADD},
        {.name = "evloop_io_modify", .entry = IO_MODIFY},
        {.name = "evloop_io_remove", .entry = IO_REMOVE},
        {.name = "evloop_stats", .entry = STATS},
    };
    expect_each(calls, sizeof calls / sizeof calls[0], NULL, false, p[0], -EINVAL);
    assert_int_equal(evloop_state(NULL), EVLOOP_TERMINATED);
    assert_null(evloop_backend(NULL));
    assert_rc(evloop_free(NULL), 0);
    close(p[0]);
    close(p[1]);
    assert_checks_passed();
}

static void test_every_entry_point_returns_einval_for_a_null_callback(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    static const struct entry_call calls[] = {
        {.name = "evloop_submit", .entry = SUBMIT},
        {.name = "evloop_submit_internal", .entry = SUBMIT_INTERNAL},
        {.name = "evloop_queue_microtask", .entry = QUEUE_MICROTASK},
        {.name = "evloop_timer_start with an id out", .entry = TIMER_START, .want_id = true},
        {.name = "evloop_timer_start repeating, no id out",
         .entry = TIMER_START,
         .interval_ns = 1000},
        {.name = "evloop_io_add", .entry = IO_ADD},
    };
    expect_each(calls, sizeof calls / sizeof calls[0], loop, true, p[0], -EINVAL);
    /* the fd was not registered by the failed add */
    assert_rc(evloop_io_remove(loop, p[0]), -ENOENT);
    run_and_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_stats_with_a_null_out_returns_einval(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_stats(loop, NULL), -EINVAL);
    test_loop_free(loop);
}

/* ---- event bits ---------------------------------------------------------------------------------
 */

/* Every value here is refused with -EINVAL by io_add (modify false) or io_modify of fd. */
static void expect_bad_bits_refused(evloop *loop, int fd, bool modify)
{
    static const unsigned bad[] = {
        0, 16, 32, 0x80000000u, EVLOOP_READABLE | 16u, EVLOOP_WRITABLE | 0x100u, ~0u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = modify ? evloop_io_modify(loop, fd, bad[i])
                        : evloop_io_add(loop, fd, bad[i], test_never_io, "fd with bad bits fired");
        if (rc != -EINVAL)
            fail_msg("%s events %#x returned %d (%s), expected -EINVAL",
                     modify ? "io_modify" : "io_add", bad[i], rc, evloop_strerror(rc));
    }
}

static void test_io_add_and_modify_with_no_or_unknown_event_bits_return_einval(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    test_write_byte(p[1]);
    expect_bad_bits_refused(loop, p[0], false);
    assert_rc(evloop_io_remove(loop, p[0]), -ENOENT);
    /* modify of a registered fd: the same rule, and the registration is unchanged */
    int s[2];
    test_socketpair(s);
    assert_rc(evloop_io_add(loop, s[0], EVLOOP_READABLE, test_never_io, "idle socket fired"), 0);
    expect_bad_bits_refused(loop, s[0], true);
    assert_rc(evloop_io_remove(loop, s[0]), 0);
    run_and_free(loop);
    close(p[0]);
    close(p[1]);
    close(s[0]);
    close(s[1]);
}

/* ---- bad fds
 * ------------------------------------------------------------------------------------- */

static int closed_fd(void)
{
    int p[2];
    test_pipe(p);
    close(p[0]);
    close(p[1]);
    return p[0]; /* closed, and (single-threaded here) not reused before the call */
}

static void test_io_add_of_a_negative_or_closed_fd_returns_ebadf(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    const struct {
        const char *name;
        int fd;
        unsigned events;
    } rows[] = {
        {"fd -1", -1, EVLOOP_READABLE},
        {"fd INT_MIN", INT_MIN, EVLOOP_READABLE},
        {"a closed fd", closed_fd(), EVLOOP_READABLE},
        {"fd 1 << 29, never opened", 1 << 29, EVLOOP_WRITABLE},
        {"fd INT_MAX", INT_MAX, EVLOOP_READABLE},
    };
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        test_assert_rc(evloop_io_add(loop, rows[i].fd, rows[i].events, test_never_io, NULL), -EBADF,
                       rows[i].name, __FILE__, __LINE__);
    run_and_free(loop);
}

static void test_io_modify_and_remove_of_a_negative_fd_return_ebadf(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_io_modify(loop, -1, EVLOOP_READABLE), -EBADF);
    assert_rc(evloop_io_remove(loop, -1), -EBADF);
    assert_rc(evloop_io_remove(loop, INT_MIN), -EBADF);
    test_loop_free(loop);
}

static void test_io_modify_and_remove_of_a_closed_unregistered_fd_fail(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int fd = closed_fd();
    int rc = evloop_io_modify(loop, fd, EVLOOP_READABLE);
    assert_true(rc == -EBADF || rc == -ENOENT);
    assert_rc(evloop_io_remove(loop, fd), -ENOENT);
    test_loop_free(loop);
}

/* ---- EEXIST / ENOENT ---------------------------------------------------------------------------
 */

static void test_io_add_twice_returns_eexist_and_keeps_the_first_registration(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    test_counter first = 0;
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_count_io, &first), 0);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, "second add fired"),
              -EEXIST);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_WRITABLE, test_never_io, "second add fired"),
              -EEXIST);
    struct test_runner r;
    test_runner_start(&r, loop);
    test_write_byte(p[1]);
    assert_true(wait_for_count(&first, 1));
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    test_runner_stop(&r);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_io_modify_and_remove_of_an_unregistered_fd_return_enoent(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    assert_rc(evloop_io_modify(loop, p[0], EVLOOP_READABLE), -ENOENT);
    assert_rc(evloop_io_remove(loop, p[0]), -ENOENT);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, "idle pipe fired"), 0);
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    assert_rc(evloop_io_remove(loop, p[0]), -ENOENT);
    assert_rc(evloop_io_modify(loop, p[0], EVLOOP_WRITABLE), -ENOENT);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_timer_cancel_of_an_unknown_id_returns_enoent(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_timer_cancel(loop, 0), -ENOENT);
    assert_rc(evloop_timer_cancel(loop, 42), -ENOENT);
    test_loop_free(loop);
}

/* The extremes of the timer API are values, not errors: a deadline saturates (never fires
 * while the loop lives), an interval of 1 ns fires at most once per tick, and a stale id is
 * -ENOENT for every call that takes one. */
static void test_timers_at_the_extremes_neither_fail_nor_stall(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    evloop_timer_id never, tight;
    assert_rc(evloop_timer_start(loop, UINT64_MAX, UINT64_MAX, test_never_task, NULL, &never), 0);
    assert_rc(evloop_timer_again(loop, never, UINT64_MAX), 0);
    test_counter fired = 0;
    assert_rc(evloop_timer_start(loop, 0, 1, test_count_task, &fired, &tight), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&fired, 3)); /* the loop goes on between periods */
    assert_rc(evloop_timer_cancel(loop, tight), 0);
    assert_rc(evloop_timer_cancel(loop, never), 0);
    assert_rc(evloop_timer_cancel(loop, never), -ENOENT);
    assert_rc(evloop_timer_again(loop, never, 1), -ENOENT);
    assert_rc(evloop_timer_cancel(loop, UINT64_MAX), -ENOENT);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_io_add_of_a_regular_file_under_epoll_returns_eperm(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    if (strcmp(evloop_backend(loop), "epoll") != 0) {
        test_loop_free(loop);
        skip();
    }
    char path[] = "/tmp/evloop-test-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    unlink(path);
    assert_rc(evloop_io_add(loop, fd, EVLOOP_READABLE, test_never_io, "file fired"), -EPERM);
    assert_rc(evloop_io_remove(loop, fd), -ENOENT);
    run_and_free(loop);
    close(fd);
}

/* ---- EBUSY / ESHUTDOWN
 * ---------------------------------------------------------------------------- */

static void test_run_and_free_of_a_running_loop_return_ebusy(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_run(loop), -EBUSY);
    assert_rc(evloop_free(loop), -EBUSY);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_every_entry_point_of_a_terminated_loop_returns_eshutdown(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    assert_rc(evloop_submit(loop, test_stop_task, loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    int p[2];
    test_pipe(p);
    static const struct entry_call calls[] = {
        {.name = "evloop_run", .entry = RUN},
        {.name = "evloop_submit", .entry = SUBMIT},
        {.name = "evloop_submit_internal", .entry = SUBMIT_INTERNAL},
        {.name = "evloop_queue_microtask", .entry = QUEUE_MICROTASK},
        {.name = "evloop_timer_start", .entry = TIMER_START},
        {.name = "evloop_io_add", .entry = IO_ADD},
    };
    expect_each(calls, sizeof calls / sizeof calls[0], loop, false, p[0], -ESHUTDOWN);
    assert_rc(evloop_stop(loop), 0);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* ---- strerror
 * ------------------------------------------------------------------------------------- */

/* evloop_strerror(code), which must be a message: not NULL, not empty. */
static const char *message_of(int code)
{
    const char *m = evloop_strerror(code);
    if (m == NULL || *m == '\0')
        fail_msg("evloop_strerror(%d) gave %s", code, m ? "\"\"" : "NULL");
    return m;
}

static void test_strerror_gives_a_distinct_message_for_every_documented_error(void **state)
{
    (void)state;
    const int errs[] = {-EINVAL, -ESHUTDOWN, -ENOTSUP, -EBADF, -EEXIST,
                        -ENOENT, -EBUSY,     -ENOMEM,  -EPERM};
    const size_t n = sizeof errs / sizeof errs[0];
    const char *msgs[sizeof errs / sizeof errs[0]];
    for (size_t i = 0; i < n; i++) {
        msgs[i] = message_of(errs[i]);
        for (size_t j = 0; j < i; j++)
            if (strcmp(msgs[i], msgs[j]) == 0)
                fail_msg("%d and %d share the message \"%s\"", errs[i], errs[j], msgs[i]);
    }
    message_of(0);
}

static void test_strerror_gives_a_message_for_unknown_codes(void **state)
{
    (void)state;
    const int codes[] = {-9999, -4096, 1, 12345, INT_MAX, -INT_MAX, -EAGAIN};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        message_of(codes[i]);
}

/* Regression: evloop_strerror(INT_MIN) negated INT_MIN (signed overflow, undefined; UBSan
 * aborts). Kept last: under UBSan a failure ends the program. */
static void test_strerror_of_int_min_gives_a_message_without_overflow(void **state)
{
    (void)state;
    message_of(INT_MIN);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_with_null_out_returns_einval),
        cmocka_unit_test(test_new_with_an_unknown_backend_name_returns_einval),
        cmocka_unit_test(test_new_with_a_spin_below_minus_one_returns_einval),
        {"test_new_with_backend_kqueue_on_linux_returns_enotsup", new_with_a_named_backend, NULL,
         NULL, &kqueue_on_linux},
        {"test_new_with_backend_epoll_on_linux_gets_epoll", new_with_a_named_backend, NULL, NULL,
         &epoll_on_linux},
        {"test_new_with_backend_io_uring_gets_it_or_returns_enotsup", new_with_a_named_backend,
         NULL, NULL, &io_uring_anywhere},
        cmocka_unit_test(test_config_init_sets_the_documented_defaults),
        cmocka_unit_test(test_last_error_is_never_null),
        cmocka_unit_test(test_last_error_names_a_missing_profile_from_the_environment),
        cmocka_unit_test(test_last_error_names_the_config_profile_and_a_malformed_file),
        cmocka_unit_test(test_last_error_names_an_unknown_backend_and_where_it_came_from),
        cmocka_unit_test(test_last_error_says_a_backend_is_not_built_here),
        cmocka_unit_test(test_last_error_names_a_spin_below_minus_one),
        cmocka_unit_test(test_last_error_is_empty_after_a_success),
        cmocka_unit_test(test_last_error_is_per_thread),
        cmocka_unit_test(test_every_entry_point_returns_einval_for_a_null_loop),
        cmocka_unit_test(test_every_entry_point_returns_einval_for_a_null_callback),
        cmocka_unit_test(test_stats_with_a_null_out_returns_einval),
        cmocka_unit_test(test_io_add_and_modify_with_no_or_unknown_event_bits_return_einval),
        cmocka_unit_test(test_io_add_of_a_negative_or_closed_fd_returns_ebadf),
        cmocka_unit_test(test_io_modify_and_remove_of_a_negative_fd_return_ebadf),
        cmocka_unit_test(test_io_modify_and_remove_of_a_closed_unregistered_fd_fail),
        cmocka_unit_test(test_io_add_twice_returns_eexist_and_keeps_the_first_registration),
        cmocka_unit_test(test_io_modify_and_remove_of_an_unregistered_fd_return_enoent),
        cmocka_unit_test(test_timer_cancel_of_an_unknown_id_returns_enoent),
        cmocka_unit_test(test_timers_at_the_extremes_neither_fail_nor_stall),
        cmocka_unit_test(test_io_add_of_a_regular_file_under_epoll_returns_eperm),
        cmocka_unit_test(test_run_and_free_of_a_running_loop_return_ebusy),
        cmocka_unit_test(test_every_entry_point_of_a_terminated_loop_returns_eshutdown),
        cmocka_unit_test(test_strerror_gives_a_distinct_message_for_every_documented_error),
        cmocka_unit_test(test_strerror_gives_a_message_for_unknown_codes),
        cmocka_unit_test(test_strerror_of_int_min_gives_a_message_without_overflow),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("errors", tests, NULL, NULL);
}
