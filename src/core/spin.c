/* The spin-and-yield policy (spin.h): the adaptive window and the pause after a lost CPU. */
#include "spin.h"

#define SPIN_MIN_NS 500            /* a window halved below it is no window */
#define SPIN_PREEMPTED_NS 100000   /* a gap this long inside a spin: the CPU was taken away */
#define SPIN_PAUSE_MIN_NS 10000000 /* no spinning for 10 ms after that, */
#define SPIN_PAUSE_MAX_NS 1000000000 /* doubling up to a second while it keeps happening */

void evloop__spin_init(struct evloop__spin *s, int64_t window, int64_t max, bool adaptive)
{
    atomic_init(&s->window, window);
    s->max = max;
    s->adaptive = adaptive;
    s->paused_until = 0;
    s->pause_ns = 0;
}

int64_t evloop__spin_begin(struct evloop__spin *s, uint64_t now, int64_t timeout_ns)
{
    int64_t w = evloop__spin_window(s);
    if (w <= 0 || now < s->paused_until)
        return 0;
    return timeout_ns >= 0 && timeout_ns < w ? timeout_ns : w;
}

bool evloop__spin_lost_cpu(struct evloop__spin *s, uint64_t last, uint64_t now)
{
    if (now - last <= SPIN_PREEMPTED_NS)
        return false;
    s->pause_ns = s->pause_ns ? s->pause_ns * 2 : SPIN_PAUSE_MIN_NS;
    if (s->pause_ns > SPIN_PAUSE_MAX_NS)
        s->pause_ns = SPIN_PAUSE_MAX_NS;
    s->paused_until = now + s->pause_ns;
    return true;
}

void evloop__spin_end(struct evloop__spin *s, bool hit)
{
    if (hit)
        return;
    s->pause_ns = 0; /* a whole spin on its CPU: the machine has room again */
    if (!s->adaptive)
        return;
    int64_t w = evloop__spin_window(s);
    atomic_store_explicit(&s->window, w / 2 < SPIN_MIN_NS ? 0 : w / 2, memory_order_relaxed);
}

void evloop__spin_slept(struct evloop__spin *s, int64_t slept_ns)
{
    if (!s->adaptive || slept_ns < 0 || slept_ns >= s->max)
        return;
    int64_t want = slept_ns + slept_ns / 2;
    if (want > evloop__spin_window(s))
        atomic_store_explicit(&s->window, want < s->max ? want : s->max, memory_order_relaxed);
}
