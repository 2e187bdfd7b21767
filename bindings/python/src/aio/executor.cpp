// run_in_executor(None, fn, *args) on the library's work pool (evloop_work_submit): fn runs on
// a pool thread with the GIL, the pool's done callback comes back through the loop's ingress
// inside the next poll, and the iteration after it settles the asyncio future. The stdlib's
// way takes a concurrent.futures.Future, its condition and lock, the ThreadPoolExecutor's queue
// and semaphore, a call_soon_threadsafe and a self-pipe write per call; here there is one C
// item (a _WorkItem, which is also the future's cancel callback) and no lock.
//
// The rules the stdlib's default executor keeps, kept here (docs/asyncio.md, "The default
// executor"): the asyncio future settles with fn's result or exception on the loop thread;
// cancelling it before a pool thread takes the item means fn never runs; fn runs in the pool
// thread's own context (not a copy of the caller's), as ThreadPoolExecutor's workers do;
// shutdown(wait=True) waits for every accepted call. The executor object itself
// (evloop/_aio.py's _PoolExecutor) also takes submit() from any thread, whose
// concurrent.futures.Future the pool thread settles, as ThreadPoolExecutor's worker does.
//
// Threads: evloop_work_submit and _cancel belong to the thread that drives the RawLoop, or to
// any one thread while none polls; a poll releases the GIL, so the core marks it (poll_thread)
// and a submit from another thread while the loop runs is refused here (NotImplemented /
// False), which the Python side hands to the loop thread as a task of the RawLoop (run even
// by its end, as every accepted task is).
#include "aio.h"

#include <sched.h>

#include <atomic>

namespace aio {

struct WorkItem {
    PyObject_HEAD
    PyObject *fn, *args; // dropped by the pool thread once called
    PyObject *result;    // fn's value or exception (asyncio futures), set by the pool thread
    bool failed;         // result is an exception
    bool concurrent;     // fut is a concurrent.futures.Future, which the pool thread settles
    bool finished;       // the done callback has run (loop thread)
    bool no_state;       // the pool thread could not make a thread state: fn never ran
    int status;          // the done callback's: 0, or -ECANCELED (fn never ran)
    PyObject *fut;
    Core *core;          // a strong reference while the item is in the pool
    uint64_t id;
    WorkItem *next;      // Core::work_done
};

namespace {

PyTypeObject *g_item_type;
PyObject *s_create_future, *s_add_done_callback, *s_remove_done_callback, *s_set_result,
    *s_set_exception, *s_cancelled, *s_cancel, *s_set_running, *s_set,
    *s_call_exception_handler, *s_message, *s_exception, *s_future, *m_settle;
PyObject *g_convert; // asyncio.futures._convert_future_exc, as wrap_future converts

// ---------------------------------------------------------------- the pool thread's side

// A pool thread keeps one Python thread state from its first item to its end (PyThreadState_New
// also makes it the thread's for PyGILState_Ensure, so C code that fn calls finds it, as on the
// stdlib's threads). The destructor of a thread_local object ends it when the thread ends
// (evloop_free, which RawLoop::free calls with the GIL released), except while the interpreter
// finalizes, when taking the GIL would end the thread. Not a pthread key's destructor: glibc
// runs thread_local destructors first and the keys' after, clearing CPython's own key among
// them, so from a key's destructor PyThreadState_Clear (a threading.local's data, say) freed
// memory while CPython's checks no longer saw the thread holding the GIL (an abort under
// -X dev). Not PyGILState_Ensure for the first item, for the same reason.
PyInterpreterState *g_interp;

struct PoolThreadState {
    PyThreadState *ts = nullptr;
    ~PoolThreadState();
};
thread_local PoolThreadState t_state;

PoolThreadState::~PoolThreadState()
{
#if PY_VERSION_HEX >= 0x030D0000
    bool finalizing = Py_IsFinalizing();
#else
    bool finalizing = _Py_IsFinalizing();
#endif
    if (!ts || finalizing)
        return;
    PyEval_RestoreThread(ts);
    PyThreadState_Clear(ts);
    PyThreadState_DeleteCurrent(); // and the GIL with it
}

// False, without the GIL, if the thread state cannot be made (no memory).
bool gil_take()
{
    if (!t_state.ts) {
        PyThreadState *ts = PyThreadState_New(g_interp);
        if (!ts)
            return false;
        t_state.ts = ts;
    }
    PyEval_RestoreThread(t_state.ts);
    return true;
}

// The GIL, spun for: a pool thread that took an item while the loop thread still runs Python
// (it has just submitted it and goes on to its poll) would sleep on the GIL's condition
// variable and be woken by the loop's release, one more futex wake per call. Instead it spins
// until the loop thread polls (the GIL released), at most kGilSpinNs, one pool thread at a
// time, never on one CPU; then takes the GIL as always.
constexpr int64_t kGilSpinNs = 50000;
bool g_multi_cpu;
std::atomic<bool> g_gil_spinner{false};

inline void cpu_relax()
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

void wait_for_poll(Core *core)
{
    if (!g_multi_cpu || __atomic_load_n(&core->work.poll_thread, __ATOMIC_ACQUIRE) ||
        g_gil_spinner.exchange(true, std::memory_order_acquire))
        return;
    int64_t end = monotonic_ns() + kGilSpinNs;
    for (unsigned i = 1; !__atomic_load_n(&core->work.poll_thread, __ATOMIC_ACQUIRE); i++) {
        cpu_relax();
        if (i % 64 == 0 && monotonic_ns() > end)
            break;
    }
    g_gil_spinner.store(false, std::memory_order_release);
}

// The method name of fut with one argument; an exception goes to sys.unraisablehook, as
// ThreadPoolExecutor's worker would let it reach its thread's excepthook.
void call_unraisable(PyObject *fut, PyObject *name, PyObject *arg)
{
    PyObject *r = PyObject_CallMethodOneArg(fut, name, arg);
    if (r)
        Py_DECREF(r);
    else
        PyErr_WriteUnraisable(fut);
}

// The loop whose item this pool thread runs now: a close() there must not wait for the pool.
thread_local Core *t_item_core = nullptr;

// The work callback, on a pool thread: fn(*args) with the GIL.
void work_run(void *arg)
{
    auto *it = static_cast<WorkItem *>(arg);
    wait_for_poll(it->core);
    if (!gil_take()) { // the loop thread settles it with MemoryError
        it->no_state = true;
        return;
    }
    bool run = true;
    if (it->concurrent) { // ThreadPoolExecutor's _WorkItem.run
        PyObject *r = PyObject_CallMethodNoArgs(it->fut, s_set_running);
        run = r == Py_True;
        if (!r)
            PyErr_WriteUnraisable(it->fut);
        Py_XDECREF(r);
    }
    if (run) {
        t_item_core = it->core;
        PyObject *r = PyObject_Call(it->fn, it->args, nullptr);
        t_item_core = nullptr;
        it->failed = !r;
        it->result = r ? r : fetch_exception();
        if (it->concurrent) {
            call_unraisable(it->fut, it->failed ? s_set_exception : s_set_result, it->result);
            Py_CLEAR(it->result);
        }
    }
    Py_CLEAR(it->fn);
    Py_CLEAR(it->args);
    Core *core = it->core;
    PyEval_SaveThread();
    // For the loop's spin (work_spin): the item's reply follows as this returns.
    __atomic_add_fetch(&core->work.ran, 1, __ATOMIC_RELEASE);
}

// The done callback, on the loop thread inside evloop_run_once (the GIL held or not): queues
// the item for work_settle. No Python call.
void work_done(void *arg, int status)
{
    auto *it = static_cast<WorkItem *>(arg);
    Core *core = it->core;
    it->status = status;
    it->finished = true;
    it->next = nullptr;
    if (core->work.done_tail)
        core->work.done_tail->next = it;
    else
        core->work.done = it;
    core->work.done_tail = it;
}

// ---------------------------------------------------------------- the loop thread's side

// The loop's spin for the pool: an iteration about to wait while executor calls are in
// flight first spins, the GIL released and marked as a poll's (so a pool thread takes the GIL
// at once, wait_for_poll), until a pool thread has run a call (Core::work_ran moves) or
// kLoopSpinNs pass; then it waits in the poll as always, where the call's reply is or is
// about to be. A short call's round trip then costs no sleep and no wake on the loop's side
// (two on every loop otherwise, as the stdlib's). A spin that found nothing makes the next
// waits go straight to the poll, 8 of them, twice as many after each spin that finds nothing
// again, up to kLoopSpinSkipsMax (a call that blocks for good, a thread waiting on a queue,
// costs a spin every kLoopSpinSkipsMax waits); a spin that finds a call done starts over.
// Never on one CPU. Meanwhile another thread's call_soon_threadsafe waits at most kLoopSpinNs
// to be seen.
constexpr int64_t kLoopSpinNs = 50000;
constexpr unsigned kLoopSpinSkipsMax = 1024;

} // namespace

void work_spin(Core *self)
{
    if (!g_multi_cpu || self->work.in_flight <= 0)
        return;
    if (self->work.spin_skips) {
        self->work.spin_skips--;
        return;
    }
    uint64_t seen = __atomic_load_n(&self->work.ran, __ATOMIC_ACQUIRE);
    bool hit = false;
    self->work.spins++;
    set_poll_thread(self, PyThread_get_thread_ident());
    Py_BEGIN_ALLOW_THREADS
    int64_t end = monotonic_ns() + kLoopSpinNs;
    for (unsigned i = 1;; i++) {
        if (__atomic_load_n(&self->work.ran, __ATOMIC_ACQUIRE) != seen) {
            hit = true;
            break;
        }
        cpu_relax();
        if (i % 64 == 0 && monotonic_ns() > end)
            break;
    }
    Py_END_ALLOW_THREADS
    set_poll_thread(self, 0);
    if (hit) {
        self->work.spin_hits++;
        self->work.spin_backoff = 0;
        return;
    }
    unsigned b = self->work.spin_backoff ? self->work.spin_backoff * 2 : 8;
    self->work.spin_backoff = b < kLoopSpinSkipsMax ? b : kLoopSpinSkipsMax;
    self->work.spin_skips = self->work.spin_backoff;
}

namespace {

// Whether this thread may call evloop_work_* now: it runs the loop, or no thread does and
// none polls.
bool may_submit(Core *self)
{
    if (!self->raw)
        return false;
    unsigned long me = PyThread_get_thread_ident();
    if (self->work.poll_thread) // a callback of the poll's, or another thread while it polls
        return self->work.poll_thread == me;
    return !self->has_thread || self->thread_id == me;
}

// Whether the iteration polls the RawLoop, which brings the items back (no one has replaced
// loop._selector).
bool native_poll(Core *self)
{
    return self->selector && self->selector_attr == self->selector;
}

// Hands item it (a new reference, given up here) to the pool: 0; 1, the item dropped, when
// this thread may not submit now; or -1 with an exception set. The check is made here, with no
// Python code between it and the submit: the caller's own check came before Python code (a
// create_future, a collection), during which another thread may have started the loop.
int submit(Core *self, WorkItem *it)
{
    if (!may_submit(self)) {
        PyObject_GC_Track(it); // never in the pool, as below
        Py_DECREF(it);
        return 1;
    }
    it->core = reinterpret_cast<Core *>(Py_NewRef(reinterpret_cast<PyObject *>(self)));
    int r = self->ops->work_submit(self->raw, work_run, work_done, it, &it->id);
    if (r < 0) {
        // Refused: never in the pool, so the collector may see it (its future may hold it as
        // a done callback while it holds the future: a cycle to collect).
        PyObject_GC_Track(it);
        Py_DECREF(it); // and its core reference (item_clear)
        errno = -r;
        PyErr_SetFromErrno(r == -ESHUTDOWN ? PyExc_RuntimeError : PyExc_OSError);
        return -1;
    }
    self->work.in_flight++;
    return 0;
}

WorkItem *item_new(PyObject *fn, PyObject *args, PyObject *fut, bool concurrent)
{
    auto *it = PyObject_GC_New(WorkItem, g_item_type);
    if (!it)
        return nullptr;
    it->fn = Py_NewRef(fn);
    it->args = Py_NewRef(args);
    it->result = nullptr;
    it->failed = it->finished = it->no_state = false;
    it->concurrent = concurrent;
    it->status = 0;
    it->fut = Py_NewRef(fut);
    it->core = nullptr;
    it->id = 0;
    it->next = nullptr;
    // not GC-tracked while a pool thread may touch its fields without the collector's
    // knowledge: tracked again by work_settle (see item_traverse)
    return it;
}

// loop._evloop_run_in_executor(fn, args): the asyncio future of fn(*args) on the pool, or
// NotImplemented when this thread may not submit now (the caller takes the stdlib's way).
PyObject *run_in_executor(PyObject *me, PyObject *const *argv, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (n != 2 || !PyTuple_CheckExact(argv[1])) {
        PyErr_SetString(PyExc_TypeError, "_evloop_run_in_executor(fn, args: tuple)");
        return nullptr;
    }
    if (!may_submit(self) || !native_poll(self))
        Py_RETURN_NOTIMPLEMENTED;
    PyObject *fut = PyObject_CallMethodNoArgs(me, s_create_future);
    if (!fut)
        return nullptr;
    WorkItem *it = item_new(argv[0], argv[1], fut, false);
    if (!it) {
        Py_DECREF(fut);
        return nullptr;
    }
    // The item is the future's done callback: a cancel before a pool thread takes it cancels
    // the work (as wrap_future's cancel of the concurrent future does).
    PyObject *r = PyObject_CallMethodOneArg(fut, s_add_done_callback,
                                            reinterpret_cast<PyObject *>(it));
    if (!r) {
        Py_DECREF(it);
        Py_DECREF(fut);
        return nullptr;
    }
    Py_DECREF(r);
    int s = submit(self, it);
    if (s != 0) { // the future, which nobody has seen, goes with the item
        Py_DECREF(fut);
        if (s < 0)
            return nullptr;
        Py_RETURN_NOTIMPLEMENTED;
    }
    return fut;
}

// loop._evloop_work_submit(cf, fn, args): the executor's submit() on the pool, settling the
// concurrent.futures.Future cf on the pool thread. True; False when another thread drives the
// loop now (hand it the call); None when the loop cannot take it (closed, or not polled here).
PyObject *work_submit_cf(PyObject *me, PyObject *const *argv, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (n != 3 || !PyTuple_CheckExact(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "_evloop_work_submit(future, fn, args: tuple)");
        return nullptr;
    }
    if (!self->raw || !native_poll(self))
        Py_RETURN_NONE;
    if (!may_submit(self))
        Py_RETURN_FALSE;
    WorkItem *it = item_new(argv[1], argv[2], argv[0], true);
    int s = it ? submit(self, it) : -1;
    if (s < 0)
        return nullptr;
    return PyBool_FromLong(s == 0);
}

// The loop's exception handler for what settling an asyncio future raised (the stdlib settles
// it in a callback of the loop, whose failure reaches the same handler).
int report_settle_error(Core *self, WorkItem *it)
{
    PyObject *exc = fetch_exception();
    PyObject *ctx = PyDict_New();
    int r = -1;
    if (ctx && PyDict_SetItem(ctx, s_message, m_settle) == 0 &&
        PyDict_SetItem(ctx, s_exception, exc) == 0 && PyDict_SetItem(ctx, s_future, it->fut) == 0) {
        PyObject *res = PyObject_CallMethodOneArg(reinterpret_cast<PyObject *>(self),
                                                  s_call_exception_handler, ctx);
        r = res ? 0 : -1;
        Py_XDECREF(res);
    }
    Py_XDECREF(ctx);
    Py_XDECREF(exc);
    return r;
}

// Settles one completed asyncio item: fn's outcome to its future unless the future is done
// (cancelled) or the loop closed (wrap_future's _call_set_state drops it then too).
int settle_one(Core *self, WorkItem *it)
{
    PyObject *fut = it->fut;
    PyObject *r = PyObject_CallMethodOneArg(fut, s_remove_done_callback,
                                            reinterpret_cast<PyObject *>(it));
    if (!r)
        return -1;
    Py_DECREF(r);
    if (it->no_state && !it->result) {
        it->failed = true;
        it->result = PyObject_CallNoArgs(PyExc_MemoryError);
    }
    if (it->status != 0 || !it->result || self->closed)
        return 0;
    r = PyObject_CallMethodNoArgs(fut, s_cancelled);
    if (!r)
        return -1;
    bool cancelled = r == Py_True;
    Py_DECREF(r);
    if (cancelled)
        return 0;
    if (it->failed) { // concurrent.futures' CancelledError and the like, as asyncio's
        PyObject *exc = g_convert ? PyObject_CallOneArg(g_convert, it->result) : nullptr;
        if (exc)
            Py_SETREF(it->result, exc);
        else if (g_convert)
            return report_settle_error(self, it);
    }
    r = PyObject_CallMethodOneArg(fut, it->failed ? s_set_exception : s_set_result, it->result);
    if (r) {
        Py_DECREF(r);
        return 0;
    }
    return report_settle_error(self, it);
}

// Sets every event that _evloop_work_idle was given, once no accepted item is left.
int idle_reached(Core *self)
{
    if (self->work.in_flight || !self->work.idle)
        return 0;
    PyObject *events = self->work.idle;
    self->work.idle = nullptr;
    for (Py_ssize_t i = 0; i < PyList_GET_SIZE(events); i++) {
        PyObject *r = PyObject_CallMethodNoArgs(PyList_GET_ITEM(events, i), s_set);
        if (r)
            Py_DECREF(r);
        else // reported, so that the other waiters are still woken
            PyErr_WriteUnraisable(PyList_GET_ITEM(events, i));
    }
    Py_DECREF(events);
    return 0;
}

} // namespace

int work_settle(Core *self)
{
    while (WorkItem *it = self->work.done) {
        self->work.done = it->next;
        if (!self->work.done)
            self->work.done_tail = nullptr;
        self->work.in_flight--;
        PyObject_GC_Track(it);
        int r = it->concurrent ? 0 : settle_one(self, it);
        if (it->concurrent && it->no_state) {
            PyObject *exc = PyObject_CallNoArgs(PyExc_MemoryError);
            if (exc)
                call_unraisable(it->fut, s_set_exception, exc);
            Py_XDECREF(exc);
        }
        if (it->concurrent && it->status != 0) { // never started: stopped, as cancel_futures
            PyObject *c = PyObject_CallMethodNoArgs(it->fut, s_cancel);
            Py_XDECREF(c);
            if (!c)
                PyErr_WriteUnraisable(it->fut);
        }
        Py_DECREF(it); // the pool's reference
        if (r < 0)
            return -1;
    }
    return idle_reached(self);
}

namespace {

// loop._evloop_work_drain(): polls (the GIL released while it waits) until every accepted
// item is settled. For shutdown(wait=True) on the thread that may drive the loop and for
// close(); once the RawLoop is freed (after which every item's done has run), it settles
// them. False, doing nothing, when this thread may not drive the loop now; None on one of
// the loop's own pool threads running an item, which would wait for itself.
PyObject *work_drain(PyObject *me, PyObject *)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (t_item_core == self)
        Py_RETURN_NONE;
    if (!self->raw || (self->work.in_flight && !may_submit(self)))
        Py_RETURN_FALSE;
    if (self->work.done && work_settle(self) < 0)
        return nullptr;
    while (self->work.in_flight) {
        set_poll_thread(self, PyThread_get_thread_ident());
        int r = self->ops->poll(self->raw, self->work.done ? 0 : -1);
        set_poll_thread(self, 0);
        if (r < 0 || work_settle(self) < 0)
            return nullptr;
    }
    Py_RETURN_TRUE;
}

// loop._evloop_work_idle(event): event.set() once no accepted item is left (at once, and
// False, if none is); True if it will be set later. Each caller's event is kept: overlapping
// shutdown_default_executor() calls each wait on their own.
PyObject *work_idle(PyObject *me, PyObject *ev)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (!self->work.in_flight)
        Py_RETURN_FALSE;
    if (!self->work.idle && !(self->work.idle = PyList_New(0)))
        return nullptr;
    if (PyList_Append(self->work.idle, ev) < 0)
        return nullptr;
    Py_RETURN_TRUE;
}

// loop._evloop_work_spins(): (spins, spins that found a call done) of work_spin, so far.
PyObject *work_spins(PyObject *me, PyObject *)
{
    Core *self = reinterpret_cast<Core *>(me);
    return Py_BuildValue("(KK)", (unsigned long long)self->work.spins,
                         (unsigned long long)self->work.spin_hits);
}

// loop._evloop_work_threads(n): the pool's size, before its first item (evloop_work_configure
// with the library's other defaults). 0, or the negative errno: -EBUSY once it has started or
// from a thread that may not configure it now, -EINVAL for a size out of range.
PyObject *work_threads(PyObject *me, PyObject *arg)
{
    Core *self = reinterpret_cast<Core *>(me);
    unsigned long n = PyLong_AsUnsignedLong(arg);
    if (n == static_cast<unsigned long>(-1) && PyErr_Occurred())
        return nullptr;
    if (n > UINT32_MAX)
        return PyLong_FromLong(-EINVAL);
    if (!may_submit(self))
        return PyLong_FromLong(self->raw ? -EBUSY : -ESHUTDOWN);
    return PyLong_FromLong(self->ops->work_threads(self->raw, unsigned(n)));
}

// _WorkItem(fut): the asyncio future's done callback. A cancelled future cancels the work if
// no pool thread has taken it (-EBUSY: running, -EALREADY: returned; either way its result
// is dropped).
PyObject *item_call(PyObject *me, PyObject *args, PyObject *)
{
    auto *it = reinterpret_cast<WorkItem *>(me);
    if (PyTuple_GET_SIZE(args) != 1) {
        PyErr_SetString(PyExc_TypeError, "_WorkItem(future)");
        return nullptr;
    }
    if (it->finished || !it->core || !it->core->raw)
        Py_RETURN_NONE;
    PyObject *r = PyObject_CallMethodNoArgs(PyTuple_GET_ITEM(args, 0), s_cancelled);
    if (!r)
        return nullptr;
    bool cancelled = r == Py_True;
    Py_DECREF(r);
    // checked after cancelled(), which may run Python (a thread switch)
    if (cancelled && may_submit(it->core))
        it->core->ops->work_cancel(it->core->raw, it->id);
    Py_RETURN_NONE;
}

int item_traverse(PyObject *me, visitproc visit, void *arg)
{
    auto *it = reinterpret_cast<WorkItem *>(me);
    Py_VISIT(Py_TYPE(me));
    Py_VISIT(it->fn);
    Py_VISIT(it->args);
    Py_VISIT(it->result);
    Py_VISIT(it->fut);
    Py_VISIT(reinterpret_cast<PyObject *>(it->core));
    return 0;
}

int item_clear(PyObject *me)
{
    auto *it = reinterpret_cast<WorkItem *>(me);
    Py_CLEAR(it->fn);
    Py_CLEAR(it->args);
    Py_CLEAR(it->result);
    Py_CLEAR(it->fut);
    PyObject *core = reinterpret_cast<PyObject *>(it->core);
    it->core = nullptr;
    Py_XDECREF(core);
    return 0;
}

void item_dealloc(PyObject *me)
{
    PyTypeObject *tp = Py_TYPE(me);
    PyObject_GC_UnTrack(me);
    item_clear(me);
    PyObject_GC_Del(me);
    Py_DECREF(tp);
}

PyObject *item_repr(PyObject *me)
{
    auto *it = reinterpret_cast<WorkItem *>(me);
    return PyUnicode_FromFormat("<evloop work item %llu>", static_cast<unsigned long long>(it->id));
}

// _aio_executor_setup(convert): asyncio.futures._convert_future_exc.
PyObject *executor_setup(PyObject *, PyObject *convert)
{
    Py_XSETREF(g_convert, Py_NewRef(convert));
    Py_RETURN_NONE;
}

PyMethodDef executor_setup_def = {"_aio_executor_setup", executor_setup, METH_O,
                                  "_aio_executor_setup(convert_future_exc)."};

PyMethodDef executor_methods[] = {
    {"_evloop_run_in_executor", EVLOOP_FASTKW(run_in_executor), METH_FASTCALL, nullptr},
    {"_evloop_work_submit", EVLOOP_FASTKW(work_submit_cf), METH_FASTCALL, nullptr},
    {"_evloop_work_drain", work_drain, METH_NOARGS, nullptr},
    {"_evloop_work_idle", work_idle, METH_O, nullptr},
    {"_evloop_work_threads", work_threads, METH_O, nullptr},
    {"_evloop_work_spins", work_spins, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

} // namespace

int register_executor(PyObject *m)
{
    const Name names[] = {{&s_create_future, "create_future"},
                          {&s_add_done_callback, "add_done_callback"},
                          {&s_remove_done_callback, "remove_done_callback"},
                          {&s_set_result, "set_result"},
                          {&s_set_exception, "set_exception"},
                          {&s_cancelled, "cancelled"},
                          {&s_cancel, "cancel"},
                          {&s_set_running, "set_running_or_notify_cancel"},
                          {&s_set, "set"},
                          {&s_call_exception_handler, "call_exception_handler"},
                          {&s_message, "message"},
                          {&s_exception, "exception"},
                          {&s_future, "future"},
                          {&m_settle, "Exception in settling a run_in_executor future"}};
    if (intern_names(names) < 0)
        return -1;
    g_interp = PyInterpreterState_Get();
    cpu_set_t set;
    g_multi_cpu = sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) > 1 : true;
    static PyType_Slot slots[] = {
        {Py_tp_doc, const_cast<char *>("One run_in_executor call on evloop's work pool.")},
        {Py_tp_call, reinterpret_cast<void *>(item_call)},
        {Py_tp_traverse, reinterpret_cast<void *>(item_traverse)},
        {Py_tp_clear, reinterpret_cast<void *>(item_clear)},
        {Py_tp_dealloc, reinterpret_cast<void *>(item_dealloc)},
        {Py_tp_repr, reinterpret_cast<void *>(item_repr)},
        {0, nullptr}};
    static PyType_Spec spec = {"evloop._asyncio_core._WorkItem", int(sizeof(WorkItem)), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC, slots};
    g_item_type = reinterpret_cast<PyTypeObject *>(PyType_FromSpec(&spec));
    if (!g_item_type)
        return -1;
    if (add_core_methods(executor_methods) < 0)
        return -1;
    return add_function(m, &executor_setup_def);
}

} // namespace aio
