/* "auto" when io_uring cannot start: a seccomp filter installed in this process makes
 * io_uring_setup fail with $BT_REFUSE_ERRNO: EPERM (the default) as containers and
 * kernel.io_uring_disabled do, EINVAL as a kernel older than the backend's Linux 5.18 does (it
 * refuses IORING_SETUP_SUBMIT_ALL), ENOSYS as a kernel without io_uring does. Then "auto" (NULL
 * config, NULL or "auto" backend) must come up on epoll (saying why in evloop_stats().fallback
 * when io_uring came first in its order), so must a profile that picked io_uring, the loop
 * must work, and naming io_uring (in the config or in $EVLOOP_BACKEND) must return -ENOTSUP
 * with the errno in evloop_last_error(). Linux only: built when io_uring and epoll are. */
#include "backend_util.h"

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define ARCH AUDIT_ARCH_AARCH64
#elif defined(__i386__)
#define ARCH AUDIT_ARCH_I386
#endif

/* The errno io_uring_setup fails with in this process. */
static int refused;

/* io_uring_setup fails with err; every other system call is allowed. All threads (TSYNC). */
static int refuse_io_uring_setup(int err)
{
#ifdef ARCH
    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, ARCH, 1, 0),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | ((unsigned)err & SECCOMP_RET_DATA)),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof(filter) / sizeof(filter[0]), filter};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
        return -errno;
    if (syscall(SYS_seccomp, SECCOMP_SET_MODE_FILTER, SECCOMP_FILTER_FLAG_TSYNC, &prog) != 0)
        return -errno;
    return 0;
#else
    (void)err;
    return -ENOSYS;
#endif
}

static void test_io_uring_setup_fails_with_the_errno_asked_for(void **state)
{
    (void)state;
    char params[120] = {0}; /* struct io_uring_params */
    assert_int_equal(syscall(__NR_io_uring_setup, 4, params), -1);
    assert_int_equal(errno, refused);
}

/* auto comes up on epoll; if io_uring came before it in auto's order (backend.c), fallback
 * says io_uring was refused, with the errno, else it is empty. */
static void check_fallback(evloop *loop)
{
    assert_string_equal(evloop_backend(loop), "epoll");
    struct evloop_stats st = bt_stats(loop);
    printf("# fallback: \"%s\"; reason: %s\n", st.fallback, st.backend_reason);
    assert_non_null(strstr(st.backend_reason, "auto"));
    if (st.fallback[0]) {
        assert_non_null(strstr(st.fallback, "io_uring"));
        assert_non_null(strstr(st.fallback, strerror(refused)));
    }
}

static void test_auto_falls_back_to_epoll_and_says_why(void **state)
{
    (void)state;
    evloop *loop = NULL;
    assert_int_equal(evloop_new(&loop, NULL), 0);
    check_fallback(loop);
    assert_int_equal(evloop_free(loop), 0);
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "auto";
    assert_int_equal(evloop_new(&loop, &cfg), 0);
    check_fallback(loop);
    assert_int_equal(evloop_free(loop), 0);
}

/* A profile measured where io_uring ran (its pick) loaded where it cannot: the loop comes up
 * through auto, on epoll, and fallback names the profile's pick. Here io_uring is tried first,
 * whatever auto's order. */
static void test_profile_that_picked_io_uring_falls_back_to_epoll(void **state)
{
    (void)state;
    struct evloop_profile p = {.version = EVLOOP_PROFILE_VERSION, .ncpu = 1};
    snprintf(p.backend, sizeof(p.backend), "io_uring");
    p.batch_budget = 1024;
    p.readiness_ns[1] = 1000;
    char path[] = "/tmp/evloop_fallback_profile_XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_int_equal(evloop_profile_save(&p, path), 0);
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.profile = path;
    evloop *loop = NULL;
    int r = evloop_new(&loop, &cfg);
    unlink(path);
    assert_int_equal(r, 0);
    struct evloop_stats st = bt_stats(loop);
    printf("# profile: %s; fallback: \"%s\"; reason: %s\n", st.backend, st.fallback,
           st.backend_reason);
    assert_true(st.profile_loaded);
    assert_string_equal(st.backend, "epoll");
    assert_non_null(strstr(st.backend_reason, "auto"));
    assert_non_null(strstr(st.fallback, "profile's io_uring"));
    assert_int_equal(evloop_free(loop), 0);
}

static void fd_cb(void *arg, int fd, unsigned events)
{
    CHECK(events & EVLOOP_READABLE);
    bt_drain(fd);
    atomic_fetch_add((bt_counter *)arg, 1);
}

static void test_loop_on_the_fallback_backend_runs_tasks_and_fds(void **state)
{
    (void)state;
    evloop *loop = NULL;
    assert_int_equal(evloop_new(&loop, NULL), 0);
    check_fallback(loop);
    int p[2];
    bt_pipe(p);
    bt_counter tasks = 0, reads = 0;
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, fd_cb, &reads), 0);
    struct bt_runner r;
    bt_runner_start(&r, loop);
    for (uint64_t i = 1; i <= 50; i++) {
        assert_int_equal(evloop_submit(loop, bt_count_task, &tasks), 0);
        bt_write_byte(p[1]);
        assert_true(bt_wait_count(&tasks, i));
        assert_true(bt_wait_count(&reads, i));
    }
    assert_int_equal(evloop_io_remove(loop, p[0]), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_naming_io_uring_returns_enotsup(void **state)
{
    (void)state;
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = "io_uring";
    evloop *loop = (evloop *)&cfg;
    assert_int_equal(evloop_new(&loop, &cfg), -ENOTSUP);
    assert_null(loop);
    printf("# %s\n", evloop_last_error());
    assert_non_null(strstr(evloop_last_error(), strerror(refused)));
    setenv("EVLOOP_BACKEND", "io_uring", 1); /* the environment overrides "auto" */
    assert_int_equal(evloop_new(&loop, NULL), -ENOTSUP);
    assert_null(loop);
    unsetenv("EVLOOP_BACKEND");
    cfg.backend = "epoll"; /* the other one still starts by name */
    assert_int_equal(evloop_new(&loop, &cfg), 0);
    assert_string_equal(bt_stats(loop).fallback, "");
    assert_int_equal(evloop_free(loop), 0);
}

int main(void)
{
    unsetenv("EVLOOP_BACKEND");
    const char *err = getenv("BT_REFUSE_ERRNO");
    refused = !err || strcmp(err, "EPERM") == 0 ? EPERM
              : strcmp(err, "EINVAL") == 0      ? EINVAL
              : strcmp(err, "ENOSYS") == 0      ? ENOSYS
                                                : 0;
    if (!refused) {
        printf("# BT_REFUSE_ERRNO=%s: EPERM, EINVAL or ENOSYS\n", err);
        return 1;
    }
    int r = refuse_io_uring_setup(refused);
    if (r < 0) {
        printf("# skipped: cannot install the seccomp filter: %s\n", strerror(-r));
        return BT_SKIP;
    }
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_io_uring_setup_fails_with_the_errno_asked_for),
        cmocka_unit_test(test_auto_falls_back_to_epoll_and_says_why),
        cmocka_unit_test(test_profile_that_picked_io_uring_falls_back_to_epoll),
        cmocka_unit_test(test_loop_on_the_fallback_backend_runs_tasks_and_fds),
        cmocka_unit_test(test_naming_io_uring_returns_enotsup),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
