// evloop._asyncio_core: the native core of evloop's asyncio loop (evloop/_aio.py,
// docs/asyncio.md), one module for both ingress variants. It holds the C bases _AioCore
// (evloop.EventLoop's), _AioStreamBase and _AioDatagramBase (the transports') and the
// _aio_*_setup functions that evloop/_aio.py calls at import; it links no evloop library and
// drives a RawLoop of evloop._arena or evloop._chunk through that module's AioOps
// (src/aio_ops.h). aio.h maps the files.
#include "aio.h"

namespace {

PyModuleDef module_def = {
    PyModuleDef_HEAD_INIT,
    "evloop._asyncio_core",
    "The native core of evloop's asyncio loop (use evloop.EventLoop).",
    -1, // the state is the files' globals: one instance per process
    nullptr,
    nullptr,
    nullptr,
    nullptr,
    nullptr,
};

} // namespace

PyMODINIT_FUNC PyInit__asyncio_core()
{
    PyObject *m = PyModule_Create(&module_def);
    if (!m)
        return nullptr;
    if (aio::register_core(m) < 0 || aio::register_transport(m) < 0 ||
        aio::register_datagram(m) < 0 || aio::register_fds(m) < 0 ||
        aio::register_sock(m) < 0 || aio::register_executor(m) < 0 ||
        aio::register_accept(m) < 0 || aio::register_stream_init(m) < 0) {
        Py_DECREF(m);
        return nullptr;
    }
    return m;
}
