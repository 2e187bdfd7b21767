// The stdlib's Handle and TimerHandle as the core makes and runs them (docs/asyncio.md): their
// slot layout, read once (_aio_setup), the free lists that recycle them, make_handle and
// run_handle, and the collector's view of handles that only the ready queue or the heap holds
// (untracked while queued, tracked again when they leave).
#include "core.h"

#include <cstring>

namespace aio {

// ---------------------------------------------------------------- the stdlib's Handle layout

Layout g; // aio.h says what it holds

bool member_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out)
{
    PyObject *d = PyDict_GetItemString(tp->tp_dict, name); // borrowed
    if (!d || !Py_IS_TYPE(d, &PyMemberDescr_Type))
        return false;
    PyMemberDef *m = reinterpret_cast<PyMemberDescrObject *>(d)->d_member;
    if (m->type != T_OBJECT_EX || (m->flags & READONLY))
        return false;
    *out = m->offset;
    return true;
}

// Whether the core can tell that an object of tp has no weak reference: its list head is a
// slot (3.11: tp_weaklistoffset > 0), or CPython's managed one before the object's GC header
// (3.12 on: Py_TPFLAGS_MANAGED_WEAKREF, tp_weaklistoffset negative). CPython reads the head at
// (char *)op + tp_weaklistoffset in both layouts (_PyObject_GET_WEAKREFS_LISTPTR), as
// release_handle does.
bool weaklist_known(PyTypeObject *tp)
{
    if (tp->tp_weaklistoffset > 0)
        return true;
#ifdef Py_TPFLAGS_MANAGED_WEAKREF
    return tp->tp_weaklistoffset < 0 && (tp->tp_flags & Py_TPFLAGS_MANAGED_WEAKREF);
#else
    return false;
#endif
}

// ---------------------------------------------------------------- free lists

// Handles whose only reference was the ready queue's, emptied after they ran and kept for the
// next call_soon / call_soon_threadsafe / call_later, from whichever thread makes it: no malloc
// and free per handle, and no count towards the collector's generation-0 threshold (an
// allocation counts, a reuse does not). Untracked while here, so gc.get_objects() never shows
// an empty handle. GIL-protected.
// A list keeps up to kMax while its loops are busy: a burst of call_soon_threadsafe from
// other threads fills the ring with thousands of handles between two runs of the loop (one
// GIL switch interval of calls), and only a list that holds a whole burst lets the next burst
// reuse them instead of allocating each one and freeing it after it ran. Before a loop waits,
// and when it stops (trim_free_lists), each list gives back all but kKeep, so an idle process
// holds no more than a small list (tournament/results/asyncio-log.md, "call_soon_threadsafe's own cost").
struct FreeList {
    static constexpr int kKeep = 512;
    static constexpr int kMax = 16384;
    PyObject *items[kMax];
    int n;
};
FreeList g_free_handles, g_free_timers;

// Returns h to its free list if nothing else refers to it; else just releases it. The slots'
// references are released last, when h is already on the list: a release may run any code.
void release_handle(PyObject *h)
{
    PyTypeObject *tp = Py_TYPE(h);
    FreeList *fl = tp == g.handle_t ? &g_free_handles : tp == g.timer_t ? &g_free_timers : nullptr;
    if (!g.recycle || !fl || Py_REFCNT(h) != 1 || fl->n == FreeList::kMax ||
        *reinterpret_cast<PyObject **>(reinterpret_cast<char *>(h) + tp->tp_weaklistoffset)) {
        Py_DECREF(h);
        return;
    }
    PyObject *old[9] = {slot(h, g.callback), slot(h, g.args), slot(h, g.cancelled),
                        slot(h, g.loop), slot(h, g.source_tb), slot(h, g.repr),
                        slot(h, g.context), nullptr, nullptr};
    slot(h, g.callback) = slot(h, g.args) = slot(h, g.cancelled) = slot(h, g.loop) = nullptr;
    slot(h, g.source_tb) = slot(h, g.repr) = slot(h, g.context) = nullptr;
    if (fl == &g_free_timers) {
        old[7] = slot(h, g.when);
        old[8] = slot(h, g.scheduled);
        slot(h, g.when) = slot(h, g.scheduled) = nullptr;
    }
    PyObject_GC_UnTrack(h);
    fl->items[fl->n++] = h;
    for (PyObject *o : old)
        Py_XDECREF(o);
}

// An empty handle of type tp (a new reference): from the free list, else allocated.
PyObject *alloc_handle(PyTypeObject *tp)
{
    FreeList *fl = tp == g.timer_t ? &g_free_timers : &g_free_handles;
    if (fl->n) {
        PyObject *h = fl->items[--fl->n];
        PyObject_GC_Track(h);
        return h;
    }
    return tp->tp_alloc(tp, 0);
}

// Frees what each free list holds beyond kKeep. Each handle there is empty (its slots hold
// nothing), so its deallocation runs no code of anyone's; tracked again first, as every handle
// the collector has not seen untracked is when it is freed.
void trim_free_lists()
{
    for (FreeList *fl : {&g_free_handles, &g_free_timers}) {
        while (fl->n > FreeList::kKeep) {
            PyObject *h = fl->items[--fl->n];
            PyObject_GC_Track(h);
            Py_DECREF(h);
        }
    }
}

bool exact_handle(PyObject *h)
{
    return g.fast && (Py_IS_TYPE(h, g.handle_t) || Py_IS_TYPE(h, g.timer_t));
}

// h._cancelled as a truth value: 1, 0, or -1 with an exception set.
int is_cancelled(PyObject *h)
{
    if (exact_handle(h)) {
        PyObject *c = slot(h, g.cancelled);
        if (c == Py_False)
            return 0;
        if (c == Py_True)
            return 1;
        if (!c) {
            PyErr_SetString(PyExc_AttributeError, "_cancelled");
            return -1;
        }
        return PyObject_IsTrue(c);
    }
    PyObject *c = PyObject_GetAttr(h, g.s_cancelled);
    int r = c ? PyObject_IsTrue(c) : -1;
    Py_XDECREF(c);
    return r;
}

int set_scheduled(PyObject *h, PyObject *value)
{
    if (exact_handle(h)) {
        PyObject *old = slot(h, g.scheduled);
        slot(h, g.scheduled) = Py_NewRef(value);
        Py_XDECREF(old);
        return 0;
    }
    return PyObject_SetAttr(h, g.s_scheduled, value);
}

// A new Handle (when == nullptr) or TimerHandle of this loop for callback(*args), in context
// (nullptr or None: a copy of the current one). Steals args. Outside debug mode the slots are
// filled here, as Handle.__init__ fills them; in debug mode (and with an unexpected layout) the
// stdlib's constructor runs, which records the source traceback from the caller's frame (no
// Python frame of evloop's is in between, so nothing has to be trimmed from it).
PyObject *make_handle(Core *self, PyObject *when, PyObject *callback, PyObject *args,
                      PyObject *context, bool *ctx_ours)
{
    if (ctx_ours)
        *ctx_ours = false;
    PyObject *loop = reinterpret_cast<PyObject *>(self);
    if (!g.fast || self->debug) {
        PyObject *ctx = context ? context : Py_None;
        PyObject *a[5] = {when, callback, args, loop, ctx};
        PyObject *h = when ? PyObject_Vectorcall(reinterpret_cast<PyObject *>(g.timer_t), a, 5,
                                                 nullptr)
                           : PyObject_Vectorcall(reinterpret_cast<PyObject *>(g.handle_t), a + 1,
                                                 4, nullptr);
        Py_DECREF(args);
        return h;
    }
    bool copied = !context || context == Py_None;
    PyObject *ctx = copied ? PyContext_CopyCurrent() : Py_NewRef(context);
    if (!ctx) {
        Py_DECREF(args);
        return nullptr;
    }
    if (ctx_ours)
        *ctx_ours = copied;
    PyTypeObject *tp = when ? g.timer_t : g.handle_t;
    PyObject *h = alloc_handle(tp);
    if (!h) {
        Py_DECREF(args);
        Py_DECREF(ctx);
        return nullptr;
    }
    slot(h, g.context) = ctx;
    slot(h, g.loop) = Py_NewRef(loop);
    slot(h, g.callback) = Py_NewRef(callback);
    slot(h, g.args) = args;
    slot(h, g.cancelled) = Py_NewRef(Py_False);
    slot(h, g.repr) = Py_NewRef(Py_None);
    slot(h, g.source_tb) = Py_NewRef(Py_None);
    if (when) {
        slot(h, g.when) = Py_NewRef(when);
        slot(h, g.scheduled) = Py_NewRef(Py_False);
    }
    return h;
}

// The exception now raised, normalized, with its traceback attached (as `except ... as e`).
PyObject *fetch_exception()
{
#if PY_VERSION_HEX >= 0x030C0000
    return PyErr_GetRaisedException();
#else
    PyObject *t, *v, *tb;
    PyErr_Fetch(&t, &v, &tb);
    PyErr_NormalizeException(&t, &v, &tb);
    if (tb) {
        PyException_SetTraceback(v, tb);
        Py_DECREF(tb);
    }
    Py_XDECREF(t);
    return v;
#endif
}

// The callback of h raised (the exception is set): SystemExit and KeyboardInterrupt go up
// (-1); anything else goes to _aio._callback_failed(h, exc), which does what Handle._run does
// with it (the same message and context to the loop's exception handler), while exc is the
// exception being handled, as inside Handle._run's except clause. -1 if that call raised.
int callback_failed(PyObject *h)
{
    if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
        return -1;
    PyObject *exc = fetch_exception();
    if (!exc)
        return 0;
    PyObject *ot, *ov, *otb;
    PyErr_GetExcInfo(&ot, &ov, &otb);
    PyErr_SetExcInfo(Py_NewRef(reinterpret_cast<PyObject *>(Py_TYPE(exc))), Py_NewRef(exc),
                     PyException_GetTraceback(exc));
    PyObject *a[2] = {h, exc};
    PyObject *r = PyObject_Vectorcall(g.report, a, 2, nullptr);
    PyErr_SetExcInfo(ot, ov, otb);
    Py_DECREF(exc);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

// Runs the handle h (a reference taken from the ready queue, released here) as the stdlib's
// _run_once does: skipped if cancelled; in debug mode through _aio._run_debug (the
// current-handle bookkeeping and the slow-callback warning); else its callback is called here,
// in its context. -1: an exception to propagate out of _run_once.
int run_handle(Core *self, PyObject *h)
{
    int r = 0;
    int cancelled = is_cancelled(h);
    if (cancelled != 0) {
        r = cancelled < 0 ? -1 : 0;
    } else if (self->debug) {
        PyObject *a[2] = {reinterpret_cast<PyObject *>(self), h};
        PyObject *res = PyObject_Vectorcall(g.run_debug, a, 2, nullptr);
        r = res ? 0 : -1;
        Py_XDECREF(res);
    } else if (exact_handle(h) && slot(h, g.callback) && slot(h, g.args) &&
               PyTuple_CheckExact(slot(h, g.args)) && slot(h, g.context) &&
               PyContext_CheckExact(slot(h, g.context))) {
        // Hold what the call uses: the callback may cancel its own handle, which drops them.
        PyObject *cb = Py_NewRef(slot(h, g.callback));
        PyObject *args = Py_NewRef(slot(h, g.args));
        PyObject *ctx = Py_NewRef(slot(h, g.context));
        PyObject *res = nullptr;
        if (PyContext_Enter(ctx) == 0) {
            res = PyObject_Vectorcall(cb, &PyTuple_GET_ITEM(args, 0),
                                      size_t(PyTuple_GET_SIZE(args)), nullptr);
            if (PyContext_Exit(ctx) < 0)
                Py_CLEAR(res);
        }
        Py_DECREF(cb);
        Py_DECREF(args);
        Py_DECREF(ctx);
        if (res)
            Py_DECREF(res);
        else
            r = callback_failed(h);
    } else { // a subclass of Handle, or slots someone changed: its own _run
        PyObject *res = PyObject_CallMethodNoArgs(h, g.s_run);
        r = res ? 0 : -1;
        Py_XDECREF(res);
    }
    release_handle(h);
    return r;
}

// ---------------------------------------------------------------- queued handles and the GC

// The collector's work on queued handles was measured as the largest cost of a burst of
// call_soon and of call_soon_threadsafe into a busy loop (tournament/results/asyncio-log.md): a
// queued handle and the context copy it made are two tracked objects that young collections
// traverse, promote and traverse again, for as long as they wait. So a handle that call_soon
// made, once nothing but the ring refers to it (checked when the next one is queued, or when
// the iteration starts: by then the caller has dropped what call_soon returned), is
// untracked, and so is its context copy if only the handle refers to it. The same holds for a
// TimerHandle that call_later / call_at pushed on the heap (checked at the next one, or when
// the iteration starts), whose wait can be long: 200,000 timers pending are 400,000 objects
// that every collection of the oldest generation traversed (issue 30). While untracked:
// - the core's tp_traverse visits what the handle refers to, on its behalf (and the context's
//   references, through its tp_traverse): the collector sees the same edges as if the core held
//   them, so a cycle through a queued handle is still found and nothing it refers to can be
//   taken for garbage;
// - it is reachable only through the ring or the heap: every way out (the iteration's pop,
//   the dropping of cancelled timers, the _ready and _scheduled views, clear) tracks it, and
//   its context, again first. A context is never freed untracked (its dealloc expects a
//   tracked object).
// h, if nothing but the ring or the heap holds it now: untracked, with its context if that is
// the copy make_handle made (ctx_ours) and only h holds it.
void untrack_if_queued_only(PyObject *h, bool ctx_ours)
{
    if (!h || Py_REFCNT(h) != 1 || !is_tracked(h))
        return;
    PyObject_GC_UnTrack(h);
    PyObject *ctx = slot(h, g.context);
    if (ctx_ours && ctx && Py_REFCNT(ctx) == 1 && is_tracked(ctx))
        PyObject_GC_UnTrack(ctx);
}

// The previous fresh handle and fresh timer, if nothing but the ring or heap holds them now:
// untracked.
void settle_fresh(Core *self)
{
    PyObject *h = self->fresh, *t = self->fresh_timer;
    self->fresh = self->fresh_timer = nullptr;
    untrack_if_queued_only(h, self->fresh_ctx);
    untrack_if_queued_only(t, self->fresh_timer_ctx);
}

// tp_traverse's part for one queued handle or timer.
int traverse_queued(PyObject *h, visitproc visit, void *arg)
{
    if (!may_untrack(h) || is_tracked(h)) {
        Py_VISIT(h);
        return 0;
    }
    if (Py_REFCNT(h) != 1) // cannot happen (see above); seeing nothing is the safe side
        return 0;
    Py_VISIT(Py_TYPE(h));
    Py_VISIT(slot(h, g.callback));
    Py_VISIT(slot(h, g.args));
    Py_VISIT(slot(h, g.cancelled));
    Py_VISIT(slot(h, g.loop));
    Py_VISIT(slot(h, g.source_tb));
    Py_VISIT(slot(h, g.repr));
    if (Py_IS_TYPE(h, g.timer_t)) {
        Py_VISIT(slot(h, g.when));
        Py_VISIT(slot(h, g.scheduled));
    }
    PyObject *ctx = slot(h, g.context);
    if (ctx && is_tracked(ctx))
        Py_VISIT(ctx);
    else if (ctx && PyContext_CheckExact(ctx) && Py_REFCNT(ctx) == 1)
        return Py_TYPE(ctx)->tp_traverse(ctx, visit, arg);
    return 0;
}

// Queues h (a new reference, returned) that make_handle just made for call_soon.
PyObject *push_fresh(Core *self, PyObject *h, bool ctx_ours)
{
    if (!h)
        return nullptr;
    settle_fresh(self);
    if (ring_push(&self->ready, Py_NewRef(h)) < 0) {
        Py_DECREF(h);
        return nullptr;
    }
    if (g.recycle && Py_IS_TYPE(h, g.handle_t)) {
        self->fresh = h;
        self->fresh_ctx = ctx_ours;
    }
    return h;
}

// ---------------------------------------------------------------- argument parsing

} // namespace aio
