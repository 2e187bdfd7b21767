/* ready_conn: the connection handling of the readiness servers of the network family (evloop
 * readiness, libev; plain and offload): accept until EAGAIN, read until EAGAIN, answer, write,
 * watch for writability only while output is pending, close, and the table of open
 * connections. A server supplies its loop's watcher calls (struct ready_ops); an offload
 * server also hands each connection's waiting requests to a pool (worker_pool.c's:
 * ready_conns_offload; one of its own: ready_conns_offload_to) and calls ready_conn_job_back
 * when a job is posted back.
 * Loop thread only; one set of connections per process. */
#ifndef BENCH_NET_READY_CONN_H
#define BENCH_NET_READY_CONN_H

#include <stdalign.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http_conn.h"
#include "worker_pool.h"

/* What a connection asks its loop to watch. */
enum { READY_IN = 1u, READY_OUT = 2u };

struct ready_conn {
    int fd;
    unsigned watching; /* READY_IN / READY_OUT the loop watches now; 0 once closed */
    bool busy;         /* offload: its job is at the pool or on its way back */
    bool dead;         /* offload: closed while busy: the job's return frees it */
    struct offload_job job;
    struct http_conn http;
    alignas(max_align_t) unsigned char watcher[]; /* the loop's watcher (ready_ops) */
};

struct ready_ops {
    size_t watcher_size; /* bytes of struct ready_conn's watcher (libev: an ev_io) */
    /* Starts watching c->fd for input. 0 or a negative errno (c is then freed). */
    int (*add)(struct ready_conn *c);
    /* Watches what want says (READY_IN | READY_OUT, maybe 0). 0 or a negative errno. */
    int (*modify)(struct ready_conn *c, unsigned want);
    /* Stops watching c->fd (c is closed). */
    void (*remove)(struct ready_conn *c);
};

/* Before the first accept: the loop's calls, and the name accept errors are printed with. */
void ready_conns_init(const struct ready_ops *ops, const char *who);

/* Offload: starts the workers as o says (offload_start_pool), which hand each finished job
 * to post. Connections accepted from now on defer their requests (http_conn's defer), and
 * their waiting requests go to the workers as one job per connection at a time. Returns 0 or
 * a negative errno (no worker runs then). */
int ready_conns_offload(const struct net_opts *o, offload_post_fn post);

/* Hands a job to a pool. 0, or a negative errno (the job is not taken: the connection is
 * then closed). */
typedef int (*ready_push_fn)(struct offload_job *job);

/* Offload on a pool of the server's own, started by the server: as ready_conns_offload, but
 * each job goes to push, and ready_conns_stop_workers has nothing to stop. */
void ready_conns_offload_to(ready_push_fn push);

/* Offload, once the loop no longer runs: the workers finish what they hold (each job is
 * posted) and are joined. */
void ready_conns_stop_workers(void);

/* Accepts every connection waiting on lfd and starts reading each. */
void ready_conns_accept(int lfd);

/* c's fd is ready: reads (readable), hands off what the reads completed, writes, and watches
 * what c needs next. c may be freed. */
void ready_conn_event(struct ready_conn *c, bool readable);

/* Offload, on the loop thread: c's job is back, its work done: frees c if it was closed
 * meanwhile, else queues and writes the job's responses. */
void ready_conn_job_back(struct ready_conn *c);

/* Offload, on the loop thread: c's job is back undone (a pool that cancels what it has not
 * started when the loop stops): frees c if it was closed meanwhile; the job's requests stay
 * unanswered. */
void ready_conn_job_dropped(struct ready_conn *c);

static inline struct ready_conn *ready_conn_of_job(struct offload_job *job)
{
    return (struct ready_conn *)((char *)job - offsetof(struct ready_conn, job));
}

static inline struct ready_conn *ready_conn_of_watcher(void *watcher)
{
    return (struct ready_conn *)((char *)watcher - offsetof(struct ready_conn, watcher));
}

/* When the server stops: closes and frees every connection left (unwatching each first when
 * unwatch is set, for a loop that still exists), and returns the requests and connections
 * served. */
void ready_conns_close_all(bool unwatch, uint64_t *requests, uint64_t *conns);

#endif /* BENCH_NET_READY_CONN_H */
