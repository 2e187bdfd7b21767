/* epoll_cost: what one zero-timeout poll of an epoll set costs through epoll_wait and through
 * epoll_pwait2 (the choice in src/backends/epoll/epoll_wait.h), on an empty set and with an
 * event ready (an eventfd left readable). Prints ns per call, ROUNDS rounds of N calls each,
 * the two calls alternating within a round. Linux 5.11+.
 *
 *   epoll_cost [calls=1000000] [rounds=3]
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

static double now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec * 1e9 + (double)t.tv_nsec;
}

/* ns per zero-timeout poll of ep, through epoll_pwait2 (pwait2) or epoll_wait. */
static double cost(int ep, long calls, int pwait2)
{
    struct epoll_event out[64];
    struct timespec zero = {0, 0};
    double t = now_ns();
    for (long i = 0; i < calls; i++) {
        int n = pwait2 ? epoll_pwait2(ep, out, 64, &zero, NULL) : epoll_wait(ep, out, 64, 0);
        if (n < 0) {
            perror(pwait2 ? "epoll_pwait2" : "epoll_wait");
            exit(1);
        }
    }
    return (now_ns() - t) / (double)calls;
}

int main(int argc, char **argv)
{
    long calls = argc > 1 ? atol(argv[1]) : 1000000;
    int rounds = argc > 2 ? atoi(argv[2]) : 3;
    int ep = epoll_create1(EPOLL_CLOEXEC);
    int efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    struct epoll_event ev = {.events = EPOLLIN};
    if (calls <= 0 || rounds <= 0 || ep < 0 || efd < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, efd, &ev)) {
        fprintf(stderr, "usage: epoll_cost [calls > 0] [rounds > 0] (or epoll/eventfd failed)\n");
        return 2;
    }
    for (int r = 0; r < rounds; r++) {
        double empty_wait = cost(ep, calls, 0), empty_pwait2 = cost(ep, calls, 1);
        uint64_t one = 1;
        if (write(efd, &one, sizeof one) != sizeof one)
            return 1;
        double ready_pwait2 = cost(ep, calls, 1), ready_wait = cost(ep, calls, 0);
        if (read(efd, &one, sizeof one) != sizeof one)
            return 1;
        printf("empty: epoll_wait(0) %.0f ns, epoll_pwait2(0) %.0f ns; "
               "ready: epoll_wait(0) %.0f ns, epoll_pwait2(0) %.0f ns\n",
               empty_wait, empty_pwait2, ready_wait, ready_pwait2);
    }
    close(efd);
    close(ep);
    return 0;
}
