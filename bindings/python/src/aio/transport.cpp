// The native stream-socket path of evloop's asyncio loop (evloop/_aio.py, docs/asyncio.md):
// the type _AioStreamBase, a C base with no fields of its own that evloop's socket transport
// puts in front of the stdlib's asyncio.selector_events._SelectorSocketTransport
// (class _SocketTransport(_AioStreamBase, _SelectorSocketTransport)). It overrides the hot
// methods only, and works on the stdlib transport's own attributes (_sock_fd, _protocol,
// _conn_lost, _buffer, ...), so every other method, and every rare branch of these, is the
// stdlib's:
// - _read_ready / _read_ready__data_received / _read_ready__get_buffer: recv in C (into one
//   reusable buffer, then one bytes of the size read; after a large read on that fd straight
//   into a bytes; or straight into the BufferedProtocol's buffer) and the protocol's
//   data_received / buffer_updated called from C, with the stdlib's
//   checks and error messages; EOF goes to the stdlib's _read_ready__on_eof;
// - write: when nothing is buffered and nothing special is pending (the stdlib's own fast
//   case), send in C at once, and what is left buffered as the stdlib's write buffers it;
//   anything else (a buffered transport, EOF written, a sendfile in progress, a lost
//   connection, a bad argument) goes to the stdlib's write;
// - is_closing: the stdlib's one-line method (StreamWriter.drain calls it every message).
// The transport's hot attributes are __slots__ of evloop's class, read at their offsets
// (slots.cpp); max_size, a class attribute, and the cold ones through PyObject_GetAttr. Its
// helpers (the socket calls, the stdlib's error branch) serve datagram.cpp and sock.cpp too.
#include "aio.h"

#include <cerrno>
#include <climits>
#include <cstring>
#include <new>
#include <vector>
#include <sys/socket.h>
#include <sys/types.h>

namespace aio {

// Which fds read large last time (>= kLargeRead bytes): those read straight into a bytes of
// max_size, shrunk to what came (the stdlib's way: no copy, but a 256 KiB allocation, with
// glibc an mmap, mremap and munmap), the others into the reused buffer and copied out (no
// allocation beyond the bytes). Measured with 100 KiB echo messages through streams
// (tournament/results/asyncio-log.md): the copy alone cost more than the stdlib's allocation there.
constexpr Py_ssize_t kLargeRead = 32 * 1024;

struct FdBits {
    std::vector<bool> bits;
    bool get(int fd) const { return fd >= 0 && size_t(fd) < bits.size() && bits[size_t(fd)]; }
    void set(int fd, bool v) noexcept
    {
        if (fd < 0)
            return;
        try {
            if (size_t(fd) >= bits.size()) {
                if (!v)
                    return;
                bits.resize(size_t(fd) + 64, false);
            }
            bits[size_t(fd)] = v;
        } catch (const std::bad_alloc &) {
            // not recorded: that fd is read through the reused buffer
        }
    }
};

struct TransportGlobals {
    PyObject *std_write = nullptr; // _SelectorSocketTransport.write (the function)
    PyObject *base_type = nullptr; // _AioStreamBase
    PyObject *s_max_size, *s_data_received, *s_get_buffer, *s_buffer_updated, *s_on_eof,
        *s_fatal_error, *s_loop, *s_write_ready, *s_add_writer, *s_extend, *s_append,
        *s_maybe_pause;
    PyObject *m_read_fatal, *m_data_fatal, *m_get_buffer_fatal, *m_updated_fatal,
        *m_write_fatal;
    char *rbuf = nullptr; // the reusable receive buffer (GIL-protected; copied out before any
                          // Python code runs)
    FdBits large_reads;
};
TransportGlobals gt;

char *recv_buffer()
{
    if (!gt.rbuf)
        gt.rbuf = static_cast<char *>(PyMem_RawMalloc(size_t(kRecvBuf)));
    return gt.rbuf;
}

// A slot attribute's truth value: 1, 0, -1 with an exception set.
int attr_true(PyObject *o, SlotId id)
{
    PyObject *v = slot_get(o, id);
    if (!v)
        return -1;
    int t = v == Py_False || v == Py_None ? 0 : v == Py_True ? 1 : PyObject_IsTrue(v);
    Py_DECREF(v);
    return t;
}

// Whether the stdlib's _call_connection_lost has run: it closes the socket and sets _sock and
// _protocol to None, and _conn_lost can still be 0 then (a close() that waited for the buffer
// to drain ends there). The fd number may already name another file: the stdlib's code
// decides what a call does then (it raises, as self._sock is None). 1, 0, or -1 with an
// exception set.
int socket_gone(PyObject *self)
{
    PyObject *p = slot_get(self, S_PROTOCOL);
    if (!p)
        return -1;
    int gone = p == Py_None;
    Py_DECREF(p);
    return gone;
}

// The fd of self._sock, the one the stdlib's socket calls use: self._sock_fd, which the
// stdlib's transport sets to sock.fileno() when it is made and never changes. Every caller
// that sends has checked _conn_lost and socket_gone first, and a reader runs only while
// registered: until then the transport has not closed its socket, and it owns it
// (create_connection's sock= hands the socket over; the socket that get_extra_info gives
// cannot be closed). Reading it is a load (a slot, slots.cpp);
// self._sock.fileno() costs an attribute, a method lookup and a call, twice a message
// (callgrind: tournament/results/design-figures.md).
int sock_fd(PyObject *self)
{
    PyObject *f = slot_get(self, S_SOCK_FD);
    if (!f)
        return -2;
    long fd = PyLong_AsLong(f);
    Py_DECREF(f);
    if (fd == -1 && PyErr_Occurred())
        return -2;
    return fd < INT_MIN || fd > INT_MAX ? -1 : int(fd);
}

// args[0].name(*args[1:]) called while exc is the exception being handled (sys.exc_info()
// inside the call, and the context of what it raises), as from the stdlib's except clause.
PyObject *call_handling(PyObject *exc, PyObject *name, PyObject *const *args, size_t nargs)
{
    PyObject *ot, *ov, *otb;
    PyErr_GetExcInfo(&ot, &ov, &otb);
    PyErr_SetExcInfo(Py_NewRef(reinterpret_cast<PyObject *>(Py_TYPE(exc))), Py_NewRef(exc),
                     PyException_GetTraceback(exc));
    PyObject *r = PyObject_VectorcallMethod(name, args, nargs | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                            nullptr);
    PyErr_SetExcInfo(ot, ov, otb);
    return r;
}

// An exception is set, raised by a step that the stdlib wraps in
// `except (SystemExit, KeyboardInterrupt): raise / except BaseException as exc:
// self._fatal_error(exc, msg)`: nullptr (propagate) for the first two, else
// self._fatal_error(exc, msg) called while exc is the exception being handled, and None.
PyObject *fatal(PyObject *self, PyObject *msg)
{
    if (PyErr_ExceptionMatches(PyExc_SystemExit) || PyErr_ExceptionMatches(PyExc_KeyboardInterrupt))
        return nullptr;
    PyObject *exc = fetch_exception();
    if (!exc)
        Py_RETURN_NONE;
    PyObject *a[3] = {self, exc, msg};
    PyObject *r = call_handling(exc, gt.s_fatal_error, a, 3);
    Py_DECREF(exc);
    if (!r)
        return nullptr;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

// recv / send without blocking (the transport's socket is non-blocking already; MSG_DONTWAIT
// keeps a socket someone made blocking from blocking here, with the GIL held), retried on
// EINTR after Python's signal handlers ran, as the socket module does. >= 0, or -1 with errno
// set (EAGAIN: nothing now), or -2 with a Python exception set (a signal handler raised).
Py_ssize_t recv_nb(int fd, char *buf, Py_ssize_t len)
{
    for (;;) {
        ssize_t n = ::recv(fd, buf, size_t(len), MSG_DONTWAIT);
        if (n >= 0 || errno != EINTR)
            return Py_ssize_t(n);
        if (PyErr_CheckSignals() < 0)
            return -2;
    }
}

Py_ssize_t send_nb(int fd, const char *buf, Py_ssize_t len)
{
    for (;;) {
        ssize_t n = ::send(fd, buf, size_t(len), MSG_DONTWAIT);
        if (n >= 0 || errno != EINTR)
            return Py_ssize_t(n);
        if (PyErr_CheckSignals() < 0)
            return -2;
    }
}

// The stdlib's EOF branch: self._read_ready__on_eof() (eof_received, then close or keep).
PyObject *on_eof(PyObject *self)
{
    return PyObject_CallMethodNoArgs(self, gt.s_on_eof);
}

// _read_ready__data_received: recv up to max_size, then protocol.data_received(data).
PyObject *tr_data_received(PyObject *self, PyObject *)
{
    int lost = attr_true(self, S_CONN_LOST);
    if (lost)
        return lost < 0 ? nullptr : Py_NewRef(Py_None);
    PyObject *ms = PyObject_GetAttr(self, gt.s_max_size); // inside the stdlib's try, as recv's
    if (!ms)
        return fatal(self, gt.m_read_fatal);
    Py_ssize_t max_size = PyNumber_AsSsize_t(ms, PyExc_OverflowError); // as recv's argument
    Py_DECREF(ms);
    if (max_size == -1 && PyErr_Occurred())
        return fatal(self, gt.m_read_fatal);
    if (max_size < 0) { // as sock.recv says it
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recv");
        return fatal(self, gt.m_read_fatal);
    }
    int fd = sock_fd(self);
    if (fd == -2)
        return fatal(self, gt.m_read_fatal);
    PyObject *data;
    Py_ssize_t n;
    // The last read on this fd was large: straight into a bytes, as the stdlib reads (see
    // large_reads).
    bool direct = max_size > kRecvBuf || gt.large_reads.get(fd);
    if (!direct) {
        if (!gt.rbuf && !(gt.rbuf = static_cast<char *>(PyMem_RawMalloc(size_t(kRecvBuf)))))
            return PyErr_NoMemory();
        n = recv_nb(fd, gt.rbuf, max_size);
        if (n == -2)
            return fatal(self, gt.m_read_fatal);
        if (n < 0) {
            if (would_block(errno))
                Py_RETURN_NONE;
            PyErr_SetFromErrno(PyExc_OSError);
            return fatal(self, gt.m_read_fatal);
        }
        if (n == 0)
            return on_eof(self);
        if (n >= kLargeRead)
            gt.large_reads.set(fd, true);
        data = PyBytes_FromStringAndSize(gt.rbuf, n);
        if (!data)
            return fatal(self, gt.m_read_fatal);
    } else { // into a bytes of max_size, shrunk to what came
        data = PyBytes_FromStringAndSize(nullptr, max_size);
        if (!data)
            return fatal(self, gt.m_read_fatal);
        n = recv_nb(fd, PyBytes_AS_STRING(data), max_size);
        if (n < 0) {
            int e = errno;
            Py_DECREF(data);
            if (n == -2)
                return fatal(self, gt.m_read_fatal);
            if (would_block(e))
                Py_RETURN_NONE;
            errno = e;
            PyErr_SetFromErrno(PyExc_OSError);
            return fatal(self, gt.m_read_fatal);
        }
        if (n == 0) {
            Py_DECREF(data);
            return on_eof(self);
        }
        if (n < kLargeRead)
            gt.large_reads.set(fd, false);
        if (n != max_size && _PyBytes_Resize(&data, n) < 0)
            return fatal(self, gt.m_read_fatal);
    }
    PyObject *proto = slot_get(self, S_PROTOCOL);
    PyObject *r = nullptr;
    if (proto) {
        PyObject *a[2] = {proto, data};
        r = PyObject_VectorcallMethod(gt.s_data_received, a, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      nullptr);
        Py_DECREF(proto);
    }
    Py_DECREF(data);
    if (!r)
        return fatal(self, gt.m_data_fatal);
    Py_DECREF(r);
    Py_RETURN_NONE;
}

// _read_ready__get_buffer: protocol.get_buffer(-1), recv into it, protocol.buffer_updated(n).
PyObject *tr_get_buffer(PyObject *self, PyObject *)
{
    int lost = attr_true(self, S_CONN_LOST);
    if (lost)
        return lost < 0 ? nullptr : Py_NewRef(Py_None);
    PyObject *proto = slot_get(self, S_PROTOCOL);
    if (!proto)
        return fatal(self, gt.m_get_buffer_fatal);
    PyObject *minus1 = PyLong_FromLong(-1);
    PyObject *buf = nullptr;
    if (minus1) {
        PyObject *a[2] = {proto, minus1};
        buf = PyObject_VectorcallMethod(gt.s_get_buffer, a, 2 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                        nullptr);
        Py_DECREF(minus1);
    }
    Py_ssize_t blen = buf ? PyObject_Size(buf) : -1;
    if (blen == 0)
        PyErr_SetString(PyExc_RuntimeError, "get_buffer() returned an empty buffer");
    if (blen <= 0) {
        Py_XDECREF(buf);
        Py_DECREF(proto);
        return fatal(self, gt.m_get_buffer_fatal);
    }
    // sock.recv_into(buf): a writable buffer, all of it
    Py_buffer view;
    Py_ssize_t n = -2;
    int e = 0;
    int fd = sock_fd(self);
    if (fd != -2 && PyObject_GetBuffer(buf, &view, PyBUF_WRITABLE) == 0) {
        n = recv_nb(fd, static_cast<char *>(view.buf), view.len);
        e = errno;
        PyBuffer_Release(&view);
    } else if (fd != -2) { // as recv_into's argument parsing says it
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError,
                     "recv_into() argument 1 must be read-write bytes-like object, not %.50s",
                     Py_TYPE(buf)->tp_name);
    }
    Py_DECREF(buf);
    if (n < 0) {
        Py_DECREF(proto);
        if (n == -1 && would_block(e))
            Py_RETURN_NONE;
        if (n == -1) {
            errno = e;
            PyErr_SetFromErrno(PyExc_OSError);
        }
        return fatal(self, gt.m_read_fatal);
    }
    if (n == 0) {
        Py_DECREF(proto);
        return on_eof(self);
    }
    PyObject *nb = PyLong_FromSsize_t(n);
    PyObject *r = nullptr;
    if (nb) {
        PyObject *a[2] = {proto, nb};
        r = PyObject_VectorcallMethod(gt.s_buffer_updated, a,
                                      2 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
        Py_DECREF(nb);
    }
    Py_DECREF(proto);
    if (!r)
        return fatal(self, gt.m_updated_fatal);
    Py_DECREF(r);
    Py_RETURN_NONE;
}

// _read_ready: self._read_ready_cb(), which set_protocol points at one of the two above;
// called here directly when it is one of ours, bound to self.
PyObject *tr_read_ready(PyObject *self, PyObject *)
{
    PyObject *cb = slot_get(self, S_READ_READY_CB);
    if (!cb)
        return nullptr;
    if (PyCFunction_Check(cb) && PyCFunction_GET_SELF(cb) == self) {
        PyCFunction f = PyCFunction_GET_FUNCTION(cb);
        if (f == tr_data_received || f == tr_get_buffer) {
            Py_DECREF(cb);
            return f(self, nullptr);
        }
    }
    PyObject *r = PyObject_CallNoArgs(cb);
    Py_DECREF(cb);
    return r;
}

// The stdlib's write(data), for what the fast path leaves.
PyObject *std_write(PyObject *self, PyObject *data)
{
    PyObject *a[2] = {self, data};
    return PyObject_Vectorcall(gt.std_write, a, 2, nullptr);
}

// What the stdlib's write does after its first send left data[n:] (n may be 0: EAGAIN):
// the writer started (loop._add_writer(fd, self._write_ready)), the rest buffered, the
// protocol paused past the high-water mark. The rest as the stdlib of this Python keeps it:
// a bytearray buffer (3.11) is extended with data[n:]; a deque (3.12 on) gets
// memoryview(data)[n:] (data itself when nothing was sent).
PyObject *buffer_rest(PyObject *self, PyObject *data, Py_ssize_t n)
{
    PyObject *buf = slot_get(self, S_BUFFER);
    if (!buf)
        return nullptr;
    bool ba = PyByteArray_Check(buf);
    PyObject *rest = nullptr;
    if (n == 0) {
        rest = Py_NewRef(data);
    } else if (ba) {
        rest = PySequence_GetSlice(data, n, PY_SSIZE_T_MAX);
    } else {
        PyObject *mv = PyMemoryView_FromObject(data);
        rest = mv ? PySequence_GetSlice(mv, n, PY_SSIZE_T_MAX) : nullptr;
        Py_XDECREF(mv);
    }
    PyObject *loop = rest ? PyObject_GetAttr(self, gt.s_loop) : nullptr;
    PyObject *fdo = loop ? slot_get(self, S_SOCK_FD) : nullptr;
    PyObject *wr = fdo ? PyObject_GetAttr(self, gt.s_write_ready) : nullptr;
    PyObject *r = nullptr;
    if (wr) {
        PyObject *a[3] = {loop, fdo, wr};
        r = PyObject_VectorcallMethod(gt.s_add_writer, a, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                      nullptr);
    }
    Py_XDECREF(wr);
    Py_XDECREF(fdo);
    Py_XDECREF(loop);
    if (r) {
        Py_DECREF(r);
        r = PyObject_CallMethodOneArg(buf, ba ? gt.s_extend : gt.s_append, rest);
    }
    if (r) {
        Py_DECREF(r);
        r = PyObject_CallMethodNoArgs(self, gt.s_maybe_pause);
    }
    Py_XDECREF(rest);
    Py_DECREF(buf);
    return r;
}

// write(data): the stdlib's "try to send now" case in C (bytes, bytearray or a flat byte
// memoryview; nothing buffered, no EOF written, no sendfile waiting, the connection not lost);
// all else, and the rest of a partial send, through the stdlib's write.
PyObject *tr_write(PyObject *self, PyObject *data)
{
    bool flat;
    if (PyBytes_Check(data) || PyByteArray_Check(data)) {
        flat = true;
    } else if (PyMemoryView_Check(data)) {
        Py_buffer *mv = PyMemoryView_GET_BUFFER(data);
        flat = mv->itemsize == 1 && mv->ndim <= 1 && PyBuffer_IsContiguous(mv, 'C');
    } else {
        flat = false;
    }
    if (!flat)
        return std_write(self, data);
    int t = attr_true(self, S_EOF);
    if (t != 0)
        return t < 0 ? nullptr : std_write(self, data);
    PyObject *w = slot_get(self, S_EMPTY_WAITER);
    if (!w)
        return nullptr;
    Py_DECREF(w);
    if (w != Py_None)
        return std_write(self, data);
    t = attr_true(self, S_CONN_LOST);
    if (t != 0)
        return t < 0 ? nullptr : std_write(self, data);
    PyObject *b = slot_get(self, S_BUFFER);
    if (!b)
        return nullptr;
    Py_ssize_t blen = PyObject_Size(b);
    Py_DECREF(b);
    if (blen != 0)
        return blen < 0 ? nullptr : std_write(self, data);
    t = socket_gone(self);
    if (t != 0)
        return t < 0 ? nullptr : std_write(self, data);
    Py_buffer view;
    if (PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
        return nullptr;
    if (view.len == 0) { // `if not data: return`
        PyBuffer_Release(&view);
        Py_RETURN_NONE;
    }
    int fd = sock_fd(self);
    Py_ssize_t n = fd == -2 ? -2 : send_nb(fd, static_cast<const char *>(view.buf), view.len);
    int e = errno;
    Py_ssize_t len = view.len;
    PyBuffer_Release(&view);
    if (n == len)
        Py_RETURN_NONE;
    if (n == -1 && !would_block(e)) {
        errno = e;
        PyErr_SetFromErrno(PyExc_OSError);
    }
    if (n == -2 || (n == -1 && !would_block(e)))
        return fatal(self, gt.m_write_fatal);
    return buffer_rest(self, data, n < 0 ? 0 : n);
}

// is_closing(): self._closing, as the stdlib's; StreamWriter.drain asks it once a message.
PyObject *tr_is_closing(PyObject *self, PyObject *)
{
    return slot_get(self, S_CLOSING);
}

PyMethodDef transport_methods[] = {
    {"_read_ready", tr_read_ready, METH_NOARGS,
     "The socket is readable: the protocol's read callback (set_protocol chose it), in C."},
    {"_read_ready__data_received", tr_data_received, METH_NOARGS,
     "recv in C, then protocol.data_received(data); as the stdlib's."},
    {"_read_ready__get_buffer", tr_get_buffer, METH_NOARGS,
     "protocol.get_buffer(-1), recv into it in C, protocol.buffer_updated(n); as the stdlib's."},
    {"write", tr_write, METH_O,
     "write(data): sent at once in C when nothing is buffered; else the stdlib's write."},
    {"is_closing", tr_is_closing, METH_NOARGS, "Whether the transport is closing or closed."},
    {"_evloop_init", EVLOOP_FASTKW(stream_init), METH_FASTCALL | METH_KEYWORDS,
     "The stdlib's construction in C (stream_init.cpp), for _SocketTransport.__init__."},
    {nullptr, nullptr, 0, nullptr},
};

// _aio_transport_setup(stdlib_write, cls): the stdlib transport's write, for what the fast
// path leaves to it, and evloop's transport class, whose hot attributes are slots
// (slots.cpp).
PyObject *transport_setup(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 2) {
        PyErr_SetString(PyExc_TypeError, "_aio_transport_setup(write, cls): 2 arguments");
        return nullptr;
    }
    if (!slots_set_class(SC_STREAM, args[1], gt.base_type))
        return nullptr;
    Py_XSETREF(gt.std_write, Py_NewRef(args[0]));
    Py_RETURN_NONE;
}

PyMethodDef transport_setup_def = {
    "_aio_transport_setup", EVLOOP_FASTKW(transport_setup), METH_FASTCALL,
    "_aio_transport_setup(_SelectorSocketTransport.write, _SocketTransport)."};

PyObject *add_base_type(PyObject *m, const char *qualname, const char *doc, PyMethodDef *methods)
{
    PyType_Slot type_slots[] = {
        {Py_tp_doc, const_cast<char *>(doc)}, {Py_tp_methods, methods}, {0, nullptr}};
    PyType_Spec spec = {qualname, int(sizeof(PyObject)), 0,
                        Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, type_slots};
    PyObject *tp = PyType_FromSpec(&spec);
    if (!tp || PyModule_AddObject(m, std::strrchr(qualname, '.') + 1, tp) < 0) {
        Py_XDECREF(tp);
        return nullptr;
    }
    return tp;
}

// Registers _AioStreamBase and _aio_transport_setup in module m.
int register_transport(PyObject *m)
{
    const Name names[] = {{&gt.s_max_size, "max_size"},
                          {&gt.s_data_received, "data_received"},
                          {&gt.s_get_buffer, "get_buffer"},
                          {&gt.s_buffer_updated, "buffer_updated"},
                          {&gt.s_on_eof, "_read_ready__on_eof"},
                          {&gt.s_fatal_error, "_fatal_error"},
                          {&gt.s_loop, "_loop"},
                          {&gt.s_write_ready, "_write_ready"},
                          {&gt.s_add_writer, "_add_writer"},
                          {&gt.s_extend, "extend"},
                          {&gt.s_append, "append"},
                          {&gt.s_maybe_pause, "_maybe_pause_protocol"},
                          {&gt.m_read_fatal, "Fatal read error on socket transport"},
                          {&gt.m_data_fatal,
                           "Fatal error: protocol.data_received() call failed."},
                          {&gt.m_get_buffer_fatal,
                           "Fatal error: protocol.get_buffer() call failed."},
                          {&gt.m_updated_fatal,
                           "Fatal error: protocol.buffer_updated() call failed."},
                          {&gt.m_write_fatal, "Fatal write error on socket transport"}};
    if (intern_names(names) < 0 || !slots_names_init())
        return -1;
    PyObject *base = add_base_type(m, "evloop._asyncio_core._AioStreamBase",
                                   "The native hot methods of evloop's socket transport "
                                   "(reading, and writing at once).",
                                   transport_methods);
    if (!base)
        return -1;
    gt.base_type = Py_NewRef(base);
    return add_function(m, &transport_setup_def);
}

} // namespace aio
