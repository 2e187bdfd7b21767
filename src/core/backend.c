/* Backend selection: the candidate list in priority order (the only place with
 * platform #ifs), the EVLOOP_BACKEND environment override of "auto", and the fallback
 * reason kept for evloop_stats(). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "error.h"

#ifdef EVLOOP_HAVE_IO_URING
extern const struct evloop__backend evloop__backend_io_uring;
#endif
#ifdef EVLOOP_HAVE_EPOLL
extern const struct evloop__backend evloop__backend_epoll;
#endif
#ifdef EVLOOP_HAVE_KQUEUE
extern const struct evloop__backend evloop__backend_kqueue;
#endif

/* Best first: "auto" takes the first that starts. */
static const struct evloop__backend *const candidates[] = {
#ifdef EVLOOP_HAVE_IO_URING
    &evloop__backend_io_uring,
#endif
#ifdef EVLOOP_HAVE_EPOLL
    &evloop__backend_epoll,
#endif
#ifdef EVLOOP_HAVE_KQUEUE
    &evloop__backend_kqueue,
#endif
};

static const char *const known_names[] = {"epoll", "io_uring", "kqueue"};

/* Why the init running on this thread refused, if it said (evloop__backend_refused). */
static _Thread_local char refusal[96];

int evloop__backend_refused(const char *what, int err)
{
    snprintf(refusal, sizeof(refusal), "%s: %s", what, strerror(err));
    return -ENOTSUP;
}

static bool is_auto(const char *name)
{
    return !name || !*name || strcmp(name, "auto") == 0;
}

/* The backends built into this library, for evloop_last_error(): "io_uring, epoll". */
static const char *built_names(void)
{
    static _Thread_local char list[64];
    list[0] = '\0';
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++)
        snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "",
                 candidates[i]->name);
    return list;
}

/* origin says where the name came from ("config.backend", "EVLOOP_BACKEND"), for the detail
 * evloop_last_error() gives when this fails. */
static int open_named(const char *origin, const char *name, _Atomic uint32_t *word,
                      const struct evloop__backend **out, void **state, unsigned *caps)
{
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        if (strcmp(candidates[i]->name, name) != 0)
            continue;
        refusal[0] = '\0';
        int r = candidates[i]->init(state, word, caps);
        if (r == 0)
            *out = candidates[i];
        else
            evloop__error_set(r, "%s \"%s\": could not start: %s", origin, name,
                              refusal[0] ? refusal : strerror(-r));
        return r;
    }
    for (size_t i = 0; i < sizeof(known_names) / sizeof(known_names[0]); i++)
        if (strcmp(known_names[i], name) == 0) /* a real backend, not built for this platform */
            return evloop__error_set(-ENOTSUP, "%s \"%s\": not built into this library (built: %s)",
                                     origin, name, built_names());
    return evloop__error_set(-EINVAL,
                             "%s \"%s\": unknown backend (epoll, io_uring, kqueue, auto; built: %s)",
                             origin, name, built_names());
}

int evloop__backend_open(const char *name, _Atomic uint32_t *word,
                         const struct evloop__backend **out, void **state, unsigned *caps,
                         char *fallback, size_t fallback_len)
{
    fallback[0] = '\0';
    *caps = 0;
    const char *origin = "config.backend";
    if (is_auto(name)) {
        name = getenv("EVLOOP_BACKEND");
        origin = "EVLOOP_BACKEND";
    }
    if (!is_auto(name))
        return open_named(origin, name, word, out, state, caps);
    int first_err = -ENOTSUP;
    for (size_t i = 0; i < sizeof(candidates) / sizeof(candidates[0]); i++) {
        refusal[0] = '\0';
        int r = candidates[i]->init(state, word, caps);
        if (r == 0) {
            *out = candidates[i];
            return 0;
        }
        if (!fallback[0])
            snprintf(fallback, fallback_len, "%s: %s", candidates[i]->name,
                     refusal[0] ? refusal : strerror(-r));
        if (first_err == -ENOTSUP)
            first_err = r;
    }
    return evloop__error_set(first_err, "backend auto: none of the backends built here (%s) "
                             "could start; first: %s", built_names(), fallback);
}
