/* The program every consumer project builds: it uses evloop only through <evloop.h> and
 * the link line its way of finding evloop gives, creates a loop, submits a task, runs the
 * loop until the task stops it, and exits 0 only if the task ran. It compiles as C11 and
 * (through consumer.cpp) as C++17, both with -Wall -Wextra -pedantic -Werror. */
#include <evloop.h>
#include <stdio.h>

#ifdef __cplusplus
#define CONSUMER_LANG "C++17"
#else
#define CONSUMER_LANG "C11"
#endif

static int task_ran;

static void task(void *arg)
{
    task_ran = 1;
    evloop_stop((evloop *)arg);
}

int main(void)
{
    evloop *loop = NULL;
    int r = evloop_new(&loop, NULL);
    if (r < 0) {
        fprintf(stderr, "consumer (%s): evloop_new: %s (%s)\n", CONSUMER_LANG, evloop_strerror(r),
                evloop_last_error());
        return 1;
    }
    r = evloop_submit(loop, task, loop);
    if (r == 0)
        r = evloop_run(loop);
    const char *backend = evloop_backend(loop);
    int f = evloop_free(loop);
    if (r < 0 || f < 0 || !task_ran) {
        fprintf(stderr, "consumer (%s): submit/run %d, free %d, task ran %d\n", CONSUMER_LANG, r,
                f, task_ran);
        return 1;
    }
    printf("consumer (%s): the task ran on the %s backend, %s ingress\n", CONSUMER_LANG, backend,
           evloop_ingress());
    return 0;
}
