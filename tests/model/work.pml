/* The work pool's protocol (issue 31): src/core/work.c. The loop thread publishes items in
 * the ring (ring_push: a release store of the slot's sequence word) and wakes a sleeping pool
 * thread (wake_workers: fence, read the idle bits, claim one, exchange its sleep word, wake
 * only if the exchange flipped ASLEEP); pool threads pop (a CAS on head), claim an item
 * (CAS QUEUED -> RUNNING) against the loop's cancel (CAS QUEUED -> CANCELLED), reply through
 * the completion queue and notify the loop, and go to sleep (worker_sleep: word ASLEEP, idle
 * bit, fence, re-check the ring and quit, block). The loop delivers each reply (done with 0)
 * and each cancelled item (done with -ECANCELED); a stop cancels every item not taken and
 * waits, asleep, for the replies of those running; then the pool ends (quit, every word
 * flipped, threads joined).
 *
 * Memory model: x86-TSO, as lanes.pml: each thread's plain stores go through its own FIFO
 * store buffer (sb[]), which the Memory process drains at any moment; loads see the thread's
 * own newest buffered store first; a fence or a read-modify-write empties the thread's
 * buffer first. The completion queue and the loop's own sleep protocol are modelled as
 * atomic steps here (lanes.pml checks them); the overflow (loop-thread only) is left out.
 *
 * Properties (assertions; a thread blocked for good is an invalid end state):
 *  (a) no lost wake: a published item is never left while every pool thread sleeps, and
 *      the loop never sleeps for good while a reply or a cancelled item waits;
 *  (b) every accepted item's done runs exactly once, with 0 after its work ran once, or
 *      with -ECANCELED and no work, also with a stop racing the pool;
 *  (c) the pool's end leaves no pool thread blocked.
 *
 * Variants (tests/model/CMakeLists.txt runs each):
 *   (default)                     two items, two pool threads: must pass
 *   -DCANCEL                      the loop cancels item 1 at any point: must pass
 *   -DSTOP                        a stop at any point: must pass
 *   -DCANCEL -DSTOP               both: must pass
 *   -DBROKEN_NO_FENCE             wake_workers() without its fence: the loop's read of the
 *                                 idle bits passes its own publication: must fail (a lost
 *                                 wake)
 *   -DBROKEN_WAKE_BEFORE_PUBLISH  the wake looks for sleepers before the item is published:
 *                                 must fail
 *   -DBROKEN_NO_RECHECK           a pool thread blocks without re-checking the ring after
 *                                 its announce: must fail
 *   -DBROKEN_BIT_AFTER_RECHECK    the idle bit is set after the re-check: must fail
 *   -DCANCEL -DBROKEN_CANCEL_CHECK_THEN_SET  cancel reads QUEUED, then stores CANCELLED (no
 *                                 CAS): an item both runs and is cancelled: must fail
 *   -DSTOP -DBROKEN_STOP_EARLY    a stopping loop ends once nothing is queued and no reply
 *                                 waits, without waiting for running items: must fail
 *   -DSPIN (alone, with -DCANCEL, with -DSTOP)  a pool thread may spin before it sleeps: it adds a
 *                                 spin credit, reads the ring, and takes a credit back before
 *                                 its sleep's announce; the loop, after its fence, takes a
 *                                 credit instead of waking a sleeper: must pass
 *   -DSPIN -DBROKEN_CREDIT_LATE   the spinning thread takes its credit back only after its
 *                                 sleep (the loop counts on a thread that sleeps): must fail
 *   -DDEFER (alone, with -DCANCEL, with -DSTOP)  the deferred wake (the pool shares the loop's
 *                                 one CPU: wake_for(), evloop__work_flush()): the loop submits
 *                                 each item from a callback of any of its ticks (after that
 *                                 tick's replies, so also from a done), publishes it and only
 *                                 counts it; before it sleeps it flushes (fence, then wakes up
 *                                 to that many sleeping threads): must pass
 *   -DDEFER -DBROKEN_FLUSH_EARLY  the flush runs at the start of the tick, before the
 *                                 callbacks that submit: an item submitted by the tick's
 *                                 last callback is left unwoken while the loop sleeps: must
 *                                 fail
 *   -DDEFER -DBROKEN_NO_FENCE     the flush without its fence: must fail */

#ifndef NITEMS
#define NITEMS 2
#endif
#define NW 2 /* pool threads */
#define LOOP 2 /* thread index of the loop (0, 1: pool threads) */
#define NT 3
#ifndef BUFSZ
#define BUFSZ 2
#endif

/* Addresses of the shared words. */
#define PUB 0      /* the ring's tail as published: slots' sequence words, folded into one */
#define WORD(w) (1 + (w))
#define IDLE(w) (3 + (w))
#define NADDR 5

#define AWAKE 0
#define ASLEEP 1

#define QUEUED 0
#define RUNNING 1
#define FINISHED 2
#define CANCELLED 3

byte mem[NADDR];
typedef sbuf {
    byte a[BUFSZ];
    byte v[BUFSZ];
    byte n
};
sbuf sb[NT];
byte sk;

byte head = 0;               /* consumers' position (CAS) */
byte state[NITEMS];          /* item states (every access an RMW or a load after one) */
byte replies = 0;            /* replies waiting in the completion queue */
byte reply_item[NITEMS * 2]; /* the queue, in push order */
byte reply_ran[NITEMS * 2];  /* 1: ran, 0: skipped */
byte reply_head = 0;
bool cancelled_list[NITEMS]; /* the loop's list of cancelled items, done to run */
byte ncancelled = 0;         /* items on it */
byte works[NITEMS];          /* times work ran */
byte dones[NITEMS];          /* times done ran */
byte done_status[NITEMS];    /* 0: ran, 1: cancelled */
bool blocked[NW];            /* pool thread inside the futex wait */
bool loop_blocked = false;
byte loop_word = AWAKE;      /* the loop's sleep word (sleep.c), SC here */
bool quit = false;
bool stopping = false;
byte live = 0;               /* accepted items whose done has not run */
byte credit = 0;             /* spin credits (every access an RMW: SC) */
byte nsub = 0;               /* items submitted (accepted) */

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

inline xchg(t, ad, val, old) {
    d_step { drain_all(t); old = mem[ad]; mem[ad] = val }
}

inline fence(t) {
    d_step { drain_all(t) }
}

proctype Memory() {
end:
    do
    :: d_step { sb[0].n > 0 -> flush_one(0) }
    :: d_step { sb[1].n > 0 -> flush_one(1) }
    :: d_step { sb[2].n > 0 -> flush_one(2) }
    od
}

/* ---- pool threads ---- */

/* reply(): the completion queue's push, then evloop__sleep_notify() of the loop. */
inline reply(me, it, ran) {
    d_step {
        drain_all(me);
        reply_item[replies] = it;
        reply_ran[replies] = ran;
        replies++
    };
    d_step { if :: loop_word != AWAKE -> loop_word = AWAKE; loop_blocked = false :: else -> skip fi }
}

proctype Worker(byte me) {
    byte it, v, old;
    bool got, hit, spun;
    do
    :: /* ring_pop(): the slot's sequence word says published; the CAS on head takes it */
        d_step {
            drain_all(me);
            if
            :: head < mem[PUB] -> it = head; head++; got = true
            :: else -> got = false
            fi
        };
        if
        :: got ->
            /* run_item(): the claim races the loop's cancel */
            d_step {
                if
                :: state[it] == QUEUED -> state[it] = RUNNING; got = true
                :: else -> got = false
                fi
            };
            if
            :: got ->
                d_step { works[it]++; state[it] = FINISHED };
                reply(me, it, 1)
            :: else -> reply(me, it, 0)
            fi
        :: else ->
            if
            :: quit -> break
            :: else ->
                hit = false;
                spun = false;
#ifdef SPIN
                /* spin_for_item(): a credit, the ring read (any number of reads is one
                 * that sees the publication or not), the credit taken back if one is left */
                if
                :: true ->
                    spun = true;
                    d_step { drain_all(me); credit++ };
                    load(me, PUB, v);
                    hit = v > head;
#ifndef BROKEN_CREDIT_LATE
                    d_step { drain_all(me); if :: credit > 0 -> credit-- :: else -> skip fi }
#endif
                :: true -> skip
                fi;
#endif
                if
                :: hit -> skip /* back to ring_pop() */
                :: else ->
                /* worker_sleep() */
                store(me, WORD(me), ASLEEP);
#ifndef BROKEN_BIT_AFTER_RECHECK
                xchg(me, IDLE(me), 1, old); /* fetch_or */
#endif
                fence(me);
                load(me, PUB, v);
#ifdef BROKEN_NO_RECHECK
                v = head;
#endif
                if
                :: v > head || quit ->
#ifdef BROKEN_BIT_AFTER_RECHECK
                    skip
#else
                    xchg(me, IDLE(me), 0, old)
#endif
                :: else ->
#ifdef BROKEN_BIT_AFTER_RECHECK
                    xchg(me, IDLE(me), 1, old);
#endif
                    d_step { if :: mem[WORD(me)] == ASLEEP -> blocked[me] = true :: else -> skip fi };
                    !blocked[me];
                    xchg(me, IDLE(me), 0, old)
                fi;
                xchg(me, WORD(me), AWAKE, old)
                fi;
#ifdef BROKEN_CREDIT_LATE
                if
                :: spun -> d_step { if :: credit > 0 -> credit-- :: else -> skip fi }
                :: else -> skip
                fi;
#endif
                spun = false
            fi
        fi
    od
}

/* ---- the loop ---- */

/* wake_workers(loop, n): claims idle bits in order and wakes up to n threads, each one whose
 * word it flips from ASLEEP. */
inline wake_workers() {
    w = 0;
    do
    :: w < NW && n > 0 ->
        load(LOOP, IDLE(w), v);
        if
        :: v != 0 ->
            xchg(LOOP, IDLE(w), 0, old);
            load(LOOP, WORD(w), v);
            if
            :: v == ASLEEP ->
                xchg(LOOP, WORD(w), AWAKE, old);
                if
                :: old == ASLEEP -> blocked[w] = false; n--
                :: else -> skip
                fi
            :: else -> skip /* awake: it re-checks the ring before it sleeps */
            fi
        :: else -> skip
        fi;
        w++
    :: else -> break
    od
}

inline publish(i) {
#ifdef BROKEN_WAKE_BEFORE_PUBLISH
    fence(LOOP);
    n = 1;
    wake_workers();
    store(LOOP, PUB, i + 1);
#else
    store(LOOP, PUB, i + 1);
#ifndef BROKEN_NO_FENCE
    fence(LOOP);
#endif
#ifdef SPIN
    /* a spinning thread's credit instead of a wake */
    d_step { if :: credit > 0 -> credit--; skipped = true :: else -> skipped = false fi };
    if
    :: skipped -> skip
    :: else -> n = 1; wake_workers()
    fi
#else
    n = 1;
    wake_workers();
#endif
#endif
}

/* evloop__work_flush(): the wakes the tick's submits deferred, as one wake_workers(). */
inline flush() {
    if
    :: unwoken > 0 ->
#ifndef BROKEN_NO_FENCE
        fence(LOOP);
#endif
        n = unwoken;
        unwoken = 0;
        wake_workers()
    :: else -> skip
    fi
}

/* A callback of the tick submits (DEFER): check_caller() refuses once the loop is stopping. */
#define MORE (i < NITEMS && !stopping)

inline cancel(i) {
#ifdef BROKEN_CANCEL_CHECK_THEN_SET
    if
    :: state[i] == QUEUED -> state[i] = CANCELLED; cancelled_list[i] = true; ncancelled++
    :: else -> skip
    fi
#else
    d_step {
        if
        :: state[i] == QUEUED -> state[i] = CANCELLED; cancelled_list[i] = true; ncancelled++
        :: else -> skip
        fi
    }
#endif
}

proctype Loop() {
    byte i = 0, w, v, old, k, n, unwoken = 0;
    bool did_cancel = false, skipped;
#ifndef DEFER
    /* submit every item (evloop_work_submit from the loop thread) */
    do
    :: i < NITEMS -> live++; nsub++; publish(i); i++
    :: else -> break
    od;
#endif
    do
    ::
#ifdef BROKEN_FLUSH_EARLY
        flush();
        skip;
#endif
        /* evloop__work_run(): the replies visible now, then the cancelled list (the loop
         * thread's own steps, one atomic step here) */
        d_step {
            do
            :: reply_head < replies ->
                k = reply_item[reply_head];
                if :: reply_ran[reply_head] -> dones[k]++; done_status[k] = 0; live--
                   :: else -> skip fi;
                reply_head++
            :: else -> break
            od;
            k = 0;
            do
            :: k < NITEMS ->
                if
                :: cancelled_list[k] ->
                    cancelled_list[k] = false; ncancelled--; dones[k]++; done_status[k] = 1; live--
                :: else -> skip
                fi;
                k++
            :: else -> break
            od;
            k = 0
        };
#ifdef DEFER
        /* a callback of this tick (a done above, a task, an fd) may submit the next item:
         * published, its wake counted for the flush */
        if
        :: MORE -> live++; nsub++; store(LOOP, PUB, i + 1); unwoken++; i++
        :: true -> skip
        fi;
#endif
#ifdef CANCEL
        if
        :: !did_cancel && nsub > 1 -> cancel(1); did_cancel = true
        :: true -> skip
        fi;
#endif
#ifdef STOP
        if
        :: !stopping ->
            /* evloop__work_stop(): every item not taken is cancelled */
            d_step {
                stopping = true;
                k = 0;
                do
                :: k < nsub ->
                    if
                    :: state[k] == QUEUED -> state[k] = CANCELLED; cancelled_list[k] = true; ncancelled++
                    :: else -> skip
                    fi;
                    k++
                :: else -> break
                od;
                k = 0
            }
        :: true -> skip
        fi;
#endif
        if
#ifdef BROKEN_STOP_EARLY
        :: stopping && reply_head == replies && ncancelled == 0 -> break
#endif
        :: live == 0 && reply_head == replies && !MORE -> break
        :: else ->
#if defined(DEFER) && !defined(BROKEN_FLUSH_EARLY)
            /* poll_or_sleep(): the flush before the wait, the stopping tick's too */
            flush();
#endif
            /* prepare_sleep() / wait_for_pool(): announce, re-check, block (not while a
             * callback is left that submits) */
            if
            :: reply_head < replies || ncancelled > 0 || MORE -> skip
            :: else ->
                loop_word = ASLEEP;
                if
                :: reply_head < replies -> loop_word = AWAKE
                :: else ->
                    d_step { if :: loop_word == ASLEEP -> loop_blocked = true :: else -> skip fi };
                    !loop_blocked;
                    loop_word = AWAKE
                fi
            fi
        fi
    od;
    /* evloop__work_destroy(): quit, every word flipped, then join */
    skip;
    d_step { drain_all(LOOP); quit = true };
    w = 0;
    do
    :: w < NW ->
        xchg(LOOP, WORD(w), AWAKE, old);
        if :: old == ASLEEP -> blocked[w] = false :: else -> skip fi;
        w++
    :: else -> break
    od
}

init {
    byte k;
    atomic {
        run Memory();
        run Worker(0);
        run Worker(1);
        run Loop()
    }
    (_nr_pr == 2); /* every thread but Memory has ended: the pool is joined */
    k = 0;
    do
    :: k < nsub ->
        assert(dones[k] == 1);                            /* (b) reported exactly once */
        assert(done_status[k] == 1 || works[k] == 1);     /* ran: its work ran once */
        assert(done_status[k] == 0 || works[k] == 0);     /* cancelled: never ran */
        k++
    :: else -> break
    od;
    do
    :: k < NITEMS -> assert(dones[k] == 0 && works[k] == 0); k++ /* never submitted */
    :: else -> break
    od
}
