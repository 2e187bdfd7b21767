/* Every error of the embedding API (issue 13) from every new entry point, in test_errors.c's
 * style: -EINVAL (NULL loop or callback, a timeout below -1, a bad signal number, an unknown
 * hook), -EEXIST, -ENOENT, -EBUSY, -ESHUTDOWN; a failed call never schedules its callback.
 * (None of the new calls takes an fd: evloop_backend_fd returns one.) */
#include "test_util.h"

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <unistd.h>

static void test_every_new_entry_point_returns_einval_for_a_null_loop(void **state)
{
    (void)state;
    assert_rc(evloop_run_once(NULL, 0), -EINVAL);
    assert_rc(evloop_run_once(NULL, -1), -EINVAL);
    assert_rc(evloop_backend_fd(NULL), -EINVAL);
    assert_int_equal(evloop_backend_timeout_ns(NULL), -EINVAL);
    assert_rc(evloop_signal_start(NULL, SIGUSR1, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_signal_stop(NULL, SIGUSR1), -EINVAL);
    assert_rc(evloop_timer_again(NULL, 1, 0), -EINVAL);
    assert_rc(evloop_hook_add(NULL, EVLOOP_HOOK_PREPARE, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_hook_remove(NULL, EVLOOP_HOOK_PREPARE, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_set_release_cb(NULL, test_never_task), -EINVAL);
    assert_false(evloop_on_loop_thread(NULL));
    assert_non_null(evloop_version());
}

static void test_run_once_with_a_timeout_below_minus_one_returns_einval(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter n = 0;
    assert_rc(evloop_submit(loop, test_count_task, &n), 0);
    assert_rc(evloop_run_once(loop, -2), -EINVAL);
    assert_rc(evloop_run_once(loop, INT64_MIN), -EINVAL);
    assert_int_equal(n, 0); /* a refused call runs nothing */
    assert_int_equal(evloop_state(loop), EVLOOP_AWAKE);
    test_loop_free(loop);
    assert_int_equal(n, 1); /* accepted, so run at free */
}

static void test_signal_start_of_a_bad_signal_number_returns_einval(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int bad[] = {0, -1, SIGKILL, SIGSTOP, NSIG, NSIG + 1, 1000, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
        assert_rc(evloop_signal_start(loop, bad[i], test_never_task, NULL), -EINVAL);
#ifdef __GLIBC__
    /* glibc keeps the first two real-time signals for itself: sigaction refuses them. */
    assert_rc(evloop_signal_start(loop, 32, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_signal_start(loop, 33, test_never_task, NULL), -EINVAL);
    assert_rc(evloop_signal_stop(loop, 32), -ENOENT);
#endif
    assert_rc(evloop_signal_start(loop, SIGUSR1, NULL, NULL), -EINVAL);
    int out_of_range[] = {0, -1, NSIG, INT_MAX, INT_MIN};
    for (size_t i = 0; i < sizeof(out_of_range) / sizeof(out_of_range[0]); i++)
        assert_rc(evloop_signal_stop(loop, out_of_range[i]), -EINVAL);
    assert_rc(evloop_signal_stop(loop, SIGUSR1), -ENOENT);
    assert_rc(evloop_signal_stop(loop, SIGKILL), -ENOENT);
    test_loop_free(loop);
}

static void test_signal_start_twice_is_eexist_and_by_another_loop_is_ebusy(void **state)
{
    (void)state;
    evloop *a = test_loop_new(NULL), *b = test_loop_new(NULL);
    test_counter n = 0;
    assert_rc(evloop_signal_start(a, SIGUSR2, test_count_task, &n), 0);
    assert_rc(evloop_signal_start(a, SIGUSR2, test_never_task, NULL), -EEXIST);
    assert_rc(evloop_signal_start(b, SIGUSR2, test_never_task, NULL), -EBUSY);
    assert_rc(evloop_signal_stop(b, SIGUSR2), -ENOENT);
    assert_int_equal(raise(SIGUSR2), 0);
    assert_int_equal(evloop_run_once(a, 0), 1); /* the first watch's callback only */
    assert_int_equal(evloop_run_once(b, 0), 0);
    assert_int_equal(n, 1);
    test_loop_free(a);
    test_loop_free(b);
}

static void test_hook_calls_with_a_bad_when_or_null_cb_return_einval(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int bad[] = {2, 3, -1, 100, INT_MAX};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        assert_rc(evloop_hook_add(loop, (enum evloop_hook)bad[i], test_never_task, NULL), -EINVAL);
        assert_rc(evloop_hook_remove(loop, (enum evloop_hook)bad[i], test_never_task, NULL),
                  -EINVAL);
    }
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, NULL, NULL), -EINVAL);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_CHECK, NULL, NULL), -EINVAL);
    assert_int_equal(evloop_run_once(loop, 0), 0); /* no hook was added */
    test_loop_free(loop);
}

static void test_hook_add_twice_is_eexist_and_remove_of_an_unknown_hook_is_enoent(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    test_counter n = 0;
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, test_count_task, &n), 0);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, test_count_task, &n), -EEXIST);
    /* Same cb and arg at the other point, or another arg: a different hook. */
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, test_count_task, &n), 0);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_CHECK, test_count_task, NULL), -ENOENT);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_CHECK, test_never_task, &n), -ENOENT);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_CHECK, test_count_task, &n), 0);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_CHECK, test_count_task, &n), -ENOENT);
    assert_int_equal(evloop_run_once(loop, 0), 0);
    assert_int_equal(n, 1); /* the PREPARE one, once */
    test_loop_free(loop);
}

static void test_hook_calls_from_another_thread_while_the_loop_runs_return_ebusy(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, test_never_task, NULL), -EBUSY);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_PREPARE, test_never_task, NULL), -EBUSY);
    test_runner_stop(&r);
    test_loop_free(loop);
}

static void test_timer_again_of_an_unknown_id_returns_enoent(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    evloop_timer_id ids[] = {0, 1, UINT64_MAX, (uint64_t)7 << 32 | 3};
    for (size_t i = 0; i < sizeof(ids) / sizeof(ids[0]); i++)
        assert_rc(evloop_timer_again(loop, ids[i], 0), -ENOENT);
    test_loop_free(loop);
}

static void test_new_calls_on_a_stopped_or_terminated_loop_return_eshutdown(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    evloop_timer_id id;
    assert_rc(evloop_timer_start(loop, 10000000000ull, 0, test_never_task, NULL, &id), 0);
    assert_rc(evloop_stop(loop), 0);
    assert_rc(evloop_signal_start(loop, SIGUSR1, test_never_task, NULL), -ESHUTDOWN);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_PREPARE, test_never_task, NULL), -ESHUTDOWN);
    assert_rc(evloop_timer_again(loop, id, 0), -ESHUTDOWN);
    assert_true(evloop_run_once(loop, 0) >= 0);
    assert_int_equal(evloop_state(loop), EVLOOP_TERMINATED);
    assert_rc(evloop_run_once(loop, 0), -ESHUTDOWN);
    assert_rc(evloop_run_once(loop, -1), -ESHUTDOWN);
    assert_rc(evloop_signal_start(loop, SIGUSR1, test_never_task, NULL), -ESHUTDOWN);
    assert_rc(evloop_hook_add(loop, EVLOOP_HOOK_CHECK, test_never_task, NULL), -ESHUTDOWN);
    assert_rc(evloop_timer_again(loop, id, 0), -ESHUTDOWN);
    assert_rc(evloop_signal_stop(loop, SIGUSR1), -ENOENT);
    assert_rc(evloop_hook_remove(loop, EVLOOP_HOOK_CHECK, test_never_task, NULL), -ENOENT);
    assert_rc(evloop_set_release_cb(loop, NULL), 0);
    int fd = evloop_backend_fd(loop);
    assert_true(fd >= 0 || fd == -ENOTSUP);
    if (fd >= 0)
        assert_int_equal(evloop_backend_timeout_ns(loop), 0); /* call run_once: -ESHUTDOWN */
    test_loop_free(loop);
}

static void test_backend_fd_is_enotsup_or_a_valid_fd(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int fd = evloop_backend_fd(loop);
    if (fd == -ENOTSUP) {
        assert_int_equal(evloop_backend_timeout_ns(loop), -ENOTSUP);
    } else {
        assert_true(fd >= 0);
        assert_true(fcntl(fd, F_GETFD) & FD_CLOEXEC);
        assert_int_equal(evloop_backend_fd(loop), fd);
    }
    test_loop_free(loop);
}

static void test_strerror_has_a_message_for_every_new_error(void **state)
{
    (void)state;
    int codes[] = {-EINVAL, -EEXIST, -ENOENT, -EBUSY, -ESHUTDOWN, -ENOTSUP};
    for (size_t i = 0; i < sizeof(codes) / sizeof(codes[0]); i++) {
        const char *m = evloop_strerror(codes[i]);
        assert_non_null(m);
        assert_true(m[0] != '\0');
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_new_entry_point_returns_einval_for_a_null_loop),
        cmocka_unit_test(test_run_once_with_a_timeout_below_minus_one_returns_einval),
        cmocka_unit_test(test_signal_start_of_a_bad_signal_number_returns_einval),
        cmocka_unit_test(test_signal_start_twice_is_eexist_and_by_another_loop_is_ebusy),
        cmocka_unit_test(test_hook_calls_with_a_bad_when_or_null_cb_return_einval),
        cmocka_unit_test(test_hook_add_twice_is_eexist_and_remove_of_an_unknown_hook_is_enoent),
        cmocka_unit_test(test_hook_calls_from_another_thread_while_the_loop_runs_return_ebusy),
        cmocka_unit_test(test_timer_again_of_an_unknown_id_returns_enoent),
        cmocka_unit_test(test_new_calls_on_a_stopped_or_terminated_loop_return_eshutdown),
        cmocka_unit_test(test_backend_fd_is_enotsup_or_a_valid_fd),
        cmocka_unit_test(test_strerror_has_a_message_for_every_new_error),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("embed_errors", tests, NULL, NULL);
}
