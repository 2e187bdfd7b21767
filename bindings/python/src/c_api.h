/* The C API of a loop module (evloop._arena, evloop._chunk) for other C extensions: the
 * evloop_* functions of the one libevloop_<variant>.a that module links, as a table handed
 * over as the capsule "evloop.c_api" (the module attribute _c_api). An extension that drives
 * loops of a variant calls through this table instead of linking a second copy of the library:
 * one copy per variant and process (no second set of its thread-locals, which are
 * initial-exec and live in glibc's small static TLS surplus), and the very code the loop
 * module runs. The benchmark subpackage's kernels module (evloop.bench._kernels) is such a caller.
 * Plain C, so C and C++ include it; each entry has its function's own type (__typeof__). */
#ifndef EVLOOP_PY_C_API_H
#define EVLOOP_PY_C_API_H

#include <stddef.h>

#include "evloop.h"

#define EVLOOP_PY_C_API_CAPSULE "evloop.c_api"
#define EVLOOP_PY_C_API_FN(name) __typeof__(evloop_##name) *name

struct evloop_py_c_api {
    size_t size; /* sizeof(struct evloop_py_c_api) of the module that filled it */
    EVLOOP_PY_C_API_FN(ingress);
    EVLOOP_PY_C_API_FN(config_init);
    __typeof__(evloop_new) *new_loop; /* "new" is C++'s */
    __typeof__(evloop_free) *free_loop;
    EVLOOP_PY_C_API_FN(run);
    EVLOOP_PY_C_API_FN(stop);
    EVLOOP_PY_C_API_FN(submit);
    EVLOOP_PY_C_API_FN(submit_internal);
    EVLOOP_PY_C_API_FN(queue_microtask);
    EVLOOP_PY_C_API_FN(submit_batch);
    EVLOOP_PY_C_API_FN(timer_start);
    EVLOOP_PY_C_API_FN(io_add);
    EVLOOP_PY_C_API_FN(io_remove);
    EVLOOP_PY_C_API_FN(stats);
    EVLOOP_PY_C_API_FN(backend);
};

#endif
