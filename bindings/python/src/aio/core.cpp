// _AioCore, the C base of evloop.EventLoop (evloop/_aio.py, docs/asyncio.md): the scheduling
// methods (call_soon, call_soon_threadsafe, call_later, call_at and the stdlib's private
// ones), the iteration (_run_once) and run_forever's loop in C, driven by evloop_run_once
// through the AioOps of the RawLoop it is attached to (either variant). Handles and queues
// are handles.cpp's and queues.cpp's; the type, its attributes and _aio_setup core_type.cpp's.
#include "core.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>

namespace aio {

inline double monotonic()
{
    // time.monotonic()'s clock and rounding: CLOCK_MONOTONIC in ns, then / 1e9.
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return double(int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec) / 1e9;
}

// self.time() as a double: the clock, or a subclass's time(). -1 with an exception set
// (check PyErr_Occurred) only for an overridden time().
double loop_time(Core *self)
{
    if (!(self->hooks & H_TIME))
        return monotonic();
    PyObject *t = PyObject_CallMethodNoArgs(reinterpret_cast<PyObject *>(self), g.s_time);
    if (!t)
        return -1.0;
    double d = PyFloat_AsDouble(t);
    Py_DECREF(t);
    return d;
}

int check_closed(Core *self)
{
    if (self->closed) {
        PyErr_SetString(PyExc_RuntimeError, "Event loop is closed");
        return -1;
    }
    return 0;
}

// ---------------------------------------------------------------- handles

// callback, *args, context=None for call_soon(_threadsafe) (first = 0) and the same after a
// leading delay/when (first = 1), bound as Python binds the stdlib's signature: the leading
// parameters by position or by keyword, *args only after them by position, with the messages
// of BaseEventLoop's own functions for an unexpected, repeated or missing argument. The args
// tuple is new; lead, callback and context borrowed (context may be nullptr).
int parse_call(const char *name, PyObject *const *argv, size_t nargsf, PyObject *kwnames,
               int first, PyObject **lead, PyObject **callback, PyObject **args,
               PyObject **context)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    const char *names[2] = {std::strcmp(name, "call_later") == 0 ? "delay" : "when", "callback"};
    if (!first)
        names[0] = names[1];
    int nnamed = first + 1;
    PyObject *named[2] = {nullptr, nullptr}; // the leading parameters, as bound
    for (Py_ssize_t i = 0; i < n && i < nnamed; i++)
        named[i] = argv[i];
    *context = nullptr;
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t i = 0; i < nkw; i++) {
        PyObject *k = PyTuple_GET_ITEM(kwnames, i);
        if (k == g.s_context || PyUnicode_CompareWithASCIIString(k, "context") == 0) {
            *context = argv[n + i];
            continue;
        }
        int j = 0;
        while (j < nnamed && PyUnicode_CompareWithASCIIString(k, names[j]) != 0)
            j++;
        if (j == nnamed) {
            PyErr_Format(PyExc_TypeError,
                         "BaseEventLoop.%s() got an unexpected keyword argument '%U'", name, k);
            return -1;
        }
        if (named[j]) {
            PyErr_Format(PyExc_TypeError,
                         "BaseEventLoop.%s() got multiple values for argument '%s'", name,
                         names[j]);
            return -1;
        }
        named[j] = argv[n + i];
    }
    if (!named[0] || !named[nnamed - 1]) {
        if (!named[0] && !named[nnamed - 1] && nnamed == 2)
            PyErr_Format(PyExc_TypeError,
                         "BaseEventLoop.%s() missing 2 required positional arguments: "
                         "'%s' and '%s'",
                         name, names[0], names[1]);
        else
            PyErr_Format(PyExc_TypeError,
                         "BaseEventLoop.%s() missing 1 required positional argument: '%s'", name,
                         names[named[0] ? 1 : 0]);
        return -1;
    }
    *lead = first ? named[0] : nullptr;
    *callback = named[first];
    Py_ssize_t extra = n > nnamed ? n - nnamed : 0;
    *args = PyTuple_New(extra);
    if (!*args)
        return -1;
    for (Py_ssize_t i = 0; i < extra; i++)
        PyTuple_SET_ITEM(*args, i, Py_NewRef(argv[nnamed + i]));
    return 0;
}

// In debug mode, the stdlib's checks, from its own methods: _check_thread() (if thread) and
// _check_callback(callback, method).
int debug_checks(Core *self, PyObject *callback, PyObject *method, bool thread)
{
    PyObject *me = reinterpret_cast<PyObject *>(self);
    PyObject *r = thread ? PyObject_CallMethodNoArgs(me, g.s_check_thread) : Py_NewRef(Py_None);
    if (!r)
        return -1;
    Py_DECREF(r);
    PyObject *a[3] = {me, callback, method};
    r = PyObject_VectorcallMethod(g.s_check_callback, a, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                  nullptr);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

// ---------------------------------------------------------------- scheduling methods

PyObject *core_call_soon(PyObject *me, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    Core *self = reinterpret_cast<Core *>(me);
    PyObject *lead, *callback, *args, *context;
    if (parse_call("call_soon", argv, nargsf, kwnames, 0, &lead, &callback, &args, &context) < 0)
        return nullptr;
    if (check_closed(self) < 0 ||
        (self->debug && debug_checks(self, callback, g.s_call_soon, true) < 0)) {
        Py_DECREF(args);
        return nullptr;
    }
    bool ours;
    PyObject *h = make_handle(self, nullptr, callback, args, context, &ours);
    return push_fresh(self, h, ours);
}

// call_soon_threadsafe: the handle goes on the ready queue (under the GIL, as the stdlib's
// deque append), then, from a thread other than the loop's, a wake through evloop's lane submit
// (RawLoop.wake: one release store into the caller's lane, no lock; a syscall only when the
// loop sleeps) unless one is already on its way since the loop last looked at the queue.
PyObject *core_call_soon_threadsafe(PyObject *me, PyObject *const *argv, size_t nargsf,
                                    PyObject *kwnames)
{
    Core *self = reinterpret_cast<Core *>(me);
    PyObject *lead, *callback, *args, *context;
    if (parse_call("call_soon_threadsafe", argv, nargsf, kwnames, 0, &lead, &callback, &args,
                   &context) < 0)
        return nullptr;
    if (check_closed(self) < 0 ||
        (self->debug && debug_checks(self, callback, g.s_call_soon_threadsafe, false) < 0)) {
        Py_DECREF(args);
        return nullptr;
    }
    bool ours;
    PyObject *h = make_handle(self, nullptr, callback, args, context, &ours);
    h = push_fresh(self, h, ours);
    if (!h)
        return nullptr;
    if (self->debug || (self->hooks & H_WRITE_TO_SELF)) { // the stdlib's own wake-up call
        PyObject *r = PyObject_CallMethodNoArgs(me, g.s_write_to_self);
        if (!r)
            Py_CLEAR(h);
        Py_XDECREF(r);
    } else if (!self->wake_pending && !on_loop_thread(self) && self->raw) {
        self->wake_pending = true;
        self->ops->wake(self->raw); // fails only once closed or closing: nothing waits then
    }
    return h;
}

// call_at's work after the argument checks: a TimerHandle at `when` (an object) pushed on the
// heap, marked _scheduled.
PyObject *schedule_at(Core *self, PyObject *when, PyObject *callback, PyObject *args,
                      PyObject *context)
{
    double w = PyFloat_AsDouble(when);
    if (w == -1.0 && PyErr_Occurred()) {
        Py_DECREF(args);
        return nullptr;
    }
    if (self->debug && debug_checks(self, callback, g.s_call_at, true) < 0) {
        Py_DECREF(args);
        return nullptr;
    }
    bool ours;
    PyObject *h = make_handle(self, when, callback, args, context, &ours);
    if (!h)
        return nullptr;
    settle_fresh(self);
    if (heap_push(&self->timers, w, Py_NewRef(h)) < 0 || set_scheduled(h, Py_True) < 0) {
        Py_DECREF(h);
        return nullptr;
    }
    if (g.recycle && Py_IS_TYPE(h, g.timer_t) && !self->debug) {
        self->fresh_timer = h;
        self->fresh_timer_ctx = ours;
    }
    return h;
}

PyObject *core_call_at(PyObject *me, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    Core *self = reinterpret_cast<Core *>(me);
    PyObject *when, *callback, *args, *context;
    if (parse_call("call_at", argv, nargsf, kwnames, 1, &when, &callback, &args, &context) < 0)
        return nullptr;
    if (when == Py_None) {
        Py_DECREF(args);
        PyErr_SetString(PyExc_TypeError, "when cannot be None");
        return nullptr;
    }
    if (check_closed(self) < 0) {
        Py_DECREF(args);
        return nullptr;
    }
    return schedule_at(self, when, callback, args, context);
}

// self.call_at(when, callback, *args, context=context), as the stdlib's call_later calls it,
// for a call_at of a subclass's or set on the instance. Takes args (the reference).
PyObject *call_at_method(PyObject *me, PyObject *when, PyObject *callback, PyObject *args,
                         PyObject *context)
{
    Py_ssize_t n = PyTuple_GET_SIZE(args);
    PyObject *pos = PyTuple_New(n + 2);
    PyObject *kw = pos && context ? Py_BuildValue("{OO}", g.s_context, context) : nullptr;
    PyObject *method = pos && (kw || !context) ? PyObject_GetAttr(me, g.s_call_at) : nullptr;
    PyObject *h = nullptr;
    if (method) {
        PyTuple_SET_ITEM(pos, 0, Py_NewRef(when));
        PyTuple_SET_ITEM(pos, 1, Py_NewRef(callback));
        for (Py_ssize_t i = 0; i < n; i++)
            PyTuple_SET_ITEM(pos, i + 2, Py_NewRef(PyTuple_GET_ITEM(args, i)));
        h = PyObject_Call(method, pos, kw);
    }
    Py_XDECREF(method);
    Py_XDECREF(kw);
    Py_XDECREF(pos);
    Py_DECREF(args);
    return h;
}

PyObject *core_call_later(PyObject *me, PyObject *const *argv, size_t nargsf, PyObject *kwnames)
{
    Core *self = reinterpret_cast<Core *>(me);
    PyObject *delay, *callback, *args, *context;
    if (parse_call("call_later", argv, nargsf, kwnames, 1, &delay, &callback, &args, &context) < 0)
        return nullptr;
    if (delay == Py_None) {
        Py_DECREF(args);
        PyErr_SetString(PyExc_TypeError, "delay must not be None");
        return nullptr;
    }
    // when = self.time() + delay, with the stdlib's errors for a bad delay
    PyObject *when;
    if (!(self->hooks & H_TIME) && PyFloat_CheckExact(delay)) {
        when = PyFloat_FromDouble(monotonic() + PyFloat_AS_DOUBLE(delay));
    } else {
        PyObject *now = self->hooks & H_TIME ? PyObject_CallMethodNoArgs(me, g.s_time)
                                          : PyFloat_FromDouble(monotonic());
        when = now ? PyNumber_Add(now, delay) : nullptr;
        Py_XDECREF(now);
    }
    if (!when || check_closed(self) < 0) {
        Py_XDECREF(when);
        Py_DECREF(args);
        return nullptr;
    }
    PyObject *h = self->hooks & H_CALL_AT ? call_at_method(me, when, callback, args, context)
                                       : schedule_at(self, when, callback, args, context);
    Py_DECREF(when);
    return h;
}

// _call_soon(callback, args, context): the stdlib's internal form (args a tuple).
PyObject *core__call_soon(PyObject *me, PyObject *const *argv, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (n != 3) {
        PyErr_SetString(PyExc_TypeError, "_call_soon(callback, args, context)");
        return nullptr;
    }
    bool ours;
    PyObject *h = make_handle(self, nullptr, argv[0], Py_NewRef(argv[1]), argv[2], &ours);
    return push_fresh(self, h, ours);
}

PyObject *core_add_callback(PyObject *me, PyObject *h)
{
    int c = is_cancelled(h);
    if (c < 0 || (c == 0 && ring_push(&reinterpret_cast<Core *>(me)->ready, Py_NewRef(h)) < 0))
        return nullptr;
    Py_RETURN_NONE;
}

PyObject *core_timer_handle_cancelled(PyObject *me, PyObject *h)
{
    Core *self = reinterpret_cast<Core *>(me);
    PyObject *s = exact_handle(h) ? Py_XNewRef(slot(h, g.scheduled))
                                  : PyObject_GetAttr(h, g.s_scheduled);
    int t = s ? PyObject_IsTrue(s) : -1;
    Py_XDECREF(s);
    if (t < 0) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "_scheduled");
        return nullptr;
    }
    if (t)
        self->timer_cancelled_count++;
    Py_RETURN_NONE;
}

PyObject *core_time(PyObject *, PyObject *) { return PyFloat_FromDouble(monotonic()); }

inline bool is_name(PyObject *name, PyObject *interned)
{
    return name == interned || (PyUnicode_GET_LENGTH(name) == PyUnicode_GET_LENGTH(interned) &&
                                PyUnicode_Compare(name, interned) == 0);
}

// Attribute assignment on the loop, the generic one, which also notes a hook (see Hook)
// being set on or deleted from the instance (mock.patch.object(loop, "time"), as web
// frameworks' tests do to expire timers): the core then calls it as the stdlib does, and
// takes the native way again once the patch is gone. A Python subclass inherits this slot unless it
// defines __setattr__, whose super() call then reaches it.
int core_setattro(PyObject *me, PyObject *name, PyObject *value)
{
    if (PyObject_GenericSetAttr(me, name, value) < 0)
        return -1;
    if (!PyUnicode_Check(name))
        return 0;
    Core *self = reinterpret_cast<Core *>(me);
    for (unsigned i = 0; i < kHooks; i++) {
        if (is_name(name, *g.hook_names[i])) {
            unsigned bit = 1u << i, here = self->hooks & ~self->class_hooks;
            here = value ? here | bit : here & ~bit;
            self->hooks = self->class_hooks | here;
            break;
        }
    }
    return 0;
}

// ---------------------------------------------------------------- the iteration

// The stdlib's clean-up of cancelled timers: all of them when there are more than 100 timers
// and more than half are cancelled, else those at the head of the heap; each leaves with
// _scheduled False.
int drop_cancelled_timers(Core *self)
{
    Heap *hp = &self->timers;
    if (hp->n > 100 && double(self->timer_cancelled_count) / double(hp->n) > 0.5) {
        // The cancelled ones are released after the heap is whole again (a release can run
        // arbitrary code); one that cannot be read or marked stays, and the error goes up.
        PyObject *gone = PyList_New(0);
        if (!gone)
            return -1;
        size_t j = 0;
        bool err = false;
        for (size_t i = 0; i < hp->n; i++) {
            Timer t = hp->a[i];
            int c = err ? 0 : is_cancelled(t.h);
            if (c > 0)
                retrack(self, t.h);
            if (c > 0 && (set_scheduled(t.h, Py_False) < 0 || PyList_Append(gone, t.h) < 0))
                c = -1;
            if (c < 0)
                err = true;
            if (c > 0)
                Py_DECREF(t.h); // the list holds it now
            else
                hp->a[j++] = t;
        }
        hp->n = j;
        heapify(hp);
        if (!err)
            self->timer_cancelled_count = 0;
        Py_DECREF(gone);
        return err ? -1 : 0;
    }
    while (hp->n) {
        int c = is_cancelled(hp->a[0].h);
        if (c <= 0)
            return c;
        self->timer_cancelled_count--;
        PyObject *h = heap_pop(hp);
        retrack(self, h);
        int r = set_scheduled(h, Py_False);
        release_handle(h);
        if (r < 0)
            return -1;
    }
    return 0;
}

// The stdlib's _process_events for one fd: its reader and writer handles queued, or removed
// if cancelled. The key is the SelectorKey (fileobj, fd, events, data) of asyncio's
// registration, data its (reader, writer) pair; anything else goes to the loop's own method.
int process_key(Core *self, PyObject *key, unsigned revents)
{
    PyObject *me = reinterpret_cast<PyObject *>(self);
    long kev = PyTuple_Check(key) && PyTuple_GET_SIZE(key) == 4
                   ? PyLong_AsLong(PyTuple_GET_ITEM(key, 2)) : -1;
    if (kev == -1 && PyErr_Occurred())
        return -1;
    long mask = ((revents & self->any_read) ? 1 : 0) | ((revents & self->any_write) ? 2 : 0);
    if (kev >= 0)
        mask &= kev;
    if (!mask)
        return 0;
    PyObject *data = kev >= 0 ? PyTuple_GET_ITEM(key, 3) : nullptr;
    if (!data || !PyTuple_CheckExact(data) || PyTuple_GET_SIZE(data) != 2) {
        PyObject *ev = Py_BuildValue("[(Ol)]", key, mask);
        PyObject *r = ev ? PyObject_CallMethodOneArg(me, g.s_process_events, ev) : nullptr;
        Py_XDECREF(ev);
        Py_XDECREF(r);
        return r ? 0 : -1;
    }
    static PyObject *const *removers[2] = {&g.s_remove_reader, &g.s_remove_writer};
    for (int i = 0; i < 2; i++) {
        PyObject *h = PyTuple_GET_ITEM(data, i);
        if (!(mask & (1 << i)) || h == Py_None)
            continue;
        int c = is_cancelled(h);
        if (c < 0)
            return -1;
        if (!c) {
            if (ring_push(&self->ready, Py_NewRef(h)) < 0)
                return -1;
            continue;
        }
        PyObject *r = PyObject_CallMethodOneArg(me, *removers[i], PyTuple_GET_ITEM(key, 0));
        Py_XDECREF(r);
        if (!r)
            return -1;
    }
    return 0;
}

// The fds the last poll reported, in its order, as the stdlib's select() + _process_events.
int dispatch_io(Core *self, IoReady *io)
{
    int r = 0;
    for (size_t i = 0; r == 0 && i < io->fds.size(); i++) {
        int fd = io->fds[i];
        unsigned revents = io->events[size_t(fd)];
        PyObject *fdo = PyLong_FromLong(fd);
        PyObject *key = fdo ? PyDict_GetItemWithError(self->sel_keys, fdo) : nullptr;
        Py_XDECREF(fdo);
        if (!key) { // unregistered since (or an error)
            r = PyErr_Occurred() ? -1 : 0;
            continue;
        }
        Py_INCREF(key); // _remove_reader may drop it from the dict
        r = process_key(self, key, revents);
        Py_DECREF(key);
    }
    io->clear();
    return r;
}

// Poll for I/O (evloop_run_once: also runs what other threads submitted, the wake no-ops) and
// queue the ready fds' handles, as select() + _process_events would.
int poll_io(Core *self, int64_t timeout_ns)
{
    PyObject *me = reinterpret_cast<PyObject *>(self);
    PyObject *events;
    if (self->selector && self->selector_attr == self->selector) {
        if (timeout_ns != 0 && self->work.in_flight)
            work_spin(self);
        // the GIL is released inside: no other thread submits work meanwhile
        set_poll_thread(self, PyThread_get_thread_ident());
        int r = self->ops->poll(self->raw, timeout_ns);
        set_poll_thread(self, 0);
        if (r < 0 || (self->work.done && work_settle(self) < 0))
            return -1;
        IoReady *io = self->ops->io_ready(self->raw);
        // A Python signal handler (Ctrl-C) raises here, as from the stdlib's select().
        if (PyErr_CheckSignals() < 0) {
            io->clear();
            return -1;
        }
        if (io->fds.empty())
            return 0;
        if (!(self->hooks & H_PROCESS_EVENTS))
            return dispatch_io(self, io);
        events = PyObject_CallMethodNoArgs(self->selector, g.s_events);
    } else { // someone replaced loop._selector: the stdlib's way
        PyObject *sel = self->selector_attr ? self->selector_attr : Py_None;
        PyObject *t = timeout_ns < 0 ? Py_NewRef(Py_None)
                                     : PyFloat_FromDouble(double(timeout_ns) / 1e9);
        events = t ? PyObject_CallMethodOneArg(sel, g.s_select, t) : nullptr;
        Py_XDECREF(t);
    }
    if (!events)
        return -1;
    PyObject *r = PyObject_CallMethodOneArg(me, g.s_process_events, events);
    Py_DECREF(events);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

constexpr double kMaxSelectTimeout = 24 * 3600; // the stdlib's MAXIMUM_SELECT_TIMEOUT

// How long fd readiness (and the C loop's own work: what other threads submitted, signals
// through the self-pipe) may wait to be seen while handles are ready or timers due, in
// run_forever's C loop: a poll with a zero timeout costs more than most iterations' own work
// (a syscall and evloop_run_once's tick), so that loop makes one only when the last
// was this long ago or more (seen at most this plus one iteration's callbacks later than on the
// stock loop). An iteration with nothing ready, the first iteration of each run_forever and
// every _run_once called on its own poll as the stdlib does (tournament/results/asyncio-log.md,
// "Issue 30").
constexpr int64_t kPollSkipNs = 20000;

// Whether this iteration, which would poll with a zero timeout, may leave the poll out: in
// run_forever's C loop (in_loop), on the native poll path (no selector or _process_events of
// someone else's, whose select() the stdlib calls each time), the loop not stopping, and the
// last poll less than kPollSkipNs ago.
bool may_skip_poll(Core *self, bool in_loop)
{
    if (!in_loop || self->stopping || !self->selector || self->selector_attr != self->selector ||
        (self->hooks & H_PROCESS_EVENTS)) {
        self->last_poll_ns = 0;
        return false;
    }
    int64_t now = monotonic_ns();
    if (now - self->last_poll_ns < kPollSkipNs)
        return true;
    self->last_poll_ns = now;
    return false;
}

// One iteration, in the stdlib's order: drop cancelled timers, poll (no wait if something is
// ready or the loop is stopping, else until the earliest timer), queue the I/O callbacks, then
// the timers due (before now + clock resolution), then run the handles that were ready at that
// point; those they schedule run in the next iteration. in_loop: called by run_forever's C
// loop, which may leave out a poll that cannot wait (may_skip_poll). 0, or -1 with an
// exception set.
int run_iteration(Core *self, bool in_loop)
{
    settle_fresh(self);
    if (drop_cancelled_timers(self) < 0)
        return -1;
    // Before reading the queue: a call_soon_threadsafe from now on wakes the wait below.
    bool woken = self->wake_pending;
    self->wake_pending = false;
    int64_t timeout_ns = -1;
    if (self->ready.len || self->stopping) {
        timeout_ns = 0;
    } else if (self->timers.n) {
        double now = loop_time(self);
        if (now == -1.0 && PyErr_Occurred())
            return -1;
        double t = self->timers.a[0].when - now;
        t = t > kMaxSelectTimeout ? kMaxSelectTimeout : t < 0 || std::isnan(t) ? 0 : t;
        timeout_ns = int64_t(std::ceil(t * 1e9)); // never early
    }
    if (timeout_ns == 0 && may_skip_poll(self, in_loop)) {
        // No wait follows: a wake made since the last poll is still on its way, unseen.
        self->wake_pending = woken;
        // A Python signal handler (Ctrl-C) runs here, as after a poll.
        if (PyErr_CheckSignals() < 0)
            return -1;
    } else {
        if (timeout_ns != 0) {
            self->last_poll_ns = 0;
            trim_free_lists(); // idle now: the handles a burst left go back (handles.cpp)
        }
        if (poll_io(self, timeout_ns) < 0)
            return -1;
    }
    if (self->timers.n) {
        double end = loop_time(self);
        if (end == -1.0 && PyErr_Occurred())
            return -1;
        end += self->clock_resolution;
        // The stdlib stops at the first timer whose `when >= end`: with time() NaN, every
        // timer is due.
        while (self->timers.n && !(self->timers.a[0].when >= end)) {
            PyObject *h = heap_pop(&self->timers);
            retrack(self, h);
            if (set_scheduled(h, Py_False) < 0) {
                Py_DECREF(h);
                return -1;
            }
            if (ring_push(&self->ready, h) < 0)
                return -1;
        }
    }
    for (size_t todo = self->ready.len; todo && self->ready.len; todo--) {
        PyObject *h = ring_pop(&self->ready);
        retrack(self, h);
        if (run_handle(self, h) < 0)
            return -1;
    }
    if (!self->ready.len && self->ready.cap > 65536) { // give back a burst's memory
        PyMem_Free(self->ready.buf);
        self->ready = Ring{nullptr, 0, 0, 0};
    }
    if (self->stopping) // the loop stops: as idle as before a wait
        trim_free_lists();
    return 0;
}

// Whether the Python frame calling us is the stdlib's BaseEventLoop.run_forever (its code
// object, given to _aio_setup): then its `while True: self._run_once(); if self._stopping:
// break` can run here.
bool called_by_run_forever()
{
    if (!g.run_forever_code)
        return false;
    PyFrameObject *f = PyEval_GetFrame(); // borrowed
    if (!f)
        return false;
    PyCodeObject *code = PyFrame_GetCode(f);
    bool r = reinterpret_cast<PyObject *>(code) == g.run_forever_code;
    Py_DECREF(code);
    return r;
}

// The iterations a C run of run_forever's loop makes between two calls of g.breaker, a
// Python function that does nothing: entering its bytecode runs the interpreter's periodic
// check, as the stdlib's `while` did between two calls of _run_once, for callbacks that are
// all C. That check hands the GIL to a thread that asked for it (and waits until that thread
// has it), runs pending calls and signal handlers. Not a release and take-back of the GIL
// (Py_BEGIN_ALLOW_THREADS): a waiting thread asks for the GIL only after a switch interval in
// which nobody released it, so a release every few hundred microseconds, which the loop takes
// straight back, keeps the waiter from ever asking (tests/test_aio_gil.py).
constexpr unsigned kGilYieldEvery = 1024;

// _run_once: one iteration. Called by the stdlib's run_forever (outside debug mode, and while
// no _run_once is set on the instance), it goes on with the next ones here, as that loop would,
// until _stopping is set: the stdlib's setup and clean-up around the loop stay its own, and
// what its `while` did between iterations is done here (the stop check; signal handlers and
// pending calls; the GIL handed to a thread that asked for it).
PyObject *core_run_once(PyObject *me, PyObject *)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (!self->raw) {
        PyErr_SetString(PyExc_RuntimeError, "evloop: the loop's C part is not attached");
        return nullptr;
    }
    if (run_iteration(self, false) < 0)
        return nullptr;
    if (self->stopping || self->debug || (self->hooks & H_RUN_ONCE) || !called_by_run_forever())
        Py_RETURN_NONE;
    for (unsigned n = 1; !self->stopping && !self->debug && !(self->hooks & H_RUN_ONCE); n++) {
        if (n % kGilYieldEvery == 0 && g.breaker) {
            PyObject *r = PyObject_CallNoArgs(g.breaker);
            if (!r)
                return nullptr;
            Py_DECREF(r);
        }
        if (!self->raw) // closed by a callback (close() refuses while running; be safe)
            break;
        if (run_iteration(self, true) < 0)
            return nullptr;
    }
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------- views and set-up

} // namespace aio
