// The private header of evloop._asyncio_core, the native core of evloop's asyncio loop
// (evloop/_aio.py, docs/asyncio.md), written in the CPython C API: the types and the helpers
// that its files share, before their bodies. One file per part:
//   core.cpp       _AioCore, the C base of evloop.EventLoop: scheduling methods, iteration
//   handles.cpp    the stdlib's handles as the core makes, recycles and runs them
//   queues.cpp     the ready ring and the timer heap
//   core_type.cpp  the _AioCore type: views, attributes, slots, method table, _aio_setup
//                  (core.h: what those four share, and no other file includes it)
//   fds.cpp        its fd registry methods (_add_reader, ...)
//   sock.cpp       its sock_recv / sock_sendall hot path
//   transport.cpp  _AioStreamBase, the stream socket transport's hot methods
//   datagram.cpp   _AioDatagramBase, the datagram transport's read and send-at-once paths
//   slots.cpp      the transports' hot attributes read at their slot offsets
//   executor.cpp   run_in_executor(None, ...) on the library's work pool
//   accept.cpp     _AioCore._accept_connection, a server's accept path
//   stream_init.cpp _AioStreamBase._evloop_init, the stream transport's construction
//   module.cpp     the module: PyInit__asyncio_core, which calls each file's register_*
// The core drives a RawLoop of either ingress variant through its module's AioOps
// (src/aio_ops.h). Everything here runs with the GIL held.
#ifndef EVLOOP_PY_AIO_H
#define EVLOOP_PY_AIO_H

#include <Python.h>
#include <structmember.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <ctime>

#include "aio_ops.h"

#if PY_VERSION_HEX < 0x030A0000
static inline PyObject *Py_NewRef(PyObject *o)
{
    Py_INCREF(o);
    return o;
}
static inline PyObject *Py_XNewRef(PyObject *o)
{
    Py_XINCREF(o);
    return o;
}
#endif

#define EVLOOP_FASTKW(f) reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)(void)>(f))

namespace aio {

// ---------------------------------------------------------------- handles.cpp: the handles

// asyncio.Handle and asyncio.TimerHandle are slotted Python classes; the core makes them with
// tp_alloc and fills their slots (what Handle.__init__ would store, without running it), and
// reads them when it runs a handle. The offsets come from the classes' member descriptors at
// setup (_aio_setup); if the layout is not the expected one, every handle is made and run by
// the stdlib's own Python code instead (slower, same behaviour).
struct Layout {
    PyTypeObject *handle_t = nullptr, *timer_t = nullptr;
    Py_ssize_t callback = 0, args = 0, cancelled = 0, loop = 0, source_tb = 0, repr = 0,
               context = 0, when = 0, scheduled = 0;
    bool fast = false;
    bool recycle = false; // the free lists below are usable (no __dict__, a weakref slot)
    PyObject *report = nullptr;    // _aio._callback_failed(handle, exc): Handle._run's except
    PyObject *run_debug = nullptr; // _aio._run_debug(loop, handle): the debug-mode branch
    // interned names
    PyObject *s_context, *s_check_thread, *s_check_callback, *s_write_to_self, *s_process_events,
        *s_select, *s_remove_reader, *s_remove_writer, *s_time, *s_run, *s_events, *s_cancelled,
        *s_scheduled, *s_call_soon, *s_call_soon_threadsafe, *s_call_at, *s_add_reader,
        *s_add_writer, *s_run_once;
    PyObject *const *hook_names[9]; // by Hook bit: s_time, s_call_at, ...
    PyObject *run_forever_code = nullptr; // BaseEventLoop.run_forever.__code__ (see core.cpp)
    PyObject *breaker = nullptr; // `lambda: None`: its call runs the eval loop's periodic check
};
extern Layout g;

// The loop's methods that the stdlib's code calls on self and the core replaces, in the order
// of evloop/_aio.py's _HOOKS. Where a subclass overrides one, or one is set on the instance
// (mock.patch.object(loop, "time"), as web frameworks' tests do), the core calls it as the
// stdlib does: time() from the iteration and call_later, call_at() from call_later,
// _process_events() from the iteration, _write_to_self() from call_soon_threadsafe, and the
// four fd registry methods from sock_recv (which then takes the stdlib's way); a _run_once of
// its own is what run_forever calls, one iteration at a time.
enum Hook : unsigned {
    H_TIME = 1u << 0,
    H_CALL_AT = 1u << 1,
    H_PROCESS_EVENTS = 1u << 2,
    H_WRITE_TO_SELF = 1u << 3,
    H_FDS = 0xfu << 4, // _add_reader, _add_writer, _remove_reader, _remove_writer
    H_RUN_ONCE = 1u << 8,
};
constexpr unsigned kHooks = 9;

// CLOCK_MONOTONIC in ns (the poll bound of core.cpp, the GIL spin of executor.cpp).
inline int64_t monotonic_ns()
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline PyObject *&slot(PyObject *o, Py_ssize_t off)
{
    return *reinterpret_cast<PyObject **>(reinterpret_cast<char *>(o) + off);
}

// ---------------------------------------------------------------- core.cpp: the core object

// The ready queue: a ring of strong references, FIFO; touched only with the GIL held (any
// thread may append, as to the stdlib's deque).
struct Ring {
    PyObject **buf;
    size_t head, len, cap; // cap a power of two (or 0)
};

// The timer heap's entries (queues.cpp says why it is 4-ary).
struct Timer {
    double when;
    uint64_t seq;
    PyObject *h; // a strong reference to the TimerHandle
};

struct Heap {
    Timer *a;
    size_t n, cap;
    uint64_t seq;
};

// The default executor's state in each loop, executor.cpp's (the other files read in_flight,
// done and poll_thread, and the type's slots visit idle): the items whose done callback ran
// inside the last poll, waiting for the iteration to settle their futures (a list of the loop
// thread's, filled without the GIL); how many are accepted and not settled yet; the events to
// set when that reaches 0 (shutdown(wait=True) from other threads); the thread polling now, 0
// when none (the GIL is released inside: no other thread may submit then). Calls the pool
// threads have run (written by them, atomically); the waits left to go without a spin for
// them, and how many the last spin that found nothing left (executor.cpp's work_spin).
struct Executor {
    struct WorkItem *done, *done_tail;
    Py_ssize_t in_flight;
    uint64_t ran, spins, spin_hits;
    unsigned spin_skips, spin_backoff;
    PyObject *idle; // a list of the events _evloop_work_idle was given, or nullptr
    unsigned long poll_thread;
};

struct Core {
    PyObject_HEAD
    Ring ready;
    Heap timers;
    // The stdlib's loop attributes that the hot paths read, as data descriptors: what the
    // stdlib's code assigned (returned as is) and its truth value (read here).
    PyObject *closed_o, *stopping_o, *debug_o, *thread_id_o;
    bool closed, stopping, debug, has_thread;
    unsigned long thread_id;
    double clock_resolution;
    Py_ssize_t timer_cancelled_count;
    // A wake (evloop_submit of a no-op) was made since the iteration last read the ready
    // queue before waiting: later call_soon_threadsafe calls need none. GIL-protected.
    bool wake_pending;
    // The hooks (see Hook) that a subclass overrides, and those overridden by the class or
    // set on the instance now (see core_setattro): the core calls those as the stdlib does.
    unsigned class_hooks, hooks;
    PyObject *raw;    // the RawLoop (either variant), with its AioOps
    const AioOps *ops;
    PyObject *selector, *sel_keys; // the _EvloopSelector and its fd -> SelectorKey dict
    unsigned any_read, any_write; // the C events that make an fd readable / writable
    PyObject *selector_attr; // loop._selector as the stdlib's code sets it (None once closed)
    // The handle call_soon queued last (borrowed; in the ring) and whether its context is the
    // copy make_handle made: see settle_fresh().
    PyObject *fresh;
    bool fresh_ctx;
    // The same for the TimerHandle that call_at / call_later pushed on the heap last.
    PyObject *fresh_timer;
    bool fresh_timer_ctx;
    // CLOCK_MONOTONIC in ns at the last zero-timeout poll of run_forever's C loop (0 when
    // the last poll was another kind): see may_skip_poll().
    int64_t last_poll_ns;
    Executor work; // the default executor's state: executor.cpp's
};

extern PyTypeObject *g_core_type; // _AioCore, a heap type

// Core::work.poll_thread is written with the GIL by the thread that polls, and read without it by
// the pool threads of the default executor (executor.cpp's GIL spin): atomic stores.
inline void set_poll_thread(Core *self, unsigned long id)
{
    __atomic_store_n(&self->work.poll_thread, id, __ATOMIC_RELEASE);
}

// What the core's files lend the others (each explained at its body).
int check_closed(Core *self);
int is_cancelled(PyObject *h);
PyObject *make_handle(Core *self, PyObject *when, PyObject *callback, PyObject *args,
                      PyObject *context, bool *ctx_ours = nullptr);
PyObject *fetch_exception();
PyObject *call_with_self(PyObject *fn, PyObject *self, PyObject *const *argv, Py_ssize_t n,
                         PyObject *kwnames = nullptr);

// A stdlib boolean attribute (_closed, _stopping, _debug): the object assigned, and its truth.
template <PyObject *Core::*Obj, bool Core::*Flag>
PyObject *get_flag(PyObject *me, void *)
{
    Core *self = reinterpret_cast<Core *>(me);
    PyObject *o = self->*Obj;
    return Py_NewRef(o ? o : (self->*Flag ? Py_True : Py_False));
}

// ---------------------------------------------------------------- registration (core_type.cpp)

// A name the native paths look up, interned once at registration.
struct Name {
    PyObject **slot;
    const char *s;
};

// Interns each name into its slot: 0, or -1 with an exception set.
template <size_t N>
int intern_names(const Name (&names)[N])
{
    for (const Name &n : names)
        if (!(*n.slot = PyUnicode_InternFromString(n.s)))
            return -1;
    return 0;
}

// Adds def, a function of no self, to module m under its own name: 0, or -1 with an
// exception set.
int add_function(PyObject *m, PyMethodDef *def);

// Adds methods (a table ending in a null entry) to _AioCore, which register_core made: 0, or
// -1 with an exception set.
int add_core_methods(PyMethodDef *defs);

// Each file's part of the module's init (module.cpp calls them in this order): its types and
// functions added to m, 0, or -1 with an exception set.
int register_core(PyObject *m);
int register_transport(PyObject *m);
int register_datagram(PyObject *m);
int register_fds(PyObject *m);
int register_sock(PyObject *m);
int register_executor(PyObject *m);
int register_accept(PyObject *m);
int register_stream_init(PyObject *m);

// ---------------------------------------------------------------- accept.cpp

// A member of _socket.socket read through its descriptor, an int (socket.socket turns
// family and type into enums first): the value, or -1 with an exception set.
enum SockMember { SM_FAMILY, SM_TYPE, SM_PROTO };
long sock_member(SockMember which, PyObject *sock);

// ---------------------------------------------------------------- stream_init.cpp

// _AioStreamBase._evloop_init(loop, sock, protocol, waiter=None, extra=None, server=None).
PyObject *stream_init(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kwnames);

// ---------------------------------------------------------------- executor.cpp

// Settles the futures of the items the last poll completed (Core::work.done): 0, or -1 with
// an exception set (the rest stay queued for the next call).
int work_settle(Core *self);

// Before a poll that may wait, with executor calls in flight: spins a while for a pool
// thread to finish one (executor.cpp says when and how long).
void work_spin(Core *self);

// ---------------------------------------------------------------- fds.cpp

enum { kAddReader, kAddWriter, kRemoveReader, kRemoveWriter };

// _add_reader(fd, callback, *args) / _add_writer(...) (which: kAddReader or kAddWriter) ->
// the handle; sock.cpp's sock_recv adds its reader through it.
PyObject *add_rw(PyObject *me, PyObject *const *argv, Py_ssize_t n, int which);

// ---------------------------------------------------------------- slots.cpp

// The stdlib transports' hot attributes, read as C fields by the native methods of
// transport.cpp and datagram.cpp (slots.cpp says how and why).
enum SlotId {
    S_PROTOCOL,
    S_CONN_LOST,
    S_READ_READY_CB,
    S_EOF,
    S_EMPTY_WAITER,
    S_BUFFER,
    S_SOCK_FD,
    S_CLOSING,
    S_ADDRESS,
    S_EXTRA,
    S_SOCK,
    S_COUNT
};

// The transport classes whose instances are read at the offsets: the stream transport's and
// the datagram transport's, each declaring the names its native methods read.
enum SlotClass { SC_STREAM, SC_DATAGRAM, SC_COUNT };

struct Slots {
    PyTypeObject *type = nullptr;   // the transport class (a strong reference), or none
    unsigned int checked_tag = 0;   // its version tag when last checked (0: never)
    Py_ssize_t offset[S_COUNT] = {}; // each name's offset, 0 where it is not a slot of it
};
extern PyObject *slot_names[S_COUNT]; // interned, set by slots_names_init
extern Slots slot_classes[SC_COUNT];

bool slots_names_init();
void slots_check(Slots &c, PyTypeObject *tp);
bool slots_set_class(SlotClass which, PyObject *cls, PyObject *base);

// self.<name>: a new reference, or nullptr with an exception set, as PyObject_GetAttr.
inline PyObject *slot_get(PyObject *self, SlotId id)
{
    PyTypeObject *tp = Py_TYPE(self);
    for (Slots &c : slot_classes) {
        if (tp != c.type)
            continue;
        if (tp->tp_version_tag != c.checked_tag || c.checked_tag == 0)
            slots_check(c, tp);
        if (c.checked_tag != 0 && c.offset[id]) {
            PyObject *v = *reinterpret_cast<PyObject **>(reinterpret_cast<char *>(self) +
                                                         c.offset[id]);
            if (v)
                return Py_NewRef(v);
        }
        break;
    }
    return PyObject_GetAttr(self, slot_names[id]);
}

// ---------------------------------------------------------------- transport.cpp

constexpr Py_ssize_t kRecvBuf = 256 * 1024; // the stdlib's max_size

// The reusable receive buffer of kRecvBuf bytes that both transports read into (GIL-protected;
// copied out before any Python code runs): nullptr, with no exception set, if it cannot be
// allocated.
char *recv_buffer();

int attr_true(PyObject *o, SlotId id);
int socket_gone(PyObject *self);
int sock_fd(PyObject *self);
PyObject *call_handling(PyObject *exc, PyObject *name, PyObject *const *args, size_t nargs);
PyObject *fatal(PyObject *self, PyObject *msg);
Py_ssize_t recv_nb(int fd, char *buf, Py_ssize_t len);
Py_ssize_t send_nb(int fd, const char *buf, Py_ssize_t len);

inline bool would_block(int e) { return e == EAGAIN || e == EWOULDBLOCK; }

// A C base type with no fields of its own and these methods, which a transport class of
// evloop/_aio.py puts in front of the stdlib's; added to m under the last part of its name.
// A borrowed reference (m holds it), or nullptr with an exception set.
PyObject *add_base_type(PyObject *m, const char *qualname, const char *doc, PyMethodDef *methods);

} // namespace aio

#endif
