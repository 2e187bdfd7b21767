// RawLoop: one evloop and its C calls, the class that evloop._arena and evloop._chunk bind
// (src/module.cpp), and Timer, its timers. Compiled once per ingress variant, inside the
// namespace of that module (EVLOOP_PY_MODULE); the bodies that are not in the classes are in
// src/raw_loop.cpp.
//
// Ownership: every C arg is one strong reference to a Python object, which the C library
// hands back exactly once: a task's callable, or the tuple (fn, *args), is released by its
// trampoline after the call (every accepted task runs, in evloop_free too); a one-shot
// Timer by its firing; an operation's Op by its callback; whatever the loop drops without
// being asked (timers, fds and signals left at its end) by the release notification
// (release_cb); the rest by the call that removes it (io_remove, signal_stop, cancel),
// on the loop thread, where no callback of it can still be on its way.
// GIL: run() releases it while evloop_run works; a trampoline takes it around each call.
// The measured fast paths (the GIL kept across a batch, METH_FASTCALL submits) and what they
// stand on (RunCtx, CallbackGil, the task trampolines) are in src/fastpath.h. The asyncio loop's
// native core is its own module, evloop._asyncio_core (src/aio/), which drives a RawLoop of
// either variant through the calls of its AioOps (src/aio_ops.h), which raw_loop.cpp fills.
#ifndef EVLOOP_PY_RAW_LOOP_H
#define EVLOOP_PY_RAW_LOOP_H

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>

extern "C" {
#include "evloop.h"
}

#ifndef EVLOOP_PY_MODULE
#error "EVLOOP_PY_MODULE (the module name, _arena or _chunk) must be defined"
#endif

#include "aio_ops.h"
#include "fastpath.h"

namespace EVLOOP_PY_MODULE {

void timer_trampoline(void *arg);
void signal_trampoline(void *arg);
void io_trampoline(void *arg, int fd, unsigned events);
void io_native_trampoline(void *arg, int fd, unsigned events);
extern char g_native_io; // the C arg of an fd added by io_add_native: no Python object
void op_trampoline(void *arg, int fd, int64_t res);
void release_cb(void *arg);

class RawLoop;

// A timer (evloop_timer_start): its Python object is the C arg. Armed until its one-shot
// firing, a cancel, or the loop's end (Released); an Armed timer's loop is alive.
struct Timer {
    enum State { Armed, Fired, Cancelled, Released };
    RawLoop *owner = nullptr;
    evloop_timer_id id = 0;
    py::object task; // fn or (fn, *args); dropped once it cannot run any more
    bool packed = false, once = false;
    State state = Armed;

    bool cancel();
    bool again(uint64_t delay_ns);
    bool active() const;
};

class RawLoop {
public:
    RawLoop(std::optional<std::string> backend, int64_t spin_ns, unsigned batch_budget,
            bool auto_exit, std::optional<std::string> profile, std::optional<std::string> fence)
    {
        evloop_config cfg;
        evloop_config_init(&cfg);
        cfg.backend = backend ? backend->c_str() : nullptr;
        cfg.spin_ns = spin_ns;
        cfg.batch_budget = batch_budget;
        cfg.auto_exit = auto_exit;
        cfg.profile = profile ? profile->c_str() : nullptr;
        cfg.fence = fence ? fence->c_str() : nullptr;
        int r = evloop_new(&loop_, &cfg);
        if (r < 0) // evloop_last_error() names the argument, variable or file
            throw Errno{r, *evloop_last_error() ? evloop_last_error() : "evloop_new"};
        evloop_set_release_cb(loop_, release_cb);
        r = evloop_hook_add(loop_, EVLOOP_HOOK_PREPARE, prepare_hook, nullptr);
        if (r < 0) {
            evloop_free(loop_);
            check(r, "evloop_hook_add");
        }
    }

    ~RawLoop()
    {
        try {
            free();
        } catch (py::error_already_set &e) {
            e.discard_as_unraisable("evloop: freeing a loop");
        } catch (...) {
        }
    }

    evloop *get() const
    {
        if (!loop_)
            throw Errno{-ESHUTDOWN, "the loop is closed"};
        return loop_;
    }
    evloop *raw() const { return loop_; }

    // evloop_run (once false) or evloop_run_once, with the GIL released while the loop works.
    // run_once(0) keeps it: that iteration cannot spin or block (its wait is a poll with a
    // zero timeout), and an asyncio loop with handles ready calls it every iteration, where
    // the release and the take back are a share of the iteration's instructions worth saving
    // (callgrind: tournament/results/design-figures.md).
    int drive(bool once, int64_t timeout_ns)
    {
        evloop *l = get();
        bool no_wait = once && timeout_ns == 0 && g_lazy_gil;
        RunCtx ctx{this, report_to, l, nullptr, no_wait, tls_ctx, no_wait};
        tls_ctx = &ctx;
        if (!no_wait)
            ctx.saved = PyEval_SaveThread();
        int r = once ? evloop_run_once(l, timeout_ns) : evloop_run(l);
        if (ctx.saved) // else the GIL is still ours (kept after the last callback)
            PyEval_RestoreThread(ctx.saved);
        tls_ctx = ctx.prev;
        if (r != -EBUSY && evloop_state(l) == EVLOOP_TERMINATED)
            forget_registrations();
        raise_fatal();
        check(r, once ? "run_once" : "run");
        return r;
    }

    void stop()
    {
        if (loop_)
            evloop_stop(loop_);
    }

    // evloop_free: tasks accepted but never run are run now, on this thread. Idempotent.
    // Once the work pool has started (the asyncio loop's default executor, src/aio/executor.cpp)
    // the GIL is released while it works: it waits for running items and joins the pool's
    // threads, whose Python calls and thread states need the GIL; the RawLoop reads as closed
    // meanwhile, so no other thread's call reaches the loop being freed.
    void free()
    {
        if (!loop_)
            return;
        evloop *l = loop_;
        struct evloop_work_stats ws {};
        bool release = evloop_work_stats(l, &ws) == 0 && ws.threads > 0;
        RunCtx ctx{this, report_to, l, nullptr, false, tls_ctx, false};
        tls_ctx = &ctx;
        if (release) {
            loop_ = nullptr;
            ctx.saved = PyEval_SaveThread();
        }
        int r = evloop_free(l);
        if (ctx.saved)
            PyEval_RestoreThread(ctx.saved);
        tls_ctx = ctx.prev;
        if (r < 0)
            loop_ = l;
        check(r, "free");
        loop_ = nullptr;
        forget_registrations();
        raise_fatal();
    }

    // fn(*args) after delay_ns, then every interval_ns unless 0: a Timer, whose Python object
    // is the C arg (released by a one-shot's firing, a cancel, or release_cb).
    py::object timer_start(uint64_t delay_ns, uint64_t interval_ns, py::object fn, py::args args)
    {
        evloop *l = get();
        evloop_cb cb;
        auto task = py::reinterpret_steal<py::object>(
            pack_task(fn.ptr(), &PyTuple_GET_ITEM(args.ptr(), 0), Py_ssize_t(args.size()), &cb));
        if (!task)
            throw py::error_already_set();
        auto *t = new Timer{this, 0, std::move(task), cb == task_trampoline<true>,
                            interval_ns == 0};
        py::object obj = py::cast(t, py::return_value_policy::take_ownership);
        check(evloop_timer_start(l, delay_ns, interval_ns, timer_trampoline, obj.ptr(), &t->id),
              "timer_start");
        obj.inc_ref(); // the C reference; the GIL is held: the timer cannot fire before
        return obj;
    }

    // Fds and signals: the C reference to fn is dropped by io_remove/signal_stop (which the
    // release notification leaves to the caller), or by release_cb; fds_ and sigs_ only find
    // it again for that.
    void io_add(int fd, unsigned events, py::object fn)
    {
        if (!PyCallable_Check(fn.ptr()))
            throw py::type_error("callback must be callable");
        check(evloop_io_add(get(), fd, events, io_trampoline, fn.ptr()), "io_add");
        fds_[fd] = fn.inc_ref().ptr();
    }

    // For the asyncio loop's core (src/aio/core.cpp): fd's readiness only recorded, in aio_io,
    // by a C callback that needs no GIL; taken after run_once (take_io, or the core).
    void io_add_native(int fd, unsigned events)
    {
        check(evloop_io_add(get(), fd, events, io_native_trampoline, &g_native_io), "io_add");
    }

    // What the fds added by io_add_native reported since the last take: [(fd, revents)].
    py::list take_io()
    {
        py::list out;
        for (int fd : aio_io.fds)
            out.append(py::make_tuple(fd, aio_io.events[size_t(fd)]));
        aio_io.clear();
        return out;
    }

    aio::IoReady aio_io; // the readiness io_native_trampoline records (loop thread only)

    void io_modify(int fd, unsigned events) { check(evloop_io_modify(get(), fd, events), "io_modify"); }

    bool io_remove(int fd)
    {
        PyObject *fn = take(fds_, fd);
        int r;
        {
            // From another thread this waits for a running callback of fd, which needs the GIL.
            py::gil_scoped_release nogil;
            r = loop_ ? evloop_io_remove(loop_, fd) : -ENOENT;
        }
        if (r == 0) // no callback of fd starts after evloop_io_remove returns
            Py_XDECREF(fn);
        else if (fn)
            fds_.emplace(fd, fn);
        if (r != -ENOENT)
            check(r, "io_remove");
        return r == 0;
    }

    void signal_start(int signum, py::object fn)
    {
        if (!PyCallable_Check(fn.ptr()))
            throw py::type_error("callback must be callable");
        check(evloop_signal_start(get(), signum, signal_trampoline, fn.ptr()), "signal_start");
        sigs_[signum] = fn.inc_ref().ptr();
    }

    // On the loop thread at once; from another thread a delivery the loop has begun may still
    // run, so the loop thread stops it (signal_stop_task). False if signum was not watched.
    bool signal_stop(int signum)
    {
        if (!loop_ || !sigs_.count(signum))
            return false;
        if (!evloop_on_loop_thread(loop_)) {
            if (evloop_submit_internal(loop_, signal_stop_task, reinterpret_cast<void *>(
                                                                    intptr_t(signum))) < 0)
                return false; // stopping: its end releases the watch
            return true;
        }
        int r = evloop_signal_stop(loop_, signum);
        if (r == 0)
            Py_XDECREF(take(sigs_, signum));
        return r == 0;
    }
    static void signal_stop_task(void *arg);

    // Completion operations: fn(fd, res) runs once on the loop thread (res: the accepted fd,
    // the bytes read or sent, or a negative errno, -ECANCELED after op_cancel or stop).
    void accept(int fd, py::object fn) { start_op(fn, py::none(), 0, fd); }
    void recv(int fd, py::object buf, py::object fn) { start_op(fn, buf, PyBUF_WRITABLE, fd); }
    void send(int fd, py::object buf, py::object fn) { start_op(fn, buf, PyBUF_SIMPLE, fd); }

    bool op_cancel(int fd)
    {
        int r = evloop_op_cancel(get(), fd);
        if (r != -ENOENT)
            check(r, "op_cancel");
        return r == 0;
    }

    bool on_loop_thread() const { return evloop_on_loop_thread(loop_); }
    int backend_fd() const
    {
        int r = evloop_backend_fd(get());
        check(r, "backend_fd");
        return r;
    }
    int64_t backend_timeout_ns() const
    {
        int64_t r = evloop_backend_timeout_ns(get());
        if (r < -1)
            check(int(r), "backend_timeout_ns");
        return r;
    }

    // RunCtx's report (fastpath.h) for this loop.
    static void report_to(void *self, PyObject *fn)
    {
        static_cast<RawLoop *>(self)->report(fn);
    }

    // With the GIL and the exception a callback fn raised: on_error(exc, fn). Without
    // on_error, or for what on_error raises, the loop stops and run() (or free()) raises it.
    void report(PyObject *fn)
    {
        py::error_already_set e;
        if (on_error.is_none())
            return fatal(std::move(e));
        if (e.trace()) // before 3.12, the traceback is not in the fetched exception yet
            PyException_SetTraceback(e.value().ptr(), e.trace().ptr());
        try {
            on_error(e.value(), py::handle(fn));
        } catch (py::error_already_set &e2) {
            fatal(std::move(e2));
        }
    }

    struct evloop_stats stats() const
    {
        struct evloop_stats s {};
        check(evloop_stats(get(), &s), "stats");
        return s;
    }

    int state() const { return loop_ ? int(evloop_state(loop_)) : int(EVLOOP_TERMINATED); }
    const char *backend() const { return evloop_backend(get()); }
    size_t live_fds() const { return fds_.size(); }

    py::object on_error = py::none();

private:
    static PyObject *take(std::unordered_map<int, PyObject *> &m, int key)
    {
        auto it = m.find(key);
        PyObject *v = it == m.end() ? nullptr : it->second;
        if (v)
            m.erase(it);
        return v;
    }

    void start_op(py::object fn, py::object buf, int flags, int fd);

    void fatal(py::error_already_set e)
    {
        if (!fatal_)
            fatal_.emplace(std::move(e));
        if (loop_)
            evloop_stop(loop_);
    }

    void raise_fatal()
    {
        if (!fatal_)
            return;
        py::error_already_set e = std::move(*fatal_);
        fatal_.reset();
        throw e;
    }

    // The loop has terminated: release_cb has had every fd and signal still registered.
    void forget_registrations()
    {
        fds_.clear();
        sigs_.clear();
    }

    evloop *loop_ = nullptr;
    std::optional<py::error_already_set> fatal_;
    std::unordered_map<int, PyObject *> fds_, sigs_; // not owning: the C references
};

// The RawLoop in a Python RawLoop object; its evloop for fastpath.h's calls (loop_of).
RawLoop *raw_of(PyObject *obj);
evloop *raw_loop_of(PyObject *self);

// What the asyncio core calls on a RawLoop of this module (the capsule RawLoop._aio_ops).
extern aio::AioOps g_aio_ops;

} // namespace EVLOOP_PY_MODULE

#endif
