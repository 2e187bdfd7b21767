/* The tick's poll step, a driver: waits for the backend's reports and hands each to its owner,
 * a completion operation (ops.c, by its tag or EVLOOP__EV_OP) or a registered fd (io.c). The
 * one place that knows both subsystems; tick.c calls it from the spin, the sleep and the
 * poll without sleeping. */
#include "io.h"
#include "ops.h"
#include "ops_sim.h"
#include "tick_poll.h"

int evloop__wait_io(evloop *loop, int64_t timeout_ns, struct evloop__io_event *ev)
{
    if (evloop__sim_holds_reports(loop)) /* reports held back by a test mode of ops */
        return evloop__sim_wait(loop, timeout_ns, ev, EVLOOP__IO_EVENTS_MAX);
    return loop->backend->wait(loop->backend_state, timeout_ns, ev, EVLOOP__IO_EVENTS_MAX);
}

void evloop__dispatch_io(evloop *loop, const struct evloop__io_event *ev, int n)
{
    for (int i = 0; i < n; i++) {
        if (evloop__ops_owns(&ev[i]))
            evloop__ops_dispatch(loop, &ev[i]);
        else
            evloop__io_dispatch(loop, &ev[i]);
    }
}

int evloop__poll_io(evloop *loop, int64_t timeout_ns)
{
    struct evloop__io_event ev[EVLOOP__IO_EVENTS_MAX];
    int n = evloop__wait_io(loop, timeout_ns, ev);
    if (n > 0)
        evloop__dispatch_io(loop, ev, n);
    return n < 0 ? n : 0;
}
