/* Allocation failure injection (-ENOMEM from every entry point that allocates): the
 * library's malloc/calloc/realloc/aligned_alloc are wrapped at link time (-Wl,--wrap, see
 * CMakeLists.txt) and fail on demand, only on the thread that armed the failure. Checks:
 * each call returns -ENOMEM, *out stays NULL, nothing leaks (LSan, valgrind), nothing
 * accepted before or after is lost, nothing refused runs, and the loop works afterwards. */
#include "stress_util.h"

#include <fcntl.h>
#include <unistd.h>

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t size);
void *__real_realloc(void *p, size_t n);
void *__real_aligned_alloc(size_t align, size_t n);
void *__wrap_malloc(size_t n);
void *__wrap_calloc(size_t n, size_t size);
void *__wrap_realloc(void *p, size_t n);
void *__wrap_aligned_alloc(size_t align, size_t n);

/* Per thread: allow `allow` more allocations, then fail one (or all, with fail_all). */
static _Thread_local long tl_allow = -1;
static _Thread_local bool tl_fail_all;
static _Thread_local long tl_injected;

static void arm(long allow, bool fail_all)
{
    tl_allow = allow;
    tl_fail_all = fail_all;
    tl_injected = 0;
}

static long disarm(void)
{
    tl_allow = -1;
    return tl_injected;
}

static bool inject(void)
{
    if (tl_allow < 0)
        return false;
    if (tl_allow > 0) {
        tl_allow--;
        return false;
    }
    tl_injected++;
    if (!tl_fail_all)
        tl_allow = -1;
    return true;
}

void *__wrap_malloc(size_t n)
{
    return inject() ? NULL : __real_malloc(n);
}

void *__wrap_calloc(size_t n, size_t size)
{
    return inject() ? NULL : __real_calloc(n, size);
}

void *__wrap_realloc(void *p, size_t n)
{
    return inject() ? NULL : __real_realloc(p, n);
}

void *__wrap_aligned_alloc(size_t align, size_t n)
{
    return inject() ? NULL : __real_aligned_alloc(align, n);
}

static test_counter g_ran;

static void count(void *arg)
{
    (void)arg;
    atomic_fetch_add(&g_ran, 1);
}

static void test_new_with_each_allocation_failing_returns_enomem_and_leaks_nothing(void **state)
{
    (void)state;
    int k = 0, enomem = 0, other = 0;
    for (;; k++) {
        evloop *loop = (evloop *)(uintptr_t)1;
        arm(k, false);
        int r = evloop_new(&loop, NULL);
        long injected = disarm();
        if (!injected) {
            assert_rc(r, 0);
            assert_rc(evloop_free(loop), 0);
            break;
        }
        if (r == -ENOMEM && loop == NULL) {
            enomem++;
        } else {
            other++;
            fprintf(stderr, "allocation %d failed: evloop_new returned %d, out %p\n", k, r,
                    (void *)loop);
            if (r == 0)
                evloop_free(loop);
        }
    }
    printf("# figure: faults new %s: evloop_new makes %d allocations; failing each one: "
           "-ENOMEM with out NULL %d, anything else %d\n",
           EVLOOP_TEST_VARIANT, k, enomem, other);
    assert_true(k > 0);
    assert_int_equal(other, 0);
}

static void test_submits_that_cannot_allocate_are_refused_and_the_accepted_all_run(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    atomic_store(&g_ran, 0);
    int (*fns[3])(evloop *, evloop_cb, void *) = {evloop_submit, evloop_submit_internal,
                                                  evloop_queue_microtask};
    uint64_t accepted = 0, enomem = 0, other = 0;
    for (int f = 0; f < 3; f++) {
        /* Not running: these go into the ingress queues, which allocate once full. */
        arm(0, true);
        for (int i = 0; i < 10000; i++) {
            int r = fns[f](loop, count, NULL);
            if (r == 0)
                accepted++;
            else if (r == -ENOMEM)
                enomem++;
            else
                other++;
        }
        disarm();
        for (int i = 0; i < 100; i++) {
            assert_rc(fns[f](loop, count, NULL), 0); /* works again */
            accepted++;
        }
    }
    assert_rc(evloop_stop(loop), 0);
    assert_rc(test_run_to_end(loop), 0);
    printf("# figure: faults submit %s: 3 x 10,000 submits with every allocation failing: "
           "accepted %llu, -ENOMEM %llu, other %llu; accepted that ran %llu\n",
           EVLOOP_TEST_VARIANT, (unsigned long long)accepted, (unsigned long long)enomem,
           (unsigned long long)other, (unsigned long long)atomic_load(&g_ran));
    test_loop_free(loop);
    assert_int_equal(other, 0);
    assert_true(enomem > 0);
    assert_int_equal(atomic_load(&g_ran), accepted);
}

/* ---- on the loop thread: the local queues grow ------------------------------------------- */

struct local_result {
    uint64_t accepted, enomem, other;
    test_counter done;
};
static struct local_result g_local;
static evloop *g_loop;

static void submit_from_the_loop_thread(void *arg)
{
    int (*fns[3])(evloop *, evloop_cb, void *) = {evloop_submit, evloop_submit_internal,
                                                  evloop_queue_microtask};
    (void)arg;
    for (int f = 0; f < 3; f++) {
        arm(0, true);
        for (int i = 0; i < 2000; i++) {
            int r = fns[f](g_loop, count, NULL);
            if (r == 0)
                g_local.accepted++;
            else if (r == -ENOMEM)
                g_local.enomem++;
            else
                g_local.other++;
        }
        disarm();
    }
    atomic_fetch_add_explicit(&g_local.done, 1, memory_order_release);
}

static void test_loop_thread_submits_that_cannot_grow_their_queue_are_refused(void **state)
{
    (void)state;
    g_loop = test_loop_new(NULL);
    memset(&g_local, 0, sizeof g_local);
    atomic_store(&g_ran, 0);
    struct test_runner r;
    test_runner_start(&r, g_loop);
    assert_rc(evloop_submit(g_loop, submit_from_the_loop_thread, NULL), 0);
    assert_true(wait_for_count(&g_local.done, 1));
    assert_true(wait_for_count(&g_ran, g_local.accepted));
    test_runner_stop(&r);
    printf("# figure: faults loop-thread %s: 3 x 2,000 submits from a callback with every "
           "allocation failing: accepted %llu, -ENOMEM %llu, other %llu; ran %llu\n",
           EVLOOP_TEST_VARIANT, (unsigned long long)g_local.accepted,
           (unsigned long long)g_local.enomem, (unsigned long long)g_local.other,
           (unsigned long long)atomic_load(&g_ran));
    test_loop_free(g_loop);
    assert_int_equal(g_local.other, 0);
    assert_true(g_local.enomem > 0);
    assert_int_equal(atomic_load(&g_ran), g_local.accepted);
}

/* ---- timers: the slab and the heap grow -------------------------------------------------- */

static void test_timer_start_that_cannot_grow_returns_enomem_and_the_others_fire(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    atomic_store(&g_ran, 0);
    uint64_t accepted = 0, enomem = 0, other = 0;
    /* Fail the first, then the second allocation of a growth (slab, then heap), then all. */
    for (int round = 0; round < 3; round++) {
        arm(round < 2 ? round : 0, round == 2);
        for (int i = 0; i < 200; i++) {
            int r = evloop_timer_start(loop, 1000, 0, count, NULL, NULL);
            accepted += r == 0;
            enomem += r == -ENOMEM;
            other += r != 0 && r != -ENOMEM;
        }
        disarm();
    }
    for (int i = 0; i < 100; i++) {
        assert_rc(evloop_timer_start(loop, 1000, 0, count, NULL, NULL), 0);
        accepted++;
    }
    struct test_runner r;
    test_runner_start(&r, loop);
    bool all = wait_for_count(&g_ran, accepted);
    test_runner_stop(&r);
    printf("# figure: faults timers %s: 700 timer starts with growth failing: accepted %llu, "
           "-ENOMEM %llu, other %llu; fired %llu\n",
           EVLOOP_TEST_VARIANT, (unsigned long long)accepted, (unsigned long long)enomem,
           (unsigned long long)other, (unsigned long long)atomic_load(&g_ran));
    test_loop_free(loop);
    assert_true(all);
    assert_int_equal(other, 0);
    assert_true(enomem > 0);
    assert_int_equal(atomic_load(&g_ran), accepted);
}

/* ---- fds: the fd table grows ------------------------------------------------------------- */

static void test_io_add_that_cannot_grow_the_fd_table_returns_enomem(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    int high = fcntl(p[0], F_DUPFD_CLOEXEC, 300); /* beyond the first table size */
    assert_true(high >= 300);
    arm(0, false);
    int r = evloop_io_add(loop, high, EVLOOP_READABLE, test_never_io, NULL);
    long injected = disarm();
    int again = evloop_io_add(loop, high, EVLOOP_READABLE, test_never_io, NULL);
    int removed = evloop_io_remove(loop, high);
    printf("# figure: faults io_add %s.%s: fd %d with the table growth failing: %d "
           "(%ld injected); then %d, remove %d\n",
           EVLOOP_TEST_VARIANT, evloop_backend(loop), high, r, injected, again, removed);
    test_loop_free(loop);
    close(high);
    close(p[0]);
    close(p[1]);
    assert_rc(r, -ENOMEM);
    assert_rc(again, 0);
    assert_rc(removed, 0);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_new_with_each_allocation_failing_returns_enomem_and_leaks_nothing),
        cmocka_unit_test(test_submits_that_cannot_allocate_are_refused_and_the_accepted_all_run),
        cmocka_unit_test(test_loop_thread_submits_that_cannot_grow_their_queue_are_refused),
        cmocka_unit_test(test_timer_start_that_cannot_grow_returns_enomem_and_the_others_fire),
        cmocka_unit_test(test_io_add_that_cannot_grow_the_fd_table_returns_enomem),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("stress_faults", tests, NULL, NULL);
}
