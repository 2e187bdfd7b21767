/* The backends in one place: every backend evloop knows (its name and its index in the
 * profile's readiness_ns), the implementations built here (the only platform #ifs), auto's
 * order and why it is that order, and the choice: a named backend, $EVLOOP_BACKEND, a
 * profile's pick, or auto. The reason for the choice and why auto fell back are kept for
 * evloop_stats(). profile.c, autotune.c and the bindings read names from here. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend.h"
#include "common.h"
#include "error.h"
#include "evloop.h"

#ifdef EVLOOP_HAVE_IO_URING
extern const struct evloop__backend evloop__backend_io_uring;
#endif
#ifdef EVLOOP_HAVE_EPOLL
extern const struct evloop__backend evloop__backend_epoll;
#endif
#ifdef EVLOOP_HAVE_KQUEUE
extern const struct evloop__backend evloop__backend_kqueue;
#endif

/* Every backend evloop knows, built here or not; the position is the public index
 * (evloop_backend_name, evloop_profile.readiness_ns). Append only: profiles store by name,
 * programs may store the index. */
static const char *const names[] = {"epoll", "io_uring", "kqueue"};
static_assert(sizeof(names) / sizeof(names[0]) == EVLOOP__BACKENDS, "one name per index");
static_assert(sizeof(((struct evloop_profile *)0)->readiness_ns) ==
                  EVLOOP__BACKENDS * sizeof(uint64_t),
              "evloop_profile.readiness_ns has one slot per backend");

enum { EPOLL = 0, IO_URING = 1, KQUEUE = 2 }; /* positions in names[] */

/* The implementations built here, in auto's order. A name may have several, tried in order.
 * auto takes the first that starts among those marked for it; an implementation that loses
 * the readiness family to another one here is never auto's. The order is measured, not
 * assumed: docs/design.md, "Backends", says why; tournament/results/design-figures.md has
 * the figures behind it. */
static const struct impl {
    unsigned index; /* in names[] */
    const struct evloop__backend *vt;
    bool for_auto;
    const char *what; /* what runs, for evloop_stats().backend_reason */
} impls[] = {
#ifdef EVLOOP_HAVE_EPOLL
    {EPOLL, &evloop__backend_epoll, true, "epoll"},
#endif
#ifdef EVLOOP_HAVE_IO_URING
    /* Readiness from epoll_pwait2: its fd round trip ties epoll's, not ahead. */
    {IO_URING, &evloop__backend_io_uring, true,
     "readiness from epoll_pwait2, wakes and ops in the ring"},
#endif
#ifdef EVLOOP_HAVE_KQUEUE
    {KQUEUE, &evloop__backend_kqueue, true, "kqueue"},
#endif
};
#define NIMPLS (sizeof(impls) / sizeof(impls[0]))

/* Why auto's order is what it is, for the reason in evloop_stats(). */
static const char auto_why[] =
    "the order measured on the readiness family here (docs/design.md, Backends)";

EVLOOP_API const char *evloop_backend_name(unsigned i)
{
    return i < EVLOOP__BACKENDS ? names[i] : NULL;
}

int evloop__backend_index(const char *name)
{
    for (int i = 0; i < EVLOOP__BACKENDS; i++)
        if (strcmp(name, names[i]) == 0)
            return i;
    return -1;
}

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
    for (size_t i = 0; i < NIMPLS; i++) {
        const char *n = names[impls[i].index];
        if (!strstr(list, n))
            snprintf(list + strlen(list), sizeof(list) - strlen(list), "%s%s", i ? ", " : "", n);
    }
    return list;
}

static const char *why_refused(int r)
{
    return refusal[0] ? refusal : strerror(-r);
}

/* Starts implementation i. Returns 0 or its init's -errno, with refusal[] saying why. */
static int start(size_t i, _Atomic uint32_t *word, struct evloop__backend_pick *out)
{
    refusal[0] = '\0';
    int r = impls[i].vt->init(&out->state, word, &out->caps);
    if (r == 0)
        out->backend = impls[i].vt;
    return r;
}

/* What runs, once implementation i has started (evloop_stats's backend_reason). */
static const char *what(size_t i)
{
    return impls[i].what;
}

/* Starts the first implementation of backend `name` that can; the reason names `why`, what
 * runs, and why an earlier implementation did not. origin says where the name came from
 * ("config.backend", "EVLOOP_BACKEND", "profile"), for evloop_last_error(). */
static int open_named(const char *origin, const char *name, const char *why, _Atomic uint32_t *word,
                      struct evloop__backend_pick *out)
{
    int r = -ENOTSUP;
    char skipped[96] = "";
    for (size_t i = 0; i < NIMPLS; i++) {
        if (strcmp(names[impls[i].index], name) != 0)
            continue;
        if ((r = start(i, word, out)) == 0) {
            snprintf(out->reason, sizeof(out->reason), "%s; %s%s%s", why, what(i),
                     skipped[0] ? ", as " : "", skipped);
            return 0;
        }
        if (!skipped[0])
            snprintf(skipped, sizeof(skipped), "%s", why_refused(r));
        if (r != -ENOTSUP) /* -ENOMEM, -EMFILE: a failure, not this implementation's refusal */
            break;
    }
    if (skipped[0])
        return evloop__error_set(r, "%s \"%s\": could not start: %s", origin, name, skipped);
    if (evloop__backend_index(name) >= 0) /* a real backend, not built for this platform */
        return evloop__error_set(-ENOTSUP, "%s \"%s\": not built into this library (built: %s)",
                                 origin, name, built_names());
    return evloop__error_set(
        -EINVAL, "%s \"%s\": unknown backend (epoll, io_uring, kqueue, auto; built: %s)", origin,
        name, built_names());
}

/* auto: the first implementation for auto that starts, in the table's order. */
static int open_auto(_Atomic uint32_t *word, struct evloop__backend_pick *out)
{
    int first_err = -ENOTSUP;
    for (size_t i = 0; i < NIMPLS; i++) {
        if (!impls[i].for_auto)
            continue;
        int r = start(i, word, out);
        if (r == 0) {
            snprintf(out->reason, sizeof(out->reason), "auto: %s; %s", auto_why, what(i));
            return 0;
        }
        if (!out->fallback[0])
            snprintf(out->fallback, sizeof(out->fallback), "%s: %s", names[impls[i].index],
                     why_refused(r));
        if (first_err == -ENOTSUP)
            first_err = r;
    }
    return evloop__error_set(first_err,
                             "backend auto: none of the backends built here (%s) "
                             "could start; first: %s",
                             built_names(), out->fallback);
}

/* The profile's pick: the backend with the fastest fd round trip it measured. */
static int open_profiled(const struct evloop_profile *p, _Atomic uint32_t *word,
                         struct evloop__backend_pick *out)
{
    int i = evloop__backend_index(p->backend);
    char why[96];
    snprintf(why, sizeof(why), "profile: fastest fd round trip measured (%llu ns)",
             (unsigned long long)(i >= 0 ? p->readiness_ns[i] : 0));
    int refused = open_named("profile", p->backend, why, word, out);
    if (refused == 0)
        return 0;
    int r = open_auto(word, out);
    if (r == 0) {
        evloop__error_clear(); /* the profile's choice failing is no failure of the call */
        char autos[sizeof(out->fallback)];
        memcpy(autos, out->fallback, sizeof(autos));
        int n = snprintf(out->fallback, sizeof(out->fallback), "profile's %s: %s%s%s", p->backend,
                         strerror(-refused), autos[0] ? "; " : "", autos);
        (void)n; /* a long reason is cut short: it is only read by people */
    }
    return r;
}

int evloop__backend_open(const char *name, const struct evloop_profile *profile,
                         _Atomic uint32_t *word, struct evloop__backend_pick *out)
{
    *out = (struct evloop__backend_pick){0};
    if (!is_auto(name))
        return open_named("config.backend", name, "config.backend", word, out);
    name = getenv("EVLOOP_BACKEND");
    if (!is_auto(name))
        return open_named("EVLOOP_BACKEND", name, "EVLOOP_BACKEND", word, out);
    if (profile && !is_auto(profile->backend))
        return open_profiled(profile, word, out);
    return open_auto(word, out);
}
