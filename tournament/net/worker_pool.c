/* worker_pool: the offload servers' worker threads, their busy work, the locked reply list
 * and the CPU placement (see worker_pool.h). The pool's queue is a mutex, a condition
 * variable and an intrusive FIFO: the same for every system, so the servers differ only in
 * how a finished job reaches the loop thread. */
#include "worker_pool.h"

#include <errno.h>
#include <sched.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct worker_pool {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct offload_job *head, *tail; /* queued jobs */
    unsigned idle;                   /* workers waiting on cv */
    bool stopping;
    unsigned work_us;
    offload_post_fn post;
    void *ctx;
    unsigned nthreads;
    pthread_t threads[];
};

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void offload_work(uint64_t count, unsigned us)
{
    uint64_t ns = count * us * 1000u;
    uint64_t start = now_ns();
    while (now_ns() - start < ns)
        continue;
}

/* Takes the next job, waiting for one; NULL once the pool stops and its queue is empty. */
static struct offload_job *next_job(struct worker_pool *p)
{
    pthread_mutex_lock(&p->mu);
    while (!p->head && !p->stopping) {
        p->idle++;
        pthread_cond_wait(&p->cv, &p->mu);
        p->idle--;
    }
    struct offload_job *job = p->head;
    if (job) {
        p->head = job->next;
        if (!p->head)
            p->tail = NULL;
        job->next = NULL;
    }
    pthread_mutex_unlock(&p->mu);
    return job;
}

static void *worker_main(void *arg)
{
    struct worker_pool *p = arg;
    for (struct offload_job *job; (job = next_job(p));) {
        offload_work(job->count, p->work_us);
        p->post(job, p->ctx);
    }
    return NULL;
}

int worker_pool_start(struct worker_pool **out, unsigned workers, unsigned work_us,
                      offload_post_fn post, void *ctx)
{
    struct worker_pool *p = calloc(1, sizeof(*p) + workers * sizeof(pthread_t));
    if (!p)
        return -ENOMEM;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->cv, NULL);
    p->work_us = work_us;
    p->post = post;
    p->ctx = ctx;
    for (; p->nthreads < workers; p->nthreads++) {
        int r = pthread_create(&p->threads[p->nthreads], NULL, worker_main, p);
        if (r != 0) {
            worker_pool_stop(p);
            return -r;
        }
    }
    *out = p;
    return 0;
}

/* Appends job to the intrusive FIFO head..tail (the caller holds its lock). */
static void fifo_append(struct offload_job **head, struct offload_job **tail,
                        struct offload_job *job)
{
    job->next = NULL;
    if (*tail)
        (*tail)->next = job;
    else
        *head = job;
    *tail = job;
}

void worker_pool_push(struct worker_pool *p, struct offload_job *job)
{
    pthread_mutex_lock(&p->mu);
    fifo_append(&p->head, &p->tail, job);
    /* A busy worker takes the job when it is done with its own: wake one only if one is
     * waiting (pthread_cond_signal without a waiter costs no syscall, but a read of idle
     * under the lock we hold anyway is cheaper still). */
    if (p->idle > 0)
        pthread_cond_signal(&p->cv);
    pthread_mutex_unlock(&p->mu);
}

void worker_pool_stop(struct worker_pool *p)
{
    if (!p)
        return;
    pthread_mutex_lock(&p->mu);
    p->stopping = true;
    pthread_cond_broadcast(&p->cv);
    pthread_mutex_unlock(&p->mu);
    for (unsigned i = 0; i < p->nthreads; i++)
        pthread_join(p->threads[i], NULL);
    pthread_cond_destroy(&p->cv);
    pthread_mutex_destroy(&p->mu);
    free(p);
}

void reply_list_init(struct reply_list *l)
{
    pthread_mutex_init(&l->mu, NULL);
    l->head = l->tail = NULL;
}

void reply_list_destroy(struct reply_list *l)
{
    pthread_mutex_destroy(&l->mu);
}

void reply_list_push(struct reply_list *l, struct offload_job *job)
{
    pthread_mutex_lock(&l->mu);
    fifo_append(&l->head, &l->tail, job);
    pthread_mutex_unlock(&l->mu);
}

struct offload_job *reply_list_take(struct reply_list *l)
{
    pthread_mutex_lock(&l->mu);
    struct offload_job *all = l->head;
    l->head = l->tail = NULL;
    pthread_mutex_unlock(&l->mu);
    return all;
}

/* Parses a CPU list such as "1" or "0-3,6" into *set. Returns 0 or -EINVAL. */
static int parse_cpus(const char *list, cpu_set_t *set)
{
    CPU_ZERO(set);
    const char *s = list;
    while (*s) {
        char *end;
        long lo = strtol(s, &end, 10);
        long hi = lo;
        if (end == s || lo < 0)
            return -EINVAL;
        if (*end == '-') {
            s = end + 1;
            hi = strtol(s, &end, 10);
            if (end == s || hi < lo)
                return -EINVAL;
        }
        if (hi >= CPU_SETSIZE)
            return -EINVAL;
        for (long cpu = lo; cpu <= hi; cpu++)
            CPU_SET((int)cpu, set);
        if (*end == ',')
            end++;
        else if (*end)
            return -EINVAL;
        s = end;
    }
    return CPU_COUNT(set) > 0 ? 0 : -EINVAL;
}

/* Pins the calling thread to the CPUs of list; NULL or "" leaves it as it is. */
static int pin_self(const char *list)
{
    if (!list || !*list)
        return 0;
    cpu_set_t set;
    if (parse_cpus(list, &set) < 0)
        return -EINVAL;
    return -pthread_setaffinity_np(pthread_self(), sizeof(set), &set);
}

static bool cpus_are_valid(const char *list)
{
    cpu_set_t set;
    return !list || !*list || parse_cpus(list, &set) == 0;
}

int offload_cpu_list(const char *list, int *cpus, unsigned max)
{
    if (!list || !*list)
        return 0;
    cpu_set_t set;
    if (parse_cpus(list, &set) < 0 || (unsigned)CPU_COUNT(&set) > max)
        return -EINVAL;
    int n = 0;
    for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
        if (CPU_ISSET(cpu, &set))
            cpus[n++] = cpu;
    return n;
}

int offload_start_threads(const struct net_opts *o, int (*start)(void *arg), void *arg)
{
    if (!cpus_are_valid(o->worker_cpus) || !cpus_are_valid(o->loop_cpus))
        return -EINVAL;
    int r = start ? pin_self(o->worker_cpus) : 0;
    if (r == 0 && start)
        r = start(arg);
    if (r == 0)
        r = pin_self(o->loop_cpus);
    return r;
}

struct pool_start {
    struct worker_pool **out;
    const struct net_opts *o;
    offload_post_fn post;
    void *ctx;
};

static int start_pool(void *arg)
{
    struct pool_start *s = arg;
    return worker_pool_start(s->out, s->o->workers, s->o->work_us, s->post, s->ctx);
}

int offload_start_pool(struct worker_pool **out, const struct net_opts *o, offload_post_fn post,
                       void *ctx)
{
    *out = NULL;
    struct pool_start s = {.out = out, .o = o, .post = post, .ctx = ctx};
    int r = offload_start_threads(o, start_pool, &s);
    if (r < 0) {
        worker_pool_stop(*out);
        *out = NULL;
    }
    return r;
}
