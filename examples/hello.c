#include <evloop.h>
#include <pthread.h>
#include <stdio.h>

static void hello(void *arg) { printf("hello from the loop thread: %s\n", (char *)arg); }
static void *run(void *loop) { evloop_run(loop); return NULL; }

int main(void)
{
    evloop *loop;
    if (evloop_new(&loop, NULL) < 0)
        return 1;
    pthread_t thread;
    pthread_create(&thread, NULL, run, loop);
    evloop_submit(loop, hello, "a task from main"); /* from any thread */
    evloop_stop(loop); /* graceful: what was accepted still runs, then evloop_run returns */
    pthread_join(thread, NULL);
    return evloop_free(loop);
}
