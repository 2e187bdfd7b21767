/* EVLOOP_* event bits to and from epoll's, for every backend built on an epoll set (epoll.c,
 * and the io_uring backend's io_uring.c). EPOLLRDHUP is asked for with readable so a peer's
 * half-close reads as readable and hung up, as with poll(2). */
#ifndef EVLOOP_EPOLL_EVENTS_H
#define EVLOOP_EPOLL_EVENTS_H

#include <stdint.h>
#include <sys/epoll.h>

#include "evloop.h"

static inline uint32_t evloop__to_epoll(uint32_t events)
{
    return (events & EVLOOP_READABLE ? EPOLLIN | EPOLLRDHUP : 0u) |
           (events & EVLOOP_WRITABLE ? EPOLLOUT : 0u);
}

static inline uint32_t evloop__from_epoll(uint32_t ev)
{
    return (ev & (EPOLLIN | EPOLLRDHUP) ? EVLOOP_READABLE : 0u) |
           (ev & EPOLLOUT ? EVLOOP_WRITABLE : 0u) |
           (ev & (EPOLLHUP | EPOLLRDHUP) ? EVLOOP_HANGUP : 0u) |
           (ev & EPOLLERR ? EVLOOP_ERROR : 0u);
}

#endif
