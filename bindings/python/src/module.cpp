// The evloop Python extension: a 1:1 binding of include/evloop.h (the class RawLoop and the
// module functions), compiled once per ingress variant into evloop._arena and evloop._chunk,
// each linking its libevloop_<variant>.a. The Python API (evloop.Loop: seconds, handles,
// readers and writers, the exception handler, Ctrl-C) is Python, in evloop/_loop.py.
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
// either variant through the calls of its AioOps (src/aio_ops.h), which this file fills.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cerrno>
#include <memory>
#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

extern "C" {
#include "evloop.h"
}

#ifndef EVLOOP_PY_MODULE
#error "EVLOOP_PY_MODULE (the module name, _arena or _chunk) must be defined"
#endif
#ifndef EVLOOP_PY_VARIANT
#error "EVLOOP_PY_VARIANT (\"arena\" or \"chunk\") must be defined"
#endif
#ifndef EVLOOP_PY_BACKENDS
#define EVLOOP_PY_BACKENDS ""
#endif

#ifdef EVLOOP_PY_WITH_BENCH
#include "pybench.h"
#endif
// EVLOOP_PY_STATS(X): X(name, "comment") for every field of struct evloop_stats, generated
// from include/evloop.h by src/stats_fields.py at build time.
#include "evloop_stats_fields.h"

#include "aio_ops.h"
#include "fastpath.h"

namespace EVLOOP_PY_MODULE {

void timer_trampoline(void *arg);
void signal_trampoline(void *arg);
void io_trampoline(void *arg, int fd, unsigned events);
void io_native_trampoline(void *arg, int fd, unsigned events);
char g_native_io; // the C arg of an fd added by io_add_native: no Python object
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
    // the release and the take back cost about 390 instructions and six atomic operations
    // (callgrind of a call_soon chain: 3,993 instructions per iteration with them, 3,603
    // without).
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
    void free()
    {
        if (!loop_)
            return;
        RunCtx ctx{this, report_to, loop_, nullptr, false, tls_ctx, false};
        tls_ctx = &ctx;
        int r = evloop_free(loop_);
        tls_ctx = ctx.prev;
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

void timer_trampoline(void *arg)
{
    CallbackGil gil;
    py::handle me(static_cast<PyObject *>(arg));
    Timer &t = me.cast<Timer &>();
    if (t.state == Timer::Armed) {
        py::object task = t.once ? std::move(t.task) : t.task;
        t.state = t.once ? Timer::Fired : t.state;
        call_task(task.ptr(), t.packed);
    }
    if (t.once) // the C library is done with a one-shot timer's arg
        me.dec_ref();
}

// Timer::cancel from another thread: the loop thread cancels, where no firing is under way.
void cancel_task(void *arg)
{
    CallbackGil gil;
    auto me = py::reinterpret_steal<py::object>(static_cast<PyObject *>(arg)); // the task's
    Timer &t = me.cast<Timer &>();
    if (evloop_timer_cancel(t.owner->raw(), t.id) == 0)
        me.dec_ref(); // the C reference
}

bool Timer::cancel()
{
    if (state != Armed)
        return false;
    state = Cancelled; // a firing on its way skips the call
    py::object drop = std::move(task);
    py::object me = py::cast(this, py::return_value_policy::reference);
    evloop *l = owner->raw();
    if (evloop_on_loop_thread(l)) {
        if (evloop_timer_cancel(l, id) == 0)
            me.dec_ref(); // the C reference
    } else if (evloop_submit_internal(l, cancel_task, me.inc_ref().ptr()) < 0) {
        me.dec_ref(); // refused, the loop is stopping: its end releases the C reference
    }
    return true;
}

bool Timer::again(uint64_t delay_ns)
{
    int r = state == Armed ? evloop_timer_again(owner->raw(), id, delay_ns) : -ENOENT;
    if (r != -ENOENT)
        check(r, "timer_again");
    return r == 0;
}

bool Timer::active() const
{
    return state == Armed && evloop_state(owner->raw()) < EVLOOP_TERMINATING;
}

void RawLoop::signal_stop_task(void *arg)
{
    CallbackGil gil;
    RawLoop *l = static_cast<RawLoop *>(tls_ctx->owner);
    int signum = int(reinterpret_cast<intptr_t>(arg));
    if (evloop_signal_stop(l->raw(), signum) == 0)
        Py_XDECREF(take(l->sigs_, signum));
}

void signal_trampoline(void *arg)
{
    CallbackGil gil;
    PyObject *fn = Py_NewRef(static_cast<PyObject *>(arg)); // it may stop its own signal
    call_task(fn, false);
    Py_DECREF(fn);
}

// The release notification: the loop drops a registration's arg without running it.
void release_cb(void *arg)
{
    if (!arg || arg == &g_native_io) // the PREPARE hook's, an fd of io_add_native
        return;
    CallbackGil gil;
    py::handle h(static_cast<PyObject *>(arg));
    if (py::isinstance<Timer>(h) && h.cast<Timer &>().state == Timer::Armed) {
        h.cast<Timer &>().state = Timer::Released;
        h.cast<Timer &>().task = py::none();
    }
    h.dec_ref();
}

// fn(fd, n) with the GIL held; takes a reference to fn (the call may drop the other ones).
void call_fd_int(PyObject *fn, int fd, PyObject *n)
{
    PyObject *a[2] = {PyLong_FromLong(fd), n};
    PyObject *r = a[0] && a[1] ? PyObject_Vectorcall(fn, a, 2, nullptr) : nullptr;
    Py_XDECREF(a[0]);
    Py_XDECREF(a[1]);
    if (r)
        Py_DECREF(r);
    else
        report(fn);
    Py_DECREF(fn);
}

// Inside evloop_run_once (drive), on the loop thread, without the GIL: only recorded.
void io_native_trampoline(void *, int fd, unsigned events)
{
    if (tls_ctx)
        static_cast<RawLoop *>(tls_ctx->owner)->aio_io.add(fd, events);
}

void io_trampoline(void *arg, int fd, unsigned events)
{
    CallbackGil gil;
    call_fd_int(Py_NewRef(static_cast<PyObject *>(arg)), fd, PyLong_FromUnsignedLong(events));
}

// A completion operation's C arg: the callable, and the buffer it reads into or sends from,
// held until its one callback; released before the call, which may use the buffer again.
struct Op {
    py::object fn;
    Py_buffer view{};
    ~Op()
    {
        if (view.obj)
            PyBuffer_Release(&view);
    }
};

void op_trampoline(void *arg, int fd, int64_t res)
{
    CallbackGil gil;
    PyObject *fn = static_cast<Op *>(arg)->fn.release().ptr();
    delete static_cast<Op *>(arg);
    call_fd_int(fn, fd, PyLong_FromLongLong(res));
}

void RawLoop::start_op(py::object fn, py::object buf, int flags, int fd)
{
    evloop *l = get();
    if (!PyCallable_Check(fn.ptr()))
        throw py::type_error("callback must be callable");
    auto op = std::make_unique<Op>();
    op->fn = std::move(fn);
    if (!buf.is_none() && PyObject_GetBuffer(buf.ptr(), &op->view, flags) < 0)
        throw py::error_already_set();
    void *data = op->view.buf;
    size_t len = size_t(op->view.len);
    int r = buf.is_none() ? evloop_accept(l, fd, op_trampoline, op.get())
            : flags & PyBUF_WRITABLE ? evloop_recv(l, fd, data, len, op_trampoline, op.get())
                                     : evloop_send(l, fd, data, len, op_trampoline, op.get());
    check(r, buf.is_none() ? "accept" : flags & PyBUF_WRITABLE ? "recv" : "send");
    op.release(); // the C library's until the callback
}

// The RawLoop in a Python RawLoop object (pybind11's simple instance layout); the caller
// knows obj is one (a method descriptor or the core's attach checked it).
RawLoop *raw_of(PyObject *obj)
{
    auto *inst = reinterpret_cast<py::detail::instance *>(obj);
    return inst->get_value_and_holder().value_ptr<RawLoop>();
}

evloop *raw_loop_of(PyObject *self)
{
    RawLoop *l = raw_of(self);
    if (!l || !l->raw())
        set_error(-ESHUTDOWN, "the loop is closed");
    return l ? l->raw() : nullptr;
}

// The asyncio loop's native core (evloop._asyncio_core) drives a RawLoop of this module through
// these calls (its AioOps, src/aio_ops.h); the capsule is RawLoop._aio_ops.
int aio_poll(PyObject *raw, int64_t timeout_ns)
{
    RawLoop *l = raw_of(raw);
    try {
        l->drive(true, timeout_ns);
        return 0;
    } catch (py::error_already_set &e) {
        e.restore();
    } catch (const Errno &e) {
        set_error(e.err, e.what);
    }
    return -1;
}

int aio_wake(PyObject *raw)
{
    RawLoop *l = raw_of(raw);
    return l && l->raw() ? evloop_submit(l->raw(), noop_task, nullptr) : -ESHUTDOWN;
}

aio::IoReady *aio_io_ready(PyObject *raw)
{
    return &raw_of(raw)->aio_io;
}

evloop *aio_loop(PyObject *raw)
{
    RawLoop *l = raw_of(raw);
    return l ? l->raw() : nullptr;
}

// The fds of the asyncio selector: added as io_add_native adds them (no Python object as the
// C arg, so RawLoop::fds_ has nothing to drop on removal); the GIL is kept, as the native
// callback never takes it.
int aio_io_add(PyObject *raw, int fd, unsigned events)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_io_add(l, fd, events, io_native_trampoline, &g_native_io) : -ESHUTDOWN;
}

int aio_io_modify(PyObject *raw, int fd, unsigned events)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_io_modify(l, fd, events) : -ESHUTDOWN;
}

int aio_io_remove(PyObject *raw, int fd)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_io_remove(l, fd) : -ESHUTDOWN;
}

aio::AioOps g_aio_ops = {sizeof(aio::AioOps), nullptr,     aio_poll,      aio_wake,
                         aio_io_ready,        aio_io_add,  aio_io_modify, aio_io_remove};

py::dict profile_dict(const evloop_profile &p)
{
    return py::dict(py::arg("version") = p.version, py::arg("ncpu") = p.ncpu,
                    py::arg("backend") = std::string(p.backend), py::arg("spin_ns") = p.spin_ns,
                    py::arg("spin_max_ns") = p.spin_max_ns,
                    py::arg("batch_budget") = p.batch_budget, py::arg("wake_ns") = p.wake_ns,
                    py::arg("handoff_ns") = p.handoff_ns,
                    py::arg("readiness_epoll_ns") = p.readiness_ns[0],
                    py::arg("readiness_io_uring_ns") = p.readiness_ns[1],
                    py::arg("readiness_kqueue_ns") = p.readiness_ns[2]);
}

py::dict autotune(double max_seconds, std::optional<std::string> save)
{
    evloop_autotune_options opt{max_seconds, save ? save->c_str() : nullptr};
    evloop_profile p{};
    int r;
    {
        py::gil_scoped_release nogil;
        r = evloop_autotune(&p, &opt);
    }
    check(r, p.version ? "evloop_autotune: saving the profile" : "evloop_autotune");
    return profile_dict(p);
}

} // namespace EVLOOP_PY_MODULE

PYBIND11_MODULE(EVLOOP_PY_MODULE, m)
{
    using namespace EVLOOP_PY_MODULE;
    loop_of = raw_loop_of; // fastpath.h's calls find the RawLoop's evloop through it
    m.doc() = "evloop's C API, ingress variant '" EVLOOP_PY_VARIANT "' (use the evloop package)";

    py::module_ common = py::module_::import("evloop._common");
    g_error = py::object(common.attr("Error")).release();
    g_closed_error = py::object(common.attr("LoopClosedError")).release();
    py::register_local_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const Errno &e) {
            set_error(e.err, e.what);
        }
    });

    m.attr("VARIANT") = EVLOOP_PY_VARIANT;
    m.attr("VERSION_INFO") =
        py::make_tuple(EVLOOP_VERSION_MAJOR, EVLOOP_VERSION_MINOR, EVLOOP_VERSION_PATCH);
    m.def("version", &evloop_version, "evloop_version(): the library's \"MAJOR.MINOR.PATCH\".");
    m.attr("BACKENDS") = EVLOOP_PY_BACKENDS; // compiled in, best first, ","-separated
    m.attr("READABLE") = unsigned(EVLOOP_READABLE);
    m.attr("WRITABLE") = unsigned(EVLOOP_WRITABLE);
    m.attr("HANGUP") = unsigned(EVLOOP_HANGUP);
    m.attr("ERROR") = unsigned(EVLOOP_ERROR);
    m.def("ingress", &evloop_ingress, "evloop_ingress(): the variant linked.");
    m.def("strerror", &evloop_strerror, py::arg("err"), "evloop_strerror(err).");
    m.def("now_ns", &evloop_now_ns, "evloop_now_ns(): the loops' clock, ns.");
    m.def("autotune", &autotune, py::arg("max_seconds"), py::arg("save") = py::none(),
          "evloop_autotune, with the GIL released; the profile as a dict.");
    m.def("check_signals", []() {
              if (PyErr_CheckSignals() < 0)
                  throw py::error_already_set();
          }, "PyErr_CheckSignals(): runs the Python signal handlers now (main thread).");
    m.def("write_unraisable", [](py::object exc, py::object obj) {
              PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(exc.ptr())), exc.ptr());
              PyErr_WriteUnraisable(obj.ptr());
          }, py::arg("exc"), py::arg("obj"), "PyErr_WriteUnraisable: exc to sys.unraisablehook.");
    m.def("_set_lazy_gil", [](bool on) { g_lazy_gil = on; }, py::arg("on"),
          "Testing: keep the GIL between the callbacks of a batch (default True).");

    py::class_<struct evloop_stats> stats(m, "Stats", py::module_local(),
                                          "struct evloop_stats as read-only fields.");
#define EVLOOP_PY_FIELD(f, doc) stats.def_readonly(#f, &evloop_stats::f, doc);
    EVLOOP_PY_STATS(EVLOOP_PY_FIELD)
    py::list fields;
#define EVLOOP_PY_NAME(f, doc) fields.append(#f);
    EVLOOP_PY_STATS(EVLOOP_PY_NAME)
    stats.attr("_fields") = py::tuple(fields);

    py::class_<Timer>(m, "Timer", py::module_local(), "A timer of RawLoop.timer_start.")
        .def_readonly("id", &Timer::id)
        .def("cancel", &Timer::cancel, "True if this call stopped the timer (evloop_timer_cancel).")
        .def("again", &Timer::again, py::arg("delay_ns"),
             "evloop_timer_again: next firing delay_ns from now; False if not armed.")
        .def_property_readonly("active", &Timer::active, "Armed and its loop not stopping.")
        .def_property_readonly("cancelled", [](const Timer &t) {
            return t.state == Timer::Cancelled || t.state == Timer::Released;
        }, "Cancelled, or dropped unfired at the loop's end.");

    py::class_<RawLoop> cls(m, "RawLoop", py::module_local(), "One evloop; the C calls.");
    cls.def(py::init<std::optional<std::string>, int64_t, unsigned, bool,
                     std::optional<std::string>, std::optional<std::string>>(),
            py::arg("backend") = py::none(), py::arg("spin_ns") = -1,
            py::arg("batch_budget") = 0, py::arg("auto_exit") = false,
            py::arg("profile") = py::none(), py::arg("fence") = py::none(), "evloop_new.")
        .def("run", [](RawLoop &l) { l.drive(false, 0); },
             "evloop_run, with the GIL released while the loop waits.")
        .def("run_once", [](RawLoop &l, int64_t timeout_ns) { return l.drive(true, timeout_ns); },
             py::arg("timeout_ns"), "evloop_run_once: the callbacks run.")
        .def("backend_fd", &RawLoop::backend_fd, "evloop_backend_fd.")
        .def("backend_timeout_ns", &RawLoop::backend_timeout_ns, "evloop_backend_timeout_ns.")
        .def("stop", &RawLoop::stop, "evloop_stop; a no-op once freed.")
        .def("free", &RawLoop::free, "evloop_free; idempotent.")
        .def_property_readonly("closed", [](const RawLoop &l) { return !l.raw(); })
        .def("timer_start", &RawLoop::timer_start, py::arg("delay_ns"), py::arg("interval_ns"),
             py::arg("fn"), "timer_start(delay_ns, interval_ns, fn, *args) -> Timer.")
        .def("signal_start", &RawLoop::signal_start, py::arg("signum"), py::arg("fn"),
             "evloop_signal_start: fn() on the loop thread after deliveries of signum.")
        .def("signal_stop", &RawLoop::signal_stop, py::arg("signum"),
             "evloop_signal_stop; from another thread the loop thread does it a moment later.")
        .def("io_add", &RawLoop::io_add, py::arg("fd"), py::arg("events"), py::arg("fn"),
             "evloop_io_add: fn(fd, revents) on the loop thread while fd is ready.")
        .def("io_modify", &RawLoop::io_modify, py::arg("fd"), py::arg("events"))
        .def("io_add_native", &RawLoop::io_add_native, py::arg("fd"), py::arg("events"),
             "evloop_io_add with a C callback that only records the readiness, for take_io().")
        .def("take_io", &RawLoop::take_io,
             "[(fd, revents)] of the io_add_native fds since the last take (emptied).")
        .def("io_remove", &RawLoop::io_remove, py::arg("fd"),
             "evloop_io_remove: False if fd was not registered.")
        .def("accept", &RawLoop::accept, py::arg("fd"), py::arg("fn"),
             "evloop_accept: fn(fd, res), res the accepted fd or a negative errno.")
        .def("recv", &RawLoop::recv, py::arg("fd"), py::arg("buf"), py::arg("fn"),
             "evloop_recv into buf (writable, held until fn(fd, res) runs).")
        .def("send", &RawLoop::send, py::arg("fd"), py::arg("buf"), py::arg("fn"),
             "evloop_send of buf (held until fn(fd, res) runs; res = len(buf) when all sent).")
        .def("op_cancel", &RawLoop::op_cancel, py::arg("fd"),
             "evloop_op_cancel: False if nothing was pending on fd.")
        .def("on_loop_thread", &RawLoop::on_loop_thread, "evloop_on_loop_thread.")
        .def_readwrite("on_error", &RawLoop::on_error,
                       "on_error(exc, callback) for what a callback raises; without it, or for\n"
                       "what it raises, the loop stops and run() raises that exception.")
        .def("stats", &RawLoop::stats, "evloop_stats, as a Stats.")
        .def_property_readonly("state", &RawLoop::state, "evloop_state, as an int.")
        .def_property_readonly("backend", &RawLoop::backend, "evloop_backend.")
        .def("_live_fds", &RawLoop::live_fds);
    for (PyMethodDef &def : g_fast_methods)
        cls.attr(def.ml_name) = py::reinterpret_steal<py::object>(
            PyDescr_NewMethod(reinterpret_cast<PyTypeObject *>(cls.ptr()), &def));

    g_aio_ops.raw_type = reinterpret_cast<PyTypeObject *>(cls.ptr());
    cls.attr("_aio_ops") = py::capsule(&g_aio_ops, "evloop.aio_ops");

#ifdef EVLOOP_PY_WITH_BENCH
    evloop_pybench_register(m);
#endif
}
