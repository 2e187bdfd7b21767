/* The helpers of backend_util.h. */
#include "backend_util.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

bool bt_wait(bt_pred pred, void *ctx)
{
    uint64_t end = now_ns() + (uint64_t)BT_DEADLINE_MS * 1000000u;
    long nap = 10000;
    while (!pred(ctx)) {
        if (now_ns() >= end)
            return pred(ctx);
        struct timespec ts = {0, nap};
        nanosleep(&ts, NULL);
        nap = nap < 1000000 ? nap * 2 : nap;
    }
    return true;
}

struct count_goal {
    bt_counter *c;
    uint64_t at_least;
};

static bool count_reached(void *ctx)
{
    struct count_goal *g = ctx;
    return atomic_load(g->c) >= g->at_least;
}

bool bt_wait_count(bt_counter *c, uint64_t at_least)
{
    struct count_goal g = {c, at_least};
    return bt_wait(count_reached, &g);
}

struct evloop_stats bt_stats(const evloop *loop)
{
    struct evloop_stats st;
    memset(&st, 0, sizeof(st));
    evloop_stats(loop, &st);
    return st;
}

static atomic_int check_failures;

void bt_check_failed(const char *expr, const char *file, int line)
{
    atomic_fetch_add(&check_failures, 1);
    fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
}

int bt_check_failures(void)
{
    return atomic_exchange(&check_failures, 0);
}

/* The backend $EVLOOP_BACKEND names, or NULL for auto. */
static const char *wanted_backend(void)
{
    const char *b = getenv("EVLOOP_BACKEND");
    return b && *b && strcmp(b, "auto") != 0 ? b : NULL;
}

evloop *bt_loop_new(void)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.spin_ns = 0; /* an idle loop sleeps at once */
    evloop *loop = NULL;
    int r = evloop_new(&loop, &cfg);
    const char *want = wanted_backend();
    if (r == -ENOTSUP || (r == 0 && want && strcmp(evloop_backend(loop), want) != 0)) {
        printf("# skipped: backend %s cannot start here\n", want ? want : "auto");
        evloop_free(loop);
        exit(BT_SKIP);
    }
    assert_int_equal(r, 0);
    return loop;
}

void bt_loop_free(evloop *loop)
{
    assert_int_equal(evloop_free(loop), 0);
    assert_int_equal(bt_check_failures(), 0);
}

static void *runner_main(void *arg)
{
    struct bt_runner *r = arg;
    r->rc = evloop_run(r->loop);
    atomic_store(&r->done, true);
    return NULL;
}

void bt_runner_start(struct bt_runner *r, evloop *loop)
{
    r->loop = loop;
    r->rc = -1;
    atomic_init(&r->done, false);
    assert_int_equal(pthread_create(&r->thread, NULL, runner_main, r), 0);
}

static bool runner_done(void *ctx)
{
    return atomic_load(&((struct bt_runner *)ctx)->done);
}

void bt_runner_stop(struct bt_runner *r)
{
    assert_int_equal(evloop_stop(r->loop), 0);
    assert_true(bt_wait(runner_done, r));
    assert_int_equal(pthread_join(r->thread, NULL), 0);
    assert_int_equal(r->rc, 0);
}

/* pipe() and fcntl() rather than pipe2() and SOCK_NONBLOCK: these suites also run on macOS. */
static void make_nonblocking(const int fds[2])
{
    for (int i = 0; i < 2; i++) {
        assert_int_equal(fcntl(fds[i], F_SETFL, fcntl(fds[i], F_GETFL) | O_NONBLOCK), 0);
        assert_int_equal(fcntl(fds[i], F_SETFD, FD_CLOEXEC), 0);
    }
}

void bt_pipe(int p[2])
{
    assert_int_equal(pipe(p), 0);
    make_nonblocking(p);
}

void bt_socketpair(int sv[2])
{
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    make_nonblocking(sv);
}

void bt_write_byte(int fd)
{
    assert_int_equal(write(fd, "x", 1), 1);
}

size_t bt_drain(int fd)
{
    char buf[256];
    size_t total = 0;
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        total += (size_t)n;
    return total;
}

void bt_count_task(void *counter)
{
    atomic_fetch_add((bt_counter *)counter, 1);
}
