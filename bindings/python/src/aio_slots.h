// The stdlib transport's hot attributes, read as C fields by the native methods of
// src/aio_transport.h.
//
// evloop's socket transport (evloop/_aio.py, _SocketTransport) declares the attributes its
// native methods read on every message as __slots__: _protocol, _conn_lost, _read_ready_cb,
// _eof, _empty_waiter, _buffer, _sock_fd, _closing. The stdlib's own code sets and reads them as
// before (through the slots' member descriptors, which the interpreter specialises); the C
// methods read each at its offset in the instance: a load, where PyObject_GetAttr cost ~175
// instructions (callgrind, 1 KiB protocol echo, CPython 3.11: the type lookup, the
// descriptor checks, the instance-values lookup), ten times a message. Reading the
// instance's __dict__ instead was measured too: ~170, the dict lookup being most of it.
//
// The offsets come from the class's member descriptors, checked (a writable object member
// of that class, under that name) whenever the class's version tag is not the one checked:
// CPython sets a type's tag to 0 whenever the type or a base changes, and gives it a new,
// never reused tag at its next lookup. So a class patched with a property under one of the
// names, or an instance of a subclass, is read with PyObject_GetAttr, as is an empty slot
// (its AttributeError is the stdlib's). Included once by src/aio_transport.h. GIL held.
#ifndef EVLOOP_PY_AIO_SLOTS_H
#define EVLOOP_PY_AIO_SLOTS_H

#include <Python.h>
#include <structmember.h>

namespace EVLOOP_PY_MODULE {
namespace aio {

enum SlotId {
    S_PROTOCOL,
    S_CONN_LOST,
    S_READ_READY_CB,
    S_EOF,
    S_EMPTY_WAITER,
    S_BUFFER,
    S_SOCK_FD,
    S_CLOSING,
    S_COUNT
};

struct Slots {
    PyObject *names[S_COUNT] = {};  // interned, set by slots_init
    PyTypeObject *type = nullptr;   // the transport class (a strong reference), or none
    unsigned int checked_tag = 0;   // its version tag when last checked (0: never)
    bool ok = false;                // that check found every name a slot of the class
    Py_ssize_t offset[S_COUNT] = {};
};
Slots slots;

// The names, interned; false with an exception set.
bool slots_names_init()
{
    static const char *const s[S_COUNT] = {"_protocol", "_conn_lost",    "_read_ready_cb",
                                           "_eof",      "_empty_waiter", "_buffer",
                                           "_sock_fd",  "_closing"};
    for (int i = 0; i < S_COUNT; i++)
        if (!slots.names[i] && !(slots.names[i] = PyUnicode_InternFromString(s[i])))
            return false;
    return true;
}

// Checks the class as the header says; records the offsets and the tag checked.
void slots_check(PyTypeObject *tp)
{
    slots.ok = false;
    for (int i = 0; i < S_COUNT; i++) {
        PyObject *d = _PyType_Lookup(tp, slots.names[i]); // borrowed; assigns a tag
        if (!d || Py_TYPE(d) != &PyMemberDescr_Type ||
            reinterpret_cast<PyDescrObject *>(d)->d_type != tp) {
            slots.checked_tag = tp->tp_version_tag;
            return;
        }
        PyMemberDef *m = reinterpret_cast<PyMemberDescrObject *>(d)->d_member;
        if (m->type != T_OBJECT_EX || (m->flags & READONLY) || m->offset <= 0 ||
            size_t(m->offset) + sizeof(PyObject *) > size_t(tp->tp_basicsize)) {
            slots.checked_tag = tp->tp_version_tag;
            return;
        }
        slots.offset[i] = m->offset;
    }
    slots.checked_tag = tp->tp_version_tag;
    slots.ok = slots.checked_tag != 0;
}

// self.<name>: a new reference, or nullptr with an exception set, as PyObject_GetAttr.
inline PyObject *slot_get(PyObject *self, SlotId id)
{
    PyTypeObject *tp = Py_TYPE(self);
    if (tp == slots.type) {
        if (tp->tp_version_tag != slots.checked_tag || slots.checked_tag == 0)
            slots_check(tp);
        if (slots.ok) {
            PyObject *v = *reinterpret_cast<PyObject **>(reinterpret_cast<char *>(self) +
                                                         slots.offset[id]);
            if (v)
                return Py_NewRef(v);
        }
    }
    return PyObject_GetAttr(self, slots.names[id]);
}

// The class whose instances are read at the offsets (_aio_transport_setup); a subclass of
// base. false with an exception set.
bool slots_set_class(PyObject *cls, PyObject *base)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject *>(cls),
                                                reinterpret_cast<PyTypeObject *>(base))) {
        PyErr_SetString(PyExc_TypeError, "_aio_transport_setup: not a subclass of _AioStreamBase");
        return false;
    }
    Py_INCREF(cls);
    Py_XSETREF(slots.type, reinterpret_cast<PyTypeObject *>(cls));
    slots.checked_tag = 0;
    slots.ok = false;
    return true;
}

} // namespace aio
} // namespace EVLOOP_PY_MODULE

#endif
