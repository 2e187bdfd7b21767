// RawLoop's and Timer's bodies that are not in their classes (src/raw_loop.h): the
// trampolines the C library calls, the release notification, the completion operations, and
// the AioOps through which the asyncio core (evloop._asyncio_core) drives a RawLoop.
#include "raw_loop.h"

#include <memory>

namespace EVLOOP_PY_MODULE {

char g_native_io;

void timer_trampoline(void *arg)
{
    CallbackGil gil;
    py::handle me(static_cast<PyObject *>(arg));
    Timer &t = me.cast<Timer &>();
    if (t.state == Timer::Armed) {
        py::object task = t.once ? std::move(t.task) : t.task;
        t.state = t.once ? Timer::Fired : t.state;
        call_task(task.ptr(), t.packed);
    }
    if (t.once) // the C library is done with a one-shot timer's arg
        me.dec_ref();
}

// Timer::cancel from another thread: the loop thread cancels, where no firing is under way.
void cancel_task(void *arg)
{
    CallbackGil gil;
    auto me = py::reinterpret_steal<py::object>(static_cast<PyObject *>(arg)); // the task's
    Timer &t = me.cast<Timer &>();
    if (evloop_timer_cancel(t.owner->raw(), t.id) == 0)
        me.dec_ref(); // the C reference
}

bool Timer::cancel()
{
    if (state != Armed)
        return false;
    state = Cancelled; // a firing on its way skips the call
    py::object drop = std::move(task);
    py::object me = py::cast(this, py::return_value_policy::reference);
    evloop *l = owner->raw();
    if (evloop_on_loop_thread(l)) {
        if (evloop_timer_cancel(l, id) == 0)
            me.dec_ref(); // the C reference
    } else if (evloop_submit_internal(l, cancel_task, me.inc_ref().ptr()) < 0) {
        me.dec_ref(); // refused, the loop is stopping: its end releases the C reference
    }
    return true;
}

bool Timer::again(uint64_t delay_ns)
{
    int r = state == Armed ? evloop_timer_again(owner->raw(), id, delay_ns) : -ENOENT;
    if (r != -ENOENT)
        check(r, "timer_again");
    return r == 0;
}

bool Timer::active() const
{
    return state == Armed && evloop_state(owner->raw()) < EVLOOP_TERMINATING;
}

void RawLoop::signal_stop_task(void *arg)
{
    CallbackGil gil;
    RawLoop *l = static_cast<RawLoop *>(tls_ctx->owner);
    int signum = int(reinterpret_cast<intptr_t>(arg));
    if (evloop_signal_stop(l->raw(), signum) == 0)
        Py_XDECREF(take(l->sigs_, signum));
}

void signal_trampoline(void *arg)
{
    CallbackGil gil;
    PyObject *fn = Py_NewRef(static_cast<PyObject *>(arg)); // it may stop its own signal
    call_task(fn, false);
    Py_DECREF(fn);
}

// The release notification: the loop drops a registration's arg without running it.
void release_cb(void *arg)
{
    if (!arg || arg == &g_native_io) // the PREPARE hook's, an fd of io_add_native
        return;
    CallbackGil gil;
    py::handle h(static_cast<PyObject *>(arg));
    if (py::isinstance<Timer>(h) && h.cast<Timer &>().state == Timer::Armed) {
        h.cast<Timer &>().state = Timer::Released;
        h.cast<Timer &>().task = py::none();
    }
    h.dec_ref();
}

// fn(fd, n) with the GIL held; takes a reference to fn (the call may drop the other ones).
void call_fd_int(PyObject *fn, int fd, PyObject *n)
{
    PyObject *a[2] = {PyLong_FromLong(fd), n};
    PyObject *r = a[0] && a[1] ? PyObject_Vectorcall(fn, a, 2, nullptr) : nullptr;
    Py_XDECREF(a[0]);
    Py_XDECREF(a[1]);
    if (r)
        Py_DECREF(r);
    else
        report(fn);
    Py_DECREF(fn);
}

// Inside evloop_run_once (drive), on the loop thread, without the GIL: only recorded.
void io_native_trampoline(void *, int fd, unsigned events)
{
    if (tls_ctx)
        static_cast<RawLoop *>(tls_ctx->owner)->aio_io.add(fd, events);
}

void io_trampoline(void *arg, int fd, unsigned events)
{
    CallbackGil gil;
    call_fd_int(Py_NewRef(static_cast<PyObject *>(arg)), fd, PyLong_FromUnsignedLong(events));
}

// A completion operation's C arg: the callable, and the buffer it reads into or sends from,
// held until its one callback; released before the call, which may use the buffer again.
struct Op {
    py::object fn;
    Py_buffer view{};
    ~Op()
    {
        if (view.obj)
            PyBuffer_Release(&view);
    }
};

void op_trampoline(void *arg, int fd, int64_t res)
{
    CallbackGil gil;
    PyObject *fn = static_cast<Op *>(arg)->fn.release().ptr();
    delete static_cast<Op *>(arg);
    call_fd_int(fn, fd, PyLong_FromLongLong(res));
}

void RawLoop::start_op(py::object fn, py::object buf, int flags, int fd)
{
    evloop *l = get();
    if (!PyCallable_Check(fn.ptr()))
        throw py::type_error("callback must be callable");
    auto op = std::make_unique<Op>();
    op->fn = std::move(fn);
    if (!buf.is_none() && PyObject_GetBuffer(buf.ptr(), &op->view, flags) < 0)
        throw py::error_already_set();
    void *data = op->view.buf;
    size_t len = size_t(op->view.len);
    int r = buf.is_none() ? evloop_accept(l, fd, op_trampoline, op.get())
            : flags & PyBUF_WRITABLE ? evloop_recv(l, fd, data, len, op_trampoline, op.get())
                                     : evloop_send(l, fd, data, len, op_trampoline, op.get());
    check(r, buf.is_none() ? "accept" : flags & PyBUF_WRITABLE ? "recv" : "send");
    op.release(); // the C library's until the callback
}

// The RawLoop in a Python RawLoop object (pybind11's simple instance layout); the caller
// knows obj is one (a method descriptor or the core's attach checked it).
RawLoop *raw_of(PyObject *obj)
{
    auto *inst = reinterpret_cast<py::detail::instance *>(obj);
    return inst->get_value_and_holder().value_ptr<RawLoop>();
}

evloop *raw_loop_of(PyObject *self)
{
    RawLoop *l = raw_of(self);
    if (!l || !l->raw())
        set_error(-ESHUTDOWN, "the loop is closed");
    return l ? l->raw() : nullptr;
}

// The asyncio loop's native core (evloop._asyncio_core) drives a RawLoop of this module through
// these calls (its AioOps, src/aio_ops.h); the capsule is RawLoop._aio_ops.
int aio_poll(PyObject *raw, int64_t timeout_ns)
{
    RawLoop *l = raw_of(raw);
    try {
        l->drive(true, timeout_ns);
        return 0;
    } catch (py::error_already_set &e) {
        e.restore();
    } catch (const Errno &e) {
        set_error(e.err, e.what);
    }
    return -1;
}

int aio_wake(PyObject *raw)
{
    RawLoop *l = raw_of(raw);
    return l && l->raw() ? evloop_submit(l->raw(), noop_task, nullptr) : -ESHUTDOWN;
}

aio::IoReady *aio_io_ready(PyObject *raw)
{
    return &raw_of(raw)->aio_io;
}

evloop *aio_loop(PyObject *raw)
{
    RawLoop *l = raw_of(raw);
    return l ? l->raw() : nullptr;
}

// The fds of the asyncio selector: added as io_add_native adds them (no Python object as the
// C arg, so RawLoop::fds_ has nothing to drop on removal); the GIL is kept, as the native
// callback never takes it.
int aio_io_add(PyObject *raw, int fd, unsigned events)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_io_add(l, fd, events, io_native_trampoline, &g_native_io) : -ESHUTDOWN;
}

int aio_io_modify(PyObject *raw, int fd, unsigned events)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_io_modify(l, fd, events) : -ESHUTDOWN;
}

int aio_io_remove(PyObject *raw, int fd)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_io_remove(l, fd) : -ESHUTDOWN;
}

int aio_work_submit(PyObject *raw, void (*work)(void *), void (*done)(void *, int), void *arg,
                    uint64_t *id)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_work_submit(l, work, done, arg, id) : -ESHUTDOWN;
}

int aio_work_cancel(PyObject *raw, uint64_t id)
{
    evloop *l = aio_loop(raw);
    return l ? evloop_work_cancel(l, id) : -ESHUTDOWN;
}

int aio_work_threads(PyObject *raw, unsigned threads)
{
    evloop *l = aio_loop(raw);
    if (!l)
        return -ESHUTDOWN;
    struct evloop_work_config cfg;
    evloop_work_config_init(&cfg);
    cfg.threads = threads;
    return evloop_work_configure(l, &cfg);
}

aio::AioOps g_aio_ops = {sizeof(aio::AioOps), nullptr,         aio_poll,        aio_wake,
                         aio_io_ready,        aio_io_add,      aio_io_modify,   aio_io_remove,
                         aio_work_submit,     aio_work_cancel, aio_work_threads};

} // namespace EVLOOP_PY_MODULE
