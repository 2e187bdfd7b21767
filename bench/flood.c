/* flood: the one-number hand-off check used to A/B a change to the ingress or the tick
 * (tournament/results/tuning-log.md). P producer threads submit N tasks in all into a running loop,
 * R times; prints the median and the minimum ns per task, the producers' own CPU time per
 * task (median; their thread CPU clocks, which a busy machine's preemption does not inflate
 * as it does the wall time), and the loop's counters. Built
 * against one library (the build's default variant), so two builds of two revisions
 * can be run interleaved by bench/ab.sh. Uses the public API only.
 *
 *   flood [producers=1] [tasks=100000] [rounds=21]      env: BUDGET, SPIN (fixed knobs)
 */
#define _POSIX_C_SOURCE 200809L
#include <evloop.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define MAX_PRODUCERS 128
#define MAX_ROUNDS 1000

static struct {
    _Alignas(64) uint64_t ran, target; /* loop thread only */
    _Alignas(64) atomic_bool done;
} g_count;

static evloop *g_loop;
static uint64_t g_share;
static _Atomic uint64_t g_producer_cpu_ns; /* summed over the producers of a round */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void count_task(void *arg)
{
    (void)arg;
    if (++g_count.ran == g_count.target)
        atomic_store_explicit(&g_count.done, true, memory_order_release);
}

static void *run_loop(void *arg)
{
    (void)arg;
    evloop_run(g_loop);
    return NULL;
}

static uint64_t thread_cpu_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *produce(void *arg)
{
    (void)arg;
    uint64_t cpu0 = thread_cpu_ns();
    for (uint64_t i = 0; i < g_share; i++) {
        int r = evloop_submit(g_loop, count_task, NULL);
        if (r < 0) {
            fprintf(stderr, "flood: evloop_submit: %s\n", evloop_strerror(r));
            exit(1);
        }
    }
    atomic_fetch_add(&g_producer_cpu_ns, thread_cpu_ns() - cpu0);
    return NULL;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int producers = argc > 1 ? atoi(argv[1]) : 1;
    long long tasks = argc > 2 ? atoll(argv[2]) : 100000;
    int rounds = argc > 3 ? atoi(argv[3]) : 21;
    if (producers < 1 || producers > MAX_PRODUCERS || tasks < producers || rounds < 1 ||
        rounds > MAX_ROUNDS) {
        fprintf(stderr, "usage: flood [producers 1..%d] [tasks] [rounds 1..%d]\n", MAX_PRODUCERS,
                MAX_ROUNDS);
        return 2;
    }
    evloop_config cfg;
    evloop_config_init(&cfg);
    if (getenv("BUDGET"))
        cfg.batch_budget = (unsigned)atoi(getenv("BUDGET"));
    if (getenv("SPIN"))
        cfg.spin_ns = atoll(getenv("SPIN"));
    int r = evloop_new(&g_loop, &cfg);
    if (r < 0) {
        fprintf(stderr, "flood: evloop_new: %s\n", evloop_strerror(r));
        return 1;
    }
    pthread_t loop_thread, threads[MAX_PRODUCERS];
    pthread_create(&loop_thread, NULL, run_loop, NULL);
    g_share = (uint64_t)tasks / (uint64_t)producers;
    static double ns[MAX_ROUNDS], cpu[MAX_ROUNDS];
    for (int k = 0; k < rounds; k++) {
        g_count.ran = 0; /* the loop is idle between rounds: done was set last */
        atomic_store(&g_producer_cpu_ns, 0);
        g_count.target = g_share * (uint64_t)producers;
        atomic_store(&g_count.done, false);
        uint64_t t0 = now_ns();
        if (producers == 1)
            produce(NULL);
        else
            for (int i = 0; i < producers; i++)
                pthread_create(&threads[i], NULL, produce, NULL);
        while (!atomic_load_explicit(&g_count.done, memory_order_acquire))
            ;
        ns[k] = (double)(now_ns() - t0) / (double)g_count.target;
        if (producers > 1)
            for (int i = 0; i < producers; i++)
                pthread_join(threads[i], NULL);
        cpu[k] = (double)atomic_load(&g_producer_cpu_ns) / (double)g_count.target;
    }
    struct evloop_stats st;
    evloop_stats(g_loop, &st);
    qsort(ns, (size_t)rounds, sizeof(ns[0]), cmp_double);
    qsort(cpu, (size_t)rounds, sizeof(cpu[0]), cmp_double);
    printf("%s p=%d median %.1f ns/task (min %.1f) producer CPU %.1f ns/task overflows %llu "
           "tasks %llu budget %u spin %lld\n",
           evloop_ingress(), producers, ns[rounds / 2], ns[0], cpu[rounds / 2],
           (unsigned long long)st.ingress_overflows, (unsigned long long)st.tasks_run,
           st.batch_budget, (long long)st.spin_ns);
    evloop_stop(g_loop);
    pthread_join(loop_thread, NULL);
    return evloop_free(g_loop) == 0 ? 0 : 1;
}
