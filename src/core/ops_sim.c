/* native-sim: the native contract of completion operations over the readiness emulation
 * (tests only; ops_sim.h). */
#include "ops_sim.h"

void evloop__sim_queue(evloop *loop, struct evloop__op *op, int64_t res)
{
    struct evloop__ops *o = &loop->ops;
    op->res = res;
    op->flags |= EVLOOP__OPF_REPORTED;
    op->report_next = NULL;
    if (o->sim_tail)
        o->sim_tail->report_next = op;
    else
        o->sim_head = op;
    o->sim_tail = op;
}

int evloop__sim_start(evloop *loop, struct evloop__ofd *f, struct evloop__op *op)
{
    int64_t res;
    int r = evloop__emu_start(loop, f, op, &res);
    if (r == 1)
        evloop__sim_queue(loop, op, res); /* never from op_start itself: from the next wait */
    return r < 0 ? r : 0;
}

void evloop__sim_cancel(evloop *loop, struct evloop__ofd *f, struct evloop__op *op)
{
    if (op->flags & EVLOOP__OPF_REPORTED)
        return;
    evloop__emu_cancel(loop, f, op);
    evloop__sim_queue(loop, op, -ECANCELED);
}

int evloop__sim_wait(evloop *loop, int64_t timeout_ns, struct evloop__io_event *ev, int max)
{
    struct evloop__ops *o = &loop->ops;
    /* The queue is the loop thread's, changed under io_lock by that same thread; the lock
     * is for the ops' flags, which other threads' cancels mark. */
    int n = loop->backend->wait(loop->backend_state, o->sim_head ? 0 : timeout_ns, ev, max);
    if (n < 0)
        return n;
    pthread_mutex_lock(&loop->io_lock);
    while (n < max && o->sim_head) {
        struct evloop__op *op = o->sim_head;
        o->sim_head = op->report_next;
        if (!o->sim_head)
            o->sim_tail = NULL;
        op->flags &= (uint8_t)~EVLOOP__OPF_REPORTED;
        ev[n++] = (struct evloop__io_event){(uint64_t)(uintptr_t)op, EVLOOP__EV_OP, op->res};
    }
    pthread_mutex_unlock(&loop->io_lock);
    return n;
}
