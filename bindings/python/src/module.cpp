// The evloop Python extension: a 1:1 binding of include/evloop.h (the class RawLoop and the
// module functions), compiled once per ingress variant into evloop._arena and evloop._chunk,
// each linking its libevloop_<variant>.a. The Python API (evloop.Loop: seconds, handles,
// readers and writers, the exception handler, Ctrl-C) is Python, in evloop/_loop.py.
//
// Ownership: a task's callable, or the tuple (fn, *args), is its C arg: one strong reference,
// released by the trampoline after the call (the C library runs every task it accepted, in
// evloop_free too) or at once when the submit is refused. Timers and fds: see RawLoop.
// GIL: run() releases it while evloop_run works; a trampoline takes it around each call.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <cerrno>
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

namespace py = pybind11;

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *Py_NewRef(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
#endif

namespace EVLOOP_PY_MODULE {

// evloop.Error and evloop.LoopClosedError (evloop/_common.py, shared by both modules so that
// one except clause catches both variants); held for the life of the process.
py::handle g_error, g_closed_error;
bool g_lazy_gil = true;

// A negative errno of the C library as a C++ exception; the module's exception translator
// raises it as evloop.Error(errno, message), LoopClosedError for ESHUTDOWN.
struct Errno {
    int err;
    std::string what;
};

void set_error(int err, const std::string &what)
{
    std::string msg = what + (what.empty() ? "" : ": ") + evloop_strerror(err);
    py::set_error(err == -ESHUTDOWN ? g_closed_error : g_error, py::make_tuple(-err, msg));
}

void check(int r, const char *what)
{
    if (r < 0)
        throw Errno{r, what};
}

class RawLoop;

// What the thread running a loop's callbacks knows: set by run() and free(), the two calls
// inside which the C library runs callbacks; innermost first.
struct RunCtx {
    RawLoop *loop;
    PyThreadState *saved; // non-null while run() has released the GIL on this thread
    bool lazy;            // the GIL is kept between callbacks; a release task is queued
    RunCtx *prev;
};
thread_local RunCtx *tls_ctx = nullptr;

void release_gil_task(void *arg);

// Takes the GIL around one Python callback on the loop thread. After the callback the GIL is
// kept, and an internal task that releases it is queued instead: it runs before the loop can
// spin, poll or sleep (it is pending work), so the GIL is never held while the loop waits, and
// a batch of N callbacks costs one release/acquire instead of N. Measured with
// `examples/roundtrip.py --flood 100000 --eager-gil` (2 vCPUs, load 13, Python 3.11): a flood
// from another thread took 183 ns per callback so, 286 ns releasing after each callback.
class CallbackGil {
public:
    CallbackGil() : ctx_(tls_ctx)
    {
        if (ctx_ && ctx_->saved) {
            PyEval_RestoreThread(ctx_->saved);
            ctx_->saved = nullptr;
            mode_ = Restored;
        } else if (ctx_ && ctx_->lazy) {
            mode_ = Kept;
        } else {
            gstate_ = PyGILState_Ensure();
            mode_ = Ensured;
        }
    }
    ~CallbackGil();
    CallbackGil(const CallbackGil &) = delete;
    CallbackGil &operator=(const CallbackGil &) = delete;

private:
    enum Mode { Restored, Kept, Ensured };
    RunCtx *ctx_;
    Mode mode_;
    PyGILState_STATE gstate_{};
};

void report(PyObject *fn);

// Calls a task (fn, or the tuple (fn, *args) when packed) with the GIL held; an exception
// goes to the loop's on_error.
void call_task(PyObject *task, bool packed)
{
    PyObject *r, *fn = task;
    if (packed) {
        PyObject **it = &PyTuple_GET_ITEM(task, 0);
        fn = it[0];
        r = PyObject_Vectorcall(fn, it + 1, size_t(PyTuple_GET_SIZE(task) - 1), nullptr);
    } else {
        r = PyObject_CallNoArgs(fn);
    }
    if (r)
        Py_DECREF(r);
    else
        report(fn);
}

template <bool Packed> void task_trampoline(void *arg)
{
    CallbackGil gil;
    call_task(static_cast<PyObject *>(arg), Packed);
    Py_DECREF(static_cast<PyObject *>(arg));
}

// The task for fn(*args) (n args, maybe 0): a new reference, and its trampoline in *cb.
// NULL with an exception set when fn is not callable.
PyObject *pack_task(PyObject *fn, PyObject *const *args, Py_ssize_t n, evloop_cb *cb)
{
    if (!PyCallable_Check(fn)) {
        PyErr_Format(PyExc_TypeError, "callback must be callable, not %.200s",
                     Py_TYPE(fn)->tp_name);
        return nullptr;
    }
    *cb = n ? task_trampoline<true> : task_trampoline<false>;
    if (n == 0)
        return Py_NewRef(fn);
    PyObject *t = PyTuple_New(n + 1);
    for (Py_ssize_t i = 0; t && i <= n; i++)
        PyTuple_SET_ITEM(t, i, Py_NewRef(i ? args[i - 1] : fn));
    return t;
}

void timer_trampoline(void *key);
void io_trampoline(void *arg, int fd, unsigned events);
void op_trampoline(void *arg, int fd, int64_t res);

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
    void count_internal() { internal_tasks_++; }

    void run()
    {
        evloop *l = get();
        RunCtx ctx{this, nullptr, false, tls_ctx};
        tls_ctx = &ctx;
        ctx.saved = PyEval_SaveThread();
        int r = evloop_run(l);
        // evloop_run returns only after the release task queued with a kept GIL has run.
        if (ctx.saved)
            PyEval_RestoreThread(ctx.saved);
        tls_ctx = ctx.prev;
        if (r != -EBUSY)
            drop_timers_and_fds();
        raise_fatal();
        check(r, "run");
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
        RunCtx ctx{this, nullptr, false, tls_ctx};
        tls_ctx = &ctx;
        int r = evloop_free(loop_);
        tls_ctx = ctx.prev;
        check(r, "free");
        loop_ = nullptr;
        drop_timers_and_fds();
        raise_fatal();
    }

    // Timers. Until the C library says when it drops a timer's arg without running it
    // (cancelled, or left at the loop's end), the loop owns each timer's callable in timers_,
    // under a key of its own that is both the C arg and the id Python sees.
    uint64_t timer_start(uint64_t delay_ns, uint64_t interval_ns, py::object fn)
    {
        evloop *l = get();
        if (!PyCallable_Check(fn.ptr()))
            throw py::type_error("callback must be callable");
        uint64_t key = next_timer_++;
        Timer &t = timers_[key];
        t.fn = std::move(fn);
        t.once = interval_ns == 0;
        // The GIL is held until the entry is complete: the trampoline cannot look before.
        int r = evloop_timer_start(l, delay_ns, interval_ns, timer_trampoline,
                                   reinterpret_cast<void *>(key), &t.id);
        if (r < 0) {
            timers_.erase(key);
            check(r, "timer_start");
        }
        return key;
    }

    bool timer_cancel(uint64_t key)
    {
        auto it = timers_.find(key);
        if (it == timers_.end())
            return false;
        // 0: stopped; a firing begun already finds no entry. -ENOENT: the loop has taken it
        // to fire (its trampoline waits for the GIL) and runs it.
        int r = loop_ ? evloop_timer_cancel(loop_, it->second.id) : -ENOENT;
        if (r == 0)
            timers_.erase(it);
        return r == 0;
    }

    void fire_timer(uint64_t key)
    {
        auto it = timers_.find(key);
        if (it == timers_.end())
            return;
        py::object fn = it->second.fn; // alive across a cancel from the callback
        if (it->second.once)
            timers_.erase(it);
        call_task(fn.ptr(), false);
    }

    // Fds. fds_ owns each fd's callable and the C arg borrows it: evloop_io_remove
    // guarantees that no callback of the fd starts after it returns, so the entry goes then;
    // the loop's end drops the rest.
    void io_add(int fd, unsigned events, py::object fn)
    {
        if (!PyCallable_Check(fn.ptr()))
            throw py::type_error("callback must be callable");
        check(evloop_io_add(get(), fd, events, io_trampoline, fn.ptr()), "io_add");
        fds_[fd] = std::move(fn); // may replace an entry whose remove is still returning
    }

    void io_modify(int fd, unsigned events) { check(evloop_io_modify(get(), fd, events), "io_modify"); }

    bool io_remove(int fd)
    {
        auto it = fds_.find(fd);
        PyObject *fn = it == fds_.end() ? nullptr : it->second.ptr();
        int r;
        {
            // From another thread this waits for a running callback of fd, which needs the GIL.
            py::gil_scoped_release nogil;
            r = loop_ ? evloop_io_remove(loop_, fd) : -ENOENT;
        }
        it = fds_.find(fd); // another thread may have added fd again meanwhile
        if (r == 0 && it != fds_.end() && it->second.ptr() == fn)
            fds_.erase(it);
        if (r != -ENOENT)
            check(r, "io_remove");
        return r == 0;
    }

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

    struct Stats {
        struct evloop_stats c;
        uint64_t py_internal_tasks;
    };

    Stats stats() const
    {
        Stats s{};
        check(evloop_stats(get(), &s.c), "stats");
        s.py_internal_tasks = internal_tasks_;
        s.c.tasks_run -= std::min(s.c.tasks_run, s.py_internal_tasks);
        return s;
    }

    int state() const { return loop_ ? int(evloop_state(loop_)) : int(EVLOOP_TERMINATED); }
    const char *backend() const { return evloop_backend(get()); }
    size_t live_timers() const { return timers_.size(); }
    size_t live_fds() const { return fds_.size(); }

    py::object on_error = py::none();

private:
    struct Timer {
        evloop_timer_id id = 0;
        py::object fn;
        bool once = false;
    };

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

    // After evloop_run returned or evloop_free: the C library has dropped every timer and fd.
    void drop_timers_and_fds()
    {
        std::unordered_map<uint64_t, Timer> timers;
        std::unordered_map<int, py::object> fds;
        timers.swap(timers_); // released at return: their destructors may use the loop
        fds.swap(fds_);
    }

    evloop *loop_ = nullptr;
    std::optional<py::error_already_set> fatal_;
    std::unordered_map<uint64_t, Timer> timers_;
    uint64_t next_timer_ = 1;
    std::unordered_map<int, py::object> fds_;
    uint64_t internal_tasks_ = 0; // under the GIL
};

CallbackGil::~CallbackGil()
{
    if (mode_ == Restored) {
        // Refused (the loop is stopping, nothing left to batch): release it now.
        if (g_lazy_gil && evloop_submit_internal(ctx_->loop->raw(), release_gil_task, ctx_) == 0)
            ctx_->lazy = true;
        else
            ctx_->saved = PyEval_SaveThread();
    } else if (mode_ == Ensured) {
        PyGILState_Release(gstate_);
    }
}

void release_gil_task(void *arg)
{
    auto *ctx = static_cast<RunCtx *>(arg);
    if (ctx->lazy) { // with the GIL
        ctx->loop->count_internal();
        ctx->lazy = false;
        ctx->saved = PyEval_SaveThread();
    }
}

void report(PyObject *fn)
{
    if (tls_ctx)
        tls_ctx->loop->report(fn);
    else
        PyErr_WriteUnraisable(fn);
}

void timer_trampoline(void *key)
{
    CallbackGil gil;
    tls_ctx->loop->fire_timer(reinterpret_cast<uint64_t>(key));
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

// The hand-off: submit, submit_internal, queue_microtask and submit_batch are METH_FASTCALL
// methods of RawLoop, not pybind11 functions: a pybind11 def of the same submit
// (py::object fn, py::args) cost 249 ns per call against 101 ns here (200k submits to a loop
// not running; medians of 9 interleaved rounds, 2 vCPUs, load 15, Python 3.11), and in a
// flood from another thread 412 against 243 ns per task.

RawLoop *self_loop(PyObject *self)
{
    // self is a RawLoop (the method descriptor checked); pybind11's simple instance layout.
    RawLoop *l =
        reinterpret_cast<py::detail::instance *>(self)->get_value_and_holder().value_ptr<RawLoop>();
    if (!l || !l->raw())
        set_error(-ESHUTDOWN, "the loop is closed");
    return l && l->raw() ? l : nullptr;
}

template <int (*Push)(evloop *, evloop_cb, void *)>
PyObject *fast_submit(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "submit(fn, *args) needs fn");
        return nullptr;
    }
    RawLoop *l = self_loop(self);
    evloop_cb cb;
    PyObject *task = l ? pack_task(args[0], args + 1, n - 1, &cb) : nullptr;
    int r = task ? Push(l->raw(), cb, task) : 0;
    if (r < 0) {
        Py_DECREF(task);
        set_error(r, "");
    }
    return task && r == 0 ? Py_NewRef(Py_None) : nullptr;
}

// submit_batch(tasks): a sequence of callables or tuples (fn, *args); all or none.
PyObject *fast_submit_batch(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    RawLoop *l = n == 1 ? self_loop(self) : nullptr;
    if (n != 1 && !PyErr_Occurred())
        PyErr_SetString(PyExc_TypeError, "submit_batch(tasks) takes one sequence");
    PyObject *seq = l ? PySequence_Fast(args[0], "submit_batch needs a sequence") : nullptr;
    if (!seq)
        return nullptr;
    Py_ssize_t count = PySequence_Fast_GET_SIZE(seq), i = 0;
    PyObject **items = PySequence_Fast_ITEMS(seq);
    std::vector<evloop_task> tasks(size_t(count), evloop_task{nullptr, nullptr});
    for (; i < count; i++) {
        PyObject *it = items[i];
        bool packed = PyTuple_Check(it) && PyTuple_GET_SIZE(it) > 0; // a tuple is its own task
        if (!PyCallable_Check(packed ? PyTuple_GET_ITEM(it, 0) : it)) {
            PyErr_Format(PyExc_TypeError, "submit_batch: item %zd is not a callable or a "
                         "tuple (fn, *args)", i);
            break;
        }
        tasks[size_t(i)] = {packed ? task_trampoline<true> : task_trampoline<false>, Py_NewRef(it)};
    }
    int r = i == count ? evloop_submit_batch(l->raw(), tasks.data(), tasks.size()) : -1;
    if (r < 0) {
        for (Py_ssize_t j = 0; j < i; j++)
            Py_DECREF(static_cast<PyObject *>(tasks[size_t(j)].arg));
        if (i == count)
            set_error(r, "");
    }
    Py_DECREF(seq);
    return r == 0 ? Py_NewRef(Py_None) : nullptr;
}

PyMethodDef g_fast_methods[] = {
    {"submit", (PyCFunction)(void (*)(void))fast_submit<evloop_submit>, METH_FASTCALL,
     "submit(fn, *args): evloop_submit of fn(*args)."},
    {"submit_internal", (PyCFunction)(void (*)(void))fast_submit<evloop_submit_internal>,
     METH_FASTCALL, "submit_internal(fn, *args): evloop_submit_internal of fn(*args)."},
    {"queue_microtask", (PyCFunction)(void (*)(void))fast_submit<evloop_queue_microtask>,
     METH_FASTCALL, "queue_microtask(fn, *args): evloop_queue_microtask of fn(*args)."},
    {"submit_batch", (PyCFunction)(void (*)(void))fast_submit_batch, METH_FASTCALL,
     "submit_batch(tasks): evloop_submit_batch of callables or tuples (fn, *args)."},
};

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

int probe_backend(const std::string &name)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = name.c_str();
    cfg.profile = "";
    evloop *loop = nullptr;
    py::gil_scoped_release nogil;
    int r = evloop_new(&loop, &cfg);
    if (r == 0)
        evloop_free(loop);
    return r;
}

} // namespace EVLOOP_PY_MODULE

PYBIND11_MODULE(EVLOOP_PY_MODULE, m)
{
    using namespace EVLOOP_PY_MODULE;
    using Stats = RawLoop::Stats;
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
    m.def("probe_backend", &probe_backend, py::arg("name"),
          "0 when a loop with this backend starts here, else the negative errno.");
    m.def("autotune", &autotune, py::arg("max_seconds"), py::arg("save") = py::none(),
          "evloop_autotune, with the GIL released; the profile as a dict.");
    m.def("profile_load", [](const std::string &path) {
              evloop_profile p{};
              check(evloop_profile_load(&p, path.c_str()), "evloop_profile_load");
              return profile_dict(p);
          }, py::arg("path"), "evloop_profile_load(path): the profile as a dict.");
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

    py::class_<Stats> stats(m, "Stats", py::module_local(),
                            "struct evloop_stats as read-only fields, and py_internal_tasks:\n"
                            "the binding's own tasks, left out of tasks_run.");
#define EVLOOP_PY_FIELD(f, doc) stats.def_property_readonly(#f, [](const Stats &s) { return s.c.f; }, doc);
    EVLOOP_PY_STATS(EVLOOP_PY_FIELD)
#define EVLOOP_PY_NAME(f, doc) #f,
    stats.def_readonly("py_internal_tasks", &Stats::py_internal_tasks);
    stats.attr("_fields") = py::make_tuple(EVLOOP_PY_STATS(EVLOOP_PY_NAME) "py_internal_tasks");

    py::class_<RawLoop> cls(m, "RawLoop", py::module_local(), "One evloop; the C calls.");
    cls.def(py::init<std::optional<std::string>, int64_t, unsigned, bool,
                     std::optional<std::string>, std::optional<std::string>>(),
            py::arg("backend") = py::none(), py::arg("spin_ns") = -1,
            py::arg("batch_budget") = 0, py::arg("auto_exit") = false,
            py::arg("profile") = py::none(), py::arg("fence") = py::none(), "evloop_new.")
        .def("run", &RawLoop::run, "evloop_run, with the GIL released while the loop waits.")
        .def("stop", &RawLoop::stop, "evloop_stop; a no-op once freed.")
        .def("free", &RawLoop::free, "evloop_free; idempotent.")
        .def_property_readonly("closed", [](const RawLoop &l) { return !l.raw(); })
        .def("timer_start", &RawLoop::timer_start, py::arg("delay_ns"), py::arg("interval_ns"),
             py::arg("fn"), "evloop_timer_start of fn(); returns an id for timer_cancel.")
        .def("timer_cancel", &RawLoop::timer_cancel, py::arg("id"),
             "evloop_timer_cancel: True if this call stopped the timer.")
        .def("io_add", &RawLoop::io_add, py::arg("fd"), py::arg("events"), py::arg("fn"),
             "evloop_io_add: fn(fd, revents) on the loop thread while fd is ready.")
        .def("io_modify", &RawLoop::io_modify, py::arg("fd"), py::arg("events"))
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
        .def("_live_timers", &RawLoop::live_timers)
        .def("_live_fds", &RawLoop::live_fds);
    for (PyMethodDef &def : g_fast_methods)
        cls.attr(def.ml_name) = py::reinterpret_steal<py::object>(
            PyDescr_NewMethod(reinterpret_cast<PyTypeObject *>(cls.ptr()), &def));

#ifdef EVLOOP_PY_WITH_BENCH
    evloop_pybench_register(m);
#endif
}
