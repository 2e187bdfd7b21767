/* evloop_strerror(): messages for the values evloop functions return. */
#include <limits.h>
#include <string.h>

#include "evloop.h"
#include "common.h"

EVLOOP_API const char *evloop_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case -EINVAL: return "invalid argument (NULL loop or callback, unknown event bits or backend, malformed profile)";
    case -ESHUTDOWN: return "the loop is terminating or terminated; the work was not accepted";
    case -ENOTSUP: return "the requested backend does not exist or cannot start here";
    case -EBADF: return "not a valid open file descriptor";
    case -EEXIST: return "file descriptor already registered";
    case -ENOENT: return "no such file descriptor, timer or profile file";
    case -EBUSY: return "the loop is running";
    case -ENOMEM: return "out of memory; nothing was accepted";
    default: break;
    }
    if (err < 0 && err != INT_MIN) {
        const char *s = strerror(-err);
        if (s)
            return s;
    }
    return "unknown error";
}
