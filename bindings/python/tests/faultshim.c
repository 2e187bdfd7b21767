/* faultshim: an LD_PRELOAD library for test_aio_faults.py. It stands in front of libc's socket
 * calls, the ones CPython's socket and os modules and evloop's native asyncio paths make
 * (accept, accept4, recv, recvfrom, send, sendto, sendmsg, sendfile, sendfile64), so that a
 * window of them fails with a chosen errno, and it counts them and the poller waits
 * (epoll_wait, epoll_pwait, epoll_pwait2: counted only). Built by the test at collection time:
 *     cc -shared -fPIC -O2 -o faultshim.so faultshim.c -ldl
 * Control, per kind ("accept", "recv", "send", "sendfile", "epoll_wait"):
 *  - from the process, through ctypes.CDLL(None):
 *      faultshim_arm(kind, fd, err, skip, count, every): calls of kind on fd (-1: any fd) are
 *          counted from now on; after `skip` of them, `count` fail with err (-1: every one
 *          until faultshim_clear), one in `every`; err 0 counts only. Returns 0, -1 (kind).
 *      faultshim_signal(kind, signo): each failure of kind first raises signo in the
 *          calling thread (a real EINTR comes with a signal whose handler ran).
 *      faultshim_clear(kind): no more failures; the counting goes on.
 *      faultshim_count(kind, what): "calls" (on the fd armed), "failed", "total" (any fd,
 *          since the process started).
 *  - at start, from the environment: FAULTSHIM_<KIND>=ERRNO[:skip[:count[:every]]] arms kind
 *    on any fd (ERRNO a name such as EMFILE, or a number), e.g. FAULTSHIM_ACCEPT=EMFILE:0:-1.
 * The real functions come from dlsym(RTLD_NEXT). <sys/socket.h> is left out on purpose: with
 * _GNU_SOURCE glibc declares accept's address as a transparent union, which these
 * definitions would contradict; they only pass pointers through. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

struct sockaddr;
struct msghdr;
struct epoll_event;
struct timespec;
typedef unsigned int shim_socklen;
typedef struct __sigset_t_opaque shim_sigset;

enum { K_ACCEPT, K_RECV, K_SEND, K_SENDFILE, K_EPOLL_WAIT, K_KINDS };
static const char *const kind_names[K_KINDS] = {"accept", "recv", "send", "sendfile",
                                                "epoll_wait"};

struct rule {
    int fd;          /* -1: any fd */
    int err;         /* 0: count only */
    long skip;       /* calls let through before the window */
    long left;       /* failures left, -1: until cleared */
    unsigned every;  /* one call in `every` fails */
    int signo;       /* raised in the failing call before it returns, 0: none */
    unsigned long phase, calls, failed, total;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct rule rules[K_KINDS];
static int armed[K_KINDS]; /* the rule's fd filter applies (calls counted) */

static int kind_of(const char *name)
{
    for (int k = 0; name && k < K_KINDS; k++)
        if (strcmp(name, kind_names[k]) == 0)
            return k;
    return -1;
}

/* Counts a call; returns the errno it must fail with, or 0: make the real call. */
static int take(int kind, int fd)
{
    pthread_mutex_lock(&lock);
    struct rule *r = &rules[kind];
    int err = 0;
    r->total++;
    if (armed[kind] && (r->fd < 0 || r->fd == fd)) {
        r->calls++;
        if (r->skip > 0) {
            r->skip--;
        } else if (r->err && r->left != 0 && r->phase++ % r->every == 0) {
            err = r->err;
            r->failed++;
            if (r->left > 0)
                r->left--;
        }
    }
    int signo = err ? r->signo : 0;
    pthread_mutex_unlock(&lock);
    if (signo)
        raise(signo); /* as a real EINTR comes: a signal's handler ran meanwhile */
    return err;
}

int faultshim_arm(const char *kind, int fd, int err, long skip, long count, unsigned every)
{
    int k = kind_of(kind);
    if (k < 0)
        return -1;
    pthread_mutex_lock(&lock);
    unsigned long total = rules[k].total;
    rules[k] = (struct rule){.fd = fd, .err = err, .skip = skip, .left = err ? count : 0,
                             .every = every ? every : 1, .total = total};
    armed[k] = 1;
    pthread_mutex_unlock(&lock);
    return 0;
}

/* The failures of kind from now on raise signo in the calling thread first (0: none). */
void faultshim_signal(const char *kind, int signo)
{
    int k = kind_of(kind);
    if (k < 0)
        return;
    pthread_mutex_lock(&lock);
    rules[k].signo = signo;
    pthread_mutex_unlock(&lock);
}

void faultshim_clear(const char *kind)
{
    int k = kind_of(kind);
    if (k < 0)
        return;
    pthread_mutex_lock(&lock);
    rules[k].left = 0;
    pthread_mutex_unlock(&lock);
}

unsigned long faultshim_count(const char *kind, const char *what)
{
    int k = kind_of(kind);
    if (k < 0 || !what)
        return 0;
    pthread_mutex_lock(&lock);
    struct rule r = rules[k];
    pthread_mutex_unlock(&lock);
    return strcmp(what, "failed") == 0 ? r.failed : strcmp(what, "total") == 0 ? r.total : r.calls;
}

/* ---- the environment ---------------------------------------------------------------------- */

static int errno_of(const char *s)
{
    static const struct {
        const char *name;
        int value;
    } known[] = {{"EMFILE", EMFILE}, {"ENFILE", ENFILE},         {"ENOBUFS", ENOBUFS},
                 {"ENOMEM", ENOMEM}, {"ECONNRESET", ECONNRESET}, {"EPIPE", EPIPE},
                 {"EINTR", EINTR},   {"EAGAIN", EAGAIN},         {"ECONNABORTED", ECONNABORTED}};
    for (size_t i = 0; i < sizeof known / sizeof known[0]; i++)
        if (strcmp(s, known[i].name) == 0)
            return known[i].value;
    return atoi(s);
}

__attribute__((constructor)) static void from_environment(void)
{
    static const char *const vars[K_KINDS] = {"FAULTSHIM_ACCEPT", "FAULTSHIM_RECV",
                                              "FAULTSHIM_SEND", "FAULTSHIM_SENDFILE",
                                              "FAULTSHIM_EPOLL_WAIT"};
    for (int k = 0; k < K_KINDS; k++) {
        const char *v = getenv(vars[k]);
        if (!v || !*v)
            continue;
        char buf[128];
        strncpy(buf, v, sizeof buf - 1);
        buf[sizeof buf - 1] = 0;
        char *fields[4] = {buf, NULL, NULL, NULL};
        for (int i = 1; i < 4 && fields[i - 1]; i++) {
            char *colon = strchr(fields[i - 1], ':');
            if (colon) {
                *colon = 0;
                fields[i] = colon + 1;
            }
        }
        faultshim_arm(kind_names[k], -1, errno_of(fields[0]),
                      fields[1] ? atol(fields[1]) : 0, fields[2] ? atol(fields[2]) : -1,
                      fields[3] ? (unsigned)atol(fields[3]) : 1);
    }
}

/* ---- the wrappers --------------------------------------------------------------------------- */

#define REAL(name, type)                                                                           \
    static type real_##name;                                                                       \
    if (!real_##name)                                                                              \
        real_##name = (type)dlsym(RTLD_NEXT, #name);

#define FAIL_OR(kind, fd)                                                                          \
    do {                                                                                           \
        int shim_err_ = take(kind, fd);                                                            \
        if (shim_err_) {                                                                           \
            errno = shim_err_;                                                                     \
            return -1;                                                                             \
        }                                                                                          \
    } while (0)

typedef int (*accept_fn)(int, struct sockaddr *, shim_socklen *);
typedef int (*accept4_fn)(int, struct sockaddr *, shim_socklen *, int);
typedef ssize_t (*recv_fn)(int, void *, size_t, int);
typedef ssize_t (*recvfrom_fn)(int, void *, size_t, int, struct sockaddr *, shim_socklen *);
typedef ssize_t (*send_fn)(int, const void *, size_t, int);
typedef ssize_t (*sendto_fn)(int, const void *, size_t, int, const struct sockaddr *,
                             shim_socklen);
typedef ssize_t (*sendmsg_fn)(int, const struct msghdr *, int);
typedef ssize_t (*sendfile_fn)(int, int, off_t *, size_t);
typedef int (*epoll_wait_fn)(int, struct epoll_event *, int, int);
typedef int (*epoll_pwait_fn)(int, struct epoll_event *, int, int, const shim_sigset *);
typedef int (*epoll_pwait2_fn)(int, struct epoll_event *, int, const struct timespec *,
                               const shim_sigset *);

int accept(int fd, struct sockaddr *addr, shim_socklen *len)
{
    REAL(accept, accept_fn)
    FAIL_OR(K_ACCEPT, fd);
    return real_accept(fd, addr, len);
}

int accept4(int fd, struct sockaddr *addr, shim_socklen *len, int flags)
{
    REAL(accept4, accept4_fn)
    FAIL_OR(K_ACCEPT, fd);
    return real_accept4(fd, addr, len, flags);
}

ssize_t recv(int fd, void *buf, size_t n, int flags)
{
    REAL(recv, recv_fn)
    FAIL_OR(K_RECV, fd);
    return real_recv(fd, buf, n, flags);
}

ssize_t recvfrom(int fd, void *buf, size_t n, int flags, struct sockaddr *addr,
                 shim_socklen *len)
{
    REAL(recvfrom, recvfrom_fn)
    FAIL_OR(K_RECV, fd);
    return real_recvfrom(fd, buf, n, flags, addr, len);
}

ssize_t send(int fd, const void *buf, size_t n, int flags)
{
    REAL(send, send_fn)
    FAIL_OR(K_SEND, fd);
    return real_send(fd, buf, n, flags);
}

ssize_t sendto(int fd, const void *buf, size_t n, int flags, const struct sockaddr *addr,
               shim_socklen len)
{
    REAL(sendto, sendto_fn)
    FAIL_OR(K_SEND, fd);
    return real_sendto(fd, buf, n, flags, addr, len);
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags)
{
    REAL(sendmsg, sendmsg_fn)
    FAIL_OR(K_SEND, fd);
    return real_sendmsg(fd, msg, flags);
}

ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
    REAL(sendfile, sendfile_fn)
    FAIL_OR(K_SENDFILE, out);
    return real_sendfile(out, in, off, count);
}

ssize_t sendfile64(int out, int in, off_t *off, size_t count)
{
    REAL(sendfile64, sendfile_fn)
    FAIL_OR(K_SENDFILE, out);
    return real_sendfile64(out, in, off, count);
}

int epoll_wait(int epfd, struct epoll_event *ev, int max, int timeout)
{
    REAL(epoll_wait, epoll_wait_fn)
    take(K_EPOLL_WAIT, epfd);
    return real_epoll_wait(epfd, ev, max, timeout);
}

int epoll_pwait(int epfd, struct epoll_event *ev, int max, int timeout, const shim_sigset *set)
{
    REAL(epoll_pwait, epoll_pwait_fn)
    take(K_EPOLL_WAIT, epfd);
    return real_epoll_pwait(epfd, ev, max, timeout, set);
}

int epoll_pwait2(int epfd, struct epoll_event *ev, int max, const struct timespec *timeout,
                 const shim_sigset *set)
{
    REAL(epoll_pwait2, epoll_pwait2_fn)
    if (!real_epoll_pwait2) {
        errno = ENOSYS;
        return -1;
    }
    take(K_EPOLL_WAIT, epfd);
    return real_epoll_pwait2(epfd, ev, max, timeout, set);
}
