// The core's two queues: the ready queue (a ring of handles) and the timer heap (4-ary, keyed
// by `when` and the push order, as the stdlib's heapq of TimerHandles orders them).
#include "core.h"

#include <cmath>

namespace aio {

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

} // namespace aio
