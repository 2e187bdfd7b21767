/* The limits of a saved machine profile (struct evloop_profile in evloop.h), shared by the
 * file reader and writer (profile.c), the calibration that fills one (autotune.c) and
 * evloop_new, which starts a loop from one (lifecycle.c). */
#ifndef EVLOOP_PROFILE_H
#define EVLOOP_PROFILE_H

#include <stdbool.h>

#include "evloop.h"

#define EVLOOP__PROFILE_SPIN_LIMIT_NS 10000000     /* 10 ms: longer spins are never right */
#define EVLOOP__PROFILE_BUDGET_LIMIT (1u << 20)    /* batch budgets above this are typos */
#define EVLOOP__PROFILE_TIME_LIMIT_NS 60000000000u /* 60 s: a measured hand-off beyond is junk */

/* True when every field of *p is within the limits a file may hold. */
bool evloop__profile_is_valid(const struct evloop_profile *p);

#endif
