// The _AioCore type: _evloop_attach, the views of the ready queue and the heap for loop._ready
// and loop._scheduled, the attributes the stdlib's code reads and writes as data descriptors,
// the type's slots (new, traverse, clear, dealloc), its method table, and _aio_setup.
#include "core.h"

#include <cmath>
#include <cstring>

namespace aio {

PyTypeObject *g_core_type = nullptr; // _AioCore, a heap type

// _evloop_attach(raw, selector, keys, class_hooks, any_read, any_write): the RawLoop to
// drive, the _EvloopSelector and its fd -> SelectorKey dict, the hooks the loop's class
// overrides (a Hook mask, as evloop/_aio.py's _HOOKS lists them), and the C events read as
// readable / writable.
PyObject *core_attach(PyObject *me, PyObject *const *argv, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (n != 6 || !PyDict_CheckExact(argv[2])) {
        PyErr_SetString(PyExc_TypeError, "_evloop_attach(raw, selector, keys: dict, hooks, "
                                         "any_read, any_write)");
        return nullptr;
    }
    unsigned long hooks = PyLong_AsUnsignedLong(argv[3]);
    unsigned long rd = PyLong_AsUnsignedLong(argv[4]), wr = PyLong_AsUnsignedLong(argv[5]);
    if (PyErr_Occurred())
        return nullptr;
    PyObject *cap = PyObject_GetAttrString(argv[0], "_aio_ops");
    auto *ops = cap ? static_cast<const AioOps *>(PyCapsule_GetPointer(cap, "evloop.aio_ops"))
                    : nullptr;
    Py_XDECREF(cap);
    if (!ops)
        return nullptr;
    if (ops->size != sizeof(AioOps) || !PyObject_TypeCheck(argv[0], ops->raw_type)) {
        PyErr_SetString(PyExc_TypeError, "_evloop_attach: not a RawLoop of this build");
        return nullptr;
    }
    Py_XSETREF(self->raw, Py_NewRef(argv[0]));
    self->ops = ops;
    Py_XSETREF(self->selector, Py_NewRef(argv[1]));
    Py_XSETREF(self->sel_keys, Py_NewRef(argv[2]));
    self->class_hooks = self->hooks = unsigned(hooks) & ((1u << kHooks) - 1);
    self->any_read = unsigned(rd);
    self->any_write = unsigned(wr);
    Py_RETURN_NONE;
}

// The ready queue and the timer heap, for the Python views loop._ready and loop._scheduled.
PyObject *core_ready_list(PyObject *me, PyObject *)
{
    Core *self = reinterpret_cast<Core *>(me);
    Ring *r = &self->ready;
    for (size_t i = 0; i < r->len; i++)
        retrack(self, ring_at(r, i));
    PyObject *l = PyList_New(Py_ssize_t(r->len));
    for (size_t i = 0; l && i < r->len; i++)
        PyList_SET_ITEM(l, Py_ssize_t(i), Py_NewRef(ring_at(r, i)));
    return l;
}

PyObject *core_timers_list(PyObject *me, PyObject *)
{
    Core *self = reinterpret_cast<Core *>(me);
    Heap *hp = &self->timers;
    for (size_t i = 0; i < hp->n; i++)
        retrack(self, hp->a[i].h);
    PyObject *l = PyList_New(Py_ssize_t(hp->n));
    for (size_t i = 0; l && i < hp->n; i++)
        PyList_SET_ITEM(l, Py_ssize_t(i), Py_NewRef(hp->a[i].h));
    return l;
}

PyObject *core_ready_len(PyObject *me, PyObject *)
{
    return PyLong_FromSize_t(reinterpret_cast<Core *>(me)->ready.len);
}

PyObject *core_timers_len(PyObject *me, PyObject *)
{
    return PyLong_FromSize_t(reinterpret_cast<Core *>(me)->timers.n);
}

PyObject *core_ready_popleft(PyObject *me, PyObject *)
{
    Core *self = reinterpret_cast<Core *>(me);
    Ring *r = &self->ready;
    if (!r->len) {
        PyErr_SetString(PyExc_IndexError, "pop from an empty deque");
        return nullptr;
    }
    PyObject *h = ring_pop(r);
    retrack(self, h);
    return h;
}

PyObject *core_ready_append(PyObject *me, PyObject *h)
{
    if (ring_push(&reinterpret_cast<Core *>(me)->ready, Py_NewRef(h)) < 0)
        return nullptr;
    Py_RETURN_NONE;
}

// Empties the queue and the heap; the references go after both are consistent again.
PyObject *clear_ready(Core *self)
{
    Ring r = self->ready;
    for (size_t i = 0; i < r.len; i++)
        retrack(self, ring_at(&r, i));
    self->fresh = nullptr;
    self->ready = Ring{nullptr, 0, 0, 0};
    for (size_t i = 0; i < r.len; i++)
        Py_DECREF(ring_at(&r, i));
    PyMem_Free(r.buf);
    Py_RETURN_NONE;
}

PyObject *clear_timers(Core *self)
{
    Heap hp = self->timers;
    for (size_t i = 0; i < hp.n; i++)
        retrack(self, hp.a[i].h);
    self->fresh_timer = nullptr;
    self->timers = Heap{nullptr, 0, 0, hp.seq};
    for (size_t i = 0; i < hp.n; i++)
        Py_DECREF(hp.a[i].h);
    PyMem_Free(hp.a);
    Py_RETURN_NONE;
}

PyObject *core_ready_clear(PyObject *me, PyObject *)
{
    return clear_ready(reinterpret_cast<Core *>(me));
}

PyObject *core_timers_clear(PyObject *me, PyObject *)
{
    return clear_timers(reinterpret_cast<Core *>(me));
}

// Adds a TimerHandle to the heap as it is (its _when; _scheduled left alone), for the
// _scheduled view's setter.
PyObject *core_timers_add(PyObject *me, PyObject *h)
{
    Core *self = reinterpret_cast<Core *>(me);
    PyObject *when =
        exact_handle(h) ? Py_XNewRef(slot(h, g.when)) : PyObject_GetAttrString(h, "_when");
    if (!when) {
        if (!PyErr_Occurred())
            PyErr_SetString(PyExc_AttributeError, "_when");
        return nullptr;
    }
    double w = PyFloat_AsDouble(when);
    Py_DECREF(when);
    if ((w == -1.0 && PyErr_Occurred()) || heap_push(&self->timers, w, Py_NewRef(h)) < 0)
        return nullptr;
    Py_RETURN_NONE;
}

// ---------------------------------------------------------------- attributes

// The stdlib's boolean attributes (_closed, _stopping, _debug) are read by get_flag (aio.h).
template <PyObject *Core::*Obj, bool Core::*Flag>
int set_flag(PyObject *me, PyObject *v, void *)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete this loop attribute");
        return -1;
    }
    int t = PyObject_IsTrue(v);
    if (t < 0)
        return -1;
    Py_XSETREF(self->*Obj, Py_NewRef(v));
    self->*Flag = t;
    return 0;
}

PyObject *get_thread_id(PyObject *me, void *)
{
    PyObject *o = reinterpret_cast<Core *>(me)->thread_id_o;
    return Py_NewRef(o ? o : Py_None);
}

int set_thread_id(PyObject *me, PyObject *v, void *)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (!v) {
        PyErr_SetString(PyExc_AttributeError, "cannot delete _thread_id");
        return -1;
    }
    unsigned long tid = 0;
    if (v != Py_None) {
        tid = PyLong_Check(v) ? PyLong_AsUnsignedLong(v) : 0;
        if (PyErr_Occurred())
            PyErr_Clear(); // not a thread ident: never this thread
    }
    Py_XSETREF(self->thread_id_o, Py_NewRef(v));
    self->has_thread = v != Py_None;
    self->thread_id = tid;
    return 0;
}

PyObject *get_selector(PyObject *me, void *)
{
    PyObject *o = reinterpret_cast<Core *>(me)->selector_attr;
    if (!o)
        PyErr_SetString(PyExc_AttributeError, "_selector");
    return Py_XNewRef(o);
}

int set_selector(PyObject *me, PyObject *v, void *)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (v == Py_None && self->selector && self->selector_attr == self->selector) {
        // The stdlib's close() drops the selector it has closed: the core lets go of it too
        // (the iteration and the fd registry take the stdlib's way once they differ).
        Py_CLEAR(self->selector);
        Py_CLEAR(self->sel_keys);
    }
    Py_XSETREF(self->selector_attr, Py_XNewRef(v));
    return 0;
}

PyObject *get_clock_resolution(PyObject *me, void *)
{
    return PyFloat_FromDouble(reinterpret_cast<Core *>(me)->clock_resolution);
}

int set_clock_resolution(PyObject *me, PyObject *v, void *)
{
    double d = v ? PyFloat_AsDouble(v) : -1.0;
    if (!v)
        PyErr_SetString(PyExc_AttributeError, "cannot delete _clock_resolution");
    if (PyErr_Occurred())
        return -1;
    reinterpret_cast<Core *>(me)->clock_resolution = d;
    return 0;
}

PyObject *get_cancelled_count(PyObject *me, void *)
{
    return PyLong_FromSsize_t(reinterpret_cast<Core *>(me)->timer_cancelled_count);
}

int set_cancelled_count(PyObject *me, PyObject *v, void *)
{
    Py_ssize_t n = v ? PyLong_AsSsize_t(v) : -1;
    if (!v)
        PyErr_SetString(PyExc_AttributeError, "cannot delete _timer_cancelled_count");
    if (PyErr_Occurred())
        return -1;
    reinterpret_cast<Core *>(me)->timer_cancelled_count = n;
    return 0;
}

// ---------------------------------------------------------------- the type

PyObject *core_new(PyTypeObject *tp, PyObject *, PyObject *)
{
    PyObject *me = tp->tp_alloc(tp, 0); // zeroed: empty queue and heap, no flags set
    if (me)
        reinterpret_cast<Core *>(me)->clock_resolution = 1e-9;
    return me;
}

int core_traverse(PyObject *me, visitproc visit, void *arg)
{
    Core *self = reinterpret_cast<Core *>(me);
    Py_VISIT(Py_TYPE(me)); // a heap type's instances hold their type
    for (size_t i = 0; i < self->ready.len; i++) {
        int r = traverse_queued(ring_at(&self->ready, i), visit, arg);
        if (r)
            return r;
    }
    for (size_t i = 0; i < self->timers.n; i++) {
        int r = traverse_queued(self->timers.a[i].h, visit, arg);
        if (r)
            return r;
    }
    Py_VISIT(self->closed_o);
    Py_VISIT(self->stopping_o);
    Py_VISIT(self->debug_o);
    Py_VISIT(self->thread_id_o);
    Py_VISIT(self->raw);
    Py_VISIT(self->selector);
    Py_VISIT(self->selector_attr);
    Py_VISIT(self->sel_keys);
    Py_VISIT(self->work.idle);
    return 0;
}

int core_clear(PyObject *me)
{
    Core *self = reinterpret_cast<Core *>(me);
    Py_XDECREF(clear_ready(self));
    Py_XDECREF(clear_timers(self));
    Py_CLEAR(self->closed_o);
    Py_CLEAR(self->stopping_o);
    Py_CLEAR(self->debug_o);
    Py_CLEAR(self->thread_id_o);
    Py_CLEAR(self->selector);
    Py_CLEAR(self->selector_attr);
    Py_CLEAR(self->sel_keys);
    Py_CLEAR(self->work.idle);
    Py_CLEAR(self->raw); // after the handles: the RawLoop is freed by the selector's close()
    return 0;
}

void core_dealloc(PyObject *me)
{
    PyTypeObject *tp = Py_TYPE(me);
    PyObject_GC_UnTrack(me);
    core_clear(me);
    tp->tp_free(me);
    Py_DECREF(tp); // a heap type (also for a subclass: subtype_dealloc leaves it to its base)
}

PyMethodDef core_methods[] = {
    {"call_soon", EVLOOP_FASTKW(core_call_soon), METH_FASTCALL | METH_KEYWORDS,
     "call_soon(callback, *args, context=None): as asyncio's, the handle queued natively."},
    {"call_soon_threadsafe", EVLOOP_FASTKW(core_call_soon_threadsafe),
     METH_FASTCALL | METH_KEYWORDS,
     "call_soon_threadsafe(callback, *args, context=None): queued, then a wake through evloop's\n"
     "lane submit from another thread (no lock; no syscall while the loop is awake)."},
    {"call_later", EVLOOP_FASTKW(core_call_later), METH_FASTCALL | METH_KEYWORDS,
     "call_later(delay, callback, *args, context=None): a TimerHandle on the native heap."},
    {"call_at", EVLOOP_FASTKW(core_call_at), METH_FASTCALL | METH_KEYWORDS,
     "call_at(when, callback, *args, context=None): a TimerHandle on the native heap."},
    {"_call_soon", EVLOOP_FASTKW(core__call_soon), METH_FASTCALL, nullptr},
    {"_add_callback", core_add_callback, METH_O, nullptr},
    {"_timer_handle_cancelled", core_timer_handle_cancelled, METH_O, nullptr},
    {"_run_once", core_run_once, METH_NOARGS, "One iteration of the loop, in C."},
    {"time", core_time, METH_NOARGS, "The loop's clock: time.monotonic()."},
    {"_evloop_attach", EVLOOP_FASTKW(core_attach), METH_FASTCALL, nullptr},
    {"_evloop_ready_list", core_ready_list, METH_NOARGS, nullptr},
    {"_evloop_ready_len", core_ready_len, METH_NOARGS, nullptr},
    {"_evloop_ready_popleft", core_ready_popleft, METH_NOARGS, nullptr},
    {"_evloop_ready_append", core_ready_append, METH_O, nullptr},
    {"_evloop_ready_clear", core_ready_clear, METH_NOARGS, nullptr},
    {"_evloop_timers_list", core_timers_list, METH_NOARGS, nullptr},
    {"_evloop_timers_len", core_timers_len, METH_NOARGS, nullptr},
    {"_evloop_timers_add", core_timers_add, METH_O, nullptr},
    {"_evloop_timers_clear", core_timers_clear, METH_NOARGS, nullptr},
    {nullptr, nullptr, 0, nullptr},
};

PyGetSetDef core_getset[] = {
    {"_closed", get_flag<&Core::closed_o, &Core::closed>, set_flag<&Core::closed_o, &Core::closed>,
     nullptr, nullptr},
    {"_stopping", get_flag<&Core::stopping_o, &Core::stopping>,
     set_flag<&Core::stopping_o, &Core::stopping>, nullptr, nullptr},
    {"_debug", get_flag<&Core::debug_o, &Core::debug>, set_flag<&Core::debug_o, &Core::debug>,
     nullptr, nullptr},
    {"_thread_id", get_thread_id, set_thread_id, nullptr, nullptr},
    {"_selector", get_selector, set_selector, nullptr, nullptr},
    {"_clock_resolution", get_clock_resolution, set_clock_resolution, nullptr, nullptr},
    {"_timer_cancelled_count", get_cancelled_count, set_cancelled_count, nullptr, nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr},
};

// _aio_setup(Handle, TimerHandle, callback_failed, run_debug, run_forever): the stdlib's
// handle classes, the two Python helpers and BaseEventLoop.run_forever (whose loop
// core_run_once continues in C); True if handles can be made and run natively.
PyObject *setup(PyObject *, PyObject *const *argv, Py_ssize_t n)
{
    if (n != 5 || !PyType_Check(argv[0]) || !PyType_Check(argv[1])) {
        PyErr_SetString(PyExc_TypeError,
                        "_aio_setup(Handle, TimerHandle, report, run_debug, run_forever)");
        return nullptr;
    }
    PyObject *code = PyFunction_Check(argv[4]) ? PyFunction_GET_CODE(argv[4]) : nullptr;
    Py_XSETREF(g.run_forever_code, Py_XNewRef(code));
    if (!g.breaker) {
        PyObject *ns = Py_BuildValue("{sO}", "__builtins__", PyEval_GetBuiltins());
        g.breaker = ns ? PyRun_String("lambda: None", Py_eval_input, ns, ns) : nullptr;
        Py_XDECREF(ns);
        if (!g.breaker)
            return nullptr;
    }
    auto *ht = reinterpret_cast<PyTypeObject *>(argv[0]);
    auto *tt = reinterpret_cast<PyTypeObject *>(argv[1]);
    Py_XSETREF(g.handle_t, reinterpret_cast<PyTypeObject *>(Py_NewRef(argv[0])));
    Py_XSETREF(g.timer_t, reinterpret_cast<PyTypeObject *>(Py_NewRef(argv[1])));
    Py_XSETREF(g.report, Py_NewRef(argv[2]));
    Py_XSETREF(g.run_debug, Py_NewRef(argv[3]));
    g.fast = PyType_IsSubtype(tt, ht) && member_offset(ht, "_callback", &g.callback) &&
             member_offset(ht, "_args", &g.args) && member_offset(ht, "_cancelled", &g.cancelled) &&
             member_offset(ht, "_loop", &g.loop) &&
             member_offset(ht, "_source_traceback", &g.source_tb) &&
             member_offset(ht, "_repr", &g.repr) && member_offset(ht, "_context", &g.context) &&
             member_offset(tt, "_when", &g.when) && member_offset(tt, "_scheduled", &g.scheduled);
    g.recycle = g.fast && ht->tp_dictoffset == 0 && tt->tp_dictoffset == 0 &&
                weaklist_known(ht) && weaklist_known(tt) &&
                (ht->tp_flags & Py_TPFLAGS_HAVE_GC) && (tt->tp_flags & Py_TPFLAGS_HAVE_GC);
    return PyBool_FromLong(g.fast);
}

PyMethodDef setup_def = {"_aio_setup", EVLOOP_FASTKW(setup), METH_FASTCALL,
                         "_aio_setup(Handle, TimerHandle, callback_failed, run_debug, "
                         "run_forever)."};

// fn(self, *argv), argv as a vectorcall's (n positional, then one per name in kwnames).
PyObject *call_with_self(PyObject *fn, PyObject *self, PyObject *const *argv, Py_ssize_t n,
                         PyObject *kwnames)
{
    Py_ssize_t total = n + (kwnames ? PyTuple_GET_SIZE(kwnames) : 0);
    PyObject *small[8];
    PyObject **a = total + 1 <= 8 ? small : PyMem_New(PyObject *, size_t(total + 1));
    if (!a)
        return PyErr_NoMemory();
    a[0] = self;
    for (Py_ssize_t i = 0; i < total; i++)
        a[i + 1] = argv[i];
    PyObject *r = PyObject_Vectorcall(fn, a, size_t(n + 1), kwnames);
    if (a != small)
        PyMem_Free(a);
    return r;
}

int add_function(PyObject *m, PyMethodDef *def)
{
    PyObject *f = PyCFunction_New(def, nullptr);
    if (!f || PyModule_AddObject(m, def->ml_name, f) < 0)
        return -1;
    return 0;
}

int add_core_methods(PyMethodDef *defs)
{
    for (PyMethodDef *d = defs; d->ml_name; d++) {
        PyObject *descr = PyDescr_NewMethod(g_core_type, d);
        int r = descr ? PyObject_SetAttrString(reinterpret_cast<PyObject *>(g_core_type),
                                               d->ml_name, descr)
                      : -1;
        Py_XDECREF(descr);
        if (r < 0)
            return -1;
    }
    return 0;
}

// Registers _AioCore and _aio_setup in module m.
int register_core(PyObject *m)
{
    const Name names[] = {{&g.s_context, "context"},
                          {&g.s_check_thread, "_check_thread"},
                          {&g.s_check_callback, "_check_callback"},
                          {&g.s_write_to_self, "_write_to_self"},
                          {&g.s_process_events, "_process_events"},
                          {&g.s_select, "select"},
                          {&g.s_remove_reader, "_remove_reader"},
                          {&g.s_remove_writer, "_remove_writer"},
                          {&g.s_time, "time"},
                          {&g.s_run, "_run"},
                          {&g.s_events, "_evloop_events"},
                          {&g.s_cancelled, "_cancelled"},
                          {&g.s_scheduled, "_scheduled"},
                          {&g.s_call_soon, "call_soon"},
                          {&g.s_call_soon_threadsafe, "call_soon_threadsafe"},
                          {&g.s_call_at, "call_at"},
                          {&g.s_add_reader, "_add_reader"},
                          {&g.s_add_writer, "_add_writer"},
                          {&g.s_run_once, "_run_once"}};
    if (intern_names(names) < 0)
        return -1;
    PyObject *const *hooks[kHooks] = {&g.s_time,          &g.s_call_at,     &g.s_process_events,
                                      &g.s_write_to_self, &g.s_add_reader,  &g.s_add_writer,
                                      &g.s_remove_reader, &g.s_remove_writer, &g.s_run_once};
    std::memcpy(g.hook_names, hooks, sizeof hooks);
    static PyType_Slot slots[] = {
        {Py_tp_doc,
         const_cast<char *>("The native part of evloop.EventLoop: ready queue, timer heap, "
                            "iteration.")},
        {Py_tp_new, reinterpret_cast<void *>(core_new)},
        {Py_tp_dealloc, reinterpret_cast<void *>(core_dealloc)},
        {Py_tp_traverse, reinterpret_cast<void *>(core_traverse)},
        {Py_tp_clear, reinterpret_cast<void *>(core_clear)},
        {Py_tp_setattro, reinterpret_cast<void *>(core_setattro)},
        {Py_tp_methods, core_methods},
        {Py_tp_getset, core_getset},
        {0, nullptr}};
    static PyType_Spec spec = {"evloop._asyncio_core._AioCore", int(sizeof(Core)), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC,
                               slots};
    g_core_type = reinterpret_cast<PyTypeObject *>(PyType_FromSpec(&spec));
    if (!g_core_type ||
        PyModule_AddObject(m, "_AioCore", Py_NewRef(reinterpret_cast<PyObject *>(g_core_type))) < 0)
        return -1;
    return add_function(m, &setup_def);
}

} // namespace aio
