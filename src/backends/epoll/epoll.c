/* Backend "epoll" (Linux): level-triggered epoll with an eventfd for wake-ups.
 * Implements the evloop__backend vtable (backend.h).
 *
 * Traps of the OS API:
 *  a. epoll_wait's timeout is in ms: rounding down fires timers early, so a timed wait uses
 *     epoll_pwait2 (ns, Linux 5.11+) and falls back to epoll_wait rounded up; under
 *     ThreadSanitizer always epoll_wait (epoll_wait.h says why). A zero or no timeout is
 *     epoll_wait's: epoll_pwait2 costs more there.
 *  b. epoll registers the open file description, not the fd: an fd closed without
 *     removal disappears by itself, so EPOLL_CTL_DEL's EBADF/ENOENT mean "already gone".
 *  c. Regular files cannot be polled: EPOLL_CTL_ADD fails with EPERM, returned as is.
 *  d. The eventfd stays readable until read: the wait drains it, never reports it. */
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend.h"
#include "backends/epoll/epoll_embed.h"
#include "backends/epoll/epoll_events.h"
#include "backends/epoll/epoll_wait.h"
#include "common.h"
#include "evloop.h"

#define WAKE_TAG UINT64_MAX

struct epoll_state {
    int epfd;
    int wakefd;
    bool no_pwait2;
    struct evloop__pollable embed; /* evloop_backend_fd's, once made (epoll_embed.h) */
};

static int epoll_init(void **out, _Atomic uint32_t *word, unsigned *caps)
{
    (void)word;
    *caps = 0;
    struct epoll_state *s = calloc(1, sizeof(*s));
    if (!s)
        return -ENOMEM;
    evloop__epoll_embed_clear(&s->embed);
    s->epfd = epoll_create1(EPOLL_CLOEXEC);
    if (s->epfd < 0) {
        int r = -errno;
        free(s);
        return r == -ENOSYS ? -ENOTSUP : r;
    }
    s->wakefd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = WAKE_TAG};
    if (s->wakefd < 0 || epoll_ctl(s->epfd, EPOLL_CTL_ADD, s->wakefd, &ev) < 0) {
        int r = -errno;
        if (s->wakefd >= 0)
            close(s->wakefd);
        close(s->epfd);
        free(s);
        return r;
    }
    *out = s;
    return 0;
}

static void epoll_destroy(void *state)
{
    struct epoll_state *s = state;
    evloop__epoll_embed_close(&s->embed);
    close(s->wakefd);
    close(s->epfd);
    free(s);
}

static int ctl(struct epoll_state *s, int op, int fd, uint32_t events, uint64_t tag)
{
    struct epoll_event ev = {.events = evloop__to_epoll(events), .data.u64 = tag};
    return epoll_ctl(s->epfd, op, fd, &ev) < 0 ? -errno : 0;
}

static int epoll_add(void *state, int fd, uint32_t events, uint64_t tag)
{
    return ctl(state, EPOLL_CTL_ADD, fd, events, tag);
}

static int epoll_modify(void *state, int fd, uint32_t events, uint64_t tag)
{
    return ctl(state, EPOLL_CTL_MOD, fd, events, tag);
}

static int epoll_remove(void *state, int fd)
{
    int r = ctl(state, EPOLL_CTL_DEL, fd, 0, 0);
    return r == -EBADF || r == -ENOENT ? 0 : r; /* trap b */
}

static int epoll_wait_events(void *state, int64_t timeout_ns, struct evloop__io_event *out, int max)
{
    struct epoll_state *s = state;
    struct epoll_event ev[64];
    if (max > 64)
        max = 64;
    int n = evloop__epoll_wait_ns(s->epfd, ev, max, timeout_ns, &s->no_pwait2); /* trap a */
    if (n < 0)
        return errno == EINTR ? 0 : -errno;
    int k = 0;
    for (int i = 0; i < n; i++) {
        if (ev[i].data.u64 == WAKE_TAG) {
            uint64_t v;
            ssize_t rd = read(s->wakefd, &v, sizeof(v)); /* trap d */
            (void)rd;
            continue;
        }
        out[k++] = (struct evloop__io_event){ev[i].data.u64, evloop__from_epoll(ev[i].events), 0};
    }
    return k;
}

static int epoll_wake(void *state)
{
    struct epoll_state *s = state;
    uint64_t one = 1;
    /* EAGAIN: the counter is already non-zero, so the loop will wake anyway. */
    return write(s->wakefd, &one, sizeof(one)) < 0 && errno != EAGAIN ? -errno : 0;
}

/* evloop_backend_fd: a set of its own (epoll_embed.h); once the core makes the loop park
 * with fds registered, the epoll fd itself joins it, readable while a registered fd is ready
 * or the wake eventfd is set. */
static int epoll_pollable_fd(void *state, struct evloop__pollable *out)
{
    return evloop__epoll_embed_open(&((struct epoll_state *)state)->embed, out);
}

static int epoll_pollable_watch(void *state, bool on)
{
    struct epoll_state *s = state;
    return evloop__epoll_embed_watch(&s->embed, s->epfd, on);
}

const struct evloop__backend evloop__backend_epoll = {
    .name = "epoll",
    .init = epoll_init,
    .destroy = epoll_destroy,
    .add = epoll_add,
    .modify = epoll_modify,
    .remove = epoll_remove,
    .wait = epoll_wait_events,
    .wake = epoll_wake,
    .pollable_fd = epoll_pollable_fd,
    .pollable_watch = epoll_pollable_watch,
};
