/* The chunk ingress's wake decision (src/variants/chunk/chunk.c): a push reads the loop's
 * sleep word inside the queue's mutex, after it published its task there, and asks its
 * caller to notify only when it read the loop asleep; the loop, after it stored its sleep
 * value, takes and releases the same mutex (evloop__ingress_fenced) before its re-check.
 * Neither side fences: the mutex's order does it. Either the push's critical section comes
 * first, and the loop's lock acquires its count; or the loop's comes first, and the push's
 * lock acquires the sleep value stored before it.
 *
 * Memory model: x86-TSO, as lanes.pml: each thread's plain stores go through its own FIFO
 * store buffer, which the Memory process drains one store at a time, at any moment; a
 * thread's loads see its own newest buffered store first; a read-modify-write (the lock's
 * test-and-set, the exchange on the word) first empties the thread's own buffer. Unlock is
 * a plain (buffered) store, the weakest release TSO allows. C11 is weaker than TSO; the
 * argument above uses only the mutex's acquire and release, which C11 gives.
 *
 * Threads: producers 0 and 1 push NTASKS each; the loop drains what it sees, then
 * announces sleep, syncs with the mutex, re-checks, and blocks on the futex unless the
 * re-check found work; it ends once it has run every task.
 *
 * Property: no lost wake: the loop never blocks for good with a published task undrained
 * (an invalid end state, which spin reports), and it runs every task exactly once.
 *   (default)                    the protocol: must pass
 *   -DBROKEN_NO_SYNC             the loop re-checks without taking the mutex: must fail
 *   -DBROKEN_SYNC_FIRST          the loop takes and releases the mutex before it stores its
 *                                sleep value: must fail
 *   -DBROKEN_WORD_BEFORE_LOCK    the push reads the word before it takes the mutex: must fail */

#define NPROD 2
#ifndef NTASKS
#define NTASKS 2
#endif
#define TOTAL (NPROD * NTASKS)
#define NT 3 /* threads with a store buffer: producers 0 and 1, the loop */
#define LOOP 2
#define BUFSZ 3

/* Addresses of the shared words. */
#define COUNT 0 /* the queue's published tasks (chunk->count), written under mu */
#define MU 1    /* the mutex: 0 free, 1 held */
#define WORD 2  /* the loop's sleep word */
#define NADDR 3

#define AWAKE 0
#define SLEEP 1

byte mem[NADDR];
typedef sbuf {
    byte a[BUFSZ];
    byte v[BUFSZ];
    byte n
};
sbuf sb[NT];
byte sk; /* scratch index for the buffer helpers, always 0 between steps */

bool futex_blocked = false;
byte ran = 0; /* the loop's: tasks drained and run */

inline flush_one(t) {
    mem[sb[t].a[0]] = sb[t].v[0];
    sk = 1;
    do
    :: sk < BUFSZ -> sb[t].a[sk - 1] = sb[t].a[sk]; sb[t].v[sk - 1] = sb[t].v[sk]; sk++
    :: else -> break
    od;
    sb[t].a[BUFSZ - 1] = 0;
    sb[t].v[BUFSZ - 1] = 0;
    sk = 0;
    sb[t].n--
}

inline drain_all(t) {
    do
    :: sb[t].n > 0 -> flush_one(t)
    :: else -> break
    od
}

inline store(t, ad, val) {
    d_step { sb[t].n < BUFSZ -> sb[t].a[sb[t].n] = ad; sb[t].v[sb[t].n] = val; sb[t].n++ }
}

inline load(t, ad, res) {
    d_step {
        res = mem[ad];
        do
        :: sk < sb[t].n -> if :: sb[t].a[sk] == ad -> res = sb[t].v[sk] :: else -> skip fi; sk++
        :: else -> break
        od;
        sk = 0
    }
}

/* pthread_mutex_lock: a locked test-and-set (it empties the own buffer) that waits for the
 * lock word free in memory. */
inline lock(t) {
    atomic { drain_all(t); mem[MU] == 0 -> mem[MU] = 1 }
}

inline unlock(t) {
    store(t, MU, 0)
}

/* FUTEX_WAIT compares and sleeps in one step; FUTEX_WAKE is not remembered. */
inline futex_wait() {
    atomic { if :: mem[WORD] == SLEEP -> futex_blocked = true :: else -> skip fi };
    !futex_blocked
}

/* evloop__sleep_wake_loop: the exchange, then the wake for the one who flipped it. */
inline wake_loop(t, old) {
    d_step { drain_all(t); old = mem[WORD]; mem[WORD] = AWAKE };
    if :: old == SLEEP -> futex_blocked = false :: else -> skip fi
}

proctype Producer(byte t) {
    byte i = 0, c, w, old;
    do
    :: i < NTASKS ->
#ifdef BROKEN_WORD_BEFORE_LOCK
        load(t, WORD, w);
        lock(t);
        load(t, COUNT, c);
        store(t, COUNT, c + 1);
#else
        lock(t);
        load(t, COUNT, c);
        store(t, COUNT, c + 1);    /* fill(): the task and its count */
        load(t, WORD, w);          /* the wake decision, under mu */
#endif
        unlock(t);
        if
        :: w != AWAKE -> wake_loop(t, old) /* push returned 1: the caller notifies */
        :: else -> skip
        fi;
        i++
    :: else -> break
    od
}

inline sync(t) {
    lock(t);
    unlock(t)
}

proctype Loop() {
    byte c, old;
    do
    :: ran == TOTAL -> break
    :: else ->
        load(LOOP, COUNT, c);      /* drain: acquire loads of count, no lock */
        if
        :: c > ran -> ran = c
        :: else ->
#ifdef BROKEN_SYNC_FIRST
            sync(LOOP);
            store(LOOP, WORD, SLEEP);
#else
            store(LOOP, WORD, SLEEP); /* evloop__sleep_announce */
#ifndef BROKEN_NO_SYNC
            sync(LOOP);               /* evloop__ingress_fenced */
#endif
#endif
            load(LOOP, COUNT, c);     /* the re-check: evloop__ingress_is_empty */
            if
            :: c > ran -> store(LOOP, WORD, AWAKE) /* evloop__sleep_cancel */
            :: else ->
                futex_wait();
                d_step { drain_all(LOOP); old = mem[WORD]; mem[WORD] = AWAKE } /* finish */
            fi
        fi
    od;
    assert(ran == TOTAL)
}

active proctype Memory() {
end:
    do
    :: atomic { sb[0].n > 0 -> flush_one(0) }
    :: atomic { sb[1].n > 0 -> flush_one(1) }
    :: atomic { sb[LOOP].n > 0 -> flush_one(LOOP) }
    od
}

init {
    atomic {
        run Producer(0);
        run Producer(1);
        run Loop()
    }
}
