/* Submit versus stop (design.md "Shutdown"): a submit racing evloop_stop either runs or is
 * refused, never both, never neither. The arena ingress claims a ring position with one CAS
 * on `tail`, whose bit 63 is the closed flag that evloop_stop sets (src/variants/arena);
 * the chunk ingress checks `closed` and appends under one mutex: both make "closed?" and
 * "claim" one atomic step. The loop (run_until_drained() in src/core/loop.c) returns once
 * stopping is set and no claimed position is left; a claimed but unpublished task keeps it
 * ticking. stop also kicks the loop, which may be asleep (the wake handshake as in wake.pml).
 *
 * evloop_stop() sets `stopping`, closes every ingress queue, then sets `closed`; the loop
 * returns only once `closed` is set and nothing claimed is left, because before that a
 * queue stop has not reached yet may still accept a push. A producer first checks
 * `stopping` (so a refusal is final across the loop's queues), then claims.
 *
 * Property: when every process has finished, every accepted task ran (assertion), and the
 * loop did not block for good (invalid end state).
 *   (default)     the admission, evloop_stop() and the loop's exit as coded: no error
 *   -DEARLY_EXIT  the loop returns on "stopping and nothing claimed" without waiting for
 *                 `closed` (the bug the submit-racing-stop test found): spin must find a
 *                 task accepted by a not yet closed queue and never run
 *   -DBROKEN      the producer checks `stopping`, then claims without the closed check in
 *                 the same atomic step: spin must find a task accepted and never run */

#define NPROD 2
#define NTRY 2

#define AWAKE 0
#define SLEEP_WORD 1

bool closed = false;      /* bit 63 of tail */
bool stopping = false;
bool all_closed = false;  /* loop->closed: every queue closed */
byte claimed = 0;         /* tail */
byte published = 0;       /* positions whose slot was published */
byte head = 0;            /* the consumer's position */
byte epoch = 0;
byte word = AWAKE;
bool futex_blocked = false;
byte accepted = 0, refused = 0, ran = 0;

inline wake_loop(old) {
    if
    :: word == AWAKE -> skip
    :: else ->
        atomic { old = word; word = AWAKE };
        if :: old == SLEEP_WORD -> futex_blocked = false :: else -> skip fi
    fi
}

proctype Producer() {
    byte i = 0, old;
    bool ok;
    do
    :: i < NTRY ->
#ifdef BROKEN
        ok = !stopping;
        if :: ok -> claimed++ :: else -> skip fi;
#else
        ok = !stopping;           /* push_and_wake(): refusal is final */
        if
        :: ok -> atomic { if :: !closed -> claimed++ :: else -> ok = false fi }
        :: else -> skip
        fi;
#endif
        if
        :: ok ->
            published++;          /* the slot's seq store */
            accepted++;           /* evloop_submit returned 0 */
            wake_loop(old)
        :: else -> refused++      /* -ESHUTDOWN */
        fi;
        i++
    :: else -> break
    od
}

/* evloop_stop() as coded: the stopping flag, the ingress closes, then `closed`. */
proctype Stopper() {
    byte old;
    stopping = true;              /* atomic_exchange(&loop->stopping, true) */
    closed = true;                /* evloop__ingress_close: fetch_or of the closed bit */
    all_closed = true;            /* atomic_store(&loop->closed, true) */
    epoch++;                      /* evloop__kick */
    wake_loop(old)
}

proctype Loop() {
    byte e;
    do
    :: atomic { ran = ran + published - head; head = published };   /* drain, in order */
        if
#ifdef EARLY_EXIT
        :: stopping && claimed == head -> break                      /* the old exit */
#else
        :: all_closed && claimed == head -> break                    /* drained: run returns */
#endif
        :: else -> skip
        fi;
        if
        :: stopping || claimed != head -> skip                       /* tick again */
        :: else ->
            e = epoch;
            word = SLEEP_WORD;
            if
            :: claimed != head || stopping || e != epoch -> word = AWAKE
            :: else ->
                atomic { if :: word == SLEEP_WORD -> futex_blocked = true :: else -> skip fi };
                !futex_blocked;
                word = AWAKE
            fi
        fi
    od
}

init {
    atomic {
        run Loop();
        run Producer();
        run Producer();
        run Stopper()
    }
    (_nr_pr == 1);
    assert(ran == accepted);
    assert(accepted + refused == NPROD * NTRY)
}
