/* fd readiness with pipes and socketpairs: readable, writable, modify, remove, hang-up,
 * many fds, generation safety (no callback for an fd after its removal, even when its
 * readiness was already collected, even when its number is reused at once), and the switch
 * between futex sleep (no fd) and poller sleep (fds) in both directions, from another
 * thread. "No more callbacks" is checked with a sentinel fd that becomes ready later: once
 * its callback ran, the loop has polled again. */
#include "test_util.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

/* ---- a sentinel --------------------------------------------------------------------- */

struct sentinel {
    int p[2];
    test_counter fired;
};

static void sentinel_fire(void *arg, int fd, unsigned events)
{
    (void)events;
    test_drain_fd(fd);
    atomic_fetch_add(&((struct sentinel *)arg)->fired, 1);
}

static void sentinel_open(struct sentinel *s, evloop *loop)
{
    test_pipe(s->p);
    atomic_init(&s->fired, 0);
    assert_rc(evloop_io_add(loop, s->p[0], EVLOOP_READABLE, sentinel_fire, s), 0);
}

/* Makes the sentinel ready and waits until the loop has run its callback. */
static void sentinel_pass(struct sentinel *s)
{
    uint64_t before = atomic_load(&s->fired);
    test_write_byte(s->p[1]);
    assert_true(wait_for_count(&s->fired, before + 1));
}

static void sentinel_close(struct sentinel *s, evloop *loop)
{
    assert_rc(evloop_io_remove(loop, s->p[0]), 0);
    close(s->p[0]);
    close(s->p[1]);
}

/* ---- basic readiness ---------------------------------------------------------------------- */

struct watch {
    evloop *loop;
    int fd;
    test_counter calls;
    test_counter readable, writable, hangup;
    _Atomic unsigned last_events;
    bool drain;
    bool remove_self;
    int remove_rc;
};

static void watch_init(struct watch *w, evloop *loop, int fd)
{
    memset(w, 0, sizeof *w);
    w->loop = loop;
    w->fd = fd;
    w->remove_rc = 1;
}

static void watch_fire(void *arg, int fd, unsigned events)
{
    struct watch *w = arg;
    CHECK_EQ(fd, w->fd);
    CHECK((events &
           ~(unsigned)(EVLOOP_READABLE | EVLOOP_WRITABLE | EVLOOP_HANGUP | EVLOOP_ERROR)) == 0);
    CHECK(events != 0);
    /* Drain and remove before counting: the test thread acts as soon as a count moves. */
    if (w->drain)
        test_drain_fd(fd);
    if (w->remove_self)
        w->remove_rc = evloop_io_remove(w->loop, fd);
    atomic_store(&w->last_events, events);
    if (events & EVLOOP_READABLE)
        atomic_fetch_add(&w->readable, 1);
    if (events & EVLOOP_WRITABLE)
        atomic_fetch_add(&w->writable, 1);
    if (events & EVLOOP_HANGUP)
        atomic_fetch_add(&w->hangup, 1);
    atomic_fetch_add(&w->calls, 1);
}

/* A readable fd gets its callback each time data arrives, and never WRITABLE, whether its
 * number is low or high. One cmocka test a row, named in main(). */
struct readable_case {
    const char *name; /* for messages */
    int min_fd;       /* 0: the pipe's own read end; else a dup of it at or above this */
};

static struct readable_case low_fd = {"a pipe's own read end", 0};
static struct readable_case high_fd = {"a dup of a pipe's read end at 1000 or above", 1000};

static void readable_fd_gets_its_callback(void **state)
{
    const struct readable_case *c = *state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    int fd = c->min_fd ? fcntl(p[0], F_DUPFD_CLOEXEC, c->min_fd) : p[0];
    if (fd < 0) {
        test_loop_free(loop);
        close(p[0]);
        close(p[1]);
        print_message("# %s: no such fd (RLIMIT_NOFILE too low)\n", c->name);
        skip();
    }
    struct watch w;
    watch_init(&w, loop, fd);
    w.drain = true;
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_io_add(loop, fd, EVLOOP_READABLE, watch_fire, &w), 0);
    test_write_byte(p[1]);
    assert_true(wait_for_count(&w.readable, 1));
    test_write_byte(p[1]); /* and again: the registration stays */
    assert_true(wait_for_count(&w.readable, 2));
    assert_rc(evloop_io_remove(loop, fd), 0);
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&w.writable), 0);
    test_loop_free(loop);
    if (fd != p[0])
        close(fd);
    close(p[0]);
    close(p[1]);
}

static void test_writable_callback_runs_for_a_writable_socket(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int s[2];
    test_socketpair(s);
    struct watch w;
    watch_init(&w, loop, s[0]);
    w.remove_self = true;
    struct sentinel sen;
    sentinel_open(&sen, loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_io_add(loop, s[0], EVLOOP_WRITABLE, watch_fire, &w), 0);
    assert_true(wait_for_count(&w.writable, 1));
    sentinel_pass(&sen);
    sentinel_close(&sen, loop);
    test_runner_stop(&r);
    assert_rc(w.remove_rc, 0);
    assert_int_equal(atomic_load(&w.calls), 1); /* removed itself: never again */
    assert_int_equal(atomic_load(&w.readable), 0);
    test_loop_free(loop);
    close(s[0]);
    close(s[1]);
}

struct modify_back {
    struct watch w;
    int modify_rc;
    test_counter late_writable; /* WRITABLE reported after the switch back */
    bool switched;              /* loop thread only */
};

static void modify_back_fire(void *arg, int fd, unsigned events)
{
    struct modify_back *m = arg;
    if (m->switched && (events & EVLOOP_WRITABLE))
        atomic_fetch_add(&m->late_writable, 1);
    if ((events & EVLOOP_WRITABLE) && !m->switched) {
        m->modify_rc = evloop_io_modify(m->w.loop, fd, EVLOOP_READABLE);
        m->switched = true;
    }
    watch_fire(&m->w, fd, events);
}

static void test_modify_switches_the_watched_events_both_ways(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int s[2];
    test_socketpair(s);
    struct modify_back m = {.modify_rc = 1};
    watch_init(&m.w, loop, s[0]);
    m.w.drain = true;
    struct sentinel sen;
    sentinel_open(&sen, loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    /* readable only, no data: silent */
    assert_rc(evloop_io_add(loop, s[0], EVLOOP_READABLE, modify_back_fire, &m), 0);
    sentinel_pass(&sen);
    assert_int_equal(atomic_load(&m.w.calls), 0);
    /* to writable from this thread: reported; the callback switches back to readable */
    assert_rc(evloop_io_modify(loop, s[0], EVLOOP_WRITABLE), 0);
    assert_true(wait_for_count(&m.w.writable, 1));
    sentinel_pass(&sen);
    test_write_byte(s[1]);
    assert_true(wait_for_count(&m.w.readable, 1));
    sentinel_pass(&sen);
    sentinel_close(&sen, loop);
    assert_rc(evloop_io_remove(loop, s[0]), 0);
    test_runner_stop(&r);
    assert_rc(m.modify_rc, 0);
    assert_int_equal(atomic_load(&m.w.writable), 1);
    assert_int_equal(atomic_load(&m.late_writable), 0);
    test_loop_free(loop);
    close(s[0]);
    close(s[1]);
}

static void test_fd_removed_from_another_thread_gets_no_callback_started_after(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    test_write_byte(p[1]); /* never drained: ready on every poll */
    struct watch w;
    watch_init(&w, loop, p[0]);
    struct sentinel sen;
    sentinel_open(&sen, loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_fire, &w), 0);
    assert_true(wait_for_count(&w.calls, 3));
    assert_rc(evloop_io_remove(loop, p[0]), 0);
    uint64_t at_remove = atomic_load(&w.calls);
    sentinel_pass(&sen);
    sentinel_pass(&sen);
    /* One callback may have been starting while remove ran; none may start after. */
    assert_true(atomic_load(&w.calls) <= at_remove + 1);
    assert_rc(evloop_io_remove(loop, p[0]), -ENOENT);
    sentinel_close(&sen, loop);
    test_runner_stop(&r);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

/* ---- generation safety ------------------------------------------------------------------------
 */

/* Two pipes, both ready before the loop's first poll, so one poll reports both. The first
 * callback removes the other fd (and, with reuse, closes it and registers a fresh pipe that
 * likely gets the same number); the other's collected readiness must not be delivered. */
struct rival {
    evloop *loop;
    int p[2][2];
    int first;    /* loop thread only: who ran first, -1 before */
    int calls[2]; /* loop thread only */
    int remove_rc;
    bool reuse;
    int fresh[2]; /* the pipe registered in the removed one's place */
    int add_rc;
    test_counter fresh_calls;
    test_counter any;
};

static struct rival g_rival;

static void fresh_fire(void *arg, int fd, unsigned events)
{
    (void)arg;
    (void)fd;
    (void)events;
    atomic_fetch_add(&g_rival.fresh_calls, 1); /* nothing was ever written to it */
}

static void rival_fire(void *arg, int fd, unsigned events)
{
    (void)events;
    int me = test_tag_of(arg);
    struct rival *v = &g_rival;
    v->calls[me]++;
    test_drain_fd(fd);
    if (v->first < 0) {
        v->first = me;
        int other = v->p[1 - me][0];
        v->remove_rc = evloop_io_remove(v->loop, other);
        if (v->reuse) {
            close(other);
            v->p[1 - me][0] = -1;
            CHECK_EQ(pipe2(v->fresh, O_NONBLOCK | O_CLOEXEC), 0);
            v->add_rc = evloop_io_add(v->loop, v->fresh[0], EVLOOP_READABLE, fresh_fire, NULL);
        }
    }
    atomic_fetch_add(&v->any, 1);
}

static void removal_round(bool reuse)
{
    evloop *loop = test_loop_new(NULL);
    struct rival *v = &g_rival;
    memset(v, 0, sizeof *v);
    v->loop = loop;
    v->first = -1;
    v->remove_rc = v->add_rc = 1;
    v->reuse = reuse;
    v->fresh[0] = v->fresh[1] = -1;
    for (int i = 0; i < 2; i++) {
        test_pipe(v->p[i]);
        test_write_byte(v->p[i][1]);
        assert_rc(evloop_io_add(loop, v->p[i][0], EVLOOP_READABLE, rival_fire, test_tag(i)), 0);
    }
    struct sentinel sen;
    sentinel_open(&sen, loop);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_count(&v->any, 1));
    sentinel_pass(&sen);
    sentinel_pass(&sen);
    sentinel_close(&sen, loop);
    if (reuse)
        assert_rc(evloop_io_remove(loop, v->fresh[0]), 0);
    test_runner_stop(&r);
    assert_true(v->first == 0 || v->first == 1);
    assert_rc(v->remove_rc, 0);
    assert_int_equal(v->calls[1 - v->first], 0);
    assert_int_equal(v->calls[v->first], 1);
    if (reuse) {
        assert_rc(v->add_rc, 0);
        assert_int_equal(atomic_load(&v->fresh_calls), 0);
    }
    test_loop_free(loop);
    for (int i = 0; i < 2; i++) {
        if (v->p[i][0] >= 0)
            close(v->p[i][0]);
        close(v->p[i][1]);
    }
    if (reuse) {
        close(v->fresh[0]);
        close(v->fresh[1]);
    }
}

/* The initial states of removal_inside_another_callback, a row each in main(): the first
 * callback only removes the other fd, or also closes it and registers a fresh pipe that likely
 * takes its number. */
static bool only_removed = false, removed_and_reused = true;

static void removal_inside_another_callback(void **state)
{
    bool reuse = *(const bool *)*state;
    for (int round = 0; round < 20; round++)
        removal_round(reuse);
}

/* ---- more -------------------------------------------------------------------------------------
 */

static void test_peer_hang_up_is_reported(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    struct watch w;
    watch_init(&w, loop, p[0]);
    w.drain = true;
    w.remove_self = true;
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_fire, &w), 0);
    close(p[1]);
    assert_true(wait_for_count(&w.calls, 1));
    test_runner_stop(&r);
    assert_rc(w.remove_rc, 0);
    assert_true(atomic_load(&w.last_events) & EVLOOP_HANGUP);
    test_loop_free(loop);
    close(p[0]);
}

#define N_FDS 32

struct many {
    int p[N_FDS][2];
    int calls[N_FDS]; /* loop thread only */
    test_counter total;
};

static struct many g_many;

static void many_fire(void *arg, int fd, unsigned events)
{
    int i = test_tag_of(arg);
    CHECK(i >= 0 && i < N_FDS);
    if (i < 0 || i >= N_FDS)
        return;
    CHECK_EQ(fd, g_many.p[i][0]);
    CHECK(events & EVLOOP_READABLE);
    test_drain_fd(fd);
    g_many.calls[i]++;
    atomic_fetch_add(&g_many.total, 1);
}

static void test_many_fds_each_get_their_own_callback_argument_and_fd(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    memset(&g_many, 0, sizeof g_many);
    for (int i = 0; i < N_FDS; i++) {
        test_pipe(g_many.p[i]);
        assert_rc(evloop_io_add(loop, g_many.p[i][0], EVLOOP_READABLE, many_fire, test_tag(i)), 0);
    }
    struct test_runner r;
    test_runner_start(&r, loop);
    for (int i = 0; i < N_FDS; i += 2) /* half now, half once the loop sleeps in the poller */
        test_write_byte(g_many.p[i][1]);
    assert_true(wait_for_count(&g_many.total, N_FDS / 2));
    for (int i = 1; i < N_FDS; i += 2)
        test_write_byte(g_many.p[i][1]);
    assert_true(wait_for_count(&g_many.total, N_FDS));
    for (int i = 0; i < N_FDS; i++)
        assert_rc(evloop_io_remove(loop, g_many.p[i][0]), 0);
    test_runner_stop(&r);
    for (int i = 0; i < N_FDS; i++) {
        assert_int_equal(g_many.calls[i], 1);
        close(g_many.p[i][0]);
        close(g_many.p[i][1]);
    }
    test_loop_free(loop);
}

static void test_fds_registered_at_stop_are_released_but_never_closed(void **state)
{
    (void)state;
    evloop *loop = test_loop_new(NULL);
    int p[2];
    test_pipe(p);
    struct watch w;
    watch_init(&w, loop, p[0]);
    w.drain = true;
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_fire, &w), 0);
    struct test_runner r;
    test_runner_start(&r, loop);
    assert_true(wait_for_running(loop));
    test_runner_stop(&r); /* returns although an fd is registered */
    assert_rc(evloop_io_remove(loop, p[0]), -ENOENT);
    test_loop_free(loop);
    assert_true(fcntl(p[0], F_GETFD) != -1);
    assert_true(fcntl(p[1], F_GETFD) != -1);
    close(p[0]);
    close(p[1]);
}

/* ---- the mode switch
 * ------------------------------------------------------------------------------ */

static struct evloop_stats stats_of(evloop *loop)
{
    struct evloop_stats st;
    memset(&st, 0, sizeof st);
    assert_rc(evloop_stats(loop, &st), 0);
    return st;
}

struct stat_goal {
    evloop *loop;
    bool poller; /* wait for poller_sleeps, else futex_sleeps */
    uint64_t after;
};

static bool slept_in(void *ctx)
{
    struct stat_goal *g = ctx;
    struct evloop_stats st;
    if (evloop_stats(g->loop, &st) != 0 || evloop_state(g->loop) != EVLOOP_SLEEPING)
        return false;
    return (g->poller ? st.poller_sleeps : st.futex_sleeps) > g->after;
}

static bool wait_for_sleep_in(evloop *loop, bool poller, uint64_t after)
{
    struct stat_goal g = {loop, poller, after};
    return wait_until(slept_in, &g, TEST_DEADLINE_MS);
}

/* A loop asleep on its futex (no fd) gets an fd added from another thread: the add wakes it
 * and readiness arrives; it then sleeps in the poller. The last fd removed from another
 * thread wakes it out of the poller; it sleeps on the futex again, and a submit wakes it. */
static void
test_fd_added_and_last_fd_removed_from_another_thread_switch_the_sleep_mode(void **state)
{
    (void)state;
    evloop_config cfg = test_config_no_spin();
    evloop *loop = test_loop_new(&cfg);
    struct test_runner r;
    test_runner_start(&r, loop);

    assert_true(wait_for_sleep_in(loop, false, 0));
    assert_int_equal(stats_of(loop).poller_sleeps, 0);

    /* Each wait below is for a sleep counted after the action that woke the loop. */
    int p[2];
    test_pipe(p);
    test_write_byte(p[1]); /* ready before the add */
    struct watch w;
    watch_init(&w, loop, p[0]);
    w.drain = true;
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, watch_fire, &w), 0);
    assert_true(wait_for_count(&w.readable, 1));
    assert_true(wait_for_sleep_in(loop, true, 0));

    uint64_t poller_before = stats_of(loop).poller_sleeps;
    test_write_byte(p[1]); /* readiness wakes the poller */
    assert_true(wait_for_count(&w.readable, 2));
    assert_true(wait_for_sleep_in(loop, true, poller_before));

    poller_before = stats_of(loop).poller_sleeps;
    test_counter ran = 0;
    assert_rc(evloop_submit(loop, test_count_task, &ran), 0); /* a submit wakes it too */
    assert_true(wait_for_count(&ran, 1));
    assert_true(wait_for_sleep_in(loop, true, poller_before));

    uint64_t futex_before = stats_of(loop).futex_sleeps;
    assert_rc(evloop_io_remove(loop, p[0]), 0); /* must wake it out of the poller */
    if (!wait_for_sleep_in(loop, false, futex_before))
        fail_msg("after the last fd was removed the loop never slept on its futex again");

    futex_before = stats_of(loop).futex_sleeps;
    assert_rc(evloop_submit(loop, test_count_task, &ran), 0);
    assert_true(wait_for_count(&ran, 2));
    test_write_byte(p[1]); /* removed: no callback */
    assert_true(wait_for_sleep_in(loop, false, futex_before));
    test_runner_stop(&r);
    assert_int_equal(atomic_load(&w.readable), 2);
    test_loop_free(loop);
    close(p[0]);
    close(p[1]);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        {"test_readable_callback_runs_when_a_pipe_has_data", readable_fd_gets_its_callback, NULL,
         NULL, &low_fd},
        cmocka_unit_test(test_writable_callback_runs_for_a_writable_socket),
        cmocka_unit_test(test_modify_switches_the_watched_events_both_ways),
        cmocka_unit_test(test_fd_removed_from_another_thread_gets_no_callback_started_after),
        {"test_fd_removed_inside_another_fds_callback_while_both_are_ready_gets_no_callback",
         removal_inside_another_callback, NULL, NULL, &only_removed},
        {"test_fd_number_reused_inside_a_callback_gets_no_stale_readiness",
         removal_inside_another_callback, NULL, NULL, &removed_and_reused},
        cmocka_unit_test(test_peer_hang_up_is_reported),
        cmocka_unit_test(test_many_fds_each_get_their_own_callback_argument_and_fd),
        {"test_high_fd_numbers_are_watched_like_low_ones", readable_fd_gets_its_callback, NULL,
         NULL, &high_fd},
        cmocka_unit_test(test_fds_registered_at_stop_are_released_but_never_closed),
        cmocka_unit_test(
            test_fd_added_and_last_fd_removed_from_another_thread_switch_the_sleep_mode),
    };
    test_require_backend();
    return cmocka_run_group_tests_name("io", tests, NULL, NULL);
}
