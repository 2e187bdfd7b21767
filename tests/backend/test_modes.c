/* The switch between the two places a loop sleeps, under each backend: on its word (no fd
 * registered) and in the poller (fds registered). The first fd added from another thread
 * must reach a loop asleep on its word; the last fd removed must send it back to its word,
 * where a producer's wake must still reach it, including when the last fd is removed by its
 * own callback (an io_uring futex wait left armed would take that wake). */
#include "backend_util.h"

#include <unistd.h>

struct fdwatch {
    evloop *loop;
    int fd;
    bool remove_self;
    bt_counter calls;
};

static void fd_cb(void *arg, int fd, unsigned events)
{
    (void)events;
    struct fdwatch *w = arg;
    bt_drain(fd);
    if (w->remove_self)
        CHECK(evloop_io_remove(w->loop, fd) == 0);
    atomic_fetch_add(&w->calls, 1);
}

static bool asleep_on_word(void *ctx)
{
    struct evloop_stats st = bt_stats(ctx);
    return evloop_state(ctx) == EVLOOP_SLEEPING && st.futex_sleeps > 0;
}

static void test_first_fd_added_from_another_thread_reaches_a_loop_asleep_on_its_word(void **s)
{
    (void)s;
    evloop *loop = bt_loop_new();
    struct bt_runner r;
    bt_runner_start(&r, loop);
    assert_true(bt_wait(asleep_on_word, loop));
    int p[2];
    bt_pipe(p);
    struct fdwatch w = {.loop = loop, .fd = p[0]};
    bt_write_byte(p[1]);
    assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, fd_cb, &w), 0);
    assert_true(bt_wait_count(&w.calls, 1));
    assert_int_equal(evloop_io_remove(loop, p[0]), 0);
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

struct sleep_goal {
    evloop *loop;
    uint64_t after;
    bool poller;
};

static bool asleep_again(void *ctx)
{
    struct sleep_goal *g = ctx;
    struct evloop_stats st = bt_stats(g->loop);
    return evloop_state(g->loop) == EVLOOP_SLEEPING &&
           (g->poller ? st.poller_sleeps : st.futex_sleeps) > g->after;
}

/* Adds the pipe's read end from this thread and waits until the loop sleeps in the poller. */
static void add_and_wait_poller_sleep(evloop *loop, struct fdwatch *w)
{
    struct sleep_goal g = {loop, bt_stats(loop).poller_sleeps, true};
    assert_int_equal(evloop_io_add(loop, w->fd, EVLOOP_READABLE, fd_cb, w), 0);
    assert_true(bt_wait(asleep_again, &g));
}

/* Waits until the loop sleeps on its word again, then checks a submit reaches it. */
static void check_word_sleep_then_submit(evloop *loop, uint64_t futex_sleeps, bt_counter *ran)
{
    struct sleep_goal g = {loop, futex_sleeps, false};
    assert_true(bt_wait(asleep_again, &g));
    uint64_t before = atomic_load(ran);
    assert_int_equal(evloop_submit(loop, bt_count_task, ran), 0);
    assert_true(bt_wait_count(ran, before + 1));
}

static void test_last_fd_removed_from_another_thread_sends_the_loop_back_to_its_word(void **s)
{
    (void)s;
    evloop *loop = bt_loop_new();
    int p[2];
    bt_pipe(p);
    struct fdwatch w = {.loop = loop, .fd = p[0]};
    bt_counter ran = 0;
    struct bt_runner r;
    bt_runner_start(&r, loop);
    for (int i = 0; i < 20; i++) {
        add_and_wait_poller_sleep(loop, &w);
        uint64_t futex = bt_stats(loop).futex_sleeps;
        assert_int_equal(evloop_io_remove(loop, p[0]), 0);
        check_word_sleep_then_submit(loop, futex, &ran);
    }
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_last_fd_removed_by_its_own_callback_leaves_the_word_wake_working(void **s)
{
    (void)s;
    evloop *loop = bt_loop_new();
    int p[2];
    bt_pipe(p);
    struct fdwatch w = {.loop = loop, .fd = p[0], .remove_self = true};
    bt_counter ran = 0;
    struct bt_runner r;
    bt_runner_start(&r, loop);
    for (uint64_t i = 1; i <= 20; i++) {
        add_and_wait_poller_sleep(loop, &w);
        uint64_t futex = bt_stats(loop).futex_sleeps;
        bt_write_byte(p[1]); /* the poller wait ends with I/O; the callback removes the fd */
        assert_true(bt_wait_count(&w.calls, i));
        check_word_sleep_then_submit(loop, futex, &ran);
    }
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

static void test_mode_switches_back_and_forth_lose_no_wakeup(void **s)
{
    (void)s;
    evloop *loop = bt_loop_new();
    int p[2];
    bt_pipe(p);
    struct fdwatch w = {.loop = loop, .fd = p[0]};
    bt_counter ran = 0;
    struct bt_runner r;
    bt_runner_start(&r, loop);
    for (uint64_t i = 1; i <= 300; i++) {
        bt_write_byte(p[1]);
        assert_int_equal(evloop_io_add(loop, p[0], EVLOOP_READABLE, fd_cb, &w), 0);
        assert_true(bt_wait_count(&w.calls, i));
        assert_int_equal(evloop_io_remove(loop, p[0]), 0);
        assert_int_equal(evloop_submit(loop, bt_count_task, &ran), 0);
        assert_true(bt_wait_count(&ran, i));
    }
    bt_runner_stop(&r);
    bt_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_first_fd_added_from_another_thread_reaches_a_loop_asleep_on_its_word),
        cmocka_unit_test(test_last_fd_removed_from_another_thread_sends_the_loop_back_to_its_word),
        cmocka_unit_test(test_last_fd_removed_by_its_own_callback_leaves_the_word_wake_working),
        cmocka_unit_test(test_mode_switches_back_and_forth_lose_no_wakeup),
    };
    evloop_free(bt_loop_new()); /* exits 77 when the backend cannot start */
    return cmocka_run_group_tests(tests, NULL, NULL);
}
