// The stdlib transports' hot attributes, read as C fields by the native methods of
// transport.cpp and datagram.cpp (slot_get, in aio.h, reads them).
//
// evloop's transport classes (evloop/_aio.py) declare the attributes their native methods
// read on every message as __slots__: the socket transport (_SocketTransport) _protocol,
// _conn_lost, _read_ready_cb, _eof, _empty_waiter, _buffer, _sock_fd, _closing; the datagram
// transport (_DatagramTransport) _protocol, _conn_lost, _buffer, _sock_fd, _address, _extra,
// _sock. The stdlib's own code sets and reads them as before (through the slots' member
// descriptors, which the interpreter specialises); the C methods read each at its offset in
// the instance: a load, where PyObject_GetAttr is the type lookup, the descriptor checks and
// the instance-values lookup, ten times a message. Reading the instance's __dict__ instead
// was measured too and saved little, the dict lookup being most of it (callgrind:
// tournament/results/design-figures.md).
//
// The offsets come from each class's member descriptors, checked (a writable object member
// of that class, under that name) whenever the class's version tag is not the one checked:
// CPython sets a type's tag to 0 whenever the type or a base changes, and gives it a new,
// never reused tag at its next lookup. So a name the class does not have as a slot (the
// stream names on the datagram class, a name patched with a property), an instance of a
// subclass, and an empty slot (its AttributeError is the stdlib's) are read with
// PyObject_GetAttr. GIL held.
#include "aio.h"

namespace aio {

PyObject *slot_names[S_COUNT] = {}; // interned, set by slots_names_init
Slots slot_classes[SC_COUNT];

// The names, interned; false with an exception set.
bool slots_names_init()
{
    static const char *const s[S_COUNT] = {
        "_protocol", "_conn_lost", "_read_ready_cb", "_eof",   "_empty_waiter", "_buffer",
        "_sock_fd",  "_closing",   "_address",       "_extra", "_sock"};
    for (int i = 0; i < S_COUNT; i++)
        if (!slot_names[i] && !(slot_names[i] = PyUnicode_InternFromString(s[i])))
            return false;
    return true;
}

// Checks the class as the comment atop says; records the offsets of the names that are its slots
// now and the tag checked.
void slots_check(Slots &c, PyTypeObject *tp)
{
    for (int i = 0; i < S_COUNT; i++) {
        c.offset[i] = 0;
        PyObject *d = _PyType_Lookup(tp, slot_names[i]); // borrowed; assigns a tag
        if (!d || Py_TYPE(d) != &PyMemberDescr_Type ||
            reinterpret_cast<PyDescrObject *>(d)->d_type != tp)
            continue;
        PyMemberDef *m = reinterpret_cast<PyMemberDescrObject *>(d)->d_member;
        if (m->type == T_OBJECT_EX && !(m->flags & READONLY) && m->offset > 0 &&
            size_t(m->offset) + sizeof(PyObject *) <= size_t(tp->tp_basicsize))
            c.offset[i] = m->offset;
    }
    c.checked_tag = tp->tp_version_tag;
}

// The class of kind `which` whose instances are read at the offsets (a transport setup
// call); a subclass of base. false with an exception set.
bool slots_set_class(SlotClass which, PyObject *cls, PyObject *base)
{
    if (!PyType_Check(cls) || !PyType_IsSubtype(reinterpret_cast<PyTypeObject *>(cls),
                                                reinterpret_cast<PyTypeObject *>(base))) {
        PyErr_Format(PyExc_TypeError, "transport setup: not a subclass of %s",
                     reinterpret_cast<PyTypeObject *>(base)->tp_name);
        return false;
    }
    Slots &c = slot_classes[which];
    Py_INCREF(cls);
    Py_XSETREF(c.type, reinterpret_cast<PyTypeObject *>(cls));
    c.checked_tag = 0;
    return true;
}

} // namespace aio
