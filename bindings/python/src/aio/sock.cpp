// The socket methods' hot path in C (methods of _AioCore): what loop.sock_recv and
// loop.sock_sendall run per call on a plain socket.socket outside debug mode, with the
// stdlib's behaviour and none of its Python frames or exceptions:
//  - _evloop_sock_recv(sock, n): recv now; the bytes, or a pending future wired as the
//    stdlib's sock_recv wires it (a reader handle calling _sock_recv, a done callback
//    partial(_sock_read_done, fd, handle=handle)), or NotImplemented: the stdlib's way;
//  - _evloop_sock_send(sock, data): send now; the count sent (0: would block), or -1: the
//    stdlib's way;
//  - _sock_recv(fut, sock, n) and _sock_read_done(fd, fut, handle=None), the reader's and the
//    future's callbacks, as the stdlib's;
//  - _ensure_fd_no_transport(fd), create_future() and get_debug(), which every sock_* call
//    and every future make, as the stdlib's.
// Sockets are read and written with MSG_DONTWAIT: a socket left blocking (which the stdlib
// refuses in debug mode only) waits in the loop instead of blocking it. evloop/_aio.py has
// the Python side (sock_recv, sock_sendall), tournament/results/asyncio-log.md the measurements.
#include "aio.h"

#include <cerrno>

namespace aio {

struct SockGlobals {
    PyTypeObject *socket_t = nullptr; // socket.socket: the only class the fast paths take
    PyObject *future_t = nullptr;     // asyncio.Future
    PyObject *partial_t = nullptr;    // functools.partial
    PyObject *weakdict_t = nullptr;   // weakref.WeakValueDictionary
    PyObject *std_ensure = nullptr;   // the stdlib's _ensure_fd_no_transport
    PyObject *std_sock_recv = nullptr; // the stdlib's _sock_recv, for other sockets
    PyObject *s_fileno, *s_done, *s_set_result, *s_set_exception, *s_add_done_callback,
        *s_create_future, *s_sock_recv, *s_sock_read_done, *s_remove_reader, *s_transports,
        *s_data, *s_pending_removals, *s_handle, *s_loop, *kw_handle, *kw_loop;
};
SockGlobals gs;

// sock.fileno() of a socket.socket: >= -1, or -2 with an exception set.
int socket_fileno(PyObject *sock)
{
    PyObject *f = PyObject_CallMethodNoArgs(sock, gs.s_fileno);
    if (!f)
        return -2;
    long fd = PyLong_AsLong(f);
    Py_DECREF(f);
    if (fd == -1 && PyErr_Occurred())
        return -2;
    return fd < -1 || fd > INT32_MAX ? -1 : int(fd);
}

// recv(fd, n) without waiting (recv_nb): the bytes (b"" at EOF), Py_None if it would block,
// or nullptr with the OSError sock.recv would raise (or what a signal handler raised).
PyObject *recv_now(int fd, Py_ssize_t n)
{
    PyObject *b = PyBytes_FromStringAndSize(nullptr, n);
    if (!b)
        return nullptr;
    Py_ssize_t r = recv_nb(fd, PyBytes_AS_STRING(b), n);
    if (r < 0) {
        int e = errno;
        Py_DECREF(b);
        if (r == -2)
            return nullptr;
        if (would_block(e))
            Py_RETURN_NONE;
        errno = e;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    if (r != n && _PyBytes_Resize(&b, r) < 0)
        return nullptr;
    return b;
}

// n of sock_recv(sock, n) if the fast path may take the call, else -1 (no exception).
Py_ssize_t fast_recv_size(Core *self, PyObject *sock, PyObject *n)
{
    if (self->debug || !gs.socket_t || !Py_IS_TYPE(sock, gs.socket_t) || !PyLong_CheckExact(n) ||
        (self->hooks & H_FDS)) // the fd registry's methods overridden: the stdlib's way
        return -1;
    Py_ssize_t v = PyLong_AsSsize_t(n);
    if (v == -1 && PyErr_Occurred())
        PyErr_Clear();
    // 0: sock.recv(0) answers b"" where recv(2) of 0 bytes may say EAGAIN (AF_UNIX)
    return v > 0 ? v : -1;
}

// _ensure_fd_no_transport(fd) for an int fd: nothing to do when no transport was ever made
// on it (the WeakValueDictionary's dict has no entry); the stdlib's method otherwise.
int ensure_no_transport(Core *self, PyObject *fdo)
{
    PyObject *me = reinterpret_cast<PyObject *>(self);
    PyObject *tr = PyLong_CheckExact(fdo) ? PyObject_GetAttr(me, gs.s_transports) : nullptr;
    if (tr && Py_IS_TYPE(tr, reinterpret_cast<PyTypeObject *>(gs.weakdict_t))) {
        PyObject *data = PyObject_GetAttr(tr, gs.s_data);
        PyObject *pend = data ? PyObject_GetAttr(tr, gs.s_pending_removals) : nullptr;
        bool unused = pend && PyDict_CheckExact(data) && PyList_CheckExact(pend) &&
                      PyList_GET_SIZE(pend) == 0 && !PyDict_GetItemWithError(data, fdo);
        Py_XDECREF(data);
        Py_XDECREF(pend);
        Py_DECREF(tr);
        if (unused && !PyErr_Occurred())
            return 0;
        PyErr_Clear(); // laid out otherwise: the stdlib's method decides
    } else {
        Py_XDECREF(tr);
        PyErr_Clear();
    }
    PyObject *a[2] = {me, fdo};
    PyObject *r = PyObject_Vectorcall(gs.std_ensure, a, 2, nullptr);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

PyObject *sock_ensure_fd_no_transport(PyObject *me, PyObject *fdo)
{
    if (ensure_no_transport(reinterpret_cast<Core *>(me), fdo) < 0)
        return nullptr;
    Py_RETURN_NONE;
}

// create_future(): asyncio.Future(loop=self), as the stdlib's.
PyObject *sock_create_future(PyObject *me, PyObject *)
{
    PyObject *a[2] = {nullptr, me};
    return PyObject_Vectorcall(gs.future_t, a + 1, 0 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                               gs.kw_loop);
}

// get_debug(): self._debug, as the stdlib's.
PyObject *sock_get_debug(PyObject *me, PyObject *)
{
    return get_flag<&Core::debug_o, &Core::debug>(me, nullptr);
}

// _sock_recv(fut, sock, n): the reader's callback: unless fut is done, recv and settle fut
// with the bytes or the error; nothing if the socket would block (it fires again).
PyObject *sock_recv_ready(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    Py_ssize_t size = n == 3 ? fast_recv_size(self, a[1], a[2]) : -1;
    if (size < 0)
        return call_with_self(gs.std_sock_recv, me, a, n);
    PyObject *done = PyObject_CallMethodNoArgs(a[0], gs.s_done);
    if (!done)
        return nullptr;
    int d = PyObject_IsTrue(done);
    Py_DECREF(done);
    if (d != 0)
        return d < 0 ? nullptr : Py_NewRef(Py_None);
    int fd = socket_fileno(a[1]);
    if (fd == -2)
        return nullptr;
    PyObject *data = recv_now(fd, size);
    if (data == Py_None)
        return data; // try again next time
    // as the stdlib's except clauses: SystemExit and KeyboardInterrupt (from a signal handler
    // recv_nb ran) go up, any other error settles the future
    if (!data && (PyErr_ExceptionMatches(PyExc_SystemExit) ||
                  PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)))
        return nullptr;
    PyObject *r;
    if (data) {
        r = PyObject_CallMethodOneArg(a[0], gs.s_set_result, data);
        Py_DECREF(data);
    } else {
        PyObject *exc = fetch_exception();
        r = PyObject_CallMethodOneArg(a[0], gs.s_set_exception, exc);
        Py_DECREF(exc);
    }
    return r;
}

// _sock_read_done(fd, fut, handle=None): the future's done callback: the reader goes, unless
// its handle was cancelled (replaced) meanwhile.
PyObject *sock_read_done(PyObject *me, PyObject *const *a, size_t nargsf, PyObject *kwnames)
{
    Py_ssize_t n = PyVectorcall_NARGS(nargsf);
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    PyObject *handle = n > 2 ? a[2] : Py_None;
    bool ok = n >= 2 && n <= 3;
    for (Py_ssize_t i = 0; ok && i < nk; i++) {
        ok = n == 2 &&
             PyUnicode_Compare(PyTuple_GET_ITEM(kwnames, i), gs.s_handle) == 0;
        handle = a[n + i];
    }
    if (!ok) {
        PyErr_SetString(PyExc_TypeError, "_sock_read_done(fd, fut, handle=None)");
        return nullptr;
    }
    if (handle != Py_None) {
        int c = is_cancelled(handle);
        if (c != 0)
            return c < 0 ? nullptr : Py_NewRef(Py_None);
    }
    return PyObject_CallMethodOneArg(me, gs.s_remove_reader, a[0]);
}

// _evloop_sock_recv(sock, n): the bytes now, a future of them, or NotImplemented.
PyObject *sock_recv_start(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    Py_ssize_t size = n == 2 ? fast_recv_size(self, a[0], a[1]) : -1;
    if (size < 0)
        Py_RETURN_NOTIMPLEMENTED;
    int fd = socket_fileno(a[0]);
    if (fd == -2)
        return nullptr;
    PyObject *data = recv_now(fd, size);
    if (data != Py_None)
        return data;
    Py_DECREF(data);
    PyObject *fut = PyObject_CallMethodNoArgs(me, gs.s_create_future);
    PyObject *fdo = fut ? PyLong_FromLong(fd) : nullptr;
    PyObject *cb = fdo && ensure_no_transport(self, fdo) == 0
                       ? PyObject_GetAttr(me, gs.s_sock_recv) : nullptr;
    PyObject *handle = nullptr;
    if (cb) {
        PyObject *args[5] = {fdo, cb, fut, a[0], a[1]};
        handle = add_rw(me, args, 5, kAddReader);
        Py_DECREF(cb);
    }
    PyObject *done_cb = handle ? PyObject_GetAttr(me, gs.s_sock_read_done) : nullptr;
    PyObject *partial = nullptr;
    if (done_cb) {
        PyObject *args[4] = {nullptr, done_cb, fdo, handle};
        partial = PyObject_Vectorcall(gs.partial_t, args + 1,
                                      2 | PY_VECTORCALL_ARGUMENTS_OFFSET, gs.kw_handle);
        Py_DECREF(done_cb);
    }
    PyObject *r = partial ? PyObject_CallMethodOneArg(fut, gs.s_add_done_callback, partial)
                          : nullptr;
    Py_XDECREF(partial);
    Py_XDECREF(handle);
    Py_XDECREF(fdo);
    if (!r) {
        Py_XDECREF(fut);
        return nullptr;
    }
    Py_DECREF(r);
    return fut;
}

// _evloop_sock_send(sock, data): bytes sent now (0 if it would block), or -1: the stdlib's
// way (another class of socket, debug mode, data not a buffer).
PyObject *sock_send_now(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (n != 2 || self->debug || !gs.socket_t || !Py_IS_TYPE(a[0], gs.socket_t) ||
        !PyObject_CheckBuffer(a[1]))
        return PyLong_FromLong(-1);
    int fd = socket_fileno(a[0]);
    if (fd == -2)
        return nullptr;
    Py_buffer view;
    if (PyObject_GetBuffer(a[1], &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear(); // not contiguous: the stdlib's send says why
        return PyLong_FromLong(-1);
    }
    Py_ssize_t r = send_nb(fd, static_cast<const char *>(view.buf), view.len);
    int e = errno;
    PyBuffer_Release(&view);
    if (r == -2)
        return nullptr;
    if (r < 0) {
        if (would_block(e))
            return PyLong_FromLong(0);
        errno = e;
        return PyErr_SetFromErrno(PyExc_OSError);
    }
    return PyLong_FromSsize_t(r);
}

PyMethodDef sock_methods[] = {
    {"_evloop_sock_recv", EVLOOP_FASTKW(sock_recv_start), METH_FASTCALL,
     "sock_recv's fast path: the bytes now, a future of them, or NotImplemented."},
    {"_evloop_sock_send", EVLOOP_FASTKW(sock_send_now), METH_FASTCALL,
     "sock_sendall's first send: bytes sent now (0: would block), or -1: the stdlib's way."},
    {"_sock_recv", EVLOOP_FASTKW(sock_recv_ready), METH_FASTCALL,
     "_sock_recv(fut, sock, n): as the stdlib's, in C."},
    {"_sock_read_done", EVLOOP_FASTKW(sock_read_done), METH_FASTCALL | METH_KEYWORDS,
     "_sock_read_done(fd, fut, handle=None): as the stdlib's, in C."},
    {"_ensure_fd_no_transport", sock_ensure_fd_no_transport, METH_O,
     "_ensure_fd_no_transport(fd): as the stdlib's, in C when no transport used fd."},
    {"create_future", sock_create_future, METH_NOARGS,
     "Create a Future object attached to the loop."},
    {"get_debug", sock_get_debug, METH_NOARGS, "The loop's debug mode."},
    {nullptr, nullptr, 0, nullptr},
};

// _aio_sock_setup(socket, Future, partial, WeakValueDictionary, ensure_fd_no_transport,
// sock_recv_callback): what the fast paths make and check, and the stdlib's methods they
// fall back on.
PyObject *sock_setup(PyObject *, PyObject *const *a, Py_ssize_t n)
{
    if (n != 6 || !PyType_Check(a[0]) || !PyType_Check(a[3])) {
        PyErr_SetString(PyExc_TypeError, "_aio_sock_setup(socket, Future, partial, "
                                         "WeakValueDictionary, ensure, sock_recv)");
        return nullptr;
    }
    Py_XSETREF(gs.socket_t, reinterpret_cast<PyTypeObject *>(Py_NewRef(a[0])));
    Py_XSETREF(gs.future_t, Py_NewRef(a[1]));
    Py_XSETREF(gs.partial_t, Py_NewRef(a[2]));
    Py_XSETREF(gs.weakdict_t, Py_NewRef(a[3]));
    Py_XSETREF(gs.std_ensure, Py_NewRef(a[4]));
    Py_XSETREF(gs.std_sock_recv, Py_NewRef(a[5]));
    Py_RETURN_NONE;
}

PyMethodDef sock_setup_def = {"_aio_sock_setup", EVLOOP_FASTKW(sock_setup), METH_FASTCALL,
                              "_aio_sock_setup(socket.socket, asyncio.Future, "
                              "functools.partial, weakref.WeakValueDictionary, "
                              "_ensure_fd_no_transport, _sock_recv)."};

// Adds the methods to _AioCore and _aio_sock_setup to module m.
int register_sock(PyObject *m)
{
    const Name names[] = {{&gs.s_fileno, "fileno"},
                          {&gs.s_done, "done"},
                          {&gs.s_set_result, "set_result"},
                          {&gs.s_set_exception, "set_exception"},
                          {&gs.s_add_done_callback, "add_done_callback"},
                          {&gs.s_create_future, "create_future"},
                          {&gs.s_sock_recv, "_sock_recv"},
                          {&gs.s_sock_read_done, "_sock_read_done"},
                          {&gs.s_remove_reader, "remove_reader"},
                          {&gs.s_transports, "_transports"},
                          {&gs.s_data, "data"},
                          {&gs.s_pending_removals, "_pending_removals"},
                          {&gs.s_handle, "handle"},
                          {&gs.s_loop, "loop"}};
    if (intern_names(names) < 0)
        return -1;
    gs.kw_handle = PyTuple_Pack(1, gs.s_handle);
    gs.kw_loop = PyTuple_Pack(1, gs.s_loop);
    if (!gs.kw_handle || !gs.kw_loop || add_core_methods(sock_methods) < 0)
        return -1;
    return add_function(m, &sock_setup_def);
}

} // namespace aio
