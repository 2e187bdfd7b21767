/* The release notification: evloop_set_release_cb and the call that each subsystem makes for
 * an argument it drops at termination (release.h). */
#include "release.h"

EVLOOP_API int evloop_set_release_cb(evloop *loop, evloop_cb release)
{
    if (!loop)
        return -EINVAL;
    /* release: pairs with the acquire in evloop__released(). */
    atomic_store_explicit(&loop->release, release, memory_order_release);
    return 0;
}

void evloop__released(evloop *loop, void *arg)
{
    evloop_cb release = atomic_load_explicit(&loop->release, memory_order_acquire);
    if (release)
        release(arg);
}
