/* A complete program using only <evloop.h>: four threads submit tasks, a timer ticks,
 * microtasks chain, a pipe is watched, and a graceful stop loses nothing. It checks its
 * own result and exits non-zero if any task was lost or ran twice. */
#define _POSIX_C_SOURCE 200809L
#include <errno.h>
#include <evloop.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#define PRODUCERS 4
#define PER_PRODUCER 100000

static evloop *loop;
static unsigned char seen[PRODUCERS][PER_PRODUCER];
static _Atomic unsigned long accepted, timer_ticks, microtasks, bytes_read;

static void task(void *arg)
{
    uintptr_t v = (uintptr_t)arg;
    seen[v / PER_PRODUCER][v % PER_PRODUCER]++;
}

static void *producer(void *arg)
{
    uintptr_t base = (uintptr_t)arg * PER_PRODUCER;
    for (uintptr_t i = 0; i < PER_PRODUCER; i++)
        if (evloop_submit(loop, task, (void *)(base + i)) == 0)
            accepted++;
    return NULL;
}

static void micro(void *arg)
{
    uintptr_t depth = (uintptr_t)arg;
    microtasks++;
    if (depth < 2) /* a chain of three: each runs right after the one before */
        evloop_queue_microtask(loop, micro, (void *)(depth + 1));
}

static void on_timer(void *arg)
{
    timer_ticks++;
    evloop_queue_microtask(loop, micro, (void *)0);
}

static void on_readable(void *arg, int fd, unsigned events)
{
    char buf[64];
    ssize_t n = read(fd, buf, sizeof(buf));
    if (n > 0)
        bytes_read += (unsigned long)n;
    else
        evloop_io_remove(loop, fd);
}

static void *run_loop(void *arg)
{
    int r = evloop_run(arg);
    if (r < 0)
        fprintf(stderr, "evloop_run: %s\n", evloop_strerror(r));
    return NULL;
}

int main(void)
{
    int r = evloop_new(&loop, NULL);
    if (r < 0) {
        fprintf(stderr, "evloop_new: %s\n", evloop_strerror(r));
        return r == -ENOTSUP ? 77 : 1;
    }
    int p[2];
    if (pipe(p) < 0 || evloop_io_add(loop, p[0], EVLOOP_READABLE, on_readable, NULL) < 0)
        return 1;
    evloop_timer_id id;
    evloop_timer_start(loop, 1000000, 1000000, on_timer, NULL, &id);
    pthread_t lt, pt[PRODUCERS];
    pthread_create(&lt, NULL, run_loop, loop);
    for (uintptr_t i = 0; i < PRODUCERS; i++)
        pthread_create(&pt[i], NULL, producer, (void *)i);
    if (write(p[1], "hello", 5) != 5)
        return 1;
    for (int i = 0; i < PRODUCERS; i++)
        pthread_join(pt[i], NULL);
    while (bytes_read < 5)
        nanosleep(&(struct timespec){0, 1000000}, NULL);
    evloop_stop(loop);
    pthread_join(lt, NULL);
    struct evloop_stats st;
    evloop_stats(loop, &st);
    unsigned long ran = 0, twice = 0;
    for (int i = 0; i < PRODUCERS; i++)
        for (int j = 0; j < PER_PRODUCER; j++) {
            ran += seen[i][j] > 0;
            twice += seen[i][j] > 1;
        }
    printf("%s/%s: accepted %lu ran %lu twice %lu timer ticks %lu microtasks %lu read %lu\n",
           evloop_ingress(), evloop_backend(loop), (unsigned long)accepted, ran, twice,
           (unsigned long)timer_ticks, (unsigned long)microtasks, (unsigned long)bytes_read);
    close(p[0]);
    close(p[1]);
    evloop_free(loop);
    return ran == accepted && accepted == PRODUCERS * PER_PRODUCER && twice == 0 ? 0 : 1;
}
