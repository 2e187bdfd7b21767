/* Fds (io.c), a subsystem: the owner of the fd table of struct evloop (state.h). Everything
 * else reaches the table through these calls. */
#ifndef EVLOOP_IO_H
#define EVLOOP_IO_H

#include <stdbool.h>

#include "state.h"

void evloop__io_init(evloop *loop);
void evloop__io_destroy(evloop *loop);
/* Under io_lock: whether fd is registered with evloop_io_add. */
bool evloop__io_has_fd(const evloop *loop, int fd);
/* Loop thread: runs the callback of a registered fd for one readiness report of wait(), if
 * it is not stale, then its microtasks. */
void evloop__io_dispatch(evloop *loop, const struct evloop__io_event *ev);
/* At termination: each fd still registered is removed, its argument to the release
 * notification (unless another thread's evloop_io_remove got it first); then every fd
 * registration counted in nfds is dropped. */
void evloop__release_fds(evloop *loop);

#endif
