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

/* ---- evloop_new and the config ----------------------------------------------------------------
 */

static void test_new_with_null_out_returns_einval(void **state)
{
    (void)state;
    assert_rc(evloop_new(NULL, NULL), -EINVAL);
    evloop_config cfg;
    evloop_config_init(&cfg);
    assert_rc(evloop_new(NULL, &cfg), -EINVAL);
}

static void test_new_with_an_unknown_backend_name_returns_einval(void **state)
{
    (void)state;
    const char *names[] = {"nonsense", "epol", "EPOLL ", "io-uring", "select"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        evloop_config cfg;
        evloop_config_init(&cfg);
        cfg.backend = names[i];
        evloop *loop = NULL;
        int rc = evloop_new(&loop, &cfg);
        if (rc != -EINVAL) {
            if (rc == 0)
                evloop_free(loop);
            fail_msg("backend \"%s\": evloop_new returned %d (%s), expected -EINVAL", names[i], rc,
                     evloop_strerror(rc));
        }
    }
}

static void test_new_with_a_spin_below_minus_one_returns_einval(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.spin_ns = -2;
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
    cfg.spin_ns = INT64_MIN;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
}

static void test_new_with_backend_kqueue_on_linux_returns_enotsup(void **state)
{
    (void)state;
#ifdef __linux__
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "kqueue";
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), -ENOTSUP);
#else
    skip();
#endif
}

static void test_new_with_backend_epoll_on_linux_gets_epoll(void **state)
{
    (void)state;
#ifdef __linux__
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "epoll";
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), 0);
    assert_string_equal(evloop_backend(loop), "epoll");
    test_loop_free(loop);
#else
    skip();
#endif
}

static void test_new_with_backend_io_uring_gets_it_or_returns_enotsup(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "io_uring";
    evloop *loop = NULL;
    int rc = evloop_new(&loop, &cfg);
    assert_true(rc == 0 || rc == -ENOTSUP);
    if (rc == 0) {
        assert_string_equal(evloop_backend(loop), "io_uring");
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

/* The detail must contain want (a substring), else the test fails and prints it. */
static void assert_detail_has(const char *want)
{
    const char *d = evloop_last_error();
    assert_non_null(d);
    if (!strstr(d, want))
        fail_msg("evloop_last_error() is \"%s\", expected it to contain \"%s\"", d, want);
}

/* A variable of the environment, saved and restored around a test that changes it. */
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

static void test_last_error_is_never_null(void **state)
{
    (void)state;
    assert_non_null(evloop_last_error());
}

static void test_last_error_names_a_missing_profile_from_the_environment(void **state)
{
    (void)state;
    struct saved_env env;
    env_save(&env, "EVLOOP_PROFILE");
    setenv("EVLOOP_PROFILE", "/nonexistent-evloop-dir/stale-profile", 1);
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, NULL), -ENOENT);
    assert_null(loop);
    assert_detail_has("EVLOOP_PROFILE=/nonexistent-evloop-dir/stale-profile");
    assert_detail_has(strerror(ENOENT));
    env_restore(&env);
}

static void test_last_error_names_the_config_profile_and_a_malformed_file(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.profile = "/nonexistent-evloop-dir/p";
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), -ENOENT);
    assert_detail_has("config.profile=/nonexistent-evloop-dir/p");

    char path[] = "/tmp/evloop-test-bad-profile-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    const char junk[] = "this is not a profile\n";
    assert_int_equal(write(fd, junk, sizeof junk - 1), (ssize_t)(sizeof junk - 1));
    close(fd);
    cfg.profile = path;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
    assert_detail_has("config.profile=");
    assert_detail_has(path);
    assert_detail_has("not a valid evloop profile");
    unlink(path);
}

static void test_last_error_names_an_unknown_backend_and_where_it_came_from(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "foo";
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
    assert_detail_has("config.backend \"foo\": unknown backend");
    assert_detail_has("epoll, io_uring, kqueue, auto");

    struct saved_env env;
    env_save(&env, "EVLOOP_BACKEND");
    setenv("EVLOOP_BACKEND", "epol", 1);
    assert_rc(evloop_new(&loop, NULL), -EINVAL);
    assert_detail_has("EVLOOP_BACKEND \"epol\": unknown backend");
    env_restore(&env);
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
    assert_detail_has("config.backend \"kqueue\": not built into this library");
#else
    skip();
#endif
}

static void test_last_error_names_a_spin_below_minus_one(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.spin_ns = -7;
    evloop *loop = NULL;
    assert_rc(evloop_new(&loop, &cfg), -EINVAL);
    assert_detail_has("config.spin_ns -7");
    assert_rc(evloop_new(NULL, NULL), -EINVAL);
    assert_detail_has("out: NULL");
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
    assert_detail_has("\"this-thread\"");
    assert_null(strstr(evloop_last_error(), "another-thread"));
}

/* ---- NULL loop, NULL callback -------------------------------------------------------------------
 */

static void test_every_entry_point_returns_einval_for_a_null_loop(void **state)
{
    (void)state;
    int p[2];
    test_pipe(p);
    evloop_timer_id id = 0;
    struct evloop_stats st;
    assert_rc(evloop_run(NULL), -EINVAL);
    assert_rc(evloop_stop(NULL), -EINVAL);
    assert_rc(evloop_submit(NULL, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_submit_internal(NULL, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_queue_microtask(NULL, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_timer_start(NULL, 0, 0, test_never_task, NULL, &id), -EINVAL);
    assert_rc(evloop_timer_cancel(NULL, 1), -EINVAL);
    assert_rc(evloop_io_add(NULL, p[0], EVLOOP_READABLE, test_never_io, NULL), -EINVAL);
    assert_rc(evloop_io_modify(NULL, p[0], EVLOOP_READABLE), -EINVAL);
    assert_rc(evloop_io_remove(NULL, p[0]), -EINVAL);
    assert_rc(evloop_stats(NULL, &st), -EINVAL);
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
    evloop_timer_id id = 0;
    assert_rc(evloop_submit(loop, NULL, NULL), -EINVAL);
    assert_rc(evloop_submit_internal(loop, NULL, NULL), -EINVAL);
    assert_rc(evloop_queue_microtask(loop, NULL, NULL), -EINVAL);
    assert_rc(evloop_timer_start(loop, 0, 0, NULL, NULL, &id), -EINVAL);
    assert_rc(evloop_timer_start(loop, 0, 1000, NULL, NULL, NULL), -EINVAL);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, NULL, NULL), -EINVAL);
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

static void test_io_add_and_modify_with_no_or_unknown_event_bits_return_einval(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    test_write_byte(p[1]);
    const unsigned bad[] = {
        0, 16, 32, 0x80000000u, EVLOOP_READABLE | 16u, EVLOOP_WRITABLE | 0x100u, ~0u};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = evloop_io_add(loop, p[0], bad[i], test_never_io, "fd with bad bits fired");
        if (rc != -EINVAL)
            fail_msg("io_add events %#x returned %d (%s), expected -EINVAL", bad[i], rc,
                     evloop_strerror(rc));
    }
    assert_rc(evloop_io_remove(loop, p[0]), -ENOENT);
    /* modify of a registered fd: the same rule, and the registration is unchanged */
    int s[2];
    test_socketpair(s);
    assert_rc(evloop_io_add(loop, s[0], EVLOOP_READABLE, test_never_io, "idle socket fired"), 0);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int rc = evloop_io_modify(loop, s[0], bad[i]);
        if (rc != -EINVAL)
            fail_msg("io_modify events %#x returned %d (%s), expected -EINVAL", bad[i], rc,
                     evloop_strerror(rc));
    }
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
    assert_rc(evloop_io_add(loop, -1, EVLOOP_READABLE, test_never_io, NULL), -EBADF);
    assert_rc(evloop_io_add(loop, INT_MIN, EVLOOP_READABLE, test_never_io, NULL), -EBADF);
    int fd = closed_fd();
    assert_rc(evloop_io_add(loop, fd, EVLOOP_READABLE, test_never_io, NULL), -EBADF);
    assert_rc(evloop_io_add(loop, 1 << 29, EVLOOP_WRITABLE, test_never_io, NULL), -EBADF);
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
    assert_rc(evloop_run(loop), -ESHUTDOWN);
    assert_rc(evloop_submit(loop, test_never_task, NULL), -ESHUTDOWN);
    assert_rc(evloop_submit_internal(loop, test_never_task, NULL), -ESHUTDOWN);
    assert_rc(evloop_queue_microtask(loop, test_never_task, NULL), -ESHUTDOWN);
    assert_rc(evloop_timer_start(loop, 0, 0, test_never_task, NULL, NULL), -ESHUTDOWN);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, NULL), -ESHUTDOWN);
    assert_rc(evloop_stop(loop), 0);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* ---- strerror
 * ------------------------------------------------------------------------------------- */

static void test_strerror_gives_a_distinct_message_for_every_documented_error(void **state)
{
    (void)state;
    const int errs[] = {-EINVAL, -ESHUTDOWN, -ENOTSUP, -EBADF, -EEXIST,
                        -ENOENT, -EBUSY,     -ENOMEM,  -EPERM};
    const size_t n = sizeof errs / sizeof errs[0];
    const char *msgs[sizeof errs / sizeof errs[0]];
    for (size_t i = 0; i < n; i++) {
        msgs[i] = evloop_strerror(errs[i]);
        assert_non_null(msgs[i]);
        assert_true(strlen(msgs[i]) > 0);
        for (size_t j = 0; j < i; j++)
            if (strcmp(msgs[i], msgs[j]) == 0)
                fail_msg("%d and %d share the message \"%s\"", errs[i], errs[j], msgs[i]);
    }
    const char *ok = evloop_strerror(0);
    assert_non_null(ok);
    assert_true(strlen(ok) > 0);
}

static void test_strerror_gives_a_message_for_unknown_codes(void **state)
{
    (void)state;
    const int codes[] = {-9999, -4096, 1, 12345, INT_MAX, -INT_MAX, -EAGAIN};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *m = evloop_strerror(codes[i]);
        assert_non_null(m);
        assert_true(strlen(m) > 0);
    }
}

/* Regression: evloop_strerror(INT_MIN) negated INT_MIN (signed overflow, undefined; UBSan
 * aborts). Kept last: under UBSan a failure ends the program. */
static void test_strerror_of_int_min_gives_a_message_without_overflow(void **state)
{
    (void)state;
    const char *m = evloop_strerror(INT_MIN);
    assert_non_null(m);
    assert_true(strlen(m) > 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_with_null_out_returns_einval),
        cmocka_unit_test(test_new_with_an_unknown_backend_name_returns_einval),
        cmocka_unit_test(test_new_with_a_spin_below_minus_one_returns_einval),
        cmocka_unit_test(test_new_with_backend_kqueue_on_linux_returns_enotsup),
        cmocka_unit_test(test_new_with_backend_epoll_on_linux_gets_epoll),
        cmocka_unit_test(test_new_with_backend_io_uring_gets_it_or_returns_enotsup),
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
