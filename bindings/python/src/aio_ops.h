// The seam between the loop bindings and the asyncio core: what evloop._asyncio_core
// (src/aio/) needs from a RawLoop of evloop._arena or evloop._chunk (src/raw_loop.cpp), as a
// table of calls (AioOps) that each loop module fills and hands over as the capsule
// "evloop.aio_ops" on its RawLoop class (RawLoop._aio_ops), and the readiness record (IoReady)
// that those calls fill. Included by both sides; the core calls no evloop_* function.
#ifndef EVLOOP_PY_AIO_OPS_H
#define EVLOOP_PY_AIO_OPS_H

#include <Python.h>

#include <cstdint>
#include <new>
#include <vector>

namespace aio {

// The readiness of the fds an asyncio loop watches (RawLoop.io_add_native): recorded by their
// C callback inside evloop_run_once, without the GIL and on the loop thread only; taken (read and
// emptied) by whoever called run_once, right after it returns. Each fd once, its events OR-ed.
struct IoReady {
    std::vector<int> fds;
    std::vector<unsigned> events; // by fd; 0: not in fds

    void add(int fd, unsigned ev) noexcept
    {
        try {
            if (size_t(fd) >= events.size())
                events.resize(size_t(fd) + 64, 0);
            if (!events[size_t(fd)])
                fds.push_back(fd);
            events[size_t(fd)] |= ev;
        } catch (const std::bad_alloc &) {
            // dropped: the fd is level-triggered, the next poll reports it again
        }
    }

    void clear() noexcept
    {
        for (int fd : fds)
            events[size_t(fd)] = 0;
        fds.clear();
    }
};

// What the core needs from the module of its RawLoop (a capsule "evloop.aio_ops" on each
// module's RawLoop class): the calls that differ by ingress variant.
struct AioOps {
    unsigned size;          // sizeof(AioOps), checked by the core
    PyTypeObject *raw_type; // that module's RawLoop
    // evloop_run_once(timeout_ns) with the GIL released while it waits (RawLoop::drive):
    // >= 0, or -1 with a Python exception set.
    int (*poll)(PyObject *raw, int64_t timeout_ns);
    // evloop_submit of a C no-op: a lane store, a wake syscall only if the loop sleeps.
    // 0 or a negative errno (-ESHUTDOWN once closed); never sets a Python exception.
    int (*wake)(PyObject *raw);
    // The readiness recorded by the last run_once (see IoReady).
    IoReady *(*io_ready)(PyObject *raw);
    // evloop_io_add (readiness recorded in IoReady), _modify, _remove for the asyncio
    // selector's fds (src/aio/fds.cpp): 0 or a negative errno, -ESHUTDOWN once the RawLoop is
    // freed; never set a Python exception.
    int (*io_add)(PyObject *raw, int fd, unsigned events);
    int (*io_modify)(PyObject *raw, int fd, unsigned events);
    int (*io_remove)(PyObject *raw, int fd);
    // evloop_work_submit / evloop_work_cancel for the asyncio loop's default executor
    // (src/aio/executor.cpp), with the loop thread's rules of those calls: 0 or a negative errno
    // (-ESHUTDOWN once the RawLoop is freed); never set a Python exception.
    int (*work_submit)(PyObject *raw, void (*work)(void *), void (*done)(void *, int), void *arg,
                       uint64_t *id);
    int (*work_cancel)(PyObject *raw, uint64_t id);
    // evloop_work_configure with the defaults but for the number of threads.
    int (*work_threads)(PyObject *raw, unsigned threads);
};

} // namespace aio

#endif
