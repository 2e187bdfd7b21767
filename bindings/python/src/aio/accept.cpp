// A server's accept path in C (_AioCore._accept_connection): what the listening socket's
// reader runs when connections wait, for a plain socket.socket of AF_INET or AF_INET6
// without TLS, outside debug mode. Per connection, as the stdlib's _accept_connection and
// _accept_connection2 do, less the task between them:
//  - accept4 with SOCK_CLOEXEC | SOCK_NONBLOCK (the stdlib: accept, then setblocking(False),
//    one more syscall), the peer address built as socket.accept builds it;
//  - a socket.socket on the fd, made non-blocking as the stdlib leaves it;
//  - in a copy of the current context (the stdlib's task runs in one): protocol_factory(),
//    then self._make_socket_transport(conn, protocol, waiter=None, extra={"peername": addr},
//    server=server).
// No task and no waiter: the stdlib's task only awaits a waiter that the transport sets
// after connection_made, and outside debug mode it drops any exception (so does this). So the
// protocol is made in the iteration that accepts, not the next, and connection_made runs one
// iteration later instead of two. A task cancelled while it awaits (asyncio.run's end
// cancels every task) closes its transport in the stdlib; here there is no such task.
// A round's accepts come first, in batches of 64, and then their connections are made (as
// the stdlib's round comes before its tasks run): a factory that closes the server neither
// cuts the round short nor has the next accept meet a closed or reused fd. Accept errors are
// handled as the stdlib's: nothing waiting ends the round, EINTR runs the signal handlers,
// out of descriptors or memory calls evloop/_aio.py's _evloop_accept_failed (which rests the
// listener) and the round goes on, any other error goes up for the loop to log. Anything
// else (TLS, debug mode, another socket class or family, an overridden _accept_connection2,
// no accept4) is the stdlib's _accept_connection, called as it is.
#include "aio.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#ifndef SOCK_NONBLOCK // no accept4 (macOS): accept_nb() sends every call the stdlib's way
#define SOCK_NONBLOCK 0
#endif

namespace aio {

constexpr int kBatch = 64; // connections accepted before their protocols are made

struct Accepted {
    int fd;
    struct sockaddr_storage ss;
};

struct AcceptGlobals {
    PyTypeObject *socket_t = nullptr; // socket.socket
    PyObject *members[3] = {}; // _socket.socket's family, type and proto, by SockMember
    PyObject *std_accept = nullptr;  // BaseSelectorEventLoop._accept_connection
    PyObject *std_accept2 = nullptr; // BaseSelectorEventLoop._accept_connection2
    PyObject *s_fileno, *s_accept2, *s_accept_failed, *s_make_transport, *s_peername;
    PyObject *kw_transport; // ("waiter", "extra", "server")
};
AcceptGlobals ga;

long sock_member(SockMember which, PyObject *sock)
{
    PyObject *desc = ga.members[which];
    if (!desc) {
        PyErr_SetString(PyExc_RuntimeError, "_aio_accept_setup was not called");
        return -1;
    }
    PyObject *v = Py_TYPE(desc)->tp_descr_get(desc, sock, nullptr);
    if (!v)
        return -1;
    long r = PyLong_AsLong(v);
    Py_DECREF(v);
    return r;
}

// sock.fileno(): the fd, -1 once closed, or -1 with an exception set.
long sock_fileno(PyObject *sock)
{
    PyObject *f = PyObject_CallMethodNoArgs(sock, ga.s_fileno);
    long fd = f ? PyLong_AsLong(f) : -1;
    Py_XDECREF(f);
    return fd;
}

// The peer address as socket.accept returns it for AF_INET and AF_INET6 (None for none): a
// new reference, or nullptr with an exception set.
PyObject *peer_address(const struct sockaddr_storage *ss)
{
    char host[INET6_ADDRSTRLEN];
    if (ss->ss_family == AF_INET) {
        const auto *a = reinterpret_cast<const struct sockaddr_in *>(ss);
        if (!inet_ntop(AF_INET, &a->sin_addr, host, sizeof(host)))
            return PyErr_SetFromErrno(PyExc_OSError);
        return Py_BuildValue("(si)", host, int(ntohs(a->sin_port)));
    }
    if (ss->ss_family != AF_INET6) // no address (socket.accept says None too)
        Py_RETURN_NONE;
    const auto *a = reinterpret_cast<const struct sockaddr_in6 *>(ss);
    if (!inet_ntop(AF_INET6, &a->sin6_addr, host, sizeof(host)))
        return PyErr_SetFromErrno(PyExc_OSError);
    return Py_BuildValue("(siII)", host, int(ntohs(a->sin6_port)),
                         unsigned(ntohl(a->sin6_flowinfo)), unsigned(a->sin6_scope_id));
}

// accept4(lfd, SOCK_CLOEXEC | SOCK_NONBLOCK) where there is one; elsewhere -1 with ENOSYS.
int accept_nb(int lfd, struct sockaddr_storage *ss)
{
#if defined(__linux__) || defined(__FreeBSD__)
    socklen_t len = sizeof(*ss);
    return accept4(lfd, reinterpret_cast<struct sockaddr *>(ss), &len,
                   SOCK_CLOEXEC | SOCK_NONBLOCK);
#else
    (void)lfd;
    (void)ss;
    errno = ENOSYS;
    return -1;
#endif
}

// Whether self._accept_connection2 is the stdlib's (a subclass or a test may replace it, and
// then expects it called): 1, 0, or -1 with an exception set.
int stdlib_accept2(PyObject *me)
{
    PyObject *m = PyObject_GetAttr(me, ga.s_accept2);
    if (!m)
        return -1;
    int r = PyMethod_Check(m) && PyMethod_GET_FUNCTION(m) == ga.std_accept2 &&
            PyMethod_GET_SELF(m) == me;
    Py_DECREF(m);
    return r;
}

// One accepted connection, fd of family/type/proto from the address ss: its socket, protocol
// and transport, in a copy of the current context. 0, or -1 with SystemExit or
// KeyboardInterrupt set (any other error is dropped, as the stdlib's task drops it outside
// debug mode, and the socket is left to the collector, which closes it).
int accept_one(PyObject *me, PyObject *factory, PyObject *server, int fd, long family, long type,
               long proto, const struct sockaddr_storage *ss)
{
    PyObject *addr = peer_address(ss);
    PyObject *conn = nullptr;
    if (addr) {
        PyObject *a[4] = {PyLong_FromLong(family), PyLong_FromLong(type | SOCK_NONBLOCK),
                          PyLong_FromLong(proto), PyLong_FromLong(fd)};
        if (a[0] && a[1] && a[2] && a[3])
            conn = PyObject_Vectorcall(reinterpret_cast<PyObject *>(ga.socket_t), a, 4,
                                       nullptr);
        for (PyObject *o : a)
            Py_XDECREF(o);
    }
    if (!conn) {
        close(fd); // not yet a socket's: as socket.accept, which closes it on failure
        Py_XDECREF(addr);
        return -1; // an exception here is the accept's, which the stdlib lets go up too
    }
    PyObject *ctx = PyContext_CopyCurrent();
    int r = ctx ? PyContext_Enter(ctx) : -1;
    if (r == 0) {
        PyObject *protocol = PyObject_CallNoArgs(factory);
        PyObject *extra = protocol ? PyDict_New() : nullptr;
        PyObject *tr = nullptr;
        if (extra && PyDict_SetItem(extra, ga.s_peername, addr) == 0) {
            PyObject *a[6] = {me, conn, protocol, Py_None, extra, server};
            tr = PyObject_VectorcallMethod(ga.s_make_transport, a,
                                           3 | PY_VECTORCALL_ARGUMENTS_OFFSET, ga.kw_transport);
        }
        Py_XDECREF(tr);
        Py_XDECREF(extra);
        Py_XDECREF(protocol);
        if (!tr && (PyErr_ExceptionMatches(PyExc_SystemExit) ||
                    PyErr_ExceptionMatches(PyExc_KeyboardInterrupt)))
            r = -1;
        else
            PyErr_Clear();
        if (PyContext_Exit(ctx) < 0)
            r = -1;
    }
    Py_XDECREF(ctx);
    Py_DECREF(conn);
    Py_DECREF(addr);
    return r;
}

// _accept_connection(protocol_factory, sock, sslcontext=None, server=None, backlog=100, ...)
PyObject *accept_connection(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (n < 2 || n > 7 || self->debug || !ga.socket_t || !Py_IS_TYPE(a[1], ga.socket_t) ||
        (n > 2 && a[2] != Py_None) || (n > 4 && !PyLong_CheckExact(a[4])))
        return call_with_self(ga.std_accept, me, a, n);
    PyObject *sock = a[1], *server = n > 3 ? a[3] : Py_None;
    long backlog = n > 4 ? PyLong_AsLong(a[4]) : 100;
    long family = sock_member(SM_FAMILY, sock);
    long type = family < 0 ? -1 : sock_member(SM_TYPE, sock);
    long proto = type < 0 ? -1 : sock_member(SM_PROTO, sock);
    if (backlog == -1 || proto == -1) {
        if (PyErr_Occurred())
            return nullptr;
    }
    int std2 = stdlib_accept2(me);
    if (std2 < 0)
        return nullptr;
    if ((family != AF_INET && family != AF_INET6) || !std2)
        return call_with_self(ga.std_accept, me, a, n);
    long lfd = sock_fileno(sock);
    if (lfd < 0)
        return PyErr_Occurred() ? nullptr : call_with_self(ga.std_accept, me, a, n);
    for (long i = 0; i < backlog;) {
        // Accept a batch, then make its connections: as in the stdlib, where every accept of
        // the round comes before any protocol_factory (a task's, run later), a factory that
        // closes the server does not cut the round short, and the fd is not reused under us.
        Accepted got[kBatch];
        int k = 0, err = 0;
        while (k < kBatch && i < backlog) {
            int fd = accept_nb(int(lfd), &got[k].ss);
            if (fd >= 0) {
                got[k++].fd = fd;
                i++;
            } else if (errno != EINTR) {
                err = errno;
                break;
            } else if (PyErr_CheckSignals() < 0) { // as socket.accept: handlers, then again
                err = -1;
                break;
            }
        }
        for (int j = 0; j < k; j++) {
            if (accept_one(me, a[0], server, got[j].fd, family, type, proto, &got[j].ss) < 0) {
                while (++j < k) // SystemExit or KeyboardInterrupt goes up: these are not served
                    close(got[j].fd);
                return nullptr;
            }
        }
        if (err == -1)
            return nullptr;
        if (err == ENOSYS && i == 0) // no accept4 here
            return call_with_self(ga.std_accept, me, a, n);
        if (err == 0) {
            if (sock_fileno(sock) != lfd) // the server closed meanwhile
                return PyErr_Occurred() ? nullptr : Py_NewRef(Py_None);
            continue;
        }
        if (would_block(err) || err == ECONNABORTED)
            Py_RETURN_NONE;
        // As the stdlib: out of descriptors or memory, the listener rests a while (the Python
        // side, _evloop_accept_failed) and the round goes on; any other error goes up, for
        // the loop to log.
        errno = err;
        PyErr_SetFromErrno(PyExc_OSError);
        if (err != EMFILE && err != ENFILE && err != ENOBUFS && err != ENOMEM)
            return nullptr;
        i++; // a try, as each pass of the stdlib's range(backlog)
        PyObject *argv[9] = {me, fetch_exception()}; // self._evloop_accept_failed(exc, *a)
        for (Py_ssize_t q = 0; q < n; q++)
            argv[q + 2] = a[q];
        PyObject *r = PyObject_VectorcallMethod(ga.s_accept_failed, argv, size_t(n + 2), nullptr);
        Py_DECREF(argv[1]);
        if (!r)
            return nullptr;
        Py_DECREF(r);
    }
    Py_RETURN_NONE;
}

PyMethodDef accept_methods[] = {
    {"_accept_connection", EVLOOP_FASTKW(accept_connection), METH_FASTCALL,
     "The listening socket's reader: accepts the connections waiting (accept.cpp)."},
    {nullptr, nullptr, 0, nullptr},
};

// _aio_accept_setup(socket.socket, _socket.socket, _accept_connection, _accept_connection2):
// the class the fast path takes, the base whose members it reads, and the stdlib's methods.
PyObject *accept_setup(PyObject *, PyObject *const *a, Py_ssize_t n)
{
    if (n != 4 || !PyType_Check(a[0]) || !PyType_Check(a[1])) {
        PyErr_SetString(PyExc_TypeError, "_aio_accept_setup(socket, _socket.socket, "
                                         "accept_connection, accept_connection2)");
        return nullptr;
    }
    PyObject *dict = reinterpret_cast<PyTypeObject *>(a[1])->tp_dict;
    PyObject *d[3] = {PyDict_GetItemString(dict, "family"), PyDict_GetItemString(dict, "type"),
                      PyDict_GetItemString(dict, "proto")};
    for (PyObject *o : d) {
        if (!o || !Py_TYPE(o)->tp_descr_get) {
            PyErr_SetString(PyExc_TypeError, "_socket.socket has no family, type or proto");
            return nullptr;
        }
    }
    Py_XSETREF(ga.socket_t, reinterpret_cast<PyTypeObject *>(Py_NewRef(a[0])));
    for (int i = 0; i < 3; i++)
        Py_XSETREF(ga.members[i], Py_NewRef(d[i]));
    Py_XSETREF(ga.std_accept, Py_NewRef(a[2]));
    Py_XSETREF(ga.std_accept2, Py_NewRef(a[3]));
    Py_RETURN_NONE;
}

PyMethodDef accept_setup_def = {"_aio_accept_setup", EVLOOP_FASTKW(accept_setup), METH_FASTCALL,
                                "_aio_accept_setup(socket.socket, _socket.socket, "
                                "_accept_connection, _accept_connection2)."};

// Adds _accept_connection to _AioCore and _aio_accept_setup to module m.
int register_accept(PyObject *m)
{
    PyObject *waiter = nullptr, *extra = nullptr, *server = nullptr;
    const Name names[] = {{&ga.s_fileno, "fileno"},
                          {&ga.s_accept2, "_accept_connection2"},
                          {&ga.s_accept_failed, "_evloop_accept_failed"},
                          {&ga.s_make_transport, "_make_socket_transport"},
                          {&ga.s_peername, "peername"},
                          {&waiter, "waiter"},
                          {&extra, "extra"},
                          {&server, "server"}};
    if (intern_names(names) < 0)
        return -1;
    ga.kw_transport = PyTuple_Pack(3, waiter, extra, server);
    Py_DECREF(waiter);
    Py_DECREF(extra);
    Py_DECREF(server);
    if (!ga.kw_transport || add_core_methods(accept_methods) < 0)
        return -1;
    return add_function(m, &accept_setup_def);
}

} // namespace aio
