/* Helpers for the backend suites (tests/backend/): cmocka with the includes cmocka 1.1.5
 * needs first, waiting with deadlines (never bare sleeps, never a speed assertion), a loop
 * on the backend $EVLOOP_BACKEND names (exit 77, "skipped", when it cannot start here), a
 * loop on its own thread, and CHECK() for checks made on the loop thread. */
#ifndef EVLOOP_BACKEND_UTIL_H
#define EVLOOP_BACKEND_UTIL_H

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

#define BT_SKIP 77
#define BT_DEADLINE_MS 20000 /* a hang, not a speed limit: two shared cores and sanitizers */

typedef _Atomic uint64_t bt_counter;
typedef bool (*bt_pred)(void *ctx);

/* Polls pred(ctx) with short naps until it holds or BT_DEADLINE_MS pass; its last value. */
bool bt_wait(bt_pred pred, void *ctx);
bool bt_wait_count(bt_counter *c, uint64_t at_least);
struct evloop_stats bt_stats(const evloop *loop);

/* Checks made off the test thread (a cmocka assert would longjmp across threads). */
#define CHECK(cond) ((cond) ? (void)0 : bt_check_failed(#cond, __FILE__, __LINE__))
void bt_check_failed(const char *expr, const char *file, int line);
int bt_check_failures(void);

/* A loop with spin 0 on that backend; exits 77 when it cannot start or the loop came up on
 * another one. */
evloop *bt_loop_new(void);
/* evloop_free must return 0, and every CHECK so far must have passed. */
void bt_loop_free(evloop *loop);

struct bt_runner {
    evloop *loop;
    pthread_t thread;
    int rc;
    atomic_bool done;
};
void bt_runner_start(struct bt_runner *r, evloop *loop);
/* evloop_stop, then waits for evloop_run to return 0. */
void bt_runner_stop(struct bt_runner *r);

void bt_pipe(int p[2]);
void bt_socketpair(int sv[2]);
void bt_write_byte(int fd);
size_t bt_drain(int fd);
void bt_count_task(void *counter);

#endif
