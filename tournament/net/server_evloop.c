/* server_evloop: the network family's HTTP/1.1 server on evloop readiness (evloop_io_add,
 * evloop_io_modify, evloop_io_remove), on the backend --backend names: ready_conn's
 * connection handling on evloop's watchers. Built three times:
 *   net_server_evloop (NET_OFFLOAD 0): the requests are answered at once;
 *   net_server_evloop_offload (NET_OFFLOAD 1): worker_pool.c's workers do each request's
 *     work and post the finished job back with evloop_submit; the task, on the loop thread,
 *     queues the responses and writes them;
 *   net_server_evloop_pool (NET_OFFLOAD 1, OFFLOAD_WORK_SUBMIT 1): no pool of ours, the
 *     library's: evloop_work_submit of each job, whose work callback does the work and whose
 *     done callback, on the loop thread, queues the responses and writes them. */
#include <sched.h>
#include <stdio.h>

#include "evloop_server.h"
#include "net_util.h"
#include "ready_conn.h"

#ifndef NET_OFFLOAD
#define NET_OFFLOAD 0
#endif
#ifndef OFFLOAD_WORK_SUBMIT
#define OFFLOAD_WORK_SUBMIT 0
#endif

static evloop *g_loop;

static unsigned evloop_events(unsigned want)
{
    return (want & READY_IN ? EVLOOP_READABLE : 0u) | (want & READY_OUT ? EVLOOP_WRITABLE : 0u);
}

static void on_conn(void *arg, int fd, unsigned events)
{
    ready_conn_event(arg, events & (EVLOOP_READABLE | EVLOOP_HANGUP | EVLOOP_ERROR));
}

static int add_conn(struct ready_conn *c)
{
    return evloop_io_add(g_loop, c->fd, EVLOOP_READABLE, on_conn, c);
}

static int modify_conn(struct ready_conn *c, unsigned want)
{
    return evloop_io_modify(g_loop, c->fd, evloop_events(want));
}

static void remove_conn(struct ready_conn *c)
{
    evloop_io_remove(g_loop, c->fd);
}

static void on_listener(void *arg, int lfd, unsigned events)
{
    ready_conns_accept(lfd);
}

static int start(evloop *loop, int lfd)
{
    static const struct ready_ops ops = {
        .add = add_conn, .modify = modify_conn, .remove = remove_conn};
    g_loop = loop;
    ready_conns_init(&ops, NET_OFFLOAD ? "server_evloop_offload" : "server_evloop");
    return evloop_io_add(loop, lfd, EVLOOP_READABLE, on_listener, NULL);
}

/* After evloop_free: nothing to unwatch. */
static void finish(uint64_t *requests, uint64_t *conns)
{
    ready_conns_close_all(false, requests, conns);
}

#if NET_OFFLOAD && OFFLOAD_WORK_SUBMIT
static unsigned g_work_us;
static struct evloop_work_config g_pool_cfg;
static int g_pool_cpus[CPU_SETSIZE];

/* On a pool thread. */
static void do_work(void *arg)
{
    struct offload_job *job = arg;
    offload_work(job->count, g_work_us);
}

/* On the loop thread: status 0 once the work has returned; -ECANCELED when the loop stopped
 * before a pool thread took the job. */
static void on_done(void *arg, int status)
{
    struct ready_conn *c = ready_conn_of_job(arg);
    if (status == 0)
        ready_conn_job_back(c);
    else
        ready_conn_job_dropped(c);
}

static int push_job(struct offload_job *job)
{
    return evloop_work_submit(g_loop, do_work, on_done, job, NULL);
}

/* Before the loop exists: the loop thread placed on --loop-cpu, the pool's settings kept
 * for start_pool (the pool threads start at the first submit, each pinned to one CPU of
 * --worker-cpus in turn; without it they inherit the loop thread's mask). The spin is the
 * library's default (adaptive). */
static int init(const struct net_opts *o)
{
    int n = offload_cpu_list(o->worker_cpus, g_pool_cpus, CPU_SETSIZE);
    if (n < 0)
        return n;
    evloop_work_config_init(&g_pool_cfg);
    g_pool_cfg.threads = o->workers;
    g_pool_cfg.cpus = n > 0 ? g_pool_cpus : NULL;
    g_pool_cfg.ncpus = (unsigned)n;
    g_work_us = o->work_us;
    ready_conns_offload_to(push_job);
    return offload_start_threads(o, NULL, NULL);
}

static int start_pool(evloop *loop, int lfd)
{
    int r = evloop_work_configure(loop, &g_pool_cfg);
    return r < 0 ? r : start(loop, lfd);
}

/* evloop_run has returned, so every accepted job's done has run; the pool ends in
 * evloop_free. Its counters go to stderr (how the hand-off went: sleeps, wakes, spins). */
static void print_pool_stats(void)
{
    struct evloop_work_stats st;
    if (evloop_work_stats(g_loop, &st) < 0)
        return;
    fprintf(stderr,
            "work pool: %u threads, %llu submitted, %llu completed, %llu cancelled, "
            "%llu sleeps, %llu wakes, %llu spin hits, %llu overflows\n",
            st.threads, (unsigned long long)st.submitted, (unsigned long long)st.completed,
            (unsigned long long)st.cancelled, (unsigned long long)st.sleeps,
            (unsigned long long)st.wakes, (unsigned long long)st.spin_hits,
            (unsigned long long)st.overflows);
}

static const struct evloop_glue GLUE = {.kind = "offload work-pool",
                                        .start = start_pool,
                                        .finish = finish,
                                        .init = init,
                                        .stopped = print_pool_stats};
#elif NET_OFFLOAD
/* The task a worker submits: on the loop thread, the job's responses go out. */
static void on_reply(void *arg)
{
    ready_conn_job_back(ready_conn_of_job(arg));
}

/* On a worker thread (g_loop was set before the first job was pushed). After evloop_stop
 * the loop refuses the task: the connection stays busy in the table, and finish frees it. */
static void post_reply(struct offload_job *job, void *ctx)
{
    evloop_submit(g_loop, on_reply, job);
}

static int init(const struct net_opts *o)
{
    return ready_conns_offload(o, post_reply);
}

static const struct evloop_glue GLUE = {.kind = "offload",
                                        .start = start,
                                        .finish = finish,
                                        .init = init,
                                        .stopped = ready_conns_stop_workers};
#else
static const struct evloop_glue GLUE = {.kind = "readiness", .start = start, .finish = finish};
#endif

int main(int argc, char **argv)
{
    return evloop_server_main(argc, argv, &GLUE);
}
