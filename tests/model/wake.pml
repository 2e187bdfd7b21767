/* The wake handshake of design.md ("States and the wake protocol"): the producer half is
 * evloop__wake_loop() in src/core/submit.c, the loop half prepare_sleep() in
 * src/core/tick.c, the futex is src/core/wake_futex.c. Spin explores every interleaving
 * (sequentially consistent, which the seq_cst operations of both halves give).
 *
 * Property: the loop never blocks for good while a task is queued. A lost wake-up leaves
 * the loop in FUTEX_WAIT with work queued and every producer finished: an invalid end
 * state, which spin reports.
 *   (default)        the real protocol: spin must find no error
 *   -DBROKEN         prepare_sleep() does not re-check the queues after announcing sleep
 *   -DBROKEN_ORDER   the producer reads the sleep word before it publishes the task (what
 *                    a relaxed or reordered producer amounts to)
 * Both broken variants must be rejected. */

#define NPROD 2
#define NTASKS 2 /* per producer */

#define AWAKE 0
#define SLEEP_WORD 1

byte word = AWAKE;          /* loop->sleep_word */
byte queued = 0;            /* tasks pushed and not drained */
byte ran = 0;
bool futex_blocked = false; /* the loop is inside FUTEX_WAIT */
byte wakes = 0;             /* FUTEX_WAKE calls */

/* FUTEX_WAIT: compares the word and sleeps in one step; FUTEX_WAKE wakes a sleeper, and
 * does nothing when no one sleeps (it is not remembered). */
inline futex_wait(expected) {
    atomic { if :: word == expected -> futex_blocked = true :: else -> skip fi };
    !futex_blocked
}

inline futex_wake() {
    atomic { futex_blocked = false; wakes++ }
}

/* evloop__wake_loop(): a cheap read, then only the thread that flips the word wakes. */
inline wake_loop(old) {
    if
    :: word == AWAKE -> skip
    :: else ->
        atomic { old = word; word = AWAKE };
        if :: old == SLEEP_WORD -> futex_wake() :: else -> skip fi
    fi
}

proctype Producer() {
    byte i = 0, old;
    do
    :: i < NTASKS ->
#ifdef BROKEN_ORDER
        wake_loop(old);
        queued++;
#else
        queued++;          /* the push's seq_cst write */
        wake_loop(old);
#endif
        i++
    :: else -> break
    od
}

proctype Loop() {
    do
    :: atomic { ran = ran + queued; queued = 0 };   /* drain_ingress */
        if
        :: ran == NPROD * NTASKS -> break            /* all work seen: the test is over */
        :: queued > 0 -> skip                        /* has_work: tick again */
        :: else ->
            word = SLEEP_WORD;                       /* announce sleep (seq_cst store) */
#ifdef BROKEN
            futex_wait(SLEEP_WORD);
            word = AWAKE
#else
            if
            :: queued > 0 -> word = AWAKE            /* the re-check found work */
            :: else ->
                futex_wait(SLEEP_WORD);
                word = AWAKE                          /* exchange after waking */
            fi
#endif
        fi
    od
}

init {
    atomic {
        run Loop();
        run Producer();
        run Producer()
    }
}
