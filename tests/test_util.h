/* Helpers shared by every evloop test file: cmocka with the includes cmocka 1.1.5 needs
 * first, waiting with deadlines (never bare sleeps), a loop on the backend that
 * $EVLOOP_BACKEND names (the program exits 77, "skipped", if it cannot start), running a
 * loop on its own thread, and CHECK() for checks made off the test thread, where a cmocka
 * assertion would longjmp across threads. */
#ifndef EVLOOP_TEST_UTIL_H
#define EVLOOP_TEST_UTIL_H

/* cmocka 1.1.5 uses these without including them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "evloop.h"

/* The exit status ctest reads as "skipped" (SKIP_RETURN_CODE). */
#define TEST_SKIP_EXIT 77

/* How long any single wait in a test may take before it counts as a hang. Generous on
 * purpose: the tests share two cores with sanitizers, and they never assert on speed. */
#define TEST_DEADLINE_MS 10000

/* Stress sizes shrink under ThreadSanitizer (it slows atomics and syscalls by 5-20x), so
 * every build runs in well under a minute. TEST_SIZE(n) is the size to use for n. */
#if defined(__SANITIZE_THREAD__)
#define TEST_SLOWDOWN 8
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_SLOWDOWN 8
#endif
#endif
#ifndef TEST_SLOWDOWN
#define TEST_SLOWDOWN 1
#endif
#define TEST_SIZE(n) ((n) / TEST_SLOWDOWN)

/* RUNNING_ON_VALGRIND: true under valgrind (the memcheck.* tests), from valgrind's header,
 * which the valgrind package installs; 0 where the header is missing (no memcheck then). */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

/* The ingress variant this executable is linked with, from CMake. */
#ifndef EVLOOP_TEST_VARIANT
#define EVLOOP_TEST_VARIANT "unknown"
#endif

typedef _Atomic uint64_t test_counter;

/* ---- waiting ------------------------------------------------------------------------ */

typedef bool (*test_pred)(void *ctx);

/* Polls pred(ctx) with short naps until it is true or deadline_ms have passed. Returns the
 * last value of pred. Any thread (it never asserts). */
bool wait_until(test_pred pred, void *ctx, int64_t deadline_ms);

/* wait_until() shorthands with TEST_DEADLINE_MS. */
bool wait_for_count(test_counter *counter, uint64_t at_least);
bool wait_for_flag(atomic_bool *flag);
bool wait_for_state(const evloop *loop, enum evloop_state state);
/* The loop is inside evloop_run: RUNNING or SLEEPING. */
bool wait_for_running(const evloop *loop);
/* The loop is SLEEPING and its stats show more than `after` sleeps of either kind. */
bool wait_for_sleep(const evloop *loop, uint64_t after);
/* futex_sleeps + poller_sleeps of the loop now. */
uint64_t test_sleeps(const evloop *loop);

/* ---- checks off the test thread ------------------------------------------------------- */

/* CHECK(cond) may be used on any thread (in callbacks, producers): a failure is printed with
 * its place and counted; test_loop_free() and assert_checks_passed() turn the count into a
 * cmocka failure on the test thread. */
#define CHECK(cond)                                                                                \
    do {                                                                                           \
        if (!(cond))                                                                               \
            test_check_failed(#cond, __FILE__, __LINE__);                                          \
    } while (0)
#define CHECK_EQ(a, b)                                                                             \
    do {                                                                                           \
        long long check_a_ = (long long)(a), check_b_ = (long long)(b);                            \
        if (check_a_ != check_b_)                                                                  \
            test_check_eq_failed(#a, #b, check_a_, check_b_, __FILE__, __LINE__);                  \
    } while (0)
#define assert_checks_passed() assert_int_equal(test_take_check_failures(), 0)

void test_check_failed(const char *expr, const char *file, int line);
void test_check_eq_failed(const char *a, const char *b, long long va, long long vb,
                          const char *file, int line);
int test_take_check_failures(void);

/* assert_rc(call, -EXXX): asserts an evloop return code, printing both as errno names. */
#define assert_rc(expr, want) test_assert_rc((expr), (want), #expr, __FILE__, __LINE__)
void test_assert_rc(int got, int want, const char *expr, const char *file, int line);

/* ---- loops ---------------------------------------------------------------------------- */

/* Call first in main(): makes a loop the way tests do and exits the program with 77 when
 * the backend $EVLOOP_BACKEND names cannot start here (evloop_new returns -ENOTSUP, or the
 * loop came up on another backend), so a missing backend is a skip, never a silent pass.
 * $EVLOOP_TEST_FILTER (a cmocka pattern such as "*racing*") runs only the matching tests. */
void test_require_backend(void);

/* A new loop on the backend from the environment: cfg's backend field is ignored (NULL is
 * passed, so the library reads $EVLOOP_BACKEND); cfg NULL passes NULL. Exits 77 on
 * -ENOTSUP; any other failure fails the test. */
evloop *test_loop_new(const evloop_config *cfg);
/* A config from evloop_config_init() with spin_ns = 0, so an idle loop sleeps at once. */
evloop_config test_config_no_spin(void);
/* "membarrier" where a loop can take it here (not under ThreadSanitizer, nor where the kernel
 * refuses it), else NULL (auto): for tests of the membarrier pairing in either variant (the
 * chunk variant's auto is seq_cst). */
const char *test_fence_membarrier(void);
/* evloop_free() must return 0; then every CHECK() made so far must have passed. */
void test_loop_free(evloop *loop);

/* ---- a loop on its own thread ------------------------------------------------------------ */

struct test_runner {
    evloop *loop;
    pthread_t thread;
    int rc;
    atomic_bool done;
};

/* Starts evloop_run(loop) on a new thread. */
void test_runner_start(struct test_runner *r, evloop *loop);
/* Waits (with the deadline) for evloop_run to return and joins the thread; fails the test
 * if it does not return. Returns evloop_run's result. */
int test_runner_join(struct test_runner *r);
/* evloop_stop(), then test_runner_join(); asserts both return 0. */
void test_runner_stop(struct test_runner *r);
/* Runs the loop on a new thread until it returns by itself; returns evloop_run's result. */
int test_run_to_end(evloop *loop);
/* True on the thread inside evloop_run for r. */
bool test_on_runner_thread(const struct test_runner *r);

/* ---- small callbacks --------------------------------------------------------------------- */

/* arg: a test_counter; adds 1. */
void test_count_task(void *counter);
/* An fd callback: arg is a test_counter; drains the fd, then adds 1. */
void test_count_io(void *counter, int fd, unsigned events);
/* arg: the loop; calls evloop_stop and CHECKs it returned 0. */
void test_stop_task(void *loop);
/* A callback that must never run: CHECK-fails if it does (arg: a label string or NULL). */
void test_never_task(void *label);
void test_never_io(void *label, int fd, unsigned events);

/* A gate holds the loop thread inside a callback until the test opens it. */
struct test_gate {
    atomic_bool entered;
    atomic_bool release;
};
/* arg: a struct test_gate; marks entered, then waits (with the deadline) for release. */
void test_gate_task(void *gate);
/* Submits the gate task and waits until the loop thread is inside it. */
void test_gate_hold(struct test_gate *g, evloop *loop);
void test_gate_open(struct test_gate *g);

/* ---- an order log written by callbacks ---------------------------------------------------- */

#define TEST_LOG_MAX 4096

/* One log per program: callbacks on the loop thread append tags; the test thread waits on
 * count and reads tags[] after the loop thread is joined (or after evloop_free returned). */
struct test_log {
    evloop *loop; /* for callbacks that need it */
    int tags[TEST_LOG_MAX];
    size_t len;
    test_counter count;
};
extern struct test_log test_log;

void test_log_reset(evloop *loop);
/* Appends tag (on the loop thread); test_tag(t) makes the argument. */
void test_log_add(int tag);
void test_log_task(void *tag);
void *test_tag(int tag);
int test_tag_of(void *arg);
/* Asserts the log holds exactly the n tags given. */
void test_log_expect(const int *tags, size_t n);

/* ---- fds --------------------------------------------------------------------------------- */

/* A non-blocking, close-on-exec pipe / AF_UNIX stream socketpair; asserts success. */
void test_pipe(int fds[2]);
void test_socketpair(int fds[2]);
/* Writes one byte / reads everything available (non-blocking); returns bytes read. */
void test_write_byte(int fd);
size_t test_drain_fd(int fd);

#endif
