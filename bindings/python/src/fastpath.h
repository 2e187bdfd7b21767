// The two measured fast paths of the Python binding, and what they stand on: the GIL kept
// across a batch of callbacks (RunCtx, CallbackGil, prepare_hook), the task trampolines, and
// the hand-off methods submit, submit_internal, queue_microtask and submit_batch as
// METH_FASTCALL functions. Inline functions and variables (C++17) in the per-variant
// namespace, so that both files of the module (src/raw_loop.cpp, src/module.cpp) share them
// and inline the hot ones; the figures that justify each path are in the comments where they
// live.
#ifndef EVLOOP_PY_FASTPATH_H
#define EVLOOP_PY_FASTPATH_H

#include <pybind11/pybind11.h>

#include <cerrno>
#include <string>
#include <vector>

extern "C" {
#include "evloop.h"
}

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
inline py::handle g_error, g_closed_error;
inline bool g_lazy_gil = true;

// A negative errno of the C library as a C++ exception; the module's exception translator
// raises it as evloop.Error(errno, message), LoopClosedError for ESHUTDOWN.
struct Errno {
    int err;
    std::string what;
};

inline void set_error(int err, const std::string &what)
{
    std::string msg = what + (what.empty() ? "" : ": ") + evloop_strerror(err);
    py::set_error(err == -ESHUTDOWN ? g_closed_error : g_error, py::make_tuple(-err, msg));
}

inline void check(int r, const char *what)
{
    if (r < 0)
        throw Errno{r, what};
}

// What the thread running a loop's callbacks knows: set by run() and free(), the two calls
// inside which the C library runs callbacks; innermost first. owner is the RawLoop
// (src/raw_loop.h), which installs report, where a callback's exception goes.
struct RunCtx {
    void *owner;
    void (*report)(void *owner, PyObject *fn);
    evloop *raw;
    PyThreadState *saved; // non-null while run() has released the GIL on this thread
    bool lazy;            // the GIL is kept between callbacks (see CallbackGil)
    RunCtx *prev;
    bool no_wait; // run_once(0), which cannot block: the GIL is held throughout (drive)
};
inline thread_local RunCtx *tls_ctx = nullptr;

// Takes the GIL around one Python callback on the loop thread. After the callback the GIL is
// kept for the next one; a PREPARE hook (prepare_hook), which runs before the loop can spin,
// poll or sleep, releases it (but in run_once(0), whose poll cannot wait: RawLoop::drive). So
// the GIL is never held while the loop waits, and a batch of N callbacks costs one
// release/acquire instead of N. A stopping loop runs no hook (and may wait for operations to
// finish): there each callback releases it. The figures, with their command
// (tools/roundtrip.py --eager-gil): tournament/results/design-figures.md.
class CallbackGil {
public:
    CallbackGil() : ctx_(tls_ctx)
    {
        if (ctx_ && ctx_->saved) {
            PyEval_RestoreThread(ctx_->saved);
            ctx_->saved = nullptr;
        } else if (!ctx_ || !ctx_->lazy) {
            ensured_ = true; // free()'s caller, who holds the GIL already
            gstate_ = PyGILState_Ensure();
        }
    }
    ~CallbackGil();
    CallbackGil(const CallbackGil &) = delete;
    CallbackGil &operator=(const CallbackGil &) = delete;

private:
    RunCtx *ctx_;
    bool ensured_ = false;
    PyGILState_STATE gstate_{};
};

inline void prepare_hook(void *)
{
    RunCtx *c = tls_ctx;
    if (c && c->lazy && !c->no_wait) {
        c->lazy = false;
        c->saved = PyEval_SaveThread();
    }
}

// With the GIL and the exception fn raised: to the running loop's report, or, outside any
// loop's callbacks, to sys.unraisablehook.
inline void report(PyObject *fn)
{
    if (tls_ctx)
        tls_ctx->report(tls_ctx->owner, fn);
    else
        PyErr_WriteUnraisable(fn);
}

// Calls a task (fn, or the tuple (fn, *args) when packed) with the GIL held; an exception
// goes to the loop's on_error.
inline void call_task(PyObject *task, bool packed)
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
inline PyObject *pack_task(PyObject *fn, PyObject *const *args, Py_ssize_t n, evloop_cb *cb)
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

inline CallbackGil::~CallbackGil()
{
    if (ensured_) {
        PyGILState_Release(gstate_);
        return;
    }
    ctx_->lazy = g_lazy_gil && evloop_state(ctx_->raw) != EVLOOP_TERMINATING;
    if (!ctx_->lazy)
        ctx_->saved = PyEval_SaveThread();
}

// The hand-off: submit, submit_internal, queue_microtask and submit_batch are METH_FASTCALL
// methods of RawLoop, not pybind11 functions: pybind11's argument handling cost more per
// call than the hand-off itself (measured against a pybind11 def of the same submit:
// tournament/results/design-figures.md).

// The evloop of self, a RawLoop; NULL with LoopClosedError set once it is freed. Installed by
// module.cpp at import (the class lives in src/raw_loop.h).
inline evloop *(*loop_of)(PyObject *self) = nullptr;

template <int (*Push)(evloop *, evloop_cb, void *)>
PyObject *fast_submit(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    if (n < 1) {
        PyErr_SetString(PyExc_TypeError, "submit(fn, *args) needs fn");
        return nullptr;
    }
    evloop *l = loop_of(self);
    evloop_cb cb;
    PyObject *task = l ? pack_task(args[0], args + 1, n - 1, &cb) : nullptr;
    int r = task ? Push(l, cb, task) : 0;
    if (r < 0) {
        Py_DECREF(task);
        set_error(r, "");
    }
    return task && r == 0 ? Py_NewRef(Py_None) : nullptr;
}

// submit_batch(tasks): a sequence of callables or tuples (fn, *args); all or none.
inline PyObject *fast_submit_batch(PyObject *self, PyObject *const *args, Py_ssize_t n)
{
    evloop *l = n == 1 ? loop_of(self) : nullptr;
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
    int r = i == count ? evloop_submit_batch(l, tasks.data(), tasks.size()) : -1;
    if (r < 0) {
        for (Py_ssize_t j = 0; j < i; j++)
            Py_DECREF(static_cast<PyObject *>(tasks[size_t(j)].arg));
        if (i == count)
            set_error(r, "");
    }
    Py_DECREF(seq);
    return r == 0 ? Py_NewRef(Py_None) : nullptr;
}

// wake(): evloop_submit of a C no-op, for an asyncio loop's call_soon_threadsafe (evloop/_aio.py),
// which has already put its handle on the asyncio ready queue: the submit only has to make a
// loop waiting in run_once return. On the arena variant that is one lane store, with no lock,
// and a wake syscall only when the loop has really gone to sleep; the no-op runs on the loop
// thread without the GIL. LoopClosedError once the loop is freed or stopping.
inline void noop_task(void *) {}

inline PyObject *fast_wake(PyObject *self, PyObject *)
{
    evloop *l = loop_of(self);
    int r = l ? evloop_submit(l, noop_task, nullptr) : 0;
    if (r < 0)
        set_error(r, "");
    return l && r == 0 ? Py_NewRef(Py_None) : nullptr;
}

inline PyMethodDef g_fast_methods[] = {
    {"wake", (PyCFunction)(void (*)(void))fast_wake, METH_NOARGS,
     "wake(): evloop_submit of a C no-op: makes run_once return; no syscall while awake."},
    {"submit", (PyCFunction)(void (*)(void))fast_submit<evloop_submit>, METH_FASTCALL,
     "submit(fn, *args): evloop_submit of fn(*args)."},
    {"submit_internal", (PyCFunction)(void (*)(void))fast_submit<evloop_submit_internal>,
     METH_FASTCALL, "submit_internal(fn, *args): evloop_submit_internal of fn(*args)."},
    {"queue_microtask", (PyCFunction)(void (*)(void))fast_submit<evloop_queue_microtask>,
     METH_FASTCALL, "queue_microtask(fn, *args): evloop_queue_microtask of fn(*args)."},
    {"submit_batch", (PyCFunction)(void (*)(void))fast_submit_batch, METH_FASTCALL,
     "submit_batch(tasks): evloop_submit_batch of callables or tuples (fn, *args)."},
};

} // namespace EVLOOP_PY_MODULE

#endif
