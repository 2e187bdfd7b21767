/* The heavy side of the asymmetric fence and the once-per-process choice (barrier.h).
 * membarrier(2): MEMBARRIER_CMD_PRIVATE_EXPEDITED makes every thread of the process that
 * runs on another CPU execute a full barrier before the call returns (an IPI); a thread
 * that is not running has no store in flight (a context switch is a full barrier). It is
 * usable only after the process registered for it, which is done once, early: in the
 * first evloop_new that chooses it, before any producer of that loop can exist.
 *
 * Where it is refused (a kernel before 4.14, a seccomp filter, gVisor), where TSan would not
 * see the pairing (it does not model membarrier), or when asked, producers fence instead. */
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "common.h"
#include "error.h"

#if defined(__linux__)
#include <linux/membarrier.h>
#include <sys/syscall.h>
#include <unistd.h>
#define HAVE_MEMBARRIER 1
#endif

#if EVLOOP__TSAN
_Atomic unsigned evloop__tsan_fence_word;
#endif

static pthread_once_t register_once = PTHREAD_ONCE_INIT;
static const char *register_failure; /* NULL: registered; else why not (set once) */

static void register_membarrier(void)
{
#if EVLOOP__TSAN
    register_failure = "ThreadSanitizer build (it does not model membarrier)";
#elif defined(HAVE_MEMBARRIER)
    long cmds = syscall(SYS_membarrier, MEMBARRIER_CMD_QUERY, 0, 0);
    if (cmds < 0)
        register_failure = "membarrier() refused (old kernel or seccomp)";
    else if (!(cmds & MEMBARRIER_CMD_PRIVATE_EXPEDITED))
        register_failure = "membarrier() has no PRIVATE_EXPEDITED";
    else if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED, 0, 0) < 0)
        register_failure = "membarrier() registration refused";
#else
    register_failure = "no membarrier() on this platform";
#endif
}

void evloop__barrier_heavy(enum evloop__fence fence)
{
#if defined(HAVE_MEMBARRIER) && !EVLOOP__TSAN
    if (fence == EVLOOP__FENCE_MEMBARRIER) {
        /* Cannot fail once the process is registered (the choice checked it, and fork
         * keeps the registration); a seccomp filter installed after a loop chose
         * membarrier would break the handshake: install filters before evloop_new. */
        syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED, 0, 0);
        return;
    }
#endif
    (void)fence;
    evloop__fence();
}

static bool names(const char *s, const char *name)
{
    return s && strcmp(s, name) == 0;
}

int evloop__barrier_choose(const char *request, const char *auto_seq_cst,
                           enum evloop__fence *fence, const char **why)
{
    const char *env = getenv("EVLOOP_FENCE");
    bool is_auto = !request || !*request || names(request, "auto");
    bool from_env = is_auto && env && *env;
    const char *want = from_env ? env : request;
    bool want_auto = !want || !*want || names(want, "auto"); /* config and env both say auto */
    *why = "";
    if (auto_seq_cst && want_auto) {
        *fence = EVLOOP__FENCE_SEQ_CST;
        *why = auto_seq_cst;
        return 0;
    }
    if (names(want, "seq_cst")) {
        *fence = EVLOOP__FENCE_SEQ_CST;
        *why = from_env ? "EVLOOP_FENCE=seq_cst" : "config asked for seq_cst";
        return 0;
    }
    if (!want_auto && !names(want, "membarrier"))
        return evloop__error_set(-EINVAL, "%s \"%s\": unknown fence (auto, membarrier, seq_cst)",
                                 from_env ? "EVLOOP_FENCE" : "config.fence", want);
    pthread_once(&register_once, register_membarrier);
    if (!register_failure) {
        *fence = EVLOOP__FENCE_MEMBARRIER;
        return 0;
    }
    if (names(want, "membarrier"))
        return evloop__error_set(-ENOTSUP, "%s membarrier: %s",
                                 from_env ? "EVLOOP_FENCE" : "config.fence", register_failure);
    *fence = EVLOOP__FENCE_SEQ_CST;
    *why = register_failure;
    return 0;
}

const char *evloop__barrier_name(enum evloop__fence fence)
{
    return fence == EVLOOP__FENCE_SEQ_CST ? "seq_cst" : "membarrier";
}
