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
 * Both broken variants must be rejected.
 *
 * -DDOZE adds the work pool's doze (src/core/work.c, evloop__sleep_notify_unless in
 * sleep.h): the loop may set `dozing` before it announces a sleep, which then ends by itself
 * (a timeout, taken at any time), and clears it after; producer 0 is a pool thread, which
 * skips the wake while it reads `dozing` set. It must pass; with it, each of these must fail:
 *   -DBROKEN_DOZE_UNBOUNDED  the dozing sleep has no bound
 *   -DBROKEN_DOZE_READ_FIRST the pool thread reads `dozing` before it publishes
 *   -DBROKEN_DOZE_CLEAR_LATE the loop clears `dozing` not after the dozing sleep but at its
 *                            next sleep without a bound, after that sleep's re-check */

#define NPROD 2
#define NTASKS 2 /* per producer */

#define AWAKE 0
#define SLEEP_WORD 1

byte word = AWAKE;          /* loop->sleep_word */
byte queued = 0;            /* tasks pushed and not drained */
byte ran = 0;
bool futex_blocked = false; /* the loop is inside FUTEX_WAIT */
byte wakes = 0;             /* FUTEX_WAKE calls */
bool dozing = false;        /* the work pool's: the loop's sleep ends by itself */

/* FUTEX_WAIT: compares the word and sleeps in one step; FUTEX_WAKE wakes a sleeper, and
 * does nothing when no one sleeps (it is not remembered). */
inline futex_wait(expected) {
    atomic { if :: word == expected -> futex_blocked = true :: else -> skip fi };
    !futex_blocked
}

/* The dozing sleep: the same wait, which may also end by its timeout at any time. */
inline futex_wait_bounded(expected) {
    atomic { if :: word == expected -> futex_blocked = true :: else -> skip fi };
    if
    :: !futex_blocked
    :: atomic { futex_blocked -> futex_blocked = false } /* the timeout */
    fi
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

proctype Producer(bool pool) {
    byte i = 0, old;
    bool skip_wake;
    do
    :: i < NTASKS ->
#ifdef BROKEN_ORDER
        wake_loop(old);
        queued++;
#elif defined(DOZE)
#ifdef BROKEN_DOZE_READ_FIRST
        skip_wake = pool && dozing;
        queued++;
#else
        queued++;          /* the reply's push */
        skip_wake = pool && dozing; /* read after the light barrier, as the word is */
#endif
        if
        :: skip_wake -> skip
        :: else -> wake_loop(old)
        fi;
#else
        queued++;          /* the push's seq_cst write */
        wake_loop(old);
#endif
        i++
    :: else -> break
    od
}

proctype Loop() {
    bool doze = false;
    do
    :: atomic { ran = ran + queued; queued = 0 };   /* drain_ingress */
        if
        :: ran == NPROD * NTASKS -> break            /* all work seen: the test is over */
        :: queued > 0 -> skip                        /* has_work: tick again */
        :: else ->
#ifdef DOZE
            if
            :: doze = true; dozing = true            /* evloop__work_doze */
            :: doze = false
            fi;
#endif
            word = SLEEP_WORD;                       /* announce sleep (seq_cst store) */
#ifdef BROKEN
            futex_wait(SLEEP_WORD);
            word = AWAKE;
#else
            if
            :: queued > 0 -> word = AWAKE            /* the re-check found work */
            :: else ->
#if defined(DOZE)
#ifdef BROKEN_DOZE_CLEAR_LATE
                if :: !doze -> dozing = false :: else -> skip fi;
#endif
#ifndef BROKEN_DOZE_UNBOUNDED
                if
                :: doze -> futex_wait_bounded(SLEEP_WORD)
                :: else -> futex_wait(SLEEP_WORD)
                fi;
#else
                futex_wait(SLEEP_WORD);
#endif
#else
                futex_wait(SLEEP_WORD);
#endif
                word = AWAKE                          /* exchange after waking */
            fi;
#endif
#if defined(DOZE) && !defined(BROKEN_DOZE_CLEAR_LATE)
            dozing = false                           /* evloop__work_doze_end */
#else
            skip
#endif
        fi
    od
}

init {
    atomic {
        run Loop();
        run Producer(true);   /* a pool thread (under DOZE) */
        run Producer(false)
    }
}
