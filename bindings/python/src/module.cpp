// The evloop Python extension: a 1:1 binding of include/evloop.h (the class RawLoop, in
// src/raw_loop.h, and the module functions), compiled once per ingress variant into
// evloop._arena and evloop._chunk, each linking its libevloop_<variant>.a. The Python API
// (evloop.Loop: seconds, handles, readers and writers, the exception handler, Ctrl-C) is
// Python, in evloop/_loop.py. This file is the module's init: what Python sees, bound with
// pybind11.

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <optional>
#include <string>

#include "c_api.h"
#include "raw_loop.h"

#ifndef EVLOOP_PY_VARIANT
#error "EVLOOP_PY_VARIANT (\"arena\" or \"chunk\") must be defined"
#endif
#ifndef EVLOOP_PY_BACKENDS
#define EVLOOP_PY_BACKENDS ""
#endif
#ifndef EVLOOP_PY_LEFT_OUT
#define EVLOOP_PY_LEFT_OUT ""
#endif

// EVLOOP_PY_STATS(X): X(name, "comment") for every field of struct evloop_stats, generated
// from include/evloop.h by src/stats_fields.py at build time.
#include "evloop_stats_fields.h"

namespace EVLOOP_PY_MODULE {

py::dict profile_dict(const evloop_profile &p)
{
    return py::dict(py::arg("version") = p.version, py::arg("ncpu") = p.ncpu,
                    py::arg("backend") = std::string(p.backend), py::arg("spin_ns") = p.spin_ns,
                    py::arg("spin_max_ns") = p.spin_max_ns,
                    py::arg("batch_budget") = p.batch_budget, py::arg("wake_ns") = p.wake_ns,
                    py::arg("handoff_ns") = p.handoff_ns,
                    py::arg("readiness_epoll_ns") = p.readiness_ns[0],
                    py::arg("readiness_io_uring_ns") = p.readiness_ns[1],
                    py::arg("readiness_kqueue_ns") = p.readiness_ns[2]);
}

py::dict autotune(double max_seconds, std::optional<std::string> save)
{
    evloop_autotune_options opt{max_seconds, save ? save->c_str() : nullptr};
    evloop_profile p{};
    int r;
    {
        py::gil_scoped_release nogil;
        r = evloop_autotune(&p, &opt);
    }
    check(r, p.version ? "evloop_autotune: saving the profile" : "evloop_autotune");
    return profile_dict(p);
}

// The capsule _c_api (src/c_api.h): this module's evloop_* functions, for C extensions that
// drive loops of this variant without linking a second copy of the library.
const evloop_py_c_api g_c_api = {
    sizeof(evloop_py_c_api),
    evloop_ingress,
    evloop_config_init,
    evloop_new,
    evloop_free,
    evloop_run,
    evloop_stop,
    evloop_submit,
    evloop_submit_internal,
    evloop_queue_microtask,
    evloop_submit_batch,
    evloop_timer_start,
    evloop_io_add,
    evloop_io_remove,
    evloop_stats,
    evloop_backend,
};

} // namespace EVLOOP_PY_MODULE

PYBIND11_MODULE(EVLOOP_PY_MODULE, m)
{
    using namespace EVLOOP_PY_MODULE;
    loop_of = raw_loop_of; // fastpath.h's calls find the RawLoop's evloop through it
    m.doc() = "evloop's C API, ingress variant '" EVLOOP_PY_VARIANT "' (use the evloop package)";

    py::module_ common = py::module_::import("evloop._common");
    g_error = py::object(common.attr("Error")).release();
    g_closed_error = py::object(common.attr("LoopClosedError")).release();
    py::register_local_exception_translator([](std::exception_ptr p) {
        try {
            if (p)
                std::rethrow_exception(p);
        } catch (const Errno &e) {
            set_error(e.err, e.what);
        }
    });

    m.attr("VARIANT") = EVLOOP_PY_VARIANT;
    m.attr("VERSION_INFO") =
        py::make_tuple(EVLOOP_VERSION_MAJOR, EVLOOP_VERSION_MINOR, EVLOOP_VERSION_PATCH);
    m.def("version", &evloop_version, "evloop_version(): the library's \"MAJOR.MINOR.PATCH\".");
    m.attr("BACKENDS") = EVLOOP_PY_BACKENDS; // compiled in, best first, ","-separated
    m.attr("LEFT_OUT") = EVLOOP_PY_LEFT_OUT; // "backend: why" for one left out, or ""
    m.attr("READABLE") = unsigned(EVLOOP_READABLE);
    m.attr("WRITABLE") = unsigned(EVLOOP_WRITABLE);
    m.attr("HANGUP") = unsigned(EVLOOP_HANGUP);
    m.attr("ERROR") = unsigned(EVLOOP_ERROR);
    m.def("ingress", &evloop_ingress, "evloop_ingress(): the variant linked.");
    m.def("strerror", &evloop_strerror, py::arg("err"), "evloop_strerror(err).");
    m.def("now_ns", &evloop_now_ns, "evloop_now_ns(): the loops' clock, ns.");
    m.def("autotune", &autotune, py::arg("max_seconds"), py::arg("save") = py::none(),
          "evloop_autotune, with the GIL released; the profile as a dict.");
    m.def("check_signals", []() {
              if (PyErr_CheckSignals() < 0)
                  throw py::error_already_set();
          }, "PyErr_CheckSignals(): runs the Python signal handlers now (main thread).");
    m.def("write_unraisable", [](py::object exc, py::object obj) {
              PyErr_SetObject(reinterpret_cast<PyObject *>(Py_TYPE(exc.ptr())), exc.ptr());
              PyErr_WriteUnraisable(obj.ptr());
          }, py::arg("exc"), py::arg("obj"), "PyErr_WriteUnraisable: exc to sys.unraisablehook.");
    m.def("_set_lazy_gil", [](bool on) { g_lazy_gil = on; }, py::arg("on"),
          "Testing: keep the GIL between the callbacks of a batch (default True).");

    py::class_<struct evloop_stats> stats(m, "Stats", py::module_local(),
                                          "struct evloop_stats as read-only fields.");
#define EVLOOP_PY_FIELD(f, doc) stats.def_readonly(#f, &evloop_stats::f, doc);
    EVLOOP_PY_STATS(EVLOOP_PY_FIELD)
    py::list fields;
#define EVLOOP_PY_NAME(f, doc) fields.append(#f);
    EVLOOP_PY_STATS(EVLOOP_PY_NAME)
    stats.attr("_fields") = py::tuple(fields);

    py::class_<Timer>(m, "Timer", py::module_local(), "A timer of RawLoop.timer_start.")
        .def_readonly("id", &Timer::id)
        .def("cancel", &Timer::cancel, "True if this call stopped the timer (evloop_timer_cancel).")
        .def("again", &Timer::again, py::arg("delay_ns"),
             "evloop_timer_again: next firing delay_ns from now; False if not armed.")
        .def_property_readonly("active", &Timer::active, "Armed and its loop not stopping.")
        .def_property_readonly("cancelled", [](const Timer &t) {
            return t.state == Timer::Cancelled || t.state == Timer::Released;
        }, "Cancelled, or dropped unfired at the loop's end.");

    py::class_<RawLoop> cls(m, "RawLoop", py::module_local(), "One evloop; the C calls.");
    cls.def(py::init<std::optional<std::string>, int64_t, unsigned, bool,
                     std::optional<std::string>, std::optional<std::string>>(),
            py::arg("backend") = py::none(), py::arg("spin_ns") = -1,
            py::arg("batch_budget") = 0, py::arg("auto_exit") = false,
            py::arg("profile") = py::none(), py::arg("fence") = py::none(), "evloop_new.")
        .def("run", [](RawLoop &l) { l.drive(false, 0); },
             "evloop_run, with the GIL released while the loop waits.")
        .def("run_once", [](RawLoop &l, int64_t timeout_ns) { return l.drive(true, timeout_ns); },
             py::arg("timeout_ns"), "evloop_run_once: the callbacks run.")
        .def("backend_fd", &RawLoop::backend_fd, "evloop_backend_fd.")
        .def("backend_timeout_ns", &RawLoop::backend_timeout_ns, "evloop_backend_timeout_ns.")
        .def("stop", &RawLoop::stop, "evloop_stop; a no-op once freed.")
        .def("free", &RawLoop::free, "evloop_free; idempotent.")
        .def_property_readonly("closed", [](const RawLoop &l) { return !l.raw(); })
        .def("timer_start", &RawLoop::timer_start, py::arg("delay_ns"), py::arg("interval_ns"),
             py::arg("fn"), "timer_start(delay_ns, interval_ns, fn, *args) -> Timer.")
        .def("signal_start", &RawLoop::signal_start, py::arg("signum"), py::arg("fn"),
             "evloop_signal_start: fn() on the loop thread after deliveries of signum.")
        .def("signal_stop", &RawLoop::signal_stop, py::arg("signum"),
             "evloop_signal_stop; from another thread the loop thread does it a moment later.")
        .def("io_add", &RawLoop::io_add, py::arg("fd"), py::arg("events"), py::arg("fn"),
             "evloop_io_add: fn(fd, revents) on the loop thread while fd is ready.")
        .def("io_modify", &RawLoop::io_modify, py::arg("fd"), py::arg("events"))
        .def("io_add_native", &RawLoop::io_add_native, py::arg("fd"), py::arg("events"),
             "evloop_io_add with a C callback that only records the readiness, for take_io().")
        .def("take_io", &RawLoop::take_io,
             "[(fd, revents)] of the io_add_native fds since the last take (emptied).")
        .def("io_remove", &RawLoop::io_remove, py::arg("fd"),
             "evloop_io_remove: False if fd was not registered.")
        .def("accept", &RawLoop::accept, py::arg("fd"), py::arg("fn"),
             "evloop_accept: fn(fd, res), res the accepted fd or a negative errno.")
        .def("recv", &RawLoop::recv, py::arg("fd"), py::arg("buf"), py::arg("fn"),
             "evloop_recv into buf (writable, held until fn(fd, res) runs).")
        .def("send", &RawLoop::send, py::arg("fd"), py::arg("buf"), py::arg("fn"),
             "evloop_send of buf (held until fn(fd, res) runs; res = len(buf) when all sent).")
        .def("op_cancel", &RawLoop::op_cancel, py::arg("fd"),
             "evloop_op_cancel: False if nothing was pending on fd.")
        .def("on_loop_thread", &RawLoop::on_loop_thread, "evloop_on_loop_thread.")
        .def_readwrite("on_error", &RawLoop::on_error,
                       "on_error(exc, callback) for what a callback raises; without it, or for\n"
                       "what it raises, the loop stops and run() raises that exception.")
        .def("stats", &RawLoop::stats, "evloop_stats, as a Stats.")
        .def_property_readonly("state", &RawLoop::state, "evloop_state, as an int.")
        .def_property_readonly("backend", &RawLoop::backend, "evloop_backend.")
        .def("_live_fds", &RawLoop::live_fds);
    for (PyMethodDef &def : g_fast_methods)
        cls.attr(def.ml_name) = py::reinterpret_steal<py::object>(
            PyDescr_NewMethod(reinterpret_cast<PyTypeObject *>(cls.ptr()), &def));

    g_aio_ops.raw_type = reinterpret_cast<PyTypeObject *>(cls.ptr());
    cls.attr("_aio_ops") = py::capsule(&g_aio_ops, "evloop.aio_ops");
    m.attr("_c_api") =
        py::capsule(const_cast<evloop_py_c_api *>(&g_c_api), EVLOOP_PY_C_API_CAPSULE);
}
