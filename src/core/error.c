/* evloop_strerror(): messages for the values evloop functions return; evloop_last_error():
 * the detail of the last failure on this thread (which argument, variable or file), recorded
 * through error.h by the failure sites that know it. */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "evloop.h"
#include "common.h"
#include "error.h"

/* Per thread, so a failure on one thread never overwrites another's detail; 256 bytes hold
 * a path and a reason (a longer detail is cut short: it is read by people, not parsed). */
static _Thread_local char last_error[256];

void evloop__error_clear(void)
{
    last_error[0] = '\0';
}

int evloop__error_set(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    if (n < 0)
        last_error[0] = '\0';
    return err;
}

EVLOOP_API const char *evloop_last_error(void)
{
    return last_error;
}

EVLOOP_API const char *evloop_strerror(int err)
{
    switch (err) {
    case 0: return "success";
    case -EINVAL: return "invalid argument (NULL loop or callback, unknown event bits or backend, malformed profile; after evloop_new, evloop_last_error() names it)";
    case -ESHUTDOWN: return "the loop is terminating or terminated; the work was not accepted";
    case -ENOTSUP: return "the requested backend does not exist or cannot start here";
    case -EBADF: return "not a valid open file descriptor";
    case -EEXIST: return "file descriptor already registered";
    case -ENOENT: return "no such file descriptor, timer, pending operation or profile file (after evloop_new, evloop_last_error() names the file)";
    case -EBUSY: return "the loop is running, or the fd is busy (a recv or accept pending on it already, or it is watched with evloop_io_add and has operations, or the other way round)";
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
