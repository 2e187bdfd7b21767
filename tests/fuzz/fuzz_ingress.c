/* libFuzzer target: one ingress variant (compiled in directly: src/variants/<v>/<v>.c)
 * against a reference model, a FIFO of sequence numbers. One thread plays every producer
 * and the consumer, so the order is global FIFO and a drain in a quiet queue must return
 * min(max, queued) tasks. Input: byte 0 picks the capacity (small, so the arena's ring
 * fills and spills into its overflow list), then one operation per byte: push, a burst of
 * pushes, drain with a budget, emptiness check, close. At the end everything is drained
 * and compared, and the queue is freed (LSan checks the chunks). */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "barrier.h"
#include "ingress.h"

#define MODEL_MAX (1u << 20)

static uint32_t model[MODEL_MAX];
static size_t m_head, m_tail;

static void task(void *arg)
{
    (void)arg;
}

static void die(const char *what, size_t a, size_t b)
{
    fprintf(stderr, "fuzz_ingress(%s): %s (%zu vs %zu)\n", evloop__ingress_name(), what, a, b);
    abort();
}

static size_t drain_and_check(struct evloop__ingress *q, size_t max)
{
    struct evloop_task out[256];
    if (max > 256)
        max = 256;
    size_t n = evloop__ingress_drain(q, out, max);
    size_t queued = m_tail - m_head, want = queued < max ? queued : max;
    if (n != want)
        die("drain returned a different count than min(max, queued)", n, want);
    for (size_t i = 0; i < n; i++) {
        if (out[i].cb != task)
            die("drained a task with a foreign callback", i, 0);
        uint32_t got = (uint32_t)(uintptr_t)out[i].arg, exp = model[m_head++];
        if (got != exp)
            die("drained out of order", got, exp);
    }
    return n;
}

static void push_and_check(struct evloop__ingress *q, bool closed, uint32_t *seq)
{
    if (m_tail >= MODEL_MAX)
        return; /* enough for one input */
    int r = evloop__ingress_push(q, task, (void *)(uintptr_t)*seq);
    if (closed) {
        if (r != -ESHUTDOWN)
            die("push after close did not return -ESHUTDOWN", (size_t)-r, ESHUTDOWN);
        return;
    }
    /* No sleep word given: every accepted push asks for a notify (ingress.h). */
    if (r != EVLOOP__PUSHED_NOTIFY)
        die("push failed", (size_t)-r, 0);
    model[m_tail++] = (*seq)++;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    uint32_t capacity = 2 + data[0] % 200;
    struct evloop__ingress *q = NULL;
    unsigned fence = data[0] & 1 ? EVLOOP__FENCE_SEQ_CST : EVLOOP__FENCE_MEMBARRIER;
    if (evloop__ingress_new(&q, capacity, fence, NULL, NULL, NULL) != 0)
        die("new failed", capacity, 0);
    m_head = m_tail = 0;
    uint32_t seq = 0;
    bool closed = false;
    uint64_t overflows = 0;
    for (size_t i = 1; i < size; i++) {
        uint8_t b = data[i];
        switch (b % 8) {
        case 0:
        case 1:
        case 2:
            push_and_check(q, closed, &seq);
            break;
        case 3: /* a burst: up to 4 x capacity */
            for (unsigned k = (b >> 3) * (capacity / 8 + 1); k > 0; k--)
                push_and_check(q, closed, &seq);
            break;
        case 4:
        case 5:
            drain_and_check(q, (size_t)(b >> 3) * 9);
            break;
        case 6:
            if (b & 8) /* as the loop does after a heavy barrier */
                evloop__ingress_fenced(q);
            if (evloop__ingress_is_empty(q) != (m_head == m_tail))
                die("is_empty disagrees with the model", evloop__ingress_is_empty(q),
                    m_tail - m_head);
            break;
        case 7:
            if (b & 8) {
                evloop__ingress_close(q);
                closed = true;
            }
            break;
        }
        uint64_t now = evloop__ingress_overflows(q);
        if (now < overflows)
            die("overflow counter went back", (size_t)now, (size_t)overflows);
        overflows = now;
    }
    while (m_head != m_tail)
        if (drain_and_check(q, 64) == 0)
            die("final drain stuck", m_tail - m_head, 0);
    if (!evloop__ingress_is_empty(q))
        die("not empty after everything was drained", 0, 0);
    struct evloop_task spare[4];
    if (evloop__ingress_drain(q, spare, 4) != 0)
        die("drained from an empty queue", 1, 0);
    evloop__ingress_free(q);
    return 0;
}
