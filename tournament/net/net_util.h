/* net_util: what the servers of the network family share besides the connection logic:
 * their command line (--port, --backend, --echo), the listening socket, accepting and the
 * "ready" line the driver (run_net.py) waits for. No loop calls in it. */
#ifndef BENCH_NET_NET_UTIL_H
#define BENCH_NET_NET_UTIL_H

#include <stdint.h>

/* The listen backlog: above the 1000 connections wrk opens at once. */
#define NET_BACKLOG 4096

struct net_opts {
    int port;            /* --port N (default 8080; 0: any free port, announced by "ready") */
    const char *backend; /* --backend NAME (evloop servers; NULL: "auto") */
    /* The offload servers' (worker_pool.h); the others ignore them. */
    unsigned workers;        /* --workers N: worker threads (default 2) */
    unsigned work_us;        /* --work-us N: busy work per request, us (default 2) */
    const char *loop_cpus;   /* --loop-cpu LIST: the loop thread's CPUs (NULL: as started) */
    const char *worker_cpus; /* --worker-cpus LIST: the workers' CPUs (NULL: as started) */
};

/* Parses argv; on a bad argument prints the usage of prog and returns -1, else 0. --echo
 * makes the server an echo server (http_conn_use_echo). It also ignores SIGPIPE: a write
 * to a connection the client has closed must fail, not kill. */
int net_parse_args(int argc, char **argv, const char *prog, struct net_opts *o);

/* A non-blocking, close-on-exec TCP socket listening on 127.0.0.1:port (0: a free port the
 * kernel picks), or -errno. */
int net_listen(int port);

/* The local port fd is bound to, or -errno. */
int net_local_port(int fd);

/* Accepts one connection as a non-blocking, close-on-exec socket with TCP_NODELAY.
 * Returns the fd, or -errno (-EAGAIN: none left). */
int net_accept(int lfd);

/* Sets TCP_NODELAY on fd (every server sends each response batch in one write). */
void net_nodelay(int fd);

/* Prints "ready <what> 127.0.0.1:<port>" (what run_net.py waits for), and flushes. */
void net_ready(const char *what, int port);

/* Prints the server's count of requests on stderr when it exits. */
void net_report(const char *what, uint64_t requests, uint64_t conns);

#endif /* BENCH_NET_NET_UTIL_H */
