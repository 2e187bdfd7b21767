/* evloop_server: the main() of the evloop servers (see evloop_server.h). SIGTERM and SIGINT
 * reach the loop through a self-pipe: the handler writes a byte, the loop watches the read
 * end with evloop_io_add and calls evloop_stop, so evloop_run returns on the main thread. */
#include "evloop_server.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "net_util.h"

static int g_sig_pipe[2] = {-1, -1};

static void on_signal(int sig)
{
    (void)sig;
    int saved = errno;
    ssize_t n = write(g_sig_pipe[1], "s", 1);
    (void)n; /* a full pipe already holds a stop request */
    errno = saved;
}

static void on_sig_pipe(void *arg, int fd, unsigned events)
{
    char buf[16];
    while (read(fd, buf, sizeof(buf)) > 0)
        continue;
    evloop_stop(arg);
}

static int watch_signals(evloop *loop)
{
    if (pipe2(g_sig_pipe, O_NONBLOCK | O_CLOEXEC) < 0)
        return -errno;
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    if (sigaction(SIGTERM, &sa, NULL) < 0 || sigaction(SIGINT, &sa, NULL) < 0)
        return -errno;
    return evloop_io_add(loop, g_sig_pipe[0], EVLOOP_READABLE, on_sig_pipe, loop);
}

static int fail(const char *what, int err)
{
    fprintf(stderr, "server_evloop: %s: %s\n", what, evloop_strerror(err));
    return 1;
}

static void stop_glue(const struct evloop_glue *glue)
{
    if (glue->stopped)
        glue->stopped();
}

int evloop_server_main(int argc, char **argv, const struct evloop_glue *glue)
{
    struct net_opts o;
    if (net_parse_args(argc, argv, argv[0], &o) < 0)
        return 2;
    int r = glue->init ? glue->init(&o) : 0;
    if (r < 0)
        return fail("init", r);
    evloop_config cfg;
    evloop_config_init(&cfg);
    cfg.backend = o.backend;
    evloop *loop;
    r = evloop_new(&loop, &cfg);
    if (r < 0) {
        stop_glue(glue);
        return fail("evloop_new", r);
    }
    int lfd = net_listen(o.port);
    if (lfd < 0) {
        stop_glue(glue);
        evloop_free(loop);
        return fail("listen", lfd);
    }
    r = watch_signals(loop);
    if (r == 0)
        r = glue->start(loop, lfd);
    if (r < 0) {
        stop_glue(glue);
        evloop_free(loop);
        close(lfd);
        return fail("start", r);
    }
    char what[64];
    snprintf(what, sizeof(what), "evloop-%s/%s %s", evloop_ingress(), evloop_backend(loop),
             glue->kind);
    net_ready(what, net_local_port(lfd));
    r = evloop_run(loop);
    stop_glue(glue);
    /* The loop goes first: nothing of it (an operation in flight in the kernel) may still
     * use a connection's buffer when finish frees it. */
    int rf = evloop_free(loop);
    uint64_t requests = 0, conns = 0;
    glue->finish(&requests, &conns);
    close(lfd);
    close(g_sig_pipe[0]);
    close(g_sig_pipe[1]);
    net_report(what, requests, conns);
    if (r < 0)
        return fail("evloop_run", r);
    return rf < 0 ? fail("evloop_free", rf) : 0;
}
