// _AioCore, the C base of evloop.EventLoop (evloop/_aio.py, docs/asyncio.md): the ready queue
// (a ring of handles), the timer heap and the iteration (_run_once) in C, driven by
// evloop_run_once through the AioOps of the RawLoop it is attached to (either variant). Handles
// are the stdlib's own asyncio.Handle / asyncio.TimerHandle objects, filled slot by slot. Also
// the helpers the module's other files share (aio.h declares them) and _aio_setup.
#include "aio.h"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <ctime>

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
// next call_soon / call_later: no malloc and free per handle, and no count towards the
// collector's generation-0 threshold (an allocation counts, a reuse does not). Untracked while
// here, so gc.get_objects() never shows an empty handle. GIL-protected.
struct FreeList {
    static constexpr int kMax = 512;
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

// ---------------------------------------------------------------- the ready queue

int ring_grow(Ring *r)
{
    size_t cap = r->cap ? r->cap * 2 : 256;
    auto **nb = static_cast<PyObject **>(PyMem_Malloc(cap * sizeof(PyObject *)));
    if (!nb) {
        PyErr_NoMemory();
        return -1;
    }
    for (size_t i = 0; i < r->len; i++)
        nb[i] = r->buf[(r->head + i) & (r->cap - 1)];
    PyMem_Free(r->buf);
    r->buf = nb;
    r->head = 0;
    r->cap = cap;
    return 0;
}

// Takes the reference h.
inline int ring_push(Ring *r, PyObject *h)
{
    if (r->len == r->cap && ring_grow(r) < 0) {
        Py_DECREF(h);
        return -1;
    }
    r->buf[(r->head + r->len) & (r->cap - 1)] = h;
    r->len++;
    return 0;
}

inline PyObject *ring_pop(Ring *r)
{
    PyObject *h = r->buf[r->head];
    r->head = (r->head + 1) & (r->cap - 1);
    r->len--;
    return h;
}

inline PyObject *ring_at(const Ring *r, size_t i) { return r->buf[(r->head + i) & (r->cap - 1)]; }

// ---------------------------------------------------------------- the timer heap

// A 4-ary min-heap on (when, seq): the earliest first, ties in the order they were scheduled
// (the stdlib's heapq compares `when` only, so its order among equal times is whatever the
// sifts left). `when` is the handle's _when as a double, read once at push. Four children per
// node: half the depth of a binary heap, the children of a node in about one cache line;
// measured cheaper than a binary heap of the same entries (tournament/results/asyncio-log.md,
// "Timers").

constexpr size_t kArity = 4;

inline bool timer_before(const Timer &x, const Timer &y)
{
    return x.when < y.when || (x.when == y.when && x.seq < y.seq);
}

void heap_sift_up(Heap *hp, size_t i)
{
    Timer t = hp->a[i];
    while (i > 0) {
        size_t p = (i - 1) / kArity;
        if (!timer_before(t, hp->a[p]))
            break;
        hp->a[i] = hp->a[p];
        i = p;
    }
    hp->a[i] = t;
}

void heap_sift_down(Heap *hp, size_t i)
{
    Timer t = hp->a[i];
    size_t n = hp->n;
    for (;;) {
        size_t c = kArity * i + 1;
        if (c >= n)
            break;
        size_t best = c, end = c + kArity < n ? c + kArity : n;
        for (size_t j = c + 1; j < end; j++)
            if (timer_before(hp->a[j], hp->a[best]))
                best = j;
        if (!timer_before(hp->a[best], t))
            break;
        hp->a[i] = hp->a[best];
        i = best;
    }
    hp->a[i] = t;
}

// Takes the reference h. A NaN `when` is kept as -inf: due at once, ahead of every other
// timer. The stdlib's heapq compares with `<`, always false against NaN, and its iteration pops
// the head while `not when >= end`, so a NaN timer runs as soon as it is the head; ordering it
// first makes that at once, and a NaN key inside the heap would break its order for the
// timers behind it.
int heap_push(Heap *hp, double when, PyObject *h)
{
    if (std::isnan(when))
        when = -INFINITY;
    if (hp->n == hp->cap) {
        size_t cap = hp->cap ? hp->cap * 2 : 64;
        auto *na = static_cast<Timer *>(PyMem_Realloc(hp->a, cap * sizeof(Timer)));
        if (!na) {
            Py_DECREF(h);
            PyErr_NoMemory();
            return -1;
        }
        hp->a = na;
        hp->cap = cap;
    }
    hp->a[hp->n] = Timer{when, hp->seq++, h};
    heap_sift_up(hp, hp->n++);
    return 0;
}

// The earliest timer's handle, a reference the caller now owns.
PyObject *heap_pop(Heap *hp)
{
    PyObject *h = hp->a[0].h;
    hp->a[0] = hp->a[--hp->n];
    if (hp->n)
        heap_sift_down(hp, 0);
    return h;
}

void heapify(Heap *hp)
{
    for (size_t i = hp->n / kArity + 1; i-- > 0;)
        if (i < hp->n)
            heap_sift_down(hp, i);
}

// ---------------------------------------------------------------- the core object

PyTypeObject *g_core_type = nullptr; // _AioCore, a heap type

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

inline bool on_loop_thread(const Core *self)
{
    return self->has_thread && self->thread_id == PyThread_get_thread_ident();
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
inline bool is_tracked(PyObject *o) { return PyObject_GC_IsTracked(o); }

inline bool may_untrack(PyObject *h)
{
    return Py_IS_TYPE(h, g.handle_t) || Py_IS_TYPE(h, g.timer_t);
}

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

// A handle leaving the ring or the heap: tracked again (with its context) if it was untracked
// here.
inline void retrack(Core *self, PyObject *h)
{
    if (h == self->fresh)
        self->fresh = nullptr;
    if (h == self->fresh_timer)
        self->fresh_timer = nullptr;
    if (!may_untrack(h) || is_tracked(h)) // only the stdlib's own handles are ever untracked
        return;
    PyObject_GC_Track(h);
    PyObject *ctx = slot(h, g.context);
    if (ctx && PyContext_CheckExact(ctx) && !is_tracked(ctx))
        PyObject_GC_Track(ctx);
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
        if (timeout_ns != 0 && self->work_in_flight)
            work_spin(self);
        // the GIL is released inside: no other thread submits work meanwhile
        set_poll_thread(self, PyThread_get_thread_ident());
        int r = self->ops->poll(self->raw, timeout_ns);
        set_poll_thread(self, 0);
        if (r < 0 || (self->work_done && work_settle(self) < 0))
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
        if (timeout_ns != 0)
            self->last_poll_ns = 0;
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
    Py_VISIT(self->work_idle);
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
    Py_CLEAR(self->work_idle);
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
