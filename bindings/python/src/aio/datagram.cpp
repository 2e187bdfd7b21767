// The native read path of evloop's datagram transport (evloop/_aio.py, docs/asyncio.md):
// the type _AioDatagramBase, a C base with no fields of its own that evloop's UDP transport
// puts in front of the stdlib's asyncio.selector_events._SelectorDatagramTransport (class
// _DatagramTransport(_AioDatagramBase, _SelectorDatagramTransport)), for AF_INET and
// AF_INET6 sockets only. It overrides _read_ready, and works on the stdlib transport's own
// attributes (_conn_lost, _sock_fd, _protocol, max_size, _address, _buffer, _extra, _sock:
// slots of evloop's class but max_size, slots.cpp), so every other method is the
// stdlib's:
// - _read_ready: recvfrom in C into the reusable receive buffer of transport.cpp, then one
//   bytes of the datagram's size and the address as socket.recvfrom makes it, and
//   protocol.datagram_received(data, addr) called from C; errors as the stdlib's
//   (error_received for an OSError, _fatal_error for the rest, SystemExit and
//   KeyboardInterrupt up). A max_size past that buffer: the stdlib's method.
// - sendto: the stdlib's send-at-once case in C (dg_sendto below); the rest is its method.
// Why: the stdlib's sock.recvfrom(max_size) allocates a bytes of max_size (256 KiB) per
// datagram and shrinks it; glibc serves that with mmap, mremap and munmap until its dynamic
// threshold moves past it, which depends on the process's history, so a fresh process pays
// those syscalls per datagram (tournament/results/asyncio-log.md, "Datagrams"). It uses
// transport.cpp's helpers (aio.h).
#include "aio.h"

#include <arpa/inet.h>
#include <cerrno>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>

namespace aio {

struct DatagramGlobals {
    PyObject *std_read_ready = nullptr; // _SelectorDatagramTransport._read_ready
    PyObject *std_sendto = nullptr;     // _SelectorDatagramTransport.sendto
    PyObject *base_type = nullptr;      // _AioDatagramBase
    PyObject *s_max_size, *s_datagram_received, *s_error_received, *s_peername, *s_sendto,
        *m_read_fatal, *m_write_fatal;
};
DatagramGlobals gd;

// An IPv4 address in dotted decimal, as inet_ntop writes it (glibc's goes through sprintf,
// most of the address's cost under callgrind). out holds 16.
size_t format_ipv4(const in_addr &a, char *out)
{
    const auto *b = reinterpret_cast<const unsigned char *>(&a.s_addr); // network order
    char *p = out;
    for (int i = 0; i < 4; i++) {
        unsigned v = b[i];
        if (v >= 100)
            *p++ = char('0' + v / 100);
        if (v >= 10)
            *p++ = char('0' + v / 10 % 10);
        *p++ = char('0' + v % 10);
        if (i < 3)
            *p++ = '.';
    }
    return size_t(p - out);
}

// An ASCII str of s[0:n]; a new reference or nullptr.
PyObject *ascii_str(const char *s, size_t n)
{
    PyObject *u = PyUnicode_New(Py_ssize_t(n), 127);
    if (u)
        std::memcpy(PyUnicode_DATA(u), s, n);
    return u;
}

// The address as socket.recvfrom gives it (CPython's makesockaddr): None for an empty one,
// (host, port) for AF_INET, (host, port, flowinfo, scope_id) for AF_INET6 (host as
// inet_ntop writes it), else (family, sa_data). A new reference, or nullptr with an
// exception set.
PyObject *sockaddr_object(const sockaddr_storage &ss, socklen_t len)
{
    if (len == 0)
        Py_RETURN_NONE;
    if (ss.ss_family == AF_INET) {
        const auto *a = reinterpret_cast<const sockaddr_in *>(&ss);
        char host[16];
        PyObject *h = ascii_str(host, format_ipv4(a->sin_addr, host));
        PyObject *port = h ? PyLong_FromLong(ntohs(a->sin_port)) : nullptr;
        PyObject *t = port ? PyTuple_Pack(2, h, port) : nullptr;
        Py_XDECREF(h);
        Py_XDECREF(port);
        return t;
    }
    if (ss.ss_family == AF_INET6) {
        const auto *a = reinterpret_cast<const sockaddr_in6 *>(&ss);
        char host[INET6_ADDRSTRLEN];
        if (!inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof host))
            return PyErr_SetFromErrno(PyExc_OSError);
        return Py_BuildValue("(siII)", host, int(ntohs(a->sin6_port)),
                             unsigned(ntohl(a->sin6_flowinfo)), unsigned(a->sin6_scope_id));
    }
    const auto *sa = reinterpret_cast<const sockaddr *>(&ss);
    return Py_BuildValue("(iy#)", int(sa->sa_family), sa->sa_data, Py_ssize_t(sizeof sa->sa_data));
}

// recvfrom without blocking, retried on EINTR after the signal handlers ran (recv_nb's rules):
// >= 0, -1 with errno set, or -2 with a Python exception set.
Py_ssize_t recvfrom_nb(int fd, char *buf, Py_ssize_t len, sockaddr_storage *ss, socklen_t *sl)
{
    for (;;) {
        *sl = sizeof *ss;
        ssize_t n = ::recvfrom(fd, buf, size_t(len), MSG_DONTWAIT, reinterpret_cast<sockaddr *>(ss),
                               sl);
        if (n >= 0 || errno != EINTR)
            return Py_ssize_t(n);
        if (PyErr_CheckSignals() < 0)
            return -2;
    }
}

// The exception set now, raised inside one of the stdlib's try blocks around a socket call,
// through its except clauses after the first: an OSError goes to
// self._protocol.error_received(exc); SystemExit and KeyboardInterrupt up; anything else to
// self._fatal_error(exc, msg). None, or nullptr with what went up.
PyObject *op_failed(PyObject *self, PyObject *msg)
{
    if (!PyErr_ExceptionMatches(PyExc_OSError))
        return fatal(self, msg);
    PyObject *exc = fetch_exception();
    if (!exc)
        Py_RETURN_NONE;
    PyObject *proto = slot_get(self, S_PROTOCOL);
    PyObject *r = nullptr;
    if (proto) {
        PyObject *a[2] = {proto, exc};
        r = call_handling(exc, gd.s_error_received, a, 2);
        Py_DECREF(proto);
    }
    Py_DECREF(exc);
    if (!r)
        return nullptr;
    Py_DECREF(r);
    Py_RETURN_NONE;
}

// The same around sock.recvfrom, whose first except clause lets BlockingIOError and
// InterruptedError pass.
PyObject *read_failed(PyObject *self)
{
    if (PyErr_ExceptionMatches(PyExc_BlockingIOError) ||
        PyErr_ExceptionMatches(PyExc_InterruptedError)) {
        PyErr_Clear();
        Py_RETURN_NONE;
    }
    return op_failed(self, gd.m_read_fatal);
}

// _read_ready: one datagram, as the stdlib's (above).
PyObject *dg_read_ready(PyObject *self, PyObject *)
{
    int lost = attr_true(self, S_CONN_LOST);
    if (lost)
        return lost < 0 ? nullptr : Py_NewRef(Py_None);
    PyObject *ms = PyObject_GetAttr(self, gd.s_max_size); // inside the stdlib's try
    if (!ms)
        return read_failed(self);
    Py_ssize_t max_size = PyNumber_AsSsize_t(ms, PyExc_OverflowError);
    Py_DECREF(ms);
    if (max_size == -1 && PyErr_Occurred())
        return read_failed(self);
    if (max_size > kRecvBuf) { // the stdlib's way: a bytes of max_size
        PyObject *a[1] = {self};
        return PyObject_Vectorcall(gd.std_read_ready, a, 1, nullptr);
    }
    if (max_size < 0) { // as sock.recvfrom says it
        PyErr_SetString(PyExc_ValueError, "negative buffersize in recvfrom");
        return read_failed(self);
    }
    int fd = sock_fd(self);
    if (fd == -2)
        return read_failed(self);
    char *rbuf = recv_buffer();
    if (!rbuf) {
        PyErr_NoMemory();
        return read_failed(self);
    }
    sockaddr_storage ss;
    socklen_t sl;
    Py_ssize_t n = recvfrom_nb(fd, rbuf, max_size, &ss, &sl);
    if (n == -1 && would_block(errno))
        Py_RETURN_NONE;
    if (n == -1)
        PyErr_SetFromErrno(PyExc_OSError);
    if (n < 0)
        return read_failed(self);
    PyObject *data = PyBytes_FromStringAndSize(rbuf, n);
    PyObject *addr = data ? sockaddr_object(ss, sl) : nullptr;
    if (!addr) {
        Py_XDECREF(data);
        return read_failed(self); // as from inside recvfrom
    }
    PyObject *proto = slot_get(self, S_PROTOCOL);
    PyObject *r = nullptr;
    if (proto) {
        PyObject *a[3] = {proto, data, addr};
        r = PyObject_VectorcallMethod(gd.s_datagram_received, a,
                                      3 | PY_VECTORCALL_ARGUMENTS_OFFSET, nullptr);
        Py_DECREF(proto);
    }
    Py_DECREF(data);
    Py_DECREF(addr);
    if (!r)
        return nullptr; // outside the stdlib's try: up to the handle, as there
    Py_DECREF(r);
    Py_RETURN_NONE;
}

// The stdlib's sendto(data, addr), for what the fast path leaves.
PyObject *std_sendto(PyObject *self, PyObject *data, PyObject *addr)
{
    PyObject *a[3] = {self, data, addr};
    return PyObject_Vectorcall(gd.std_sendto, a, 3, nullptr);
}

// dg_sendto's fast path, to `to` (addr, or the endpoint's remote address for addr None); what
// it leaves goes to the stdlib's sendto(data, addr).
PyObject *send_now(PyObject *self, PyObject *data, PyObject *addr, PyObject *to)
{
    int t = attr_true(self, S_CONN_LOST);
    if (t == 0)
        t = socket_gone(self);
    if (t != 0)
        return t < 0 ? nullptr : std_sendto(self, data, addr);
    PyObject *b = slot_get(self, S_BUFFER);
    if (!b)
        return nullptr;
    Py_ssize_t blen = PyObject_Size(b);
    Py_DECREF(b);
    if (blen != 0)
        return blen < 0 ? nullptr : std_sendto(self, data, addr);
    PyObject *extra = slot_get(self, S_EXTRA);
    PyObject *peer =
        extra && PyDict_CheckExact(extra) ? PyDict_GetItemWithError(extra, gd.s_peername) : nullptr;
    int connected = peer ? PyObject_IsTrue(peer) : -1;
    Py_XDECREF(extra);
    if (connected < 0) { // not laid out as the stdlib's: its code says what happens
        PyErr_Clear();
        return std_sendto(self, data, addr);
    }
    PyObject *r;
    if (connected) { // self._sock.send(data)
        Py_buffer view;
        int fd = sock_fd(self);
        if (fd == -2 || PyObject_GetBuffer(data, &view, PyBUF_SIMPLE) < 0)
            return fatal(self, gd.m_write_fatal); // as sock.send's own refusal of data
        Py_ssize_t n = send_nb(fd, static_cast<const char *>(view.buf), view.len);
        int e = errno;
        PyBuffer_Release(&view);
        if (n == -1 && would_block(e))
            return std_sendto(self, data, addr);
        if (n == -1) {
            errno = e;
            PyErr_SetFromErrno(PyExc_OSError);
        }
        r = n >= 0 ? Py_NewRef(Py_None) : nullptr;
    } else { // self._sock.sendto(data, addr)
        PyObject *sock = slot_get(self, S_SOCK);
        r = nullptr;
        if (sock) {
            PyObject *a[3] = {sock, data, to};
            r = PyObject_VectorcallMethod(gd.s_sendto, a, 3 | PY_VECTORCALL_ARGUMENTS_OFFSET,
                                          nullptr);
            Py_DECREF(sock);
        }
        if (!r && (PyErr_ExceptionMatches(PyExc_BlockingIOError) ||
                   PyErr_ExceptionMatches(PyExc_InterruptedError))) {
            PyErr_Clear();
            return std_sendto(self, data, addr);
        }
    }
    if (r) {
        Py_DECREF(r);
        Py_RETURN_NONE;
    }
    return op_failed(self, gd.m_write_fatal);
}

// sendto(data, addr=None): the stdlib's "send it right away" case in C (bytes, bytearray or a
// memoryview, not empty; addr None, or no remote address of the endpoint's own; the
// connection not lost; nothing buffered):
// send(2) on a connected socket, else sock.sendto(data, addr) (the socket module parses the
// address); OSError to the protocol's error_received, the rest to _fatal_error, as the
// stdlib's. Anything else, and a send that would block, through the stdlib's sendto (which
// tries once more, then buffers and starts the writer).
PyObject *dg_sendto(PyObject *self, PyObject *const *args, Py_ssize_t nargs, PyObject *kwnames)
{
    Py_ssize_t nk = kwnames ? PyTuple_GET_SIZE(kwnames) : 0;
    if (nargs < 1 || nargs + nk > 2 ||
        (nk == 1 && PyUnicode_CompareWithASCIIString(PyTuple_GET_ITEM(kwnames, 0), "addr") != 0))
        return call_with_self(gd.std_sendto, self, args, nargs, kwnames); // its TypeError
    PyObject *data = args[0];
    PyObject *addr = nargs + nk == 2 ? args[1] : Py_None;
    if (!PyBytes_Check(data) && !PyByteArray_Check(data) && !PyMemoryView_Check(data))
        return std_sendto(self, data, addr);
    Py_ssize_t len = PyObject_Size(data);
    if (len <= 0) // empty (3.11 and 3.12 send nothing, 3.13 an empty datagram), or an error
        return len < 0 ? nullptr : std_sendto(self, data, addr);
    PyObject *address = slot_get(self, S_ADDRESS);
    if (!address)
        return nullptr;
    int has_address = PyObject_IsTrue(address);
    PyObject *r;
    if (has_address < 0)
        r = nullptr;
    else if (has_address && addr != Py_None) // compared (and refused) by the stdlib's code
        r = std_sendto(self, data, addr);
    else // to the endpoint's own remote address if it has one, else to addr
        r = send_now(self, data, addr, has_address ? address : addr);
    Py_DECREF(address);
    return r;
}

PyMethodDef datagram_methods[] = {
    {"_read_ready", dg_read_ready, METH_NOARGS,
     "The socket is readable: recvfrom in C, then protocol.datagram_received(data, addr); as "
     "the stdlib's."},
    {"sendto", EVLOOP_FASTKW(dg_sendto), METH_FASTCALL | METH_KEYWORDS,
     "sendto(data, addr=None): sent at once in C when nothing is buffered; else the stdlib's."},
    {nullptr, nullptr, 0, nullptr},
};

// _aio_datagram_setup(read_ready, sendto, cls): the stdlib datagram transport's methods, for
// what the fast paths leave, and evloop's datagram transport class, whose hot attributes
// are slots (slots.cpp).
PyObject *datagram_setup(PyObject *, PyObject *const *args, Py_ssize_t nargs)
{
    if (nargs != 3) {
        PyErr_SetString(PyExc_TypeError,
                        "_aio_datagram_setup(read_ready, sendto, cls): 3 arguments");
        return nullptr;
    }
    if (!slots_set_class(SC_DATAGRAM, args[2], gd.base_type))
        return nullptr;
    Py_XSETREF(gd.std_read_ready, Py_NewRef(args[0]));
    Py_XSETREF(gd.std_sendto, Py_NewRef(args[1]));
    Py_RETURN_NONE;
}

PyMethodDef datagram_setup_def = {
    "_aio_datagram_setup", EVLOOP_FASTKW(datagram_setup), METH_FASTCALL,
    "_aio_datagram_setup(_SelectorDatagramTransport._read_ready, ...sendto, "
    "_DatagramTransport)."};

// Registers _AioDatagramBase and _aio_datagram_setup in module m.
int register_datagram(PyObject *m)
{
    const Name names[] = {{&gd.s_max_size, "max_size"},
                          {&gd.s_datagram_received, "datagram_received"},
                          {&gd.s_error_received, "error_received"},
                          {&gd.s_peername, "peername"},
                          {&gd.s_sendto, "sendto"},
                          {&gd.m_read_fatal, "Fatal read error on datagram transport"},
                          {&gd.m_write_fatal, "Fatal write error on datagram transport"}};
    if (intern_names(names) < 0)
        return -1;
    PyObject *base = add_base_type(
        m, "evloop._asyncio_core._AioDatagramBase",
        "The native read and send-at-once paths of evloop's datagram transport.",
        datagram_methods);
    if (!base)
        return -1;
    gd.base_type = Py_NewRef(base);
    return add_function(m, &datagram_setup_def);
}

} // namespace aio
