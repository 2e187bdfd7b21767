/* evloop_autotune: the calibration behind a saved profile. It measures this machine with
 * the public API only, on loops it runs on threads of its own, the calling thread being
 * the producer: the fd round trip of every backend that starts (the fastest wins), the
 * hand-off of a task to a sleeping loop and to a spinning one (the spin window follows by
 * the ski-rental rule: spin at most as long as a wake costs), and a one-producer flood at
 * a few fixed batch budgets. Every measurement is a median, every phase has a share of the
 * time limit, and every wait has a deadline, so a broken loop cannot hang the caller. */
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common.h"
#include "profile.h"

#define DEFAULT_SECONDS 2.0
#define MAX_SECONDS 3600.0
#define SPIN_CAP_NS 200000        /* the longest spin window autotune picks */
#define HANDOFF_SPIN_NS 200000    /* the fixed spin of the loop a hand-off is timed on */
#define SLEEP_SETTLE_NS 200000    /* a loop is asleep this long before its wake is timed */
#define READY_SETTLE_NS 50000     /* the same, before an fd round trip */
#define WAIT_LIMIT_NS 5000000000u /* no single wait takes longer, loaded machine or not */
#define SPIN_WAIT_NS 100000       /* a waiting producer spins this long, then yields */
#define FLOOD_TASKS 50000         /* per flood at most; fewer when the time limit needs it */
#define FLOOD_MIN_TASKS 5000
#define FLOOD_PROBE_TASKS 2000
#define FLOOD_ROUNDS 5
#define NBUDGETS 4
#define MAX_SAMPLES 2000

static const unsigned budgets[NBUDGETS] = {64, 256, 1024, 4096};
/* Slots of evloop_profile.readiness_ns, indexed as evloop_backend_name(i). */
#define NBACKENDS ((int)(sizeof(((struct evloop_profile *)0)->readiness_ns) / sizeof(uint64_t)))

/* A phase: samples are taken until max, or until the deadline once min are in. */
struct phase {
    uint64_t deadline;
    unsigned min, max;
};

static bool phase_wants(const struct phase *ph, unsigned n)
{
    return n < ph->max && (n < ph->min || evloop__clock_ns() < ph->deadline);
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static uint64_t median(uint64_t *v, unsigned n)
{
    if (n == 0)
        return 0;
    qsort(v, n, sizeof(v[0]), cmp_u64);
    return v[n / 2];
}

static void nap(uint64_t ns)
{
    struct timespec ts = evloop__ns_to_timespec(ns);
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

/* ---- a loop on its own thread ----------------------------------------------------------- */

struct runner {
    evloop *loop;
    pthread_t thread;
};

static void *run_loop(void *loop)
{
    evloop_run(loop);
    return NULL;
}

/* The config every calibration loop starts from: no profile (not even $EVLOOP_PROFILE, so
 * an old profile cannot bias the new one), the backend named (not $EVLOOP_BACKEND). */
static evloop_config base_config(const char *backend)
{
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = backend;
    cfg.profile = "";
    return cfg;
}

static int runner_start(struct runner *r)
{
    int e = pthread_create(&r->thread, NULL, run_loop, r->loop);
    return -e;
}

static int runner_new(struct runner *r, const evloop_config *cfg)
{
    int e = evloop_new(&r->loop, cfg);
    if (e == 0 && (e = runner_start(r)) < 0)
        evloop_free(r->loop);
    return e;
}

/* Stops the loop, joins its thread, frees it: every task submitted has run after this. */
static void runner_end(struct runner *r)
{
    evloop_stop(r->loop);
    pthread_join(r->thread, NULL);
    evloop_free(r->loop);
}

/* ---- waiting ---------------------------------------------------------------------------- */

/* Waits until *word is not 0 and returns it; 0 after WAIT_LIMIT_NS. Spins a little when
 * another CPU can run the loop meanwhile, then yields. */
static uint64_t wait_nonzero(_Atomic uint64_t *word, bool may_spin)
{
    uint64_t start = evloop__clock_ns(), spin_end = may_spin ? start + SPIN_WAIT_NS : start;
    for (unsigned i = 1;; i++) {
        /* acquire: pairs with the release store in the task that sets it */
        uint64_t v = atomic_load_explicit(word, memory_order_acquire);
        if (v)
            return v;
        if ((i & 63) != 0)
            evloop__cpu_relax();
        else if (evloop__clock_ns() - start > WAIT_LIMIT_NS)
            return 0;
        else if (evloop__clock_ns() > spin_end)
            sched_yield();
    }
}

/* Waits until the loop is asleep and has stayed so for settle_ns. False after the limit. */
static bool wait_asleep(const evloop *loop, uint64_t settle_ns)
{
    uint64_t limit = evloop__clock_ns() + WAIT_LIMIT_NS;
    while (evloop__clock_ns() < limit) {
        if (evloop_state(loop) != EVLOOP_SLEEPING) {
            sched_yield();
            continue;
        }
        nap(settle_ns);
        if (evloop_state(loop) == EVLOOP_SLEEPING)
            return true;
    }
    return false;
}

/* The task timed: records when it ran (never 0). */
static void stamp_task(void *arg)
{
    /* release: pairs with the acquire load in wait_nonzero() */
    atomic_store_explicit((_Atomic uint64_t *)arg, evloop_now_ns(), memory_order_release);
}

/* One hand-off: submit the stamp task, wait for it. Returns 0 and the ns it took, or -errno. */
static int time_handoff(evloop *loop, _Atomic uint64_t *ran_at, bool may_spin, uint64_t *ns)
{
    atomic_store_explicit(ran_at, 0, memory_order_relaxed);
    uint64_t t0 = evloop_now_ns();
    int r = evloop_submit(loop, stamp_task, ran_at);
    if (r < 0)
        return r;
    uint64_t t1 = wait_nonzero(ran_at, may_spin);
    if (t1 == 0)
        return -ETIMEDOUT;
    *ns = t1 > t0 ? t1 - t0 : 0;
    return 0;
}

/* ---- (a), (b): hand-off to a sleeping loop and to a spinning one ------------------------- */

/* Median submit-to-run time; spin_ns 0: the loop is asleep (futex wake) each time, else it
 * is spinning (the producer submits as soon as the previous task ran). */
static int measure_handoff(const char *backend, int64_t spin_ns, bool may_spin,
                           const struct phase *ph, uint64_t *out)
{
    evloop_config cfg = base_config(backend);
    cfg.spin_ns = spin_ns;
    struct runner run;
    int r = runner_new(&run, &cfg);
    if (r < 0)
        return r;
    uint64_t samples[MAX_SAMPLES];
    _Atomic uint64_t ran_at = 0;
    unsigned n = 0, warmup = spin_ns > 0 ? 2 : 0;
    while (r == 0 && phase_wants(ph, n)) {
        if (spin_ns == 0 && !wait_asleep(run.loop, SLEEP_SETTLE_NS)) {
            r = -ETIMEDOUT;
            break;
        }
        uint64_t ns;
        r = time_handoff(run.loop, &ran_at, may_spin, &ns);
        if (r == 0 && warmup > 0)
            warmup--;
        else if (r == 0)
            samples[n++] = ns;
    }
    runner_end(&run);
    *out = median(samples, n);
    return r;
}

/* ---- (d): the batch budget ---------------------------------------------------------------- */

struct flood {
    _Atomic uint64_t ran, done_at;
    uint64_t want;
};

static void flood_task(void *arg)
{
    struct flood *f = arg;
    /* relaxed: only the loop thread counts; done_at publishes the end */
    uint64_t n = atomic_load_explicit(&f->ran, memory_order_relaxed) + 1;
    atomic_store_explicit(&f->ran, n, memory_order_relaxed);
    if (n == f->want)
        atomic_store_explicit(&f->done_at, evloop_now_ns(), memory_order_release);
}

/* One flood of n tasks from this thread; *ns: first submit to last task run. */
static int time_flood(evloop *loop, struct flood *f, unsigned n, bool may_spin, uint64_t *ns)
{
    atomic_store_explicit(&f->ran, 0, memory_order_relaxed);
    atomic_store_explicit(&f->done_at, 0, memory_order_relaxed);
    f->want = n;
    uint64_t t0 = evloop_now_ns();
    for (unsigned i = 0; i < n; i++) {
        int r = evloop_submit(loop, flood_task, f);
        if (r < 0)
            return r; /* the tasks accepted run at runner_end, before f is gone */
    }
    uint64_t t1 = wait_nonzero(&f->done_at, may_spin);
    if (t1 == 0)
        return -ETIMEDOUT;
    *ns = t1 - t0;
    return 0;
}

/* How many tasks a flood may have for all rounds to fit in the phase, from a small probe
 * flood (which also warms the loop up): a slow machine or a valgrind run floods less. */
static int flood_size(evloop *loop, struct flood *f, bool may_spin, const struct phase *ph,
                      unsigned *n)
{
    uint64_t probe_ns;
    int r = time_flood(loop, f, FLOOD_PROBE_TASKS, may_spin, &probe_ns);
    if (r < 0)
        return r;
    uint64_t now = evloop__clock_ns(), left = ph->deadline > now ? ph->deadline - now : 0;
    double per_task = (double)(probe_ns ? probe_ns : 1) / FLOOD_PROBE_TASKS;
    double fit = (double)left / (per_task * NBUDGETS * FLOOD_ROUNDS);
    *n = fit >= FLOOD_TASKS       ? FLOOD_TASKS
         : fit <= FLOOD_MIN_TASKS ? FLOOD_MIN_TASKS
                                  : (unsigned)fit;
    return 0;
}

/* The budget whose flood median is lowest; a smaller budget (shorter ticks, fairer to timers
 * and fds) wins when it is within 3% of the fastest, which is within the noise. */
static unsigned pick_budget(const uint64_t *med)
{
    uint64_t best = UINT64_MAX;
    for (int b = 0; b < NBUDGETS; b++)
        if (med[b] && med[b] < best)
            best = med[b];
    for (int b = 0; b < NBUDGETS; b++)
        if (med[b] && med[b] <= best + best / 33)
            return budgets[b];
    return 256;
}

/* Floods one loop per budget, in rounds that visit every budget (so a burst of load from
 * elsewhere falls on all of them), and picks the budget. */
static int measure_budget(const char *backend, bool may_spin, const struct phase *ph, unsigned *out)
{
    struct runner run[NBUDGETS];
    int r = 0, started = 0;
    while (r == 0 && started < NBUDGETS) {
        evloop_config cfg = base_config(backend);
        cfg.batch_budget = budgets[started];
        if ((r = runner_new(&run[started], &cfg)) == 0)
            started++;
    }
    uint64_t samples[NBUDGETS][FLOOD_ROUNDS], med[NBUDGETS] = {0};
    struct flood f[NBUDGETS];
    unsigned rounds = 0, n = 0;
    if (r == 0)
        r = flood_size(run[1].loop, &f[1], may_spin, ph, &n);
    while (r == 0 && phase_wants(ph, rounds) && rounds < FLOOD_ROUNDS) {
        for (int b = 0; b < NBUDGETS && r == 0; b++)
            r = time_flood(run[b].loop, &f[b], n, may_spin, &samples[b][rounds]);
        rounds += r == 0;
    }
    for (int b = 0; b < started; b++)
        runner_end(&run[b]);
    for (int b = 0; b < NBUDGETS && rounds > 0; b++)
        med[b] = median(samples[b], rounds);
    *out = pick_budget(med);
    return r;
}

/* ---- (e): backends ------------------------------------------------------------------------- */

static void ready_io(void *arg, int fd, unsigned events)
{
    char buf[64];
    while (read(fd, buf, sizeof(buf)) > 0) {
    }
    stamp_task(arg);
}

static int open_pipe(int p[2])
{
    if (pipe(p) < 0)
        return -errno;
    for (int i = 0; i < 2; i++) {
        if (fcntl(p[i], F_SETFL, O_NONBLOCK) < 0 || fcntl(p[i], F_SETFD, FD_CLOEXEC) < 0) {
            int e = -errno;
            close(p[0]);
            close(p[1]);
            return e;
        }
    }
    return 0;
}

/* Times round trips on a started loop whose fd p0 has ready_io with ran_at registered. */
static int time_readiness(evloop *loop, int p1, _Atomic uint64_t *ran_at, bool may_spin,
                          const struct phase *ph, uint64_t *out)
{
    uint64_t samples[MAX_SAMPLES];
    unsigned n = 0;
    int r = 0;
    while (r == 0 && phase_wants(ph, n)) {
        if (!wait_asleep(loop, READY_SETTLE_NS))
            return -ETIMEDOUT;
        atomic_store_explicit(ran_at, 0, memory_order_relaxed);
        uint64_t t0 = evloop_now_ns();
        char c = 1;
        if (write(p1, &c, 1) != 1)
            return -errno;
        uint64_t t1 = wait_nonzero(ran_at, may_spin);
        if (t1 == 0)
            return -ETIMEDOUT;
        samples[n++] = t1 > t0 ? t1 - t0 : 0;
    }
    *out = median(samples, n);
    return 0;
}

/* Median time from a write into a pipe to the fd callback of a loop asleep in backend `name`.
 * Returns 0 and sets *out, or -errno (this backend cannot start here, or failed). */
static int measure_readiness(const char *name, bool may_spin, const struct phase *ph, uint64_t *out)
{
    evloop_config cfg = base_config(name);
    cfg.spin_ns = 0; /* a spin watches the queues, not the fds: sleep in the poller at once */
    int p[2];
    int r = open_pipe(p);
    if (r < 0)
        return r;
    struct runner run;
    _Atomic uint64_t ran_at = 0;
    r = evloop_new(&run.loop, &cfg);
    if (r == 0) {
        if (strcmp(evloop_backend(run.loop), name) != 0)
            r = -ENOTSUP;
        if (r == 0)
            r = evloop_io_add(run.loop, p[0], EVLOOP_READABLE, ready_io, &ran_at);
        if (r == 0)
            r = runner_start(&run);
        if (r < 0) {
            evloop_free(run.loop);
        } else {
            r = time_readiness(run.loop, p[1], &ran_at, may_spin, ph, out);
            runner_end(&run);
        }
    }
    close(p[0]);
    close(p[1]);
    return r;
}

/* ---- the calibration ----------------------------------------------------------------------- */

/* Spin window by the ski-rental rule: spinning for as long as a wake costs is never worse
 * than twice the best choice, so the cap is the wake cost and the start half of it. No
 * spin on one CPU, or when a hand-off to a spinning loop is not clearly cheaper. */
static void choose_spin(struct evloop_profile *p)
{
    p->spin_ns = p->spin_max_ns = 0;
    if (p->ncpu < 2 || p->wake_ns == 0 || p->handoff_ns == 0 || p->handoff_ns * 2 > p->wake_ns)
        return;
    p->spin_max_ns = p->wake_ns < SPIN_CAP_NS ? (int64_t)p->wake_ns : SPIN_CAP_NS;
    p->spin_ns = p->spin_max_ns / 2;
}

static void choose_backend(struct evloop_profile *p)
{
    int best = -1;
    for (int i = 0; i < NBACKENDS && evloop_backend_name((unsigned)i); i++)
        if (p->readiness_ns[i] && (best < 0 || p->readiness_ns[i] < p->readiness_ns[best]))
            best = i;
    strcpy(p->backend, best >= 0 ? evloop_backend_name((unsigned)best) : "auto");
}

static uint64_t share(uint64_t start, uint64_t total, double upto)
{
    return start + (uint64_t)((double)total * upto);
}

static int calibrate(struct evloop_profile *p, uint64_t total_ns)
{
    uint64_t start = evloop__clock_ns();
    long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
    p->ncpu = ncpu > 1 ? (unsigned)ncpu : 1;
    bool may_spin = p->ncpu > 1; /* with one CPU a spinning producer starves the loop */
    for (int i = 0; i < NBACKENDS && evloop_backend_name((unsigned)i); i++) {
        struct phase ph = {share(start, total_ns, 0.10 * (i + 1)), 5, 200};
        if (measure_readiness(evloop_backend_name((unsigned)i), may_spin, &ph,
                              &p->readiness_ns[i]) < 0)
            p->readiness_ns[i] = 0; /* cannot start here, or failed: not a candidate */
    }
    choose_backend(p);
    const char *backend = strcmp(p->backend, "auto") == 0 ? NULL : p->backend;
    struct phase wake = {share(start, total_ns, 0.55), 5, 200};
    int r = measure_handoff(backend, 0, may_spin, &wake, &p->wake_ns);
    if (r == 0 && may_spin) {
        struct phase spin = {share(start, total_ns, 0.70), 20, MAX_SAMPLES};
        r = measure_handoff(backend, HANDOFF_SPIN_NS, may_spin, &spin, &p->handoff_ns);
    }
    if (r < 0)
        return r;
    choose_spin(p);
    struct phase flood = {share(start, total_ns, 1.0), 1, FLOOD_ROUNDS};
    return measure_budget(backend, may_spin, &flood, &p->batch_budget);
}

EVLOOP_API int evloop_autotune(struct evloop_profile *out,
                               const struct evloop_autotune_options *opt)
{
    if (!out)
        return -EINVAL;
    double seconds = opt ? opt->max_seconds : 0;
    if (!(seconds >= 0 && seconds <= MAX_SECONDS)) /* also NaN */
        return -EINVAL;
    if (seconds == 0)
        seconds = DEFAULT_SECONDS;
    struct evloop_profile p;
    memset(&p, 0, sizeof(p));
    p.version = EVLOOP_PROFILE_VERSION;
    int r = calibrate(&p, (uint64_t)(seconds * 1e9));
    if (r < 0)
        return r;
    *out = p;
    if (opt && opt->save_path)
        return evloop_profile_save(out, opt->save_path);
    return 0;
}
