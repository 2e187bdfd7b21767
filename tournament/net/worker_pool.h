/* worker_pool: what the offload servers of the network family share besides the connection
 * logic: a pool of worker threads that takes jobs from the loop thread, does a fixed amount
 * of CPU work per request and hands each job to a post function, the one place where the
 * servers differ (evloop_submit, ev_async_send, uv_async_send with a reply_list); the busy
 * work itself (libuv's uv_queue_work server calls it from libuv's own pool); and the CPU
 * placement of the loop thread and of the workers. No loop calls in it. */
#ifndef BENCH_NET_WORKER_POOL_H
#define BENCH_NET_WORKER_POOL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "net_util.h"

/* One job: `count` complete requests of one connection. Servers embed it in their
 * connection and find the connection again with offsetof. */
struct offload_job {
    struct offload_job *next; /* the pool's queue, then a reply_list */
    uint64_t count;
};

/* Called on the worker thread once a job's work is done: hands the job back to the loop
 * thread. It may run after the loop has stopped, until worker_pool_stop() returns. */
typedef void (*offload_post_fn)(struct offload_job *job, void *ctx);

struct worker_pool;

/* Starts `workers` threads, which inherit the calling thread's CPU affinity. Returns 0 and
 * sets *out, or a negative errno (nothing started then). */
int worker_pool_start(struct worker_pool **out, unsigned workers, unsigned work_us,
                      offload_post_fn post, void *ctx);

/* Queues a job (FIFO). Any thread; the servers call it on the loop thread. */
void worker_pool_push(struct worker_pool *p, struct offload_job *job);

/* Lets the workers finish every job queued (each is posted), joins them and frees the pool.
 * After it returns no post runs. NULL is a no-op. */
void worker_pool_stop(struct worker_pool *p);

/* The work of `count` requests: a busy loop on CLOCK_MONOTONIC for count * us
 * microseconds. */
void offload_work(uint64_t count, unsigned us);

/* A locked list of finished jobs, for the libraries whose hand-off is a wake-up alone
 * (ev_async_send, uv_async_send): workers push, the loop thread takes the whole list. */
struct reply_list {
    pthread_mutex_t mu;
    struct offload_job *head, *tail;
};

void reply_list_init(struct reply_list *l);
void reply_list_destroy(struct reply_list *l);
/* Appends job. Any thread. */
void reply_list_push(struct reply_list *l, struct offload_job *job);
/* Takes every job pushed so far, in order (NULL if none); follow ->next. Any thread. */
struct offload_job *reply_list_take(struct reply_list *l);

/* The threads of an offload server, placed as --worker-cpus and --loop-cpu say: pins the
 * calling (loop) thread to o->worker_cpus, calls start(arg), which creates the worker
 * threads (they inherit that mask), then pins the calling thread to o->loop_cpus. A NULL
 * list leaves that mask as it is; a NULL start places the loop thread alone (a pool that
 * places its own threads). Call it before the loop is created (evloop reads its mask then).
 * Returns 0, -EINVAL (a malformed CPU list: nothing done), start's error, or
 * pthread_setaffinity_np's -errno (then what start started is the caller's to stop). */
int offload_start_threads(const struct net_opts *o, int (*start)(void *arg), void *arg);

/* The CPUs of a list such as "1" or "0-3,6" (--worker-cpus), in increasing order, into
 * cpus[0..max). Returns how many (0 for NULL or ""), or -EINVAL (malformed, or more than
 * max). */
int offload_cpu_list(const char *list, int *cpus, unsigned max);

/* offload_start_threads with worker_pool_start as start: o->workers threads doing o->work_us
 * us per request, placed as o says. Returns 0 and sets *out, or a negative errno (then
 * nothing runs and *out is NULL). */
int offload_start_pool(struct worker_pool **out, const struct net_opts *o, offload_post_fn post,
                       void *ctx);

#endif /* BENCH_NET_WORKER_POOL_H */
