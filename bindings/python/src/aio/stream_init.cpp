// The stream socket transport's construction in C: _AioStreamBase._evloop_init, which
// evloop/_aio.py makes _SocketTransport.__init__ when the stdlib's construction is one this
// file knows (it compares the names and constants of each function below with those of
// CPython 3.11.2, 3.11.7, 3.12 and 3.13, and else keeps the stdlib's __init__). It stores what
// _SelectorSocketTransport.__init__ and the __init__s and set_protocol above it store, in
// their order, with their values, and calls what they call: TransportSocket(sock),
// getsockname and getpeername (None on OSError), server._attach, loop._transports[fd] = self,
// TCP_NODELAY where _set_nodelay sets it, then loop.call_soon for connection_made, the
// reader and the waiter. What it leaves out is the Python: eight frames, and the enum
// conversions of sock.family and sock.type (the members are read as ints here), a large share
// of a connection's user-space instructions (callgrind, tournament/results/asyncio-log.md). An
// instance of another class or a socket of another
// class than socket.socket goes to the stdlib's __init__.
#include "aio.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

namespace aio {

struct InitGlobals {
    PyTypeObject *cls = nullptr;          // _SocketTransport: its exact instances only
    PyTypeObject *socket_t = nullptr;     // socket.socket: its exact instances only
    PyObject *std_init = nullptr;         // _SelectorSocketTransport.__init__, for the rest
    PyObject *transport_socket = nullptr; // asyncio.trsock.TransportSocket
    PyObject *buffered = nullptr;         // asyncio.BufferedProtocol
    PyObject *buffer_factory = nullptr;   // bytearray (3.11) or collections.deque (3.12 on)
    PyObject *set_result = nullptr;       // asyncio.futures._set_result_unless_cancelled
    PyObject *write_ready = nullptr;      // what _write_ready is bound to (3.12 on), or none
    // Where _paused = False is stored: nowhere, by _SelectorTransport.__init__ after
    // _closing (3.11.7 on), or by _SelectorSocketTransport.__init__ after _eof (3.11.2).
    enum { kPausedNone, kPausedBase, kPausedSocket } paused = kPausedNone;
    bool attach_self = false;             // server._attach(self) (3.13 on), else _attach()
    PyObject *s_read_ready_cb, *s_extra, *s_loop, *s_protocol_paused, *s_high_water,
        *s_low_water, *s_socket, *s_sockname, *s_peername, *s_getsockname, *s_getpeername,
        *s_sock, *s_fileno, *s_sock_fd, *s_protocol_connected, *s_get_buffer_cb,
        *s_data_received_cb, *s_protocol, *s_server, *s_buffer, *s_conn_lost, *s_closing,
        *s_paused, *s_attach, *s_transports, *s_eof, *s_empty_waiter, *s_write_ready,
        *s_call_soon, *s_connection_made, *s_add_reader, *s_read_ready;
    PyObject *kw[6]; // loop, sock, protocol, waiter, extra, server
    PyObject *high_water, *low_water; // 64 KiB and a quarter of it, as _set_write_buffer_limits
};
InitGlobals gi;

// self.<name> = v, v a new reference (or nullptr: an exception is set): 0, or -1.
int put(PyObject *self, PyObject *name, PyObject *v)
{
    if (!v)
        return -1;
    int r = PyObject_SetAttr(self, name, v);
    Py_DECREF(v);
    return r;
}

// sock.<name>(), None where it raises OSError (the stdlib's try/except): a new reference, or
// nullptr with another exception set.
PyObject *address_or_none(PyObject *sock, PyObject *name)
{
    PyObject *r = PyObject_CallMethodNoArgs(sock, name);
    if (!r && PyErr_ExceptionMatches(PyExc_OSError)) {
        PyErr_Clear();
        r = Py_NewRef(Py_None);
    }
    return r;
}

// loop.call_soon(a, *rest): 0, or -1 with an exception set.
int call_soon(PyObject *loop, PyObject *const *a, size_t n)
{
    PyObject *argv[4] = {loop};
    for (size_t i = 0; i < n; i++)
        argv[i + 1] = a[i];
    PyObject *r = PyObject_VectorcallMethod(gi.s_call_soon, argv,
                                            (n + 1) | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

// base_events._set_nodelay(sock): TCP_NODELAY on a TCP socket of AF_INET or AF_INET6, read
// from the socket's members as ints (socket.socket turns them into enums first). 0, or -1
// with an exception set (setsockopt's OSError, as sock.setsockopt raises it).
int set_nodelay(PyObject *sock, int fd)
{
    long family = sock_member(SM_FAMILY, sock);
    if (family == -1 && PyErr_Occurred())
        return -1;
    if (family != AF_INET && family != AF_INET6)
        return 0;
    long type = sock_member(SM_TYPE, sock);
    long proto = type == -1 ? -1 : sock_member(SM_PROTO, sock);
    if (proto == -1 && PyErr_Occurred())
        return -1;
    if (type != SOCK_STREAM || proto != IPPROTO_TCP)
        return 0;
    int one = 1;
    if (setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return -1;
    }
    return 0;
}

// The stdlib's construction, one function per __init__ it runs (and set_protocol), each
// making that method's stores and calls in its order and calling the one above it where it
// calls super().__init__. Each returns 0 or a new reference, or -1 or nullptr with an
// exception set.

// BaseTransport.__init__: self._extra = extra, a new dict where extra is None. Returns the
// dict stored.
PyObject *base_transport_init(PyObject *self, PyObject *extra)
{
    extra = extra == Py_None ? PyDict_New() : Py_NewRef(extra);
    if (extra && put(self, gi.s_extra, Py_NewRef(extra)) < 0)
        Py_CLEAR(extra);
    return extra;
}

// _FlowControlMixin.__init__: BaseTransport.__init__, then _loop, _protocol_paused and what
// _set_write_buffer_limits() stores. Returns the dict stored as _extra.
PyObject *flow_control_mixin_init(PyObject *self, PyObject *extra, PyObject *loop)
{
    extra = base_transport_init(self, extra);
    if (extra && (put(self, gi.s_loop, Py_NewRef(loop)) < 0 ||
                  put(self, gi.s_protocol_paused, Py_NewRef(Py_False)) < 0 ||
                  put(self, gi.s_high_water, Py_NewRef(gi.high_water)) < 0 ||
                  put(self, gi.s_low_water, Py_NewRef(gi.low_water)) < 0))
        Py_CLEAR(extra);
    return extra;
}

// extra[key] = v, v a new reference (or nullptr: an exception is set): 0, or -1.
int put_item(PyObject *extra, PyObject *key, PyObject *v)
{
    if (!v)
        return -1;
    int r = PyObject_SetItem(extra, key, v);
    Py_DECREF(v);
    return r;
}

// _SelectorSocketTransport.set_protocol (the read callback for the protocol's kind), then
// _SelectorTransport.set_protocol (_protocol, _protocol_connected).
int set_protocol(PyObject *self, PyObject *protocol)
{
    int buffered = PyObject_IsInstance(protocol, gi.buffered);
    if (buffered < 0 ||
        put(self, gi.s_read_ready_cb,
            PyObject_GetAttr(self, buffered ? gi.s_get_buffer_cb : gi.s_data_received_cb)) < 0 ||
        put(self, gi.s_protocol, Py_NewRef(protocol)) < 0 ||
        put(self, gi.s_protocol_connected, Py_NewRef(Py_True)) < 0)
        return -1;
    return 0;
}

// _SelectorTransport.__init__: _FlowControlMixin.__init__, the socket and its addresses in
// _extra, _sock, _sock_fd, set_protocol, the server, the buffer, server._attach and
// loop._transports[fd] = self. Returns _sock_fd, the int object sock.fileno() gave.
PyObject *selector_transport_init(PyObject *self, PyObject *loop, PyObject *sock,
                                  PyObject *protocol, PyObject *extra, PyObject *server)
{
    extra = flow_control_mixin_init(self, extra, loop);
    if (!extra)
        return nullptr;
    int e = put_item(extra, gi.s_socket, PyObject_CallOneArg(gi.transport_socket, sock));
    if (e == 0)
        e = put_item(extra, gi.s_sockname, address_or_none(sock, gi.s_getsockname));
    int has = e < 0 ? -1 : PySequence_Contains(extra, gi.s_peername);
    if (has == 0)
        e = put_item(extra, gi.s_peername, address_or_none(sock, gi.s_getpeername));
    Py_DECREF(extra);
    PyObject *fd_o = nullptr;
    if (has < 0 || e < 0 || put(self, gi.s_sock, Py_NewRef(sock)) < 0 ||
        !(fd_o = PyObject_CallMethodNoArgs(sock, gi.s_fileno)) ||
        put(self, gi.s_sock_fd, Py_NewRef(fd_o)) < 0 ||
        put(self, gi.s_protocol_connected, Py_NewRef(Py_False)) < 0 ||
        set_protocol(self, protocol) < 0 || put(self, gi.s_server, Py_NewRef(server)) < 0 ||
        put(self, gi.s_buffer, PyObject_CallNoArgs(gi.buffer_factory)) < 0 ||
        put(self, gi.s_conn_lost, PyLong_FromLong(0)) < 0 ||
        put(self, gi.s_closing, Py_NewRef(Py_False)) < 0 ||
        (gi.paused == gi.kPausedBase && put(self, gi.s_paused, Py_NewRef(Py_False)) < 0))
        goto fail;
    if (server != Py_None) {
        PyObject *v = gi.attach_self ? PyObject_CallMethodOneArg(server, gi.s_attach, self)
                                     : PyObject_CallMethodNoArgs(server, gi.s_attach);
        if (!v)
            goto fail;
        Py_DECREF(v);
    }
    {
        PyObject *transports = PyObject_GetAttr(loop, gi.s_transports);
        e = transports ? PyObject_SetItem(transports, fd_o, self) : -1;
        Py_XDECREF(transports);
        if (e < 0)
            goto fail;
    }
    return fd_o;
fail:
    Py_XDECREF(fd_o);
    return nullptr;
}

// _SelectorSocketTransport.__init__: _read_ready_cb, _SelectorTransport.__init__, _eof,
// _empty_waiter, _write_ready, _set_nodelay, then loop.call_soon for connection_made, the
// reader and the waiter.
int selector_socket_transport_init(PyObject *self, PyObject *loop, PyObject *sock,
                                   PyObject *protocol, PyObject *waiter, PyObject *extra,
                                   PyObject *server)
{
    if (put(self, gi.s_read_ready_cb, Py_NewRef(Py_None)) < 0)
        return -1;
    PyObject *fd_o = selector_transport_init(self, loop, sock, protocol, extra, server);
    if (!fd_o)
        return -1;
    int r = -1;
    long fd = 0;
    if (put(self, gi.s_eof, Py_NewRef(Py_False)) < 0 ||
        (gi.paused == gi.kPausedSocket && put(self, gi.s_paused, Py_NewRef(Py_False)) < 0) ||
        put(self, gi.s_empty_waiter, Py_NewRef(Py_None)) < 0 ||
        (gi.write_ready &&
         put(self, gi.s_write_ready, PyObject_GetAttr(self, gi.write_ready)) < 0))
        goto out;
    fd = PyLong_AsLong(fd_o);
    if ((fd == -1 && PyErr_Occurred()) || set_nodelay(sock, int(fd)) < 0)
        goto out;
    {
        PyObject *made = PyObject_GetAttr(protocol, gi.s_connection_made);
        PyObject *a[2] = {made, self};
        int e = made ? call_soon(loop, a, 2) : -1;
        Py_XDECREF(made);
        if (e < 0)
            goto out;
        PyObject *add = PyObject_GetAttr(self, gi.s_add_reader);
        PyObject *ready = add ? PyObject_GetAttr(self, gi.s_read_ready) : nullptr;
        PyObject *b[3] = {add, fd_o, ready};
        e = ready ? call_soon(loop, b, 3) : -1;
        Py_XDECREF(add);
        Py_XDECREF(ready);
        if (e < 0)
            goto out;
        PyObject *c[3] = {gi.set_result, waiter, Py_None};
        if (waiter != Py_None && call_soon(loop, c, 3) < 0)
            goto out;
    }
    r = 0;
out:
    Py_DECREF(fd_o);
    return r;
}

// _evloop_init(loop, sock, protocol, waiter=None, extra=None, server=None): the stdlib's
// signature and result (None), or its own __init__ for what this file does not know.
PyObject *stream_init(PyObject *self, PyObject *const *args, Py_ssize_t n, PyObject *kwnames)
{
    PyObject *v[6] = {nullptr, nullptr, nullptr, Py_None, Py_None, Py_None};
    bool ours = gi.cls && Py_IS_TYPE(self, gi.cls) && n <= 6;
    for (Py_ssize_t i = 0; ours && i < n; i++)
        v[i] = args[i];
    Py_ssize_t nkw = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    for (Py_ssize_t k = 0; ours && k < nkw; k++) {
        PyObject *name = PyTuple_GET_ITEM(kwnames, k);
        int i = 0;
        while (i < 6 && name != gi.kw[i] && PyUnicode_Compare(name, gi.kw[i]) != 0)
            i++;
        if (i == 6 || i < n) // unknown or given twice: the stdlib's error
            ours = false;
        else
            v[i] = args[n + k];
    }
    if (!ours || !v[0] || !v[1] || !v[2] || !Py_IS_TYPE(v[1], gi.socket_t))
        return gi.std_init ? call_with_self(gi.std_init, self, args, n, kwnames)
                           : (PyErr_SetString(PyExc_RuntimeError, "_aio_stream_init_setup "
                                                                  "was not called"),
                              nullptr);
    if (selector_socket_transport_init(self, v[0], v[1], v[2], v[3], v[4], v[5]) < 0)
        return nullptr;
    Py_RETURN_NONE;
}

// _aio_stream_init_setup(cls, socket.socket, std_init, TransportSocket, BufferedProtocol,
// buffer_factory, _set_result_unless_cancelled, write_ready, paused, attach_self): what
// evloop/_aio.py found the stdlib's construction to be (write_ready: the name of the method
// _write_ready is bound to, or None; paused: 0, 1 or 2, InitGlobals::paused).
PyObject *stream_init_setup(PyObject *, PyObject *const *a, Py_ssize_t n)
{
    if (n != 10 || !PyType_Check(a[0]) || !PyType_Check(a[1]) ||
        (a[7] != Py_None && !PyUnicode_Check(a[7]))) {
        PyErr_SetString(PyExc_TypeError,
                        "_aio_stream_init_setup(cls, socket, std_init, TransportSocket, "
                        "BufferedProtocol, buffer_factory, set_result, write_ready, paused, "
                        "attach_self)");
        return nullptr;
    }
    long paused = PyLong_AsLong(a[8]);
    int attach_self = PyObject_IsTrue(a[9]);
    if ((paused == -1 && PyErr_Occurred()) || attach_self < 0)
        return nullptr;
    if (paused < gi.kPausedNone || paused > gi.kPausedSocket) {
        PyErr_SetString(PyExc_ValueError, "_aio_stream_init_setup: paused is 0, 1 or 2");
        return nullptr;
    }
    Py_XSETREF(gi.cls, reinterpret_cast<PyTypeObject *>(Py_NewRef(a[0])));
    Py_XSETREF(gi.socket_t, reinterpret_cast<PyTypeObject *>(Py_NewRef(a[1])));
    Py_XSETREF(gi.std_init, Py_NewRef(a[2]));
    Py_XSETREF(gi.transport_socket, Py_NewRef(a[3]));
    Py_XSETREF(gi.buffered, Py_NewRef(a[4]));
    Py_XSETREF(gi.buffer_factory, Py_NewRef(a[5]));
    Py_XSETREF(gi.set_result, Py_NewRef(a[6]));
    Py_XSETREF(gi.write_ready, a[7] == Py_None ? nullptr : Py_NewRef(a[7]));
    gi.paused = decltype(gi.paused)(paused);
    gi.attach_self = attach_self;
    Py_RETURN_NONE;
}

PyMethodDef stream_init_setup_def = {
    "_aio_stream_init_setup", EVLOOP_FASTKW(stream_init_setup), METH_FASTCALL,
    "_aio_stream_init_setup(...): the stdlib's stream transport construction, as found."};

int register_stream_init(PyObject *m)
{
    const Name names[] = {{&gi.s_read_ready_cb, "_read_ready_cb"},
                          {&gi.s_extra, "_extra"},
                          {&gi.s_loop, "_loop"},
                          {&gi.s_protocol_paused, "_protocol_paused"},
                          {&gi.s_high_water, "_high_water"},
                          {&gi.s_low_water, "_low_water"},
                          {&gi.s_socket, "socket"},
                          {&gi.s_sockname, "sockname"},
                          {&gi.s_peername, "peername"},
                          {&gi.s_getsockname, "getsockname"},
                          {&gi.s_getpeername, "getpeername"},
                          {&gi.s_sock, "_sock"},
                          {&gi.s_fileno, "fileno"},
                          {&gi.s_sock_fd, "_sock_fd"},
                          {&gi.s_protocol_connected, "_protocol_connected"},
                          {&gi.s_get_buffer_cb, "_read_ready__get_buffer"},
                          {&gi.s_data_received_cb, "_read_ready__data_received"},
                          {&gi.s_protocol, "_protocol"},
                          {&gi.s_server, "_server"},
                          {&gi.s_buffer, "_buffer"},
                          {&gi.s_conn_lost, "_conn_lost"},
                          {&gi.s_closing, "_closing"},
                          {&gi.s_paused, "_paused"},
                          {&gi.s_attach, "_attach"},
                          {&gi.s_transports, "_transports"},
                          {&gi.s_eof, "_eof"},
                          {&gi.s_empty_waiter, "_empty_waiter"},
                          {&gi.s_write_ready, "_write_ready"},
                          {&gi.s_call_soon, "call_soon"},
                          {&gi.s_connection_made, "connection_made"},
                          {&gi.s_add_reader, "_add_reader"},
                          {&gi.s_read_ready, "_read_ready"},
                          {&gi.kw[0], "loop"},
                          {&gi.kw[1], "sock"},
                          {&gi.kw[2], "protocol"},
                          {&gi.kw[3], "waiter"},
                          {&gi.kw[4], "extra"},
                          {&gi.kw[5], "server"}};
    if (intern_names(names) < 0 || !(gi.high_water = PyLong_FromLong(64 * 1024)) ||
        !(gi.low_water = PyLong_FromLong(64 * 1024 / 4)))
        return -1;
    return add_function(m, &stream_init_setup_def);
}

} // namespace aio
