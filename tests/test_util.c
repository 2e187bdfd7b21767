/* The helpers of test_util.h, linked into every test executable. */
#include "test_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- waiting ------------------------------------------------------------------------ */

static uint64_t clock_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool wait_until(test_pred pred, void *ctx, int64_t deadline_ms)
{
    uint64_t end = clock_ns() + (uint64_t)deadline_ms * 1000000u;
    long nap_ns = 10000;
    for (;;) {
        if (pred(ctx))
            return true;
        if (clock_ns() >= end)
            return pred(ctx);
        struct timespec ts = {.tv_sec = 0, .tv_nsec = nap_ns};
        nanosleep(&ts, NULL);
        if (nap_ns < 1000000)
            nap_ns *= 2;
    }
}

struct count_goal {
    test_counter *counter;
    uint64_t at_least;
};

static bool count_reached(void *ctx)
{
    struct count_goal *g = ctx;
    return atomic_load_explicit(g->counter, memory_order_acquire) >= g->at_least;
}

bool wait_for_count(test_counter *counter, uint64_t at_least)
{
    struct count_goal g = {counter, at_least};
    return wait_until(count_reached, &g, TEST_DEADLINE_MS);
}

static bool flag_set(void *ctx)
{
    return atomic_load_explicit((atomic_bool *)ctx, memory_order_acquire);
}

bool wait_for_flag(atomic_bool *flag)
{
    return wait_until(flag_set, flag, TEST_DEADLINE_MS);
}

struct state_goal {
    const evloop *loop;
    enum evloop_state state;
};

static bool state_reached(void *ctx)
{
    struct state_goal *g = ctx;
    return evloop_state(g->loop) == g->state;
}

bool wait_for_state(const evloop *loop, enum evloop_state state)
{
    struct state_goal g = {loop, state};
    return wait_until(state_reached, &g, TEST_DEADLINE_MS);
}

static bool is_running(void *ctx)
{
    enum evloop_state s = evloop_state(ctx);
    return s == EVLOOP_RUNNING || s == EVLOOP_SLEEPING;
}

bool wait_for_running(const evloop *loop)
{
    return wait_until(is_running, (void *)loop, TEST_DEADLINE_MS);
}

uint64_t test_sleeps(const evloop *loop)
{
    struct evloop_stats st;
    if (evloop_stats(loop, &st) != 0)
        return 0;
    return st.futex_sleeps + st.poller_sleeps;
}

struct sleep_goal {
    const evloop *loop;
    uint64_t after;
};

static bool slept(void *ctx)
{
    struct sleep_goal *g = ctx;
    return evloop_state(g->loop) == EVLOOP_SLEEPING && test_sleeps(g->loop) > g->after;
}

bool wait_for_sleep(const evloop *loop, uint64_t after)
{
    struct sleep_goal g = {loop, after};
    return wait_until(slept, &g, TEST_DEADLINE_MS);
}

/* ---- checks --------------------------------------------------------------------------- */

static atomic_int check_failures;

static bool count_check_failure(void)
{
    int n = atomic_fetch_add(&check_failures, 1);
    if (n == 20)
        fprintf(stderr, "(more check failures not printed)\n");
    return n < 20;
}

void test_check_failed(const char *expr, const char *file, int line)
{
    if (count_check_failure())
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
}

void test_check_eq_failed(const char *a, const char *b, long long va, long long vb,
                          const char *file, int line)
{
    if (count_check_failure())
        fprintf(stderr, "%s:%d: check failed: %s == %s (%lld != %lld)\n", file, line, a, b, va, vb);
}

int test_take_check_failures(void)
{
    return atomic_exchange(&check_failures, 0);
}

static const char *errno_name(int rc)
{
    switch (-rc) {
    case 0: return "0";
    case EINVAL: return "-EINVAL";
    case ESHUTDOWN: return "-ESHUTDOWN";
    case ENOTSUP: return "-ENOTSUP";
    case EBADF: return "-EBADF";
    case EEXIST: return "-EEXIST";
    case ENOENT: return "-ENOENT";
    case EBUSY: return "-EBUSY";
    case ENOMEM: return "-ENOMEM";
    case EPERM: return "-EPERM";
    case ECANCELED: return "-ECANCELED";
    case EALREADY: return "-EALREADY";
    default: return "?";
    }
}

void test_assert_rc(int got, int want, const char *expr, const char *file, int line)
{
    if (got == want)
        return;
    print_error("%s returned %d (%s, \"%s\"), expected %d (%s)\n", expr, got, errno_name(got),
                evloop_strerror(got), want, errno_name(want));
    _fail(file, line);
}

/* ---- loops ---------------------------------------------------------------------------- */

static const char *wanted_backend(void)
{
    const char *want = getenv("EVLOOP_BACKEND");
    if (!want || !*want || strcmp(want, "auto") == 0)
        return NULL;
    return want;
}

void test_require_backend(void)
{
    const char *filter = getenv("EVLOOP_TEST_FILTER"); /* e.g. "*racing*": run only those */
    if (filter && *filter)
        cmocka_set_test_filter(filter);
    const char *want = wanted_backend();
    evloop *loop = NULL;
    int r = evloop_new(&loop, NULL);
    if (r == -ENOTSUP) {
        printf("# skipped: backend %s cannot start here\n", want ? want : "auto");
        exit(TEST_SKIP_EXIT);
    }
    if (r != 0) {
        fprintf(stderr, "evloop_new(backend %s) failed: %d %s\n", want ? want : "auto", r,
                evloop_strerror(r));
        exit(1);
    }
    const char *got = evloop_backend(loop);
    if (want && (!got || strcmp(got, want) != 0)) {
        struct evloop_stats st;
        memset(&st, 0, sizeof st);
        evloop_stats(loop, &st);
        printf("# skipped: backend %s requested, the loop runs on %s (fallback: %s)\n", want,
               got ? got : "(null)", st.fallback ? st.fallback : "(null)");
        evloop_free(loop);
        exit(TEST_SKIP_EXIT);
    }
    printf("# evloop: backend %s, ingress %s\n", got ? got : "(null)", evloop_ingress());
    evloop_free(loop);
}

evloop *test_loop_new(const evloop_config *cfg)
{
    evloop *loop = NULL;
    int r;
    if (cfg) {
        evloop_config c = *cfg;
        c.backend = NULL;
        r = evloop_new(&loop, &c);
    } else {
        r = evloop_new(&loop, NULL);
    }
    if (r == -ENOTSUP) {
        printf("# skipped: backend cannot start here\n");
        exit(TEST_SKIP_EXIT);
    }
    assert_rc(r, 0);
    assert_non_null(loop);
    return loop;
}

evloop_config test_config_no_spin(void)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.spin_ns = 0;
    return cfg;
}

const char *test_fence_membarrier(void)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.fence = "membarrier";
    evloop *loop = NULL;
    if (evloop_new(&loop, &cfg) != 0)
        return NULL;
    evloop_free(loop);
    return "membarrier";
}

void test_loop_free(evloop *loop)
{
    assert_rc(evloop_free(loop), 0);
    assert_checks_passed();
}

/* ---- a loop on its own thread ------------------------------------------------------------ */

static void *runner_main(void *arg)
{
    struct test_runner *r = arg;
    r->rc = evloop_run(r->loop);
    /* release: pairs with the acquire in wait_for_flag() of test_runner_join() */
    atomic_store_explicit(&r->done, true, memory_order_release);
    return NULL;
}

void test_runner_start(struct test_runner *r, evloop *loop)
{
    r->loop = loop;
    r->rc = -1;
    atomic_init(&r->done, false);
    assert_int_equal(pthread_create(&r->thread, NULL, runner_main, r), 0);
}

int test_runner_join(struct test_runner *r)
{
    if (!wait_for_flag(&r->done))
        fail_msg("evloop_run did not return within %d ms (state %d)", TEST_DEADLINE_MS,
                 (int)evloop_state(r->loop));
    assert_int_equal(pthread_join(r->thread, NULL), 0);
    return r->rc;
}

void test_runner_stop(struct test_runner *r)
{
    assert_rc(evloop_stop(r->loop), 0);
    assert_rc(test_runner_join(r), 0);
}

int test_run_to_end(evloop *loop)
{
    struct test_runner r;
    test_runner_start(&r, loop);
    return test_runner_join(&r);
}

bool test_on_runner_thread(const struct test_runner *r)
{
    return pthread_equal(pthread_self(), r->thread) != 0;
}

/* ---- small callbacks --------------------------------------------------------------------- */

void test_count_task(void *counter)
{
    atomic_fetch_add_explicit((test_counter *)counter, 1, memory_order_acq_rel);
}

void test_count_io(void *counter, int fd, unsigned events)
{
    (void)events;
    test_drain_fd(fd);
    test_count_task(counter);
}

void test_stop_task(void *loop)
{
    CHECK_EQ(evloop_stop(loop), 0);
}

void test_never_task(void *label)
{
    test_check_failed(label ? (const char *)label : "a callback that must never run ran", __FILE__,
                      __LINE__);
}

void test_never_io(void *label, int fd, unsigned events)
{
    fprintf(stderr, "unexpected fd callback: fd %d events %#x\n", fd, events);
    test_never_task(label);
}

void test_gate_task(void *gate)
{
    struct test_gate *g = gate;
    atomic_store_explicit(&g->entered, true, memory_order_release);
    CHECK(wait_for_flag(&g->release));
}

void test_gate_hold(struct test_gate *g, evloop *loop)
{
    atomic_init(&g->entered, false);
    atomic_init(&g->release, false);
    assert_rc(evloop_submit(loop, test_gate_task, g), 0);
    assert_true(wait_for_flag(&g->entered));
}

void test_gate_open(struct test_gate *g)
{
    atomic_store_explicit(&g->release, true, memory_order_release);
}

/* ---- an order log written by callbacks ---------------------------------------------------- */

struct test_log test_log;

void test_log_reset(evloop *loop)
{
    test_log.loop = loop;
    test_log.len = 0;
    atomic_store(&test_log.count, 0);
}

void test_log_add(int tag)
{
    if (test_log.len < TEST_LOG_MAX)
        test_log.tags[test_log.len++] = tag;
    atomic_fetch_add_explicit(&test_log.count, 1, memory_order_release);
}

void test_log_task(void *tag)
{
    test_log_add(test_tag_of(tag));
}

void *test_tag(int tag)
{
    return (void *)(intptr_t)tag;
}

int test_tag_of(void *arg)
{
    return (int)(intptr_t)arg;
}

void test_log_expect(const int *tags, size_t n)
{
    bool same = test_log.len == n;
    for (size_t i = 0; same && i < n; i++)
        same = test_log.tags[i] == tags[i];
    if (same)
        return;
    print_error("order log: got");
    for (size_t i = 0; i < test_log.len && i < 40; i++)
        print_error(" %d", test_log.tags[i]);
    print_error("%s\n           expected", test_log.len > 40 ? " ..." : "");
    for (size_t i = 0; i < n && i < 40; i++)
        print_error(" %d", tags[i]);
    print_error("%s\n", n > 40 ? " ..." : "");
    fail();
}

/* ---- fds --------------------------------------------------------------------------------- */

#if defined(__linux__) || defined(__FreeBSD__) || defined(__NetBSD__) || defined(__OpenBSD__)
void test_pipe(int fds[2])
{
    assert_int_equal(pipe2(fds, O_NONBLOCK | O_CLOEXEC), 0);
}

void test_socketpair(int fds[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, fds), 0);
}
#else /* macOS: pipe2 only from macOS 27 on, no SOCK_NONBLOCK / SOCK_CLOEXEC flags */
static void set_nonblock_cloexec(int fd)
{
    int fl = fcntl(fd, F_GETFL);
    assert_true(fl >= 0 && fcntl(fd, F_SETFL, fl | O_NONBLOCK) == 0);
    assert_int_equal(fcntl(fd, F_SETFD, FD_CLOEXEC), 0);
}

void test_pipe(int fds[2])
{
    assert_int_equal(pipe(fds), 0);
    set_nonblock_cloexec(fds[0]);
    set_nonblock_cloexec(fds[1]);
}

void test_socketpair(int fds[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, fds), 0);
    set_nonblock_cloexec(fds[0]);
    set_nonblock_cloexec(fds[1]);
}
#endif

void test_write_byte(int fd)
{
    char c = 'x';
    assert_int_equal(write(fd, &c, 1), 1);
}

size_t test_drain_fd(int fd)
{
    char buf[256];
    size_t total = 0;
    for (;;) {
        ssize_t n = read(fd, buf, sizeof buf);
        if (n <= 0)
            return total;
        total += (size_t)n;
    }
}
