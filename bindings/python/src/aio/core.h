// What the parts of _AioCore share (docs/asyncio.md, "Files"): handles.cpp (the handles, their
// free lists and the collector), queues.cpp (the ready ring and the timer heap), core.cpp (the
// scheduling methods and the iteration) and core_type.cpp (the type, its views, attributes and
// _aio_setup). The rest of the module sees the core through aio.h only.
#ifndef EVLOOP_AIO_CORE_H
#define EVLOOP_AIO_CORE_H

#include "aio.h"

namespace aio {

// ---------------------------------------------------------------- the ready ring (queues.cpp)

int ring_grow(Ring *r);

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

// ---------------------------------------------------------------- the timer heap (queues.cpp)

int heap_push(Heap *hp, double when, PyObject *h); // takes the reference h
PyObject *heap_pop(Heap *hp);
void heapify(Heap *hp);

// ---------------------------------------------------------------- handles (handles.cpp)

bool member_offset(PyTypeObject *tp, const char *name, Py_ssize_t *out);
bool weaklist_known(PyTypeObject *tp);
void release_handle(PyObject *h);
PyObject *alloc_handle(PyTypeObject *tp);
void trim_free_lists();
bool exact_handle(PyObject *h);
int set_scheduled(PyObject *h, PyObject *value);
int run_handle(Core *self, PyObject *h);
void settle_fresh(Core *self);
int traverse_queued(PyObject *h, visitproc visit, void *arg);
PyObject *push_fresh(Core *self, PyObject *h, bool ctx_ours);

// Queued handles the collector does not track (handles.cpp says when and why).
inline bool is_tracked(PyObject *o) { return PyObject_GC_IsTracked(o); }

inline bool may_untrack(PyObject *h)
{
    return Py_IS_TYPE(h, g.handle_t) || Py_IS_TYPE(h, g.timer_t);
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

// ---------------------------------------------------------------- the core (core.cpp)

inline bool on_loop_thread(const Core *self)
{
    return self->has_thread && self->thread_id == PyThread_get_thread_ident();
}

double loop_time(Core *self);

// The methods the type's table lists (core_type.cpp).
PyObject *core_call_soon(PyObject *me, PyObject *const *argv, size_t nargsf, PyObject *kwnames);
PyObject *core_call_soon_threadsafe(PyObject *me, PyObject *const *argv, size_t nargsf,
                                    PyObject *kwnames);
PyObject *core_call_at(PyObject *me, PyObject *const *argv, size_t nargsf, PyObject *kwnames);
PyObject *core_call_later(PyObject *me, PyObject *const *argv, size_t nargsf, PyObject *kwnames);
PyObject *core__call_soon(PyObject *me, PyObject *const *argv, Py_ssize_t n);
PyObject *core_add_callback(PyObject *me, PyObject *h);
PyObject *core_timer_handle_cancelled(PyObject *me, PyObject *h);
PyObject *core_time(PyObject *, PyObject *);
PyObject *core_run_once(PyObject *me, PyObject *);
int core_setattro(PyObject *me, PyObject *name, PyObject *value);

} // namespace aio

#endif
