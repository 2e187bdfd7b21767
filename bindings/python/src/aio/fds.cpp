// The asyncio loop's fd registry in C: _add_reader, _add_writer, _remove_reader and
// _remove_writer of evloop.EventLoop (methods of _AioCore), the stdlib's selector_events
// methods of those names done without their Python frames: the handle made as
// events.Handle(callback, args, loop, None) makes it, the SelectorKey (fileobj, fd, events,
// (reader, writer)) stored in the _EvloopSelector's dict, the fd added to, changed on or
// removed from evloop's poller directly. Anything else (an fd given as a file object or out
// of range, a loop._selector that is not the loop's own, a key whose data is not a pair, a
// selector closed under the loop) goes to the stdlib's Python method, unchanged.
// tournament/results/asyncio-log.md has the measurements.
#include "aio.h"

#include <cerrno>

#include "evloop.h" // EVLOOP_READABLE, EVLOOP_WRITABLE: the events given to AioOps.io_add

namespace aio {

struct FdGlobals {
    PyTypeObject *key_t = nullptr; // selectors.SelectorKey
    bool key_fast = false;         // a plain tuple subclass: made with tp_alloc, items set
    // the stdlib's BaseSelectorEventLoop methods, for what the fast paths leave
    PyObject *std[4] = {nullptr, nullptr, nullptr, nullptr};
    PyObject *s_cancel = nullptr;
};
FdGlobals gf;

enum { kRead = 1, kWrite = 2 }; // selectors.EVENT_READ, EVENT_WRITE

inline unsigned c_events(long mask)
{
    return ((mask & kRead) ? EVLOOP_READABLE : 0u) | ((mask & kWrite) ? EVLOOP_WRITABLE : 0u);
}

// The fd if the fast paths may take this call: an int in range and loop._selector the loop's
// own; else -1.
int fast_fd(Core *self, PyObject *fdo)
{
    if (!gf.key_t || !PyLong_CheckExact(fdo) || !self->selector || !self->ops ||
        self->selector_attr != self->selector)
        return -1;
    int overflow = 0;
    long fd = PyLong_AsLongAndOverflow(fdo, &overflow);
    return overflow || fd < 0 || fd > INT32_MAX ? -1 : int(fd);
}

// The stdlib's method `which` on (self, *argv).
PyObject *call_std(Core *self, int which, PyObject *const *argv, Py_ssize_t n)
{
    return call_with_self(gf.std[which], reinterpret_cast<PyObject *>(self), argv, n);
}

// SelectorKey(fileobj, fd, events, (reader, writer)); new reference or nullptr.
PyObject *new_key(PyObject *fileobj, PyObject *fdo, long events, PyObject *reader,
                  PyObject *writer)
{
    PyObject *data = PyTuple_Pack(2, reader, writer);
    PyObject *ev = data ? PyLong_FromLong(events) : nullptr;
    if (!ev) {
        Py_XDECREF(data);
        return nullptr;
    }
    if (!gf.key_fast) {
        PyObject *a[4] = {fileobj, fdo, ev, data};
        PyObject *k = PyObject_Vectorcall(reinterpret_cast<PyObject *>(gf.key_t), a, 4, nullptr);
        Py_DECREF(ev);
        Py_DECREF(data);
        return k;
    }
    PyObject *k = gf.key_t->tp_alloc(gf.key_t, 4);
    if (!k) {
        Py_DECREF(ev);
        Py_DECREF(data);
        return nullptr;
    }
    PyTuple_SET_ITEM(k, 0, Py_NewRef(fileobj));
    PyTuple_SET_ITEM(k, 1, Py_NewRef(fdo));
    PyTuple_SET_ITEM(k, 2, ev);
    PyTuple_SET_ITEM(k, 3, data);
    return k;
}

// key's events and (reader, writer), borrowed from key; false if key is not laid out so.
bool parse_key(PyObject *key, long *mask, PyObject **reader, PyObject **writer)
{
    if (!PyTuple_Check(key) || PyTuple_GET_SIZE(key) != 4)
        return false;
    PyObject *ev = PyTuple_GET_ITEM(key, 2), *data = PyTuple_GET_ITEM(key, 3);
    if (!PyLong_CheckExact(ev) || !PyTuple_CheckExact(data) || PyTuple_GET_SIZE(data) != 2)
        return false;
    *mask = PyLong_AsLong(ev);
    if (*mask == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
    }
    *reader = PyTuple_GET_ITEM(data, 0);
    *writer = PyTuple_GET_ITEM(data, 1);
    return true;
}

// Handle.cancel() of a reader or writer replaced or removed.
int cancel_handle(Core *self, PyObject *h)
{
    if (g.fast && !self->debug && Py_IS_TYPE(h, g.handle_t) &&
        slot(h, g.cancelled) == Py_False) {
        PyObject *cb = slot(h, g.callback), *args = slot(h, g.args);
        slot(h, g.cancelled) = Py_NewRef(Py_True);
        slot(h, g.callback) = Py_NewRef(Py_None);
        slot(h, g.args) = Py_NewRef(Py_None);
        Py_DECREF(Py_False);
        Py_XDECREF(cb); // last: a release may run any code
        Py_XDECREF(args);
        return 0;
    }
    PyObject *r = PyObject_CallMethodNoArgs(h, gf.s_cancel);
    Py_XDECREF(r);
    return r ? 0 : -1;
}

// OSError(errno, strerror) for a poller's -errno, as the selector raises it.
PyObject *os_error(int neg)
{
    errno = -neg;
    return PyErr_SetFromErrno(PyExc_OSError);
}

PyObject *add_rw(PyObject *me, PyObject *const *argv, Py_ssize_t n, int which)
{
    Core *self = reinterpret_cast<Core *>(me);
    int fd = n >= 2 ? fast_fd(self, argv[0]) : -1;
    if (fd < 0) // also once closed: loop._selector is None then, and the stdlib raises
        return call_std(self, which, argv, n);
    if (check_closed(self) < 0)
        return nullptr;
    PyObject *args = PyTuple_New(n - 2);
    if (!args)
        return nullptr;
    for (Py_ssize_t i = 2; i < n; i++)
        PyTuple_SET_ITEM(args, i - 2, Py_NewRef(argv[i]));
    PyObject *h = make_handle(self, nullptr, argv[1], args, nullptr);
    if (!h)
        return nullptr;
    long bit = which == kAddReader ? kRead : kWrite;
    PyObject *fdo = argv[0];
    PyObject *key = PyDict_GetItemWithError(self->sel_keys, fdo);
    if (!key && PyErr_Occurred()) {
        Py_DECREF(h);
        return nullptr;
    }
    if (!key) {
        int r = self->ops->io_add(self->raw, fd, c_events(bit));
        if (r == -ESHUTDOWN) { // the selector was closed: its own error, from the stdlib's path
            Py_DECREF(h);
            return call_std(self, which, argv, n);
        }
        if (r < 0) {
            Py_DECREF(h);
            return os_error(r);
        }
        PyObject *fresh = which == kAddReader ? new_key(fdo, fdo, bit, h, Py_None)
                                              : new_key(fdo, fdo, bit, Py_None, h);
        if (!fresh || PyDict_SetItem(self->sel_keys, fdo, fresh) < 0) {
            Py_XDECREF(fresh); // no key: the poller must not keep the fd either
            Py_DECREF(h);
            self->ops->io_remove(self->raw, fd);
            return nullptr;
        }
        Py_DECREF(fresh);
        return h;
    }
    // The fd has a key: its events widened if need be, the handle replaced.
    long mask;
    PyObject *reader, *writer;
    if (!parse_key(key, &mask, &reader, &writer)) {
        Py_DECREF(h);
        return call_std(self, which, argv, n);
    }
    Py_INCREF(key);
    if ((mask | bit) != mask) {
        int r = self->ops->io_modify(self->raw, fd, c_events(mask | bit));
        if (r < 0) {
            Py_DECREF(key);
            Py_DECREF(h);
            return r == -ESHUTDOWN ? call_std(self, which, argv, n) : os_error(r);
        }
    }
    PyObject *old = which == kAddReader ? reader : writer;
    PyObject *fresh =
        which == kAddReader
            ? new_key(PyTuple_GET_ITEM(key, 0), PyTuple_GET_ITEM(key, 1), mask | bit, h, writer)
            : new_key(PyTuple_GET_ITEM(key, 0), PyTuple_GET_ITEM(key, 1), mask | bit, reader, h);
    Py_INCREF(old); // the key dropped below may hold its last reference
    int r = fresh ? PyDict_SetItem(self->sel_keys, fdo, fresh) : -1;
    Py_XDECREF(fresh);
    Py_DECREF(key);
    if (r == 0 && old != Py_None)
        r = cancel_handle(self, old);
    Py_DECREF(old);
    if (r < 0) {
        Py_DECREF(h);
        return nullptr;
    }
    return h;
}

// _remove_reader(fd) / _remove_writer(fd) -> True if a handle was removed.
PyObject *remove_rw(PyObject *me, PyObject *const *argv, Py_ssize_t n, int which)
{
    Core *self = reinterpret_cast<Core *>(me);
    if (n == 1 && self->closed) // the stdlib's first check, before the fd is looked at
        Py_RETURN_FALSE;
    int fd = n == 1 ? fast_fd(self, argv[0]) : -1;
    if (fd < 0)
        return call_std(self, which, argv, n);
    PyObject *fdo = argv[0];
    PyObject *key = PyDict_GetItemWithError(self->sel_keys, fdo);
    if (!key) {
        if (PyErr_Occurred())
            return nullptr;
        Py_RETURN_FALSE;
    }
    long mask;
    PyObject *reader, *writer;
    if (!parse_key(key, &mask, &reader, &writer))
        return call_std(self, which, argv, n);
    Py_INCREF(key);
    long bit = which == kRemoveReader ? kRead : kWrite;
    PyObject *old = Py_NewRef(which == kRemoveReader ? reader : writer);
    int r;
    if (!(mask & ~bit)) {
        r = PyDict_DelItem(self->sel_keys, fdo);
        if (r == 0) // as the selector's unregister: a closed fd has left the poller already
            self->ops->io_remove(self->raw, fd);
    } else {
        r = 0;
        if ((mask & ~bit) != mask) {
            r = self->ops->io_modify(self->raw, fd, c_events(mask & ~bit));
            if (r == -ESHUTDOWN) {
                Py_DECREF(old);
                Py_DECREF(key);
                return call_std(self, which, argv, n);
            }
            if (r < 0)
                os_error(r);
        }
        if (r == 0) {
            PyObject *fresh = which == kRemoveReader
                                  ? new_key(PyTuple_GET_ITEM(key, 0), PyTuple_GET_ITEM(key, 1),
                                            mask & ~bit, Py_None, writer)
                                  : new_key(PyTuple_GET_ITEM(key, 0), PyTuple_GET_ITEM(key, 1),
                                            mask & ~bit, reader, Py_None);
            r = fresh ? PyDict_SetItem(self->sel_keys, fdo, fresh) : -1;
            Py_XDECREF(fresh);
        }
    }
    Py_DECREF(key);
    bool had = old != Py_None;
    if (r == 0 && had)
        r = cancel_handle(self, old);
    Py_DECREF(old);
    if (r < 0)
        return nullptr;
    return PyBool_FromLong(had);
}

PyObject *fds_add_reader(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    return add_rw(me, a, n, kAddReader);
}
PyObject *fds_add_writer(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    return add_rw(me, a, n, kAddWriter);
}
PyObject *fds_remove_reader(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    return remove_rw(me, a, n, kRemoveReader);
}
PyObject *fds_remove_writer(PyObject *me, PyObject *const *a, Py_ssize_t n)
{
    return remove_rw(me, a, n, kRemoveWriter);
}

PyMethodDef fds_methods[] = {
    {"_add_reader", EVLOOP_FASTKW(fds_add_reader), METH_FASTCALL,
     "_add_reader(fd, callback, *args): as the stdlib's, in C (src/aio/fds.cpp)."},
    {"_add_writer", EVLOOP_FASTKW(fds_add_writer), METH_FASTCALL,
     "_add_writer(fd, callback, *args): as the stdlib's, in C (src/aio/fds.cpp)."},
    {"_remove_reader", EVLOOP_FASTKW(fds_remove_reader), METH_FASTCALL,
     "_remove_reader(fd): as the stdlib's, in C (src/aio/fds.cpp)."},
    {"_remove_writer", EVLOOP_FASTKW(fds_remove_writer), METH_FASTCALL,
     "_remove_writer(fd): as the stdlib's, in C (src/aio/fds.cpp)."},
    {nullptr, nullptr, 0, nullptr},
};

// _aio_fds_setup(SelectorKey, add_reader, add_writer, remove_reader, remove_writer): the key
// class and the stdlib's four methods (BaseSelectorEventLoop's), which the fast paths fall
// back on.
PyObject *fds_setup(PyObject *, PyObject *const *argv, Py_ssize_t n)
{
    if (n != 5 || !PyType_Check(argv[0])) {
        PyErr_SetString(PyExc_TypeError, "_aio_fds_setup(SelectorKey, add_reader, add_writer, "
                                         "remove_reader, remove_writer)");
        return nullptr;
    }
    for (int i = 0; i < 4; i++)
        Py_XSETREF(gf.std[i], Py_NewRef(argv[i + 1]));
    auto *kt = reinterpret_cast<PyTypeObject *>(argv[0]);
    gf.key_fast = PyType_IsSubtype(kt, &PyTuple_Type) &&
                  kt->tp_basicsize == PyTuple_Type.tp_basicsize &&
                  kt->tp_itemsize == PyTuple_Type.tp_itemsize && kt->tp_dictoffset == 0;
    Py_XSETREF(gf.key_t, reinterpret_cast<PyTypeObject *>(Py_NewRef(argv[0])));
    Py_RETURN_NONE;
}

PyMethodDef fds_setup_def = {"_aio_fds_setup", EVLOOP_FASTKW(fds_setup), METH_FASTCALL,
                             "_aio_fds_setup(SelectorKey, add_reader, add_writer, "
                             "remove_reader, remove_writer)."};

// Adds the four methods to _AioCore and _aio_fds_setup to module m.
int register_fds(PyObject *m)
{
    if (!(gf.s_cancel = PyUnicode_InternFromString("cancel")) ||
        add_core_methods(fds_methods) < 0)
        return -1;
    return add_function(m, &fds_setup_def);
}

} // namespace aio
