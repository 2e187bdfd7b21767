/* Completion operations under load: an echo server built only on evloop_accept/recv/send
 * serves client threads that open, use and close loopback TCP connections (some close
 * first, some are closed by the server, some reset), then a cancel storm from another
 * thread, then a stop at a random moment under load, then many busy connections and a
 * burst of new ones, where no message may wait while others are served. Checks: every op
 * posted gets exactly
 * one callback (posted == completed), every accepted connection is freed once, every echo
 * comes back intact, evloop_run returns 0; ASan/LSan and valgrind see no leak. The clients
 * run in a child process: the server closes connections inside their last callback, and the
 * fds the clients open must not reuse those numbers in this process (see evloop.h).
 * Figure: 10,000 connections opened and closed (EVLOOP_LONG=1: 100,000 plain). */
#include "stress_util.h"
#include "../ops_util.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>

#define CLIENTS 2
#define MSG_MAX 200

/* ---- the server (loop thread) --------------------------------------------------------- */

struct server {
    evloop *loop;
    int lfd;
    unsigned close_every; /* the server closes a connection after this many echoes (0: never) */
    test_counter posted, completed, accepted, freed, echoes, errors;
    test_counter accept_errors;
    uint64_t work_ns; /* CPU time each message costs the server (a busy wait) */
    atomic_bool stopping;
};

struct conn {
    struct server *srv;
    int fd;
    unsigned echoes;
    char buf[MSG_MAX];
};

static void on_recv(void *arg, int fd, int64_t res);
static void on_accept(void *arg, int fd, int64_t res);

static void count_post(struct server *s, int rc)
{
    if (rc == 0)
        atomic_fetch_add(&s->posted, 1);
}

static void conn_free(struct conn *c)
{
    close(c->fd);
    atomic_fetch_add(&c->srv->freed, 1);
    free(c);
}

/* The server's work on a message: ns of CPU time, a busy wait. */
static void spend(uint64_t ns)
{
    for (uint64_t t0 = ns ? stress_now_ns() : 0; ns && stress_now_ns() - t0 < ns;)
        continue;
}

static void post_recv(struct conn *c)
{
    int rc = evloop_recv(c->srv->loop, c->fd, c->buf, sizeof c->buf, on_recv, c);
    count_post(c->srv, rc);
    if (rc < 0) {
        CHECK(rc == -ESHUTDOWN);
        conn_free(c);
    }
}

static void on_sent(void *arg, int fd, int64_t res)
{
    (void)fd;
    struct conn *c = arg;
    atomic_fetch_add(&c->srv->completed, 1);
    if (res < 0) {
        CHECK(res == -ECANCELED || res == -EPIPE || res == -ECONNRESET);
        conn_free(c);
        return;
    }
    atomic_fetch_add(&c->srv->echoes, 1);
    if (c->srv->close_every && ++c->echoes >= c->srv->close_every) {
        conn_free(c); /* the server closes first */
        return;
    }
    post_recv(c);
}

static void on_recv(void *arg, int fd, int64_t res)
{
    struct conn *c = arg;
    atomic_fetch_add(&c->srv->completed, 1);
    if (res <= 0) {
        CHECK(res == 0 || res == -ECANCELED || res == -ECONNRESET);
        conn_free(c);
        return;
    }
    CHECK(res <= (int64_t)sizeof c->buf);
    spend(c->srv->work_ns);
    int rc = evloop_send(c->srv->loop, fd, c->buf, (size_t)res, on_sent, c);
    count_post(c->srv, rc);
    if (rc < 0) {
        CHECK(rc == -ESHUTDOWN);
        conn_free(c);
    }
}

static void post_accept(struct server *s)
{
    int rc = evloop_accept(s->loop, s->lfd, on_accept, s);
    count_post(s, rc);
    CHECK(rc == 0 || rc == -ESHUTDOWN);
}

static void on_accept(void *arg, int lfd, int64_t res)
{
    (void)lfd;
    struct server *s = arg;
    atomic_fetch_add(&s->completed, 1);
    if (res == -ECANCELED)
        return;
    if (res < 0) {
        atomic_fetch_add(&s->accept_errors, 1); /* EMFILE and the like: try again */
    } else {
        struct conn *c = calloc(1, sizeof *c);
        CHECK(c != NULL);
        c->srv = s;
        c->fd = (int)res;
        CHECK(fcntl(c->fd, F_GETFL) & O_NONBLOCK);
        atomic_fetch_add(&s->accepted, 1);
        post_recv(c);
    }
    post_accept(s);
}

static void server_init(struct server *s, evloop *loop, unsigned close_every)
{
    memset(s, 0, sizeof *s);
    s->loop = loop;
    s->close_every = close_every;
}

/* ---- clients (their own threads) --------------------------------------------------------- */

struct client {
    struct sockaddr_in addr;
    uint64_t conns;   /* to open */
    uint64_t rng;
    uint64_t done;    /* opened and closed */
    uint64_t bad;     /* echoes that came back wrong */
    uint64_t refused; /* connects or echoes that failed though the server was still on */
    unsigned server_closes; /* the server closes after this many echoes (0: never) */
    atomic_bool *quit;
};

static bool echo_once(int fd, uint64_t *rng, uint64_t *bad)
{
    char out[MSG_MAX], in[MSG_MAX];
    size_t n = 1 + stress_below(rng, MSG_MAX);
    for (size_t i = 0; i < n; i++)
        out[i] = (char)stress_rand(rng);
    if (write(fd, out, n) != (ssize_t)n)
        return false;
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, in + got, n - got);
        if (r <= 0)
            return false;
        got += (size_t)r;
    }
    if (memcmp(in, out, n) != 0)
        (*bad)++;
    return true;
}

/* One connection: a few echoes, then one of: close, reset (SO_LINGER 0), or wait for the
 * server's close (it closes after close_every echoes). */
static void *client_main(void *arg)
{
    struct client *cl = arg;
    for (uint64_t i = 0; i < cl->conns && !(cl->quit && atomic_load(cl->quit)); i++) {
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0 || connect(fd, (struct sockaddr *)&cl->addr, sizeof cl->addr) < 0) {
            cl->refused++;
            if (fd >= 0)
                close(fd);
            if (cl->quit)
                stress_nap_ns(100000);
            continue;
        }
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        unsigned echoes = 1 + (unsigned)stress_below(&cl->rng, 3);
        bool ok = true;
        unsigned e = 0;
        for (; e < echoes && ok; e++)
            ok = echo_once(fd, &cl->rng, &cl->bad);
        /* An echo after the server closed its side fails, as it should. */
        if (!ok && !(cl->server_closes && e > cl->server_closes))
            cl->refused++;
        if (stress_below(&cl->rng, 8) == 0) {
            struct linger lg = {1, 0};
            setsockopt(fd, SOL_SOCKET, SO_LINGER, &lg, sizeof lg);
        }
        close(fd);
        cl->done++;
    }
    return NULL;
}

/* ---- the clients' process ---------------------------------------------------------------- */

struct client_report {
    uint64_t done, bad, refused;
};

struct clients {
    pid_t pid;
    int quit_w;   /* closed by the parent: clients with endless conns stop (-1: none) */
    int report_r; /* the child's report (struct client_report or flood_report) */
};

/* Forks the clients' process, with a pipe for its report (rep[1] in the child, c->report_r
 * here) and, when quit, one the parent closes to stop it (quit[0] in the child, c->quit_w
 * here). Returns true in the child, which has closed the listener and the other ends. */
static bool fork_clients(struct clients *c, int lfd, int rep[2], int quit[2])
{
    assert_int_equal(pipe2(rep, O_CLOEXEC), 0);
    if (quit)
        assert_int_equal(pipe2(quit, O_CLOEXEC), 0);
    fflush(stdout);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(lfd);
        close(rep[0]);
        if (quit)
            close(quit[1]);
        return true;
    }
    close(rep[1]);
    if (quit)
        close(quit[0]);
    *c = (struct clients){pid, quit ? quit[1] : -1, rep[0]};
    return false;
}

/* Reads the clients' report (size bytes into r) and reaps their process, which must have
 * exited with 0. */
static void clients_report(struct clients *c, void *r, size_t size)
{
    if (c->quit_w >= 0)
        close(c->quit_w);
    ssize_t n = read(c->report_r, r, size);
    close(c->report_r);
    int status = 0;
    assert_int_equal(waitpid(c->pid, &status, 0), c->pid);
    assert_true(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    assert_int_equal(n, (ssize_t)size);
}

/* Forks a process running CLIENTS client threads against addr. Call before this process
 * starts a thread (the loop's included). conns per client, UINT64_MAX: until told to quit. */
static void clients_start(struct clients *c, const struct sockaddr_in *addr, uint64_t conns,
                          unsigned server_closes, uint64_t seed, int lfd)
{
    int q[2], rep[2];
    if (fork_clients(c, lfd, rep, q)) {
        atomic_bool quit = false;
        struct client cl[CLIENTS];
        pthread_t t[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            cl[i] = (struct client){.addr = *addr, .conns = conns, .rng = seed + (uint64_t)i * 7919,
                                    .server_closes = server_closes,
                                    .quit = conns == UINT64_MAX ? &quit : NULL};
            if (pthread_create(&t[i], NULL, client_main, &cl[i]) != 0)
                _exit(2);
        }
        char b;
        if (conns == UINT64_MAX)
            while (read(q[0], &b, 1) > 0)
                ;
        atomic_store(&quit, true);
        struct client_report r = {0, 0, 0};
        for (int i = 0; i < CLIENTS; i++) {
            pthread_join(t[i], NULL);
            r.done += cl[i].done;
            r.bad += cl[i].bad;
            r.refused += cl[i].refused;
        }
        _exit(write(rep[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 3);
    }
}

static struct client_report clients_finish(struct clients *c)
{
    struct client_report r = {0, 0, UINT64_MAX};
    clients_report(c, &r, sizeof r);
    return r;
}

static bool all_freed(void *ctx)
{
    struct server *s = ctx;
    return atomic_load(&s->freed) == atomic_load(&s->accepted);
}

/* ---- tests --------------------------------------------------------------------------------- */

static void test_connections_open_echo_and_close_under_load_each_op_once(void **state)
{
    (void)state;
    uint64_t n = stress_size("connections", (struct stress_sizes){10000, 10000, 2000, 100000,
                                                                 10000, 10000});
    struct server s;
    struct sockaddr_in addr;
    int lfd = tcp_listener_backlog(&addr, 1024);
    struct clients kids;
    clients_start(&kids, &addr, n / CLIENTS, 2, stress_seed(), lfd);
    evloop *loop = test_loop_new(NULL);
    server_init(&s, loop, 2);
    s.lfd = lfd;
    post_accept(&s); /* from this thread, before the loop runs */
    struct test_runner r;
    test_runner_start(&r, loop);
    struct client_report rep = clients_finish(&kids);
    uint64_t done = rep.done, bad = rep.bad, refused = rep.refused;
    assert_true(wait_until(all_freed, &s, 30000));
    test_runner_stop(&r); /* the pending accept ends with -ECANCELED */
    printf("# %llu connections, %llu accepted, %llu echoes, %llu client errors, "
           "%llu accept errors\n", (unsigned long long)done,
           (unsigned long long)atomic_load(&s.accepted), (unsigned long long)atomic_load(&s.echoes),
           (unsigned long long)refused, (unsigned long long)atomic_load(&s.accept_errors));
    assert_int_equal(done, n / CLIENTS * CLIENTS);
    assert_int_equal(bad, 0);
    assert_int_equal(refused, 0);
    assert_int_equal(atomic_load(&s.accepted), done);
    assert_int_equal(atomic_load(&s.freed), atomic_load(&s.accepted));
    assert_int_equal(atomic_load(&s.completed), atomic_load(&s.posted));
    test_loop_free(loop);
    close(s.lfd);
}

/* ---- many connections under load: no connection waits while others are served ------------ */

/* Regression (completion ops at 1000 connections). On io_uring the result of an accept
 * reached the loop behind the completions of every busy connection, and the next accept
 * started only then: a loaded server took in one connection per lap of its completion
 * queue, and connections that came in a burst waited seconds for their first answer. On the
 * emulation, recvs that found their data at once chained their callbacks in one delivery,
 * and nothing else ran until the chain broke.
 *
 * The clients keep busy connections echoing in lockstep (one message in flight each), then
 * open a burst of new connections that send at once. The bound is on work, not time, so a
 * slow or loaded machine cannot fail it: while any message waits for its echo (a burst
 * connection's first one included), the busy connections of its client thread may have
 * FLOOD_ROUNDS_MAX echoes each on average, no more. A fair server answers within a round or
 * two; before the fixes the burst's last connections waited for over a hundred. The server
 * spends FLOOD_WORK_NS on each message, so that it is the bottleneck, as under wrk. */

#define FLOOD_MSG 32
#define FLOOD_TRIPS 2        /* echoes each burst connection makes */
#define FLOOD_WARMUP 10      /* echoes per busy connection before the burst */
#define FLOOD_OPEN_STEP 8    /* connections a client opens between two looks at its echoes */
#define FLOOD_FD_SPARE 64    /* fds a process needs beside the connections */
#define FLOOD_WORK_NS 20000  /* the server's work per message */
#define FLOOD_ROUNDS_MAX 8   /* echoes per busy connection while one message waits */

struct flood_conn {
    int fd;
    bool burst;
    unsigned trips;      /* echoes back */
    size_t got;          /* bytes of the echo in flight back so far */
    bool waiting;        /* a message is in flight */
    uint64_t busy_at;    /* the thread's busy echoes when it was sent */
};

struct flood_report {
    uint64_t trips, late, unanswered, errors;
    double worst_rounds, worst_first_rounds; /* busy echoes per busy connection while waiting */
};

struct flood {
    struct sockaddr_in addr;
    unsigned busy, burst; /* connections of this client thread */
    uint64_t busy_trips;  /* echoes of its busy connections so far */
    uint64_t end_ns;      /* gives up then (a hung server): counted as unanswered */
    struct flood_report rep;
};

static bool flood_send(struct flood *fl, struct flood_conn *c)
{
    static const char msg[FLOOD_MSG] = "every echo in its turn.........";
    c->got = 0;
    c->waiting = true;
    c->busy_at = fl->busy_trips;
    return write(c->fd, msg, FLOOD_MSG) == FLOOD_MSG; /* lockstep: the buffer has room */
}

/* Opens connection c, which sends its first message at once. The connect returns when the
 * kernel has completed the handshake, before the server accepts. */
static bool flood_open(struct flood *fl, struct flood_conn *c, bool burst)
{
    c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    c->burst = burst;
    if (c->fd < 0 || connect(c->fd, (const struct sockaddr *)&fl->addr, sizeof fl->addr) < 0)
        return false;
    int one = 1;
    setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fcntl(c->fd, F_SETFL, O_NONBLOCK) == 0 && flood_send(fl, c);
}

/* Busy echoes per busy connection since c's message was sent. */
static double flood_rounds(const struct flood *fl, const struct flood_conn *c)
{
    return (double)(fl->busy_trips - c->busy_at) / fl->busy;
}

/* Reads what came back on c; returns false on an error or an early close. */
static bool flood_read(struct flood *fl, struct flood_conn *c, unsigned *burst_done)
{
    char buf[FLOOD_MSG];
    ssize_t r = read(c->fd, buf, FLOOD_MSG - c->got);
    if (r < 0 && (errno == EAGAIN || errno == EINTR))
        return true;
    if (r <= 0 || !c->waiting)
        return false;
    c->got += (size_t)r;
    if (c->got < FLOOD_MSG)
        return true;
    double rounds = flood_rounds(fl, c);
    struct flood_report *rep = &fl->rep;
    rep->worst_rounds = rounds > rep->worst_rounds ? rounds : rep->worst_rounds;
    if (c->burst && c->trips == 0 && rounds > rep->worst_first_rounds)
        rep->worst_first_rounds = rounds;
    rep->late += rounds > FLOOD_ROUNDS_MAX;
    rep->trips++;
    c->trips++;
    c->waiting = false;
    fl->busy_trips += !c->burst;
    if (c->burst && c->trips == FLOOD_TRIPS) {
        ++*burst_done;
        return true;
    }
    return flood_send(fl, c);
}

/* One client thread: it opens its busy connections, and once they have echoed FLOOD_WARMUP
 * times each, its burst, FLOOD_OPEN_STEP at a time between two looks at the echoes. The busy
 * connections echo until every connection of the burst has had FLOOD_TRIPS echoes (a burst
 * connection without them by end_ns is unanswered; the busy ones always have a message in
 * flight when it ends). */
static void *flood_main(void *arg)
{
    struct flood *fl = arg;
    unsigned n = fl->busy + fl->burst, opened = 0, burst_done = 0;
    struct flood_conn *cs = calloc(n, sizeof *cs);
    struct pollfd *pfd = calloc(n, sizeof *pfd);
    bool ok = cs && pfd;
    for (unsigned i = 0; ok && i < n; i++)
        cs[i].fd = -1;
    while (ok && burst_done < fl->burst && stress_now_ns() < fl->end_ns) {
        unsigned want = fl->busy_trips >= (uint64_t)fl->busy * FLOOD_WARMUP ? n : fl->busy;
        for (unsigned i = 0; ok && i < FLOOD_OPEN_STEP && opened < want; i++, opened++)
            ok = flood_open(fl, &cs[opened], opened >= fl->busy);
        for (unsigned i = 0; i < opened; i++)
            pfd[i] = (struct pollfd){.fd = cs[i].fd, .events = POLLIN};
        int k = poll(pfd, opened, 10);
        for (unsigned i = 0; ok && k > 0 && i < opened; i++)
            if (pfd[i].revents)
                ok = flood_read(fl, &cs[i], &burst_done);
    }
    fl->rep.errors += !ok || opened < n;
    for (unsigned i = 0; cs && i < n; i++) {
        fl->rep.unanswered += cs[i].burst && cs[i].trips < FLOOD_TRIPS;
        if (cs[i].fd >= 0)
            close(cs[i].fd);
    }
    free(pfd);
    free(cs);
    return NULL;
}

/* Forks the clients' process: CLIENTS flood threads sharing busy and burst connections. */
static void flood_start(struct clients *c, const struct sockaddr_in *addr, unsigned busy,
                        unsigned burst, int lfd)
{
    int rep[2];
    if (fork_clients(c, lfd, rep, NULL)) {
        struct flood fl[CLIENTS];
        pthread_t t[CLIENTS];
        for (int i = 0; i < CLIENTS; i++) {
            fl[i] = (struct flood){.addr = *addr,
                                   .busy = busy / CLIENTS,
                                   .burst = burst / CLIENTS,
                                   .end_ns = stress_now_ns() + 120000000000u};
            if (pthread_create(&t[i], NULL, flood_main, &fl[i]) != 0)
                _exit(2);
        }
        struct flood_report r = {0};
        for (int i = 0; i < CLIENTS; i++) {
            pthread_join(t[i], NULL);
            const struct flood_report *f = &fl[i].rep;
            r.trips += f->trips;
            r.late += f->late;
            r.unanswered += f->unanswered;
            r.errors += f->errors;
            r.worst_rounds = f->worst_rounds > r.worst_rounds ? f->worst_rounds : r.worst_rounds;
            r.worst_first_rounds = f->worst_first_rounds > r.worst_first_rounds
                                       ? f->worst_first_rounds
                                       : r.worst_first_rounds;
        }
        _exit(write(rep[1], &r, sizeof r) == (ssize_t)sizeof r ? 0 : 3);
    }
}

static struct flood_report flood_finish(struct clients *c)
{
    struct flood_report r = {.errors = 1};
    clients_report(c, &r, sizeof r);
    return r;
}

/* Raises the soft RLIMIT_NOFILE to want if it is lower (the clients' process inherits it).
 * Returns false when the hard limit does not allow it; *old gets the limit to restore. */
static bool fd_limit_at_least(rlim_t want, struct rlimit *old)
{
    assert_int_equal(getrlimit(RLIMIT_NOFILE, old), 0);
    if (old->rlim_cur == RLIM_INFINITY || old->rlim_cur >= want)
        return true;
    if (old->rlim_max != RLIM_INFINITY && old->rlim_max < want)
        return false;
    struct rlimit raised = {want, old->rlim_max};
    return setrlimit(RLIMIT_NOFILE, &raised) == 0;
}

/* The kernel's cap on a listen backlog: a burst larger than it would lose SYNs and wait for
 * their retransmission, whatever the server does. */
static unsigned somaxconn(void)
{
    unsigned v = 128;
    FILE *f = fopen("/proc/sys/net/core/somaxconn", "r");
    if (f) {
        if (fscanf(f, "%u", &v) != 1)
            v = 128;
        fclose(f);
    }
    return v;
}

struct flood_server {
    struct server *s;
    uint64_t conns;
};

static bool flood_all_freed(void *ctx)
{
    struct flood_server *fs = ctx;
    return atomic_load(&fs->s->accepted) == fs->conns && all_freed(fs->s);
}

static void test_many_connections_under_load_each_waits_its_turn(void **state)
{
    (void)state;
    unsigned busy = (unsigned)stress_size("busy connections",
                                          (struct stress_sizes){500, 200, 100, 1000, 500, 300});
    unsigned burst = (unsigned)stress_size("burst connections",
                                           (struct stress_sizes){500, 200, 100, 1000, 500, 300});
    unsigned cap = somaxconn() / 2;
    burst = burst < cap ? burst : cap;
    busy = busy < CLIENTS ? CLIENTS : busy / CLIENTS * CLIENTS;
    burst = burst < CLIENTS ? CLIENTS : burst / CLIENTS * CLIENTS;
    uint64_t conns = busy + burst;
    struct rlimit old;
    if (!fd_limit_at_least(conns + FLOOD_FD_SPARE, &old)) {
        printf("# skipped: RLIMIT_NOFILE's hard limit %llu is below %llu\n",
               (unsigned long long)old.rlim_max, (unsigned long long)(conns + FLOOD_FD_SPARE));
        skip();
    }
    struct sockaddr_in addr;
    int lfd = tcp_listener_backlog(&addr, 1024);
    assert_int_equal(listen(lfd, (int)conns), 0); /* room for the whole burst */
    struct clients kids;
    flood_start(&kids, &addr, busy, burst, lfd);
    evloop *loop = test_loop_new(NULL);
    struct server s;
    server_init(&s, loop, 0); /* the clients close, after the burst */
    s.lfd = lfd;
    s.work_ns = FLOOD_WORK_NS;
    /* A watched pipe, as a server's signal pipe: on io_uring the loop then waits in its
     * epoll set, as a real server's does. */
    int p[2];
    test_pipe(p);
    assert_rc(evloop_io_add(loop, p[0], EVLOOP_READABLE, test_never_io, "flood pipe"), 0);
    post_accept(&s);
    struct test_runner r;
    test_runner_start(&r, loop);
    struct flood_report rep = flood_finish(&kids);
    struct flood_server fs = {&s, conns};
    bool freed = wait_until(flood_all_freed, &fs, 30000);
    test_runner_stop(&r);
    printf("# figure: %u busy and %u burst connections, %llu echoes; while a message waited, "
           "at most %.1f busy echoes per busy connection (a burst's first message: %.1f; bound "
           "%d); %llu late, %llu unanswered, %llu client errors\n",
           busy, burst, (unsigned long long)rep.trips, rep.worst_rounds, rep.worst_first_rounds,
           FLOOD_ROUNDS_MAX, (unsigned long long)rep.late, (unsigned long long)rep.unanswered,
           (unsigned long long)rep.errors);
    test_loop_free(loop);
    close(lfd);
    close(p[0]);
    close(p[1]);
    setrlimit(RLIMIT_NOFILE, &old);
    assert_true(freed);
    assert_int_equal(rep.errors, 0);
    assert_int_equal(rep.unanswered, 0);
    assert_int_equal(rep.late, 0);
    assert_int_equal(atomic_load(&s.completed), atomic_load(&s.posted));
}

/* ---- a cancel storm ---------------------------------------------------------------------- */

#define STORM_FDS 32

struct storm {
    evloop *loop;
    int s[STORM_FDS][2];
    char buf[STORM_FDS][8];
    test_counter posted, completed, cancelled, data;
    atomic_bool quit;
};

static struct storm g_storm;

static void storm_recv(void *arg, int fd, int64_t res);

static void storm_post(int i)
{
    struct storm *st = &g_storm;
    int rc = evloop_recv(st->loop, st->s[i][0], st->buf[i], sizeof st->buf[i], storm_recv,
                         (void *)(intptr_t)i);
    CHECK(rc == 0 || rc == -ESHUTDOWN);
    if (rc == 0)
        atomic_fetch_add(&st->posted, 1);
}

static void storm_recv(void *arg, int fd, int64_t res)
{
    (void)fd;
    struct storm *st = &g_storm;
    atomic_fetch_add(&st->completed, 1);
    CHECK(res > 0 || res == -ECANCELED);
    atomic_fetch_add(res > 0 ? &st->data : &st->cancelled, 1);
    storm_post((int)(intptr_t)arg); /* again, until the stop refuses it */
}

static void *storm_writer(void *arg)
{
    (void)arg;
    uint64_t rng = stress_seed() ^ 0x5555;
    while (!atomic_load(&g_storm.quit)) {
        int i = (int)stress_below(&rng, STORM_FDS);
        char c = 'x';
        if (write(g_storm.s[i][1], &c, 1) < 0)
            stress_nap_ns(10000); /* the peer's buffer is full: let the loop read */
    }
    return NULL;
}

static void test_cancel_storm_from_another_thread_ends_each_recv_once(void **state)
{
    (void)state;
    uint64_t n = stress_size("cancels", (struct stress_sizes){20000, 10000, 2000, 200000,
                                                             50000, 20000});
    struct storm *st = &g_storm;
    memset(st, 0, sizeof *st);
    st->loop = test_loop_new(NULL);
    for (int i = 0; i < STORM_FDS; i++) {
        test_socketpair(st->s[i]);
        storm_post(i);
    }
    struct test_runner r;
    test_runner_start(&r, st->loop);
    pthread_t w;
    assert_int_equal(pthread_create(&w, NULL, storm_writer, NULL), 0);
    uint64_t rng = stress_seed();
    uint64_t ok = 0;
    /* n cancels, and until the loop has ended n / 8 recvs (data or cancelled), so the
     * cancels race the loop rather than pile up on ops it has not reached. */
    uint64_t k = 0, deadline = stress_now_ns() + 30000000000u;
    while ((k < n || atomic_load(&st->completed) < n / 8) && stress_now_ns() < deadline) {
        int rc = evloop_op_cancel(st->loop, st->s[stress_below(&rng, STORM_FDS)][0]);
        CHECK(rc == 0 || rc == -ENOENT);
        ok += rc == 0;
        if ((++k & 15) == 0)
            stress_nap_ns(1000);
    }
    n = k;
    atomic_store(&st->quit, true);
    pthread_join(w, NULL);
    test_runner_stop(&r); /* the recvs pending now end with -ECANCELED, reposts refused */
    printf("# %llu cancels (%llu found ops), %llu recvs: %llu with data, %llu cancelled\n",
           (unsigned long long)n, (unsigned long long)ok,
           (unsigned long long)atomic_load(&st->completed),
           (unsigned long long)atomic_load(&st->data),
           (unsigned long long)atomic_load(&st->cancelled));
    assert_int_equal(atomic_load(&st->completed), atomic_load(&st->posted));
    test_loop_free(st->loop);
    for (int i = 0; i < STORM_FDS; i++) {
        close(st->s[i][0]);
        close(st->s[i][1]);
    }
}

/* ---- stop under load -------------------------------------------------------------------- */

static void test_stop_at_a_random_moment_under_load_ends_every_op_once(void **state)
{
    (void)state;
    uint64_t rounds = stress_size("stop rounds", (struct stress_sizes){20, 10, 4, 200, 50, 20});
    uint64_t rng = stress_seed() ^ 0xabcdef;
    for (uint64_t round = 0; round < rounds; round++) {
        struct server s;
        struct sockaddr_in addr;
        int lfd = tcp_listener_backlog(&addr, 1024);
        struct clients kids;
        clients_start(&kids, &addr, UINT64_MAX, 0, rng + round, lfd);
        evloop *loop = test_loop_new(NULL);
        server_init(&s, loop, 0); /* the server never closes first: connections stay busy */
        s.lfd = lfd;
        struct test_runner r;
        test_runner_start(&r, loop);
        post_accept(&s);
        stress_nap_ns((long)(1000000 + stress_below(&rng, 20000000)));
        test_runner_stop(&r);
        /* run has returned: every op posted had its one callback; every connection is freed */
        assert_int_equal(atomic_load(&s.completed), atomic_load(&s.posted));
        assert_int_equal(atomic_load(&s.freed), atomic_load(&s.accepted));
        close(s.lfd); /* clients connecting now are refused */
        struct client_report rep = clients_finish(&kids);
        assert_int_equal(rep.bad, 0);
        test_loop_free(loop);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_connections_open_echo_and_close_under_load_each_op_once),
        cmocka_unit_test(test_cancel_storm_from_another_thread_ends_each_recv_once),
        cmocka_unit_test(test_stop_at_a_random_moment_under_load_ends_every_op_once),
        cmocka_unit_test(test_many_connections_under_load_each_waits_its_turn),
    };
    test_require_backend();
    const char *mode = getenv("EVLOOP_OPS");
    if (mode && *mode)
        return cmocka_run_group_tests_name("stress_ops", tests, NULL, NULL);
    /* The backend's own way, then the core's native path over the emulation (test_ops.c). */
    int failed = cmocka_run_group_tests_name("stress_ops", tests, NULL, NULL);
    setenv("EVLOOP_OPS", "native-sim", 1);
    failed += cmocka_run_group_tests_name("stress_ops, EVLOOP_OPS=native-sim", tests, NULL, NULL);
    return failed;
}
