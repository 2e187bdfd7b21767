/* The embedding fd (backend.h, struct evloop__pollable) for every backend built on an epoll
 * set (epoll.c, and the io_uring backend's io_uring.c): an epoll set of its own holding an
 * eventfd, the wake of a parked loop, and, while watched, the backend's pollable fd, nested
 * (an epoll fd polls readable while its set has a ready fd). */
#ifndef EVLOOP_EPOLL_EMBED_H
#define EVLOOP_EPOLL_EMBED_H

#include <errno.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "backend.h"

static inline void evloop__epoll_embed_clear(struct evloop__pollable *p)
{
    *p = (struct evloop__pollable){-1, -1, -1};
}

/* A backend's pollable_fd (backend.h): makes the set and its eventfd into *p, which the
 * backend keeps (and closes), and *out. Returns 0 or -errno (nothing is left open then). */
static inline int evloop__epoll_embed_open(struct evloop__pollable *p, struct evloop__pollable *out)
{
    int set = epoll_create1(EPOLL_CLOEXEC);
    if (set < 0)
        return -errno;
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 0};
    if (efd < 0 || epoll_ctl(set, EPOLL_CTL_ADD, efd, &ev) < 0) {
        int r = -errno;
        if (efd >= 0)
            close(efd);
        close(set);
        return r;
    }
    *p = (struct evloop__pollable){set, efd, efd};
    *out = *p;
    return 0;
}

/* Puts fd (the backend's own pollable fd) into the set (on) or takes it out. */
static inline int evloop__epoll_embed_watch(const struct evloop__pollable *p, int fd, bool on)
{
    struct epoll_event ev = {.events = EPOLLIN, .data.u64 = 1};
    return epoll_ctl(p->fd, on ? EPOLL_CTL_ADD : EPOLL_CTL_DEL, fd, &ev) < 0 ? -errno : 0;
}

static inline void evloop__epoll_embed_close(struct evloop__pollable *p)
{
    if (p->fd >= 0)
        close(p->fd);
    if (p->wake_fd >= 0)
        close(p->wake_fd);
    evloop__epoll_embed_clear(p);
}

#endif
