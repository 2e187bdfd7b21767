/* Hooks (libuv's prepare and check): evloop_hook_add, evloop_hook_remove, and their run
 * around the wait of every iteration (tick.c calls evloop__run_hooks). A table of
 * (when, cb, arg) in the order added; removal while hooks run only marks an entry, dropped
 * after that run. */
#include <stdlib.h>

#include "callback.h"
#include "hooks.h"
#include "release.h"

#define HOOKS_START 4

static int check_hook_call(evloop *loop, unsigned when, evloop_cb cb)
{
    if (!loop || !cb || when > EVLOOP_HOOK_CHECK)
        return -EINVAL;
    /* The table is the loop thread's: another thread may change it only while none runs. */
    if (atomic_load(&loop->running) && !evloop__on_loop_thread(loop))
        return -EBUSY;
    return 0;
}

static int find_hook(const evloop *loop, unsigned when, evloop_cb cb, void *arg)
{
    for (uint32_t i = 0; i < loop->nhooks; i++)
        if (loop->hooks[i].cb == cb && loop->hooks[i].arg == arg && loop->hooks[i].when == when)
            return (int)i;
    return -1;
}

/* Drops the entries removed while hooks were running. O(n) in the hooks. */
static void compact_hooks(evloop *loop)
{
    if (loop->nhooks == loop->hooks_of[0] + loop->hooks_of[1])
        return;
    uint32_t k = 0;
    for (uint32_t i = 0; i < loop->nhooks; i++)
        if (loop->hooks[i].cb)
            loop->hooks[k++] = loop->hooks[i];
    loop->nhooks = k;
}

EVLOOP_API int evloop_hook_add(evloop *loop, enum evloop_hook when, evloop_cb cb, void *arg)
{
    int r = check_hook_call(loop, (unsigned)when, cb);
    if (r < 0)
        return r;
    if (atomic_load_explicit(&loop->stopping, memory_order_relaxed))
        return -ESHUTDOWN;
    if (find_hook(loop, (unsigned)when, cb, arg) >= 0)
        return -EEXIST;
    if (loop->nhooks == loop->hooks_cap) {
        uint32_t cap = loop->hooks_cap ? loop->hooks_cap * 2 : HOOKS_START;
        struct evloop__hook *hooks = realloc(loop->hooks, cap * sizeof(*hooks));
        if (!hooks)
            return -ENOMEM;
        loop->hooks = hooks;
        loop->hooks_cap = cap;
    }
    loop->hooks[loop->nhooks++] = (struct evloop__hook){cb, arg, (unsigned)when};
    loop->hooks_of[when]++;
    return 0;
}

EVLOOP_API int evloop_hook_remove(evloop *loop, enum evloop_hook when, evloop_cb cb, void *arg)
{
    int r = check_hook_call(loop, (unsigned)when, cb);
    if (r < 0)
        return r;
    int i = find_hook(loop, (unsigned)when, cb, arg);
    if (i < 0)
        return -ENOENT;
    loop->hooks[i].cb = NULL; /* a run under way skips it; compacted after that run */
    loop->hooks_of[when]--;
    if (!loop->hooks_running)
        compact_hooks(loop);
    return 0;
}

/* Hooks added meanwhile wait for the next run; removed ones are skipped. Indexes, not
 * pointers: a hook's evloop_hook_add may move the table. */
void evloop__run_hooks(evloop *loop, unsigned when)
{
    loop->hooks_running = true;
    uint32_t n = loop->nhooks;
    for (uint32_t i = 0; i < n; i++) {
        struct evloop__hook h = loop->hooks[i];
        if (!h.cb || h.when != when)
            continue;
        h.cb(h.arg);
        evloop__drain_microtasks(loop);
    }
    loop->hooks_running = false;
    compact_hooks(loop);
}

void evloop__release_hooks(evloop *loop)
{
    loop->hooks_running = true; /* a release function's evloop_hook_remove only marks */
    for (uint32_t i = 0; i < loop->nhooks; i++) {
        struct evloop__hook h = loop->hooks[i];
        if (!h.cb)
            continue;
        loop->hooks[i].cb = NULL;
        loop->hooks_of[h.when]--;
        evloop__released(loop, h.arg);
    }
    loop->hooks_running = false;
    loop->nhooks = 0;
}

void evloop__hooks_destroy(evloop *loop)
{
    free(loop->hooks);
    loop->hooks = NULL;
}
