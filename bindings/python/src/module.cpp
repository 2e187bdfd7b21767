// The evloop Python extension: one C++ source compiled once per ingress variant into
// evloop._arena and evloop._chunk, each statically linking its libevloop_<variant>.a.
// evloop/__init__.py puts one Python API (evloop.Loop) in front of the two.
//
// How Python objects cross into C, and how they get back out (each exactly once):
//   submit / submit_internal / queue_microtask: the callable (or a tuple (fn, *args)) is
//     the task's arg; the trampoline that runs it releases it. The C library runs every
//     accepted task, also when the loop is freed (evloop_free drains), so nothing leaks;
//     a refused task (-ESHUTDOWN) is released before the exception is raised.
//   call_later / call_every: a TimerHandle holds fn/args; the loop's registry holds the
//     handle while the timer is armed. Fired (one-shot), cancelled or left behind at the
//     loop's end: released from the registry once, at a moment when no trampoline for it
//     can still be pending (on the loop thread, or after evloop_run has returned).
//   add_reader / add_writer: one FdRec per fd (the C API has one callback per fd and an
//     event mask), refcounted under the GIL for the same reason.
//
// GIL: run() releases it and calls evloop_run; a trampoline takes it around the Python
// callback. To avoid one release/acquire per callback when a batch is drained, the
// trampoline keeps the GIL after a callback and queues an internal "release" task
// instead; that task runs before the loop could spin, poll with a timeout or sleep (it is
// pending work), so the GIL is never held while the loop waits.
//
// Ctrl-C: the C loop only runs code when work arrives, so while run() is on the main
// thread an internal 50 ms timer calls PyErr_CheckSignals(); an exception from a signal
// handler (KeyboardInterrupt) stops the loop and is raised from run().

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <atomic>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unordered_map>
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

namespace py = pybind11;

namespace EVLOOP_PY_MODULE {

// Objects from evloop/_common.py, looked up once at import (never freed: a module's
// statics outlive the interpreter's teardown order).
PyObject *g_error = nullptr;        // evloop.Error (OSError subclass)
PyObject *g_closed_error = nullptr; // evloop.LoopClosedError
PyObject *g_state = nullptr;        // evloop.State (str enum)
PyObject *g_default_handler = nullptr;
bool g_lazy_gil = true;

constexpr uint64_t kSignalCheckNs = 50 * 1000 * 1000;

[[noreturn]] void throw_errno(int err, const char *what = nullptr)
{
    PyObject *cls = err == -ESHUTDOWN ? g_closed_error : g_error;
    std::string msg = evloop_strerror(err);
    if (what)
        msg = std::string(what) + ": " + msg;
    PyObject *args = Py_BuildValue("(is)", -err, msg.c_str());
    if (args) {
        PyErr_SetObject(cls, args);
        Py_DECREF(args);
    }
    throw py::error_already_set();
}

// A profile file's error: the file's own message (evloop_strerror speaks of loops).
[[noreturn]] void throw_profile_errno(int err, const std::string &what)
{
    std::string msg = err == -EINVAL ? "not a valid evloop profile" : std::strerror(-err);
    PyObject *args = Py_BuildValue("(is)", -err, (what + ": " + msg).c_str());
    if (args) {
        PyErr_SetObject(g_error, args);
        Py_DECREF(args);
    }
    throw py::error_already_set();
}

[[noreturn]] void throw_closed()
{
    PyObject *args = Py_BuildValue("(is)", ESHUTDOWN, "the loop is closed");
    if (args) {
        PyErr_SetObject(g_closed_error, args);
        Py_DECREF(args);
    }
    throw py::error_already_set();
}

// The exception now set, as one object carrying its traceback (new reference).
PyObject *fetch_exception()
{
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    if (tb && value)
        PyException_SetTraceback(value, tb);
    Py_XDECREF(type);
    Py_XDECREF(tb);
    if (!value) {
        value = PyObject_CallNoArgs(PyExc_SystemError);
    }
    return value;
}

// Sets exc (borrowed) as the current exception, with its traceback.
void restore_exception(PyObject *exc)
{
    PyObject *tb = PyException_GetTraceback(exc);
    Py_INCREF(exc);
    PyObject *type = (PyObject *)Py_TYPE(exc);
    Py_INCREF(type);
    PyErr_Restore(type, exc, tb);
}

class PyLoop;

// What the thread running callbacks of a loop knows: set by run() and close() (the two
// places from which the C library runs callbacks), innermost first.
struct RunCtx {
    PyLoop *loop;
    PyThreadState *saved; // non-null while run() has released the GIL on this thread
    bool lazy;            // the GIL is kept between callbacks; a release task is queued
    RunCtx *prev;
};
thread_local RunCtx *tls_ctx = nullptr;

void release_gil_task(void *arg);

// Takes the GIL around one Python callback on the loop thread.
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

struct TimerHandle {
    enum State { Armed, Cancelled, Done };
    PyLoop *owner = nullptr; // non-null exactly while in the owner's registry
    PyObject *self = nullptr; // the Python object wrapping this handle (borrowed)
    PyObject *fn = nullptr;
    PyObject *args = nullptr; // tuple or NULL
    evloop_timer_id id = 0;
    double delay = 0, interval = 0;
    bool periodic = false;
    bool running = false;
    State state = Armed;
    TimerHandle *prev = nullptr, *next = nullptr;

    ~TimerHandle()
    {
        Py_CLEAR(fn);
        Py_CLEAR(args);
    }
    bool cancel();
    bool cancelled() const { return state == Cancelled; }
    bool active() const { return state == Armed; }
    std::string repr() const
    {
        const char *s = state == Armed ? "armed" : state == Cancelled ? "cancelled" : "done";
        std::string r = periodic ? "<evloop.TimerHandle every " : "<evloop.TimerHandle after ";
        r += std::to_string(periodic ? interval : delay) + "s " + s + ">";
        return r;
    }
};

struct FdRec {
    PyLoop *owner;
    int fd;
    int refs = 1; // under the GIL: the loop's table (or a pending release) + running callbacks
    bool active = true;
    PyObject *rfn = nullptr, *rargs = nullptr, *wfn = nullptr, *wargs = nullptr;

    unsigned mask() const
    {
        return (rfn ? unsigned(EVLOOP_READABLE) : 0u) | (wfn ? unsigned(EVLOOP_WRITABLE) : 0u);
    }
    void clear()
    {
        Py_CLEAR(rfn);
        Py_CLEAR(rargs);
        Py_CLEAR(wfn);
        Py_CLEAR(wargs);
    }
};

void fdrec_decref(FdRec *r)
{
    if (--r->refs == 0) {
        r->clear();
        delete r;
    }
}

void task_noargs(void *arg);
void task_args(void *arg);
void timer_trampoline(void *arg);
void io_trampoline(void *arg, int fd, unsigned events);
void signal_check(void *arg);
void deferred_handle_release(void *arg);
void deferred_fdrec_release(void *arg);

int to_fd(py::handle obj)
{
    long fd;
    if (PyLong_Check(obj.ptr())) {
        fd = PyLong_AsLong(obj.ptr());
    } else {
        py::object r = obj.attr("fileno")();
        fd = PyLong_AsLong(r.ptr());
    }
    if (fd == -1 && PyErr_Occurred())
        throw py::error_already_set();
    if (fd < 0 || fd > INT32_MAX)
        throw py::value_error("invalid file descriptor: " + std::to_string(fd));
    return (int)fd;
}

void check_callable(py::handle fn)
{
    if (!PyCallable_Check(fn.ptr()))
        throw py::type_error("callback must be callable, not " +
                             std::string(Py_TYPE(fn.ptr())->tp_name));
}

// (fn) when there are no args, else (fn, *args): the arg of a task (new reference).
PyObject *pack_task(py::handle fn, const py::args &args, evloop_cb *cb)
{
    size_t n = args.size();
    if (n == 0) {
        *cb = task_noargs;
        return py::reinterpret_borrow<py::object>(fn).release().ptr();
    }
    PyObject *t = PyTuple_New((Py_ssize_t)n + 1);
    if (!t)
        throw py::error_already_set();
    Py_INCREF(fn.ptr());
    PyTuple_SET_ITEM(t, 0, fn.ptr());
    for (size_t i = 0; i < n; i++) {
        PyObject *a = PyTuple_GET_ITEM(args.ptr(), (Py_ssize_t)i);
        Py_INCREF(a);
        PyTuple_SET_ITEM(t, (Py_ssize_t)i + 1, a);
    }
    *cb = task_args;
    return t;
}

uint64_t seconds_to_ns(double s, const char *what)
{
    if (std::isnan(s))
        throw py::value_error(std::string(what) + " is NaN");
    if (s <= 0)
        return 0;
    double ns = std::ceil(s * 1e9); // never early
    return ns >= 1.8e19 ? UINT64_MAX : (uint64_t)ns;
}

class PyLoop {
public:
    PyLoop(py::object backend, py::object variant, int64_t spin_ns, long long batch_budget,
           py::object profile)
    {
        if (!variant.is_none() && py::str(variant).cast<std::string>() != EVLOOP_PY_VARIANT)
            throw py::value_error("this module is the '" EVLOOP_PY_VARIANT
                                  "' variant; use evloop.Loop(variant=...) to choose");
        if (batch_budget < 0 || batch_budget > UINT32_MAX)
            throw py::value_error("batch_budget must be 0 (adaptive) or a positive count");
        if (spin_ns < -1)
            throw py::value_error("spin_ns must be -1 (adaptive), 0 (never) or a duration in ns");
        evloop_config cfg;
        evloop_config_init(&cfg);
        std::string name;
        if (!backend.is_none()) {
            name = py::str(backend).cast<std::string>();
            cfg.backend = name.c_str();
        }
        cfg.spin_ns = spin_ns;
        cfg.batch_budget = (unsigned)batch_budget;
        std::string profile_path;
        if (!profile.is_none()) {
            profile_path = py::str(profile).cast<std::string>();
            cfg.profile = profile_path.c_str();
        }
        // A bad profile is reported as such (evloop_new would only say EINVAL or ENOENT).
        const char *in_use = cfg.profile ? cfg.profile : std::getenv("EVLOOP_PROFILE");
        evloop_profile check;
        int r = in_use && *in_use ? evloop_profile_load(&check, in_use) : 0;
        if (r < 0)
            throw_profile_errno(r, "profile '" + std::string(in_use) + "'");
        r = evloop_new(&loop_, &cfg);
        if (r < 0)
            throw_errno(r, name.empty() ? "evloop_new" : ("backend '" + name + "'").c_str());
        backend_ = evloop_backend(loop_);
    }

    ~PyLoop()
    {
        if (loop_) {
            try {
                close();
            } catch (py::error_already_set &e) {
                e.discard_as_unraisable("evloop.Loop.__del__");
            } catch (...) {
            }
        }
        Py_CLEAR(handler_);
        Py_CLEAR(fatal_);
    }

    evloop *raw() const { return loop_; }
    bool running() const { return running_; }
    bool on_loop_thread() const
    {
        // Anywhere inside one of this loop's callbacks on this thread (possibly nested in
        // another loop's run or close): no other callback of this loop can be pending.
        for (RunCtx *c = tls_ctx; c; c = c->prev)
            if (c->loop == this)
                return true;
        return false;
    }
    void count_internal() { internal_tasks_.fetch_add(1, std::memory_order_relaxed); }

    // ------------------------------------------------------------ tasks

    void submit(py::object fn, py::args args) { submit_with(evloop_submit, fn, args); }
    void submit_internal(py::object fn, py::args args)
    {
        submit_with(evloop_submit_internal, fn, args);
    }
    void queue_microtask(py::object fn, py::args args)
    {
        submit_with(evloop_queue_microtask, fn, args);
    }

    // ------------------------------------------------------------ timers

    py::object call_later(double delay, py::object fn, py::args args)
    {
        return start_timer(delay, 0, false, fn, args);
    }

    py::object call_every(double interval, py::object fn, py::args args)
    {
        if (!(interval > 0))
            throw py::value_error("interval must be > 0 seconds");
        return start_timer(interval, interval, true, fn, args);
    }

    // Drops the registry's reference to h; no trampoline for h may be pending.
    void release_handle(TimerHandle *h)
    {
        if (h->owner != this)
            return;
        if (h->prev)
            h->prev->next = h->next;
        else
            timers_ = h->next;
        if (h->next)
            h->next->prev = h->prev;
        h->prev = h->next = nullptr;
        h->owner = nullptr;
        if (h->state == TimerHandle::Armed)
            h->state = TimerHandle::Done;
        Py_CLEAR(h->fn);
        Py_CLEAR(h->args);
        Py_DECREF(h->self); // may free h: last
    }

    // Releases h now when no trampoline for it can be pending, else from the loop thread.
    void release_handle_safely(TimerHandle *h)
    {
        if (!running_ || on_loop_thread()) {
            release_handle(h);
            return;
        }
        Py_INCREF(h->self); // the pending release task's own reference
        if (evloop_submit_internal(loop_, deferred_handle_release, h) < 0)
            Py_DECREF(h->self); // terminating: release_after_run() does it
    }

    // ------------------------------------------------------------ fds

    void add_reader(py::object fdobj, py::object fn, py::args args)
    {
        add_io(fdobj, fn, args, true);
    }
    void add_writer(py::object fdobj, py::object fn, py::args args)
    {
        add_io(fdobj, fn, args, false);
    }
    bool remove_reader(py::object fdobj) { return remove_io(fdobj, true); }
    bool remove_writer(py::object fdobj) { return remove_io(fdobj, false); }

    void release_fdrec_safely(FdRec *rec)
    {
        if (!running_ || on_loop_thread()) {
            fdrec_decref(rec);
            return;
        }
        // The table's reference moves to the release task (or to the zombie list).
        if (evloop_submit_internal(loop_, deferred_fdrec_release, rec) < 0)
            zombies_.push_back(rec);
    }

    // ------------------------------------------------------------ running

    void run()
    {
        if (!loop_)
            throw_closed();
        if (running_)
            throw_errno(-EBUSY, "run");
        running_ = true;
        if (is_main_thread()) {
            if (evloop_timer_start(loop_, kSignalCheckNs, kSignalCheckNs, signal_check, this,
                                   nullptr) == 0)
                signal_timer_ = true;
        }
        RunCtx ctx{this, nullptr, false, tls_ctx};
        tls_ctx = &ctx;
        ctx.saved = PyEval_SaveThread();
        int r = evloop_run(loop_);
        if (ctx.saved)
            PyEval_RestoreThread(ctx.saved);
        // else: ctx.lazy, the GIL is still ours (cannot happen: the release task queued
        // with it was accepted work, and evloop_run returns only after running it).
        tls_ctx = ctx.prev;
        running_ = false;
        signal_timer_ = false;
        release_after_run();
        raise_fatal();
        if (r < 0)
            throw_errno(r, "run");
    }

    void stop()
    {
        if (loop_)
            evloop_stop(loop_);
    }

    void close()
    {
        if (!loop_ || closing_)
            return;
        if (running_)
            throw_errno(-EBUSY, "close: the loop is running; stop() it and let run() return");
        closing_ = true;
        RunCtx ctx{this, nullptr, false, tls_ctx};
        tls_ctx = &ctx;
        // Drains what was accepted on this thread, with the GIL held (callbacks take it
        // recursively through PyGILState_Ensure).
        int r = evloop_free(loop_);
        tls_ctx = ctx.prev;
        closing_ = false;
        if (r < 0)
            throw_errno(r, "close");
        loop_ = nullptr;
        release_after_run();
        raise_fatal();
    }

    bool closed() const { return loop_ == nullptr; }

    // ------------------------------------------------------------ exceptions

    void set_exception_handler(py::object handler)
    {
        if (!handler.is_none())
            check_callable(handler);
        PyObject *old = handler_;
        handler_ = handler.is_none() ? nullptr : handler.inc_ref().ptr();
        Py_XDECREF(old);
    }

    py::object get_exception_handler() const
    {
        return handler_ ? py::reinterpret_borrow<py::object>(handler_) : py::none();
    }

    // With the GIL and an exception set by a callback fn (borrowed, may be NULL).
    void report_exception(PyObject *fn)
    {
        PyObject *exc = fetch_exception();
        if (!PyObject_IsInstance(exc, PyExc_Exception)) {
            fatal(exc); // KeyboardInterrupt, SystemExit: stop and raise from run()
            return;
        }
        PyObject *handler = handler_ ? handler_ : g_default_handler;
        Py_INCREF(handler);
        PyObject *r = PyObject_CallFunctionObjArgs(handler, exc, fn ? fn : Py_None, nullptr);
        if (r) {
            Py_DECREF(r);
        } else {
            PyObject *exc2 = fetch_exception();
            if (!PyObject_IsInstance(exc2, PyExc_Exception)) {
                fatal(exc2);
            } else {
                restore_exception(exc2);
                Py_DECREF(exc2);
                PyErr_WriteUnraisable(handler);
            }
        }
        Py_DECREF(handler);
        Py_DECREF(exc);
    }

    // Takes exc (new reference): stops the loop; run() (or close()) raises it.
    void fatal(PyObject *exc)
    {
        if (!fatal_)
            fatal_ = exc;
        else
            Py_DECREF(exc);
        if (loop_)
            evloop_stop(loop_);
    }

    void count_signal_check() { signal_checks_.fetch_add(1, std::memory_order_relaxed); }

    // ------------------------------------------------------------ introspection

    py::dict stats() const
    {
        if (!loop_)
            throw_closed();
        struct evloop_stats s;
        int r = evloop_stats(loop_, &s);
        if (r < 0)
            throw_errno(r, "stats");
        uint64_t internal = internal_tasks_.load(std::memory_order_relaxed);
        uint64_t checks = signal_checks_.load(std::memory_order_relaxed);
        py::dict d;
        d["tasks_run"] = s.tasks_run >= internal ? s.tasks_run - internal : 0;
        d["microtasks_run"] = s.microtasks_run;
        d["timers_fired"] = s.timers_fired >= checks ? s.timers_fired - checks : 0;
        d["io_callbacks"] = s.io_callbacks;
        d["ticks"] = s.ticks;
        d["futex_sleeps"] = s.futex_sleeps;
        d["futex_wakes"] = s.futex_wakes;
        d["poller_sleeps"] = s.poller_sleeps;
        d["poller_wakes"] = s.poller_wakes;
        d["spin_hits"] = s.spin_hits;
        d["spin_misses"] = s.spin_misses;
        d["ingress_overflows"] = s.ingress_overflows;
        d["batch_budget"] = s.batch_budget;
        d["spin_ns"] = s.spin_ns;
        d["backend"] = s.backend ? s.backend : "";
        d["ingress"] = s.ingress ? s.ingress : "";
        d["fallback"] = s.fallback ? s.fallback : "";
        d["profile_loaded"] = s.profile_loaded;
        d["py_internal_tasks"] = internal;
        d["py_signal_checks"] = checks;
        return d;
    }

    py::object state() const
    {
        static const char *names[] = {"awake", "running", "sleeping", "terminating",
                                      "terminated"};
        int s = loop_ ? (int)evloop_state(loop_) : (int)EVLOOP_TERMINATED;
        if (s < 0 || s > 4)
            s = 4;
        return py::reinterpret_steal<py::object>(
            PyObject_CallFunction(g_state, "s", names[s]));
    }

    std::string backend() const { return backend_; }
    std::string variant() const { return EVLOOP_PY_VARIANT; }

    std::string repr() const
    {
        static const char *names[] = {"awake", "running", "sleeping", "terminating",
                                      "terminated"};
        int s = loop_ ? (int)evloop_state(loop_) : (int)EVLOOP_TERMINATED;
        return std::string("<evloop.Loop variant=") + EVLOOP_PY_VARIANT + " backend=" + backend_ +
               " state=" + names[s] + (loop_ ? "" : " closed") + ">";
    }

    size_t live_timers() const
    {
        size_t n = 0;
        for (TimerHandle *h = timers_; h; h = h->next)
            n++;
        return n;
    }
    size_t live_fds() const { return fds_.size(); }

private:
    static bool is_main_thread()
    {
        py::object main = py::module_::import("threading").attr("main_thread")();
        return py::cast<unsigned long>(main.attr("ident")) == PyThread_get_thread_ident();
    }

    void submit_with(int (*push)(evloop *, evloop_cb, void *), py::object &fn, py::args &args)
    {
        if (!loop_)
            throw_closed();
        check_callable(fn);
        evloop_cb cb;
        PyObject *arg = pack_task(fn, args, &cb);
        int r = push(loop_, cb, arg);
        if (r < 0) {
            Py_DECREF(arg);
            throw_errno(r);
        }
    }

    py::object start_timer(double delay_s, double interval_s, bool periodic, py::object &fn,
                           py::args &args)
    {
        if (!loop_)
            throw_closed();
        check_callable(fn);
        uint64_t delay_ns = seconds_to_ns(delay_s, "delay");
        uint64_t interval_ns = periodic ? seconds_to_ns(interval_s, "interval") : 0;
        if (periodic && interval_ns == 0)
            interval_ns = 1;
        auto *h = new TimerHandle();
        py::object obj = py::cast(h, py::return_value_policy::take_ownership);
        h->self = obj.ptr();
        h->fn = fn.inc_ref().ptr();
        h->args = args.size() ? args.inc_ref().ptr() : nullptr;
        h->delay = delay_s < 0 ? 0 : delay_s;
        h->interval = periodic ? interval_s : 0;
        h->periodic = periodic;
        // Registry first: the timer may fire (and wait for the GIL) before start returns.
        Py_INCREF(h->self);
        h->owner = this;
        h->next = timers_;
        if (timers_)
            timers_->prev = h;
        timers_ = h;
        int r = evloop_timer_start(loop_, delay_ns, interval_ns, timer_trampoline, h, &h->id);
        if (r < 0) {
            h->state = TimerHandle::Cancelled;
            release_handle(h);
            throw_errno(r);
        }
        return obj;
    }

    void add_io(py::object &fdobj, py::object &fn, py::args &args, bool reader)
    {
        int fd = to_fd(fdobj);
        if (!loop_)
            throw_closed();
        check_callable(fn);
        PyObject *new_fn = fn.inc_ref().ptr();
        PyObject *new_args = args.size() ? args.inc_ref().ptr() : nullptr;
        auto it = fds_.find(fd);
        FdRec *rec;
        if (it != fds_.end()) {
            rec = it->second;
            unsigned old_mask = rec->mask();
            unsigned mask = old_mask | (reader ? EVLOOP_READABLE : EVLOOP_WRITABLE);
            int r = mask == old_mask ? 0 : evloop_io_modify(loop_, fd, mask);
            if (r < 0) {
                Py_DECREF(new_fn);
                Py_XDECREF(new_args);
                throw_errno(r, reader ? "add_reader" : "add_writer");
            }
        } else {
            rec = new FdRec{this, fd};
            int r = evloop_io_add(loop_, fd, reader ? EVLOOP_READABLE : EVLOOP_WRITABLE,
                                  io_trampoline, rec);
            if (r < 0) {
                fdrec_decref(rec);
                Py_DECREF(new_fn);
                Py_XDECREF(new_args);
                throw_errno(r, reader ? "add_reader" : "add_writer");
            }
            fds_[fd] = rec;
        }
        PyObject *old_fn = reader ? rec->rfn : rec->wfn;
        PyObject *old_args = reader ? rec->rargs : rec->wargs;
        (reader ? rec->rfn : rec->wfn) = new_fn;
        (reader ? rec->rargs : rec->wargs) = new_args;
        Py_XDECREF(old_fn);
        Py_XDECREF(old_args);
    }

    bool remove_io(py::object &fdobj, bool reader)
    {
        int fd = to_fd(fdobj);
        auto it = fds_.find(fd);
        if (it == fds_.end())
            return false;
        FdRec *rec = it->second;
        if (!(reader ? rec->rfn : rec->wfn))
            return false;
        unsigned rest = rec->mask() & ~(reader ? EVLOOP_READABLE : EVLOOP_WRITABLE);
        if (rest != 0 && loop_ && evloop_io_modify(loop_, fd, rest) == 0) {
            PyObject *old_fn = reader ? rec->rfn : rec->wfn;
            PyObject *old_args = reader ? rec->rargs : rec->wargs;
            (reader ? rec->rfn : rec->wfn) = nullptr;
            (reader ? rec->rargs : rec->wargs) = nullptr;
            Py_XDECREF(old_fn);
            Py_XDECREF(old_args);
            return true;
        }
        // The last interest on this fd (or the fd is gone): unregister it whole. From
        // another thread evloop_io_remove waits for a callback of this fd that the loop is
        // running, and that callback needs the GIL: release it around the call.
        if (loop_) {
            py::gil_scoped_release nogil;
            evloop_io_remove(loop_, fd);
        }
        it = fds_.find(fd); // the map may have changed while the GIL was released
        if (it == fds_.end() || it->second != rec)
            return true;
        fds_.erase(it);
        rec->active = false;
        rec->clear();
        release_fdrec_safely(rec);
        return true;
    }

    // After evloop_run returned (or evloop_free drained): the C library has dropped every
    // timer and fd without calling back; drop what Python objects they held.
    void release_after_run()
    {
        while (timers_) {
            TimerHandle *h = timers_;
            if (h->state == TimerHandle::Armed)
                h->state = TimerHandle::Cancelled; // never ran, never will
            release_handle(h);
        }
        std::unordered_map<int, FdRec *> fds;
        fds.swap(fds_);
        for (auto &kv : fds) {
            kv.second->active = false;
            fdrec_decref(kv.second);
        }
        std::vector<FdRec *> zombies;
        zombies.swap(zombies_);
        for (FdRec *r : zombies)
            fdrec_decref(r);
    }

    void raise_fatal()
    {
        if (!fatal_)
            return;
        PyObject *exc = fatal_;
        fatal_ = nullptr;
        restore_exception(exc);
        Py_DECREF(exc);
        throw py::error_already_set();
    }

    evloop *loop_ = nullptr;
    std::string backend_;
    bool running_ = false;
    bool closing_ = false;
    bool signal_timer_ = false;
    PyObject *handler_ = nullptr;
    PyObject *fatal_ = nullptr;
    TimerHandle *timers_ = nullptr; // armed (or cancelled, release pending) handles
    std::unordered_map<int, FdRec *> fds_;
    std::vector<FdRec *> zombies_; // removed while terminating; released after run
    std::atomic<uint64_t> internal_tasks_{0};
    std::atomic<uint64_t> signal_checks_{0};
};

// ---------------------------------------------------------------- trampolines

CallbackGil::~CallbackGil()
{
    if (mode_ == Restored) {
        // Keep the GIL for the next callback of this batch; the release task runs before
        // the loop can wait. Refused (the loop is stopping): release it now.
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
    ctx->loop->count_internal();
    if (ctx->lazy) {
        ctx->lazy = false;
        ctx->saved = PyEval_SaveThread();
    }
}

PyLoop *current_loop()
{
    return tls_ctx ? tls_ctx->loop : nullptr;
}

// With the GIL held and an exception set by fn.
void report(PyObject *fn)
{
    PyLoop *loop = current_loop();
    if (loop)
        loop->report_exception(fn);
    else
        PyErr_WriteUnraisable(fn);
}

// Calls fn(*args) (args a tuple or NULL) with the GIL held, keeping both alive meanwhile.
void call_slot(PyObject *fn, PyObject *args)
{
    Py_INCREF(fn);
    Py_XINCREF(args);
    PyObject *r = args ? PyObject_Call(fn, args, nullptr) : PyObject_CallNoArgs(fn);
    if (r)
        Py_DECREF(r);
    else
        report(fn);
    Py_DECREF(fn);
    Py_XDECREF(args);
}

void task_noargs(void *arg)
{
    CallbackGil gil;
    auto *fn = static_cast<PyObject *>(arg);
    PyObject *r = PyObject_CallNoArgs(fn);
    if (r)
        Py_DECREF(r);
    else
        report(fn);
    Py_DECREF(fn);
}

void task_args(void *arg)
{
    CallbackGil gil;
    auto *t = static_cast<PyObject *>(arg);
    PyObject **items = &PyTuple_GET_ITEM(t, 0);
    PyObject *r = PyObject_Vectorcall(items[0], items + 1, (size_t)PyTuple_GET_SIZE(t) - 1, nullptr);
    if (r)
        Py_DECREF(r);
    else
        report(items[0]);
    Py_DECREF(t);
}

void timer_trampoline(void *arg)
{
    auto *h = static_cast<TimerHandle *>(arg);
    CallbackGil gil;
    PyObject *self = h->self;
    Py_INCREF(self);
    if (h->state == TimerHandle::Armed && h->fn) {
        h->running = true;
        call_slot(h->fn, h->args);
        h->running = false;
    }
    if ((!h->periodic || h->state != TimerHandle::Armed) && h->owner)
        h->owner->release_handle(h);
    Py_DECREF(self);
}

void io_trampoline(void *arg, int fd, unsigned events)
{
    (void)fd;
    auto *rec = static_cast<FdRec *>(arg);
    CallbackGil gil;
    rec->refs++;
    const unsigned any = EVLOOP_HANGUP | EVLOOP_ERROR;
    if (rec->active && rec->rfn && (events & (EVLOOP_READABLE | any)))
        call_slot(rec->rfn, rec->rargs);
    if (rec->active && rec->wfn && (events & (EVLOOP_WRITABLE | any)))
        call_slot(rec->wfn, rec->wargs);
    fdrec_decref(rec);
}

void signal_check(void *arg)
{
    auto *loop = static_cast<PyLoop *>(arg);
    loop->count_signal_check();
    CallbackGil gil;
    if (PyErr_CheckSignals() < 0)
        loop->fatal(fetch_exception());
}

void deferred_handle_release(void *arg)
{
    auto *h = static_cast<TimerHandle *>(arg);
    CallbackGil gil;
    PyObject *self = h->self;
    PyLoop *owner = h->owner;
    if (owner) {
        owner->count_internal();
        owner->release_handle(h);
    } else if (PyLoop *cur = current_loop()) {
        cur->count_internal();
    }
    Py_DECREF(self);
}

void deferred_fdrec_release(void *arg)
{
    auto *rec = static_cast<FdRec *>(arg);
    CallbackGil gil;
    rec->owner->count_internal();
    fdrec_decref(rec);
}

bool TimerHandle::cancel()
{
    if (state != Armed || !owner)
        return false;
    int r = owner->raw() ? evloop_timer_cancel(owner->raw(), id) : -ENOENT;
    if (r != 0 && running)
        return false; // a one-shot timer whose callback is running now
    // r == 0, or the callback was taken by the loop but has not started (it will see the
    // state and skip), or the loop has ended (release_after_run is due).
    state = Cancelled;
    owner->release_handle_safely(this);
    return true;
}

// ---------------------------------------------------------------- module

std::vector<std::string> compiled_backends()
{
    std::vector<std::string> out;
    std::string s = EVLOOP_PY_BACKENDS;
    size_t pos = 0;
    while (pos < s.size()) {
        size_t end = s.find_first_of(",;", pos);
        if (end == std::string::npos)
            end = s.size();
        if (end > pos)
            out.push_back(s.substr(pos, end - pos));
        pos = end + 1;
    }
    return out;
}

// A profile as a dict with the keys of its file.
py::dict profile_dict(const evloop_profile &p)
{
    py::dict d;
    d["version"] = p.version;
    d["ncpu"] = p.ncpu;
    d["backend"] = std::string(p.backend);
    d["spin_ns"] = p.spin_ns;
    d["spin_max_ns"] = p.spin_max_ns;
    d["batch_budget"] = p.batch_budget;
    d["wake_ns"] = p.wake_ns;
    d["handoff_ns"] = p.handoff_ns;
    d["readiness_epoll_ns"] = p.readiness_ns[0];
    d["readiness_io_uring_ns"] = p.readiness_ns[1];
    d["readiness_kqueue_ns"] = p.readiness_ns[2];
    return d;
}

py::dict autotune(double max_seconds, py::object save)
{
    if (std::isnan(max_seconds) || max_seconds < 0 || max_seconds > 3600)
        throw py::value_error("max_seconds must be between 0 (the default, about 2 s) and 3600");
    std::string path;
    evloop_autotune_options opt{max_seconds, nullptr};
    if (!save.is_none()) {
        path = py::str(save).cast<std::string>();
        opt.save_path = path.c_str();
    }
    evloop_profile p{};
    int r;
    {
        py::gil_scoped_release nogil;
        r = evloop_autotune(&p, &opt);
    }
    if (r < 0 && p.version)
        throw_profile_errno(r, "saving the profile to '" + path + "'");
    if (r < 0)
        throw_errno(r, "evloop_autotune");
    return profile_dict(p);
}

int probe_backend(const std::string &name)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = name.c_str();
    evloop *loop = nullptr;
    int r;
    {
        py::gil_scoped_release nogil;
        r = evloop_new(&loop, &cfg);
        if (r == 0)
            evloop_free(loop);
    }
    return r;
}

} // namespace EVLOOP_PY_MODULE

#define EVLOOP_PY_STR2(x) #x
#define EVLOOP_PY_STR(x) EVLOOP_PY_STR2(x)

PYBIND11_MODULE(EVLOOP_PY_MODULE, m)
{
    using namespace EVLOOP_PY_MODULE;
    m.doc() = "evloop's '" EVLOOP_PY_VARIANT "' ingress variant (use the evloop package, not "
              "this module)";

    py::module_ common = py::module_::import("evloop._common");
    g_error = py::object(common.attr("Error")).release().ptr();
    g_closed_error = py::object(common.attr("LoopClosedError")).release().ptr();
    g_state = py::object(common.attr("State")).release().ptr();
    g_default_handler = py::object(common.attr("default_exception_handler")).release().ptr();

    m.attr("VARIANT") = EVLOOP_PY_VARIANT;
    m.def("ingress", []() { return std::string(evloop_ingress()); },
          "The variant the linked library was built with (\"arena\" or \"chunk\").");
    m.def("compiled_backends", &compiled_backends,
          "The pollers compiled into this build, best first as CMake lists them.");
    m.def("probe_backend", &probe_backend, py::arg("name"),
          "0 when a loop with this backend starts here, else the negative errno.");
    m.def("strerror", [](int err) { return std::string(evloop_strerror(err)); }, py::arg("err"),
          "evloop_strerror(err): the message for 0 or a negative errno.");
    m.def("autotune", &autotune, py::arg("max_seconds") = 2.0, py::arg("save") = py::none(),
          "Calibrates this machine (evloop_autotune) in at most about max_seconds, with the\n"
          "GIL released; saves the profile at save (a path) if given. Returns the profile.");
    m.def("now_ns", []() { return evloop_now_ns(); },
          "The loop's monotonic clock (CLOCK_MONOTONIC) in ns.");
    m.def("_set_lazy_gil", [](bool on) { g_lazy_gil = on; }, py::arg("on"),
          "Testing/measurement: keep the GIL between callbacks of one batch (default on).");

    py::class_<TimerHandle>(m, "TimerHandle", py::module_local(),
                            "A timer started by Loop.call_later or Loop.call_every.")
        .def("cancel", &TimerHandle::cancel,
             "Cancels the timer. Returns True if this call stopped it (its callback will not\n"
             "start, or for call_every, not start again), False if it had already fired\n"
             "(one-shot), was cancelled, or its loop has ended. Any thread.")
        .def("cancelled", &TimerHandle::cancelled,
             "True once cancel() succeeded, or the loop ended before the timer fired.")
        .def_property_readonly("active", &TimerHandle::active,
                               "True while the timer may still fire.")
        .def_property_readonly("periodic", [](const TimerHandle &h) { return h.periodic; },
                               "True for call_every timers.")
        .def_property_readonly(
            "interval", [](const TimerHandle &h) { return h.periodic ? h.interval : h.delay; },
            "The delay (call_later) or interval (call_every) in seconds.")
        .def("__repr__", &TimerHandle::repr);

    py::class_<PyLoop>(m, "Loop", py::module_local(),
                       "An evloop event loop (" EVLOOP_PY_VARIANT
                       " ingress variant). Create it with evloop.Loop(...).")
        .def(py::init<py::object, py::object, int64_t, long long, py::object>(),
             py::arg("backend") = py::none(), py::arg("variant") = py::none(),
             py::arg("spin_ns") = -1, py::arg("batch_budget") = 0,
             py::arg("profile") = py::none())
        .def("submit", &PyLoop::submit, py::arg("fn"),
             "submit(fn, *args): queues fn(*args) to run on the loop thread. Any thread.\n"
             "Tasks from one thread run in the order submitted; a task submitted from a\n"
             "callback runs after it, never nested. Raises LoopClosedError once the loop\n"
             "is stopping or closed (the task is then not accepted).")
        .def("submit_internal", &PyLoop::submit_internal, py::arg("fn"),
             "submit_internal(fn, *args): like submit(), but runs before external tasks\n"
             "still waiting. Any thread.")
        .def("queue_microtask", &PyLoop::queue_microtask, py::arg("fn"),
             "queue_microtask(fn, *args): runs fn(*args) right after the callback now\n"
             "running (from another thread: after the next callback ends), before any other\n"
             "task. Any thread.")
        .def("call_later", &PyLoop::call_later, py::arg("delay"), py::arg("fn"),
             "call_later(delay, fn, *args) -> TimerHandle: runs fn(*args) once, no earlier\n"
             "than delay seconds from now. Any thread.")
        .def("call_every", &PyLoop::call_every, py::arg("interval"), py::arg("fn"),
             "call_every(interval, fn, *args) -> TimerHandle: runs fn(*args) every interval\n"
             "seconds (first after one interval; deadlines counted from the previous one,\n"
             "not from when the callback ran) until cancelled. Any thread.")
        .def("add_reader", &PyLoop::add_reader, py::arg("fd"), py::arg("fn"),
             "add_reader(fd, fn, *args): calls fn(*args) on the loop thread while fd (an int\n"
             "or an object with fileno()) is readable, or hung up / in error; replaces an\n"
             "earlier reader of fd. Level-triggered. The fd stays yours: remove it before\n"
             "closing it. Any thread.")
        .def("add_writer", &PyLoop::add_writer, py::arg("fd"), py::arg("fn"),
             "add_writer(fd, fn, *args): as add_reader, for writability.")
        .def("remove_reader", &PyLoop::remove_reader, py::arg("fd"),
             "Stops watching fd for reading; True if a reader was registered. No reader\n"
             "callback for it starts after this returns. Any thread.")
        .def("remove_writer", &PyLoop::remove_writer, py::arg("fd"),
             "Stops watching fd for writing; True if a writer was registered.")
        .def("run", &PyLoop::run,
             "Runs the loop on the calling thread until stop() (from any thread or a\n"
             "callback), then runs everything already accepted, releases timers and fds, and\n"
             "returns; the loop is then terminated. The GIL is released while the loop\n"
             "waits. On the main thread, Ctrl-C stops the loop and raises KeyboardInterrupt\n"
             "here; a KeyboardInterrupt or SystemExit raised by a callback does the same.")
        .def("stop", &PyLoop::stop,
             "Asks the loop to stop gracefully: new work is refused (LoopClosedError),\n"
             "everything accepted runs, then run() returns. Any thread; idempotent; a no-op\n"
             "on a closed loop.")
        .def("close", &PyLoop::close,
             "Frees the loop. Tasks accepted but not run are run first, on this thread.\n"
             "Idempotent. Raises evloop.Error (EBUSY) while run() is in progress.")
        .def_property_readonly("closed", &PyLoop::closed, "True after close().")
        .def("set_exception_handler", &PyLoop::set_exception_handler, py::arg("handler"),
             "Sets handler(exc, callback), called on the loop thread when a callback raises\n"
             "an Exception; None restores the default (print the traceback to stderr and keep\n"
             "running). KeyboardInterrupt and SystemExit are not handled: they stop the loop\n"
             "and are raised from run().")
        .def("get_exception_handler", &PyLoop::get_exception_handler,
             "The handler set by set_exception_handler, or None for the default.")
        .def("stats", &PyLoop::stats,
             "The loop's counters as a dict (evloop_stats): tasks_run, microtasks_run,\n"
             "timers_fired, io_callbacks, ticks, futex_sleeps/futex_wakes,\n"
             "poller_sleeps/poller_wakes, spin_hits/spin_misses, ingress_overflows,\n"
             "batch_budget, spin_ns, backend, ingress, fallback, profile_loaded; plus\n"
             "py_internal_tasks and py_signal_checks (the bindings' own tasks and timer runs,\n"
             "already subtracted from tasks_run and timers_fired; they do count in ticks and\n"
             "sleeps).")
        .def_property_readonly("state", &PyLoop::state,
                               "The loop's state now, an evloop.State (a str enum).")
        .def_property_readonly("backend", &PyLoop::backend,
                               "The poller in use: \"epoll\", \"io_uring\" or \"kqueue\".")
        .def_property_readonly("variant", &PyLoop::variant,
                               "The ingress variant: \"arena\" or \"chunk\".")
        .def("_live_timers", &PyLoop::live_timers, "Testing: armed timers held by the loop.")
        .def("_live_fds", &PyLoop::live_fds, "Testing: fds registered.")
        .def("__enter__", [](py::object self) { return self; })
        .def("__exit__",
             [](PyLoop &self, py::object, py::object, py::object) {
                 self.close();
                 return false;
             })
        .def("__repr__", &PyLoop::repr);

#ifdef EVLOOP_PY_WITH_BENCH
    evloop_pybench_register(m);
#endif
}
