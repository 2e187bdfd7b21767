/* The arena ingress's lanes and the sleep protocol (issue 11): lane publication, the
 * asymmetric fence, sleep, close and lane reclamation. Producer half: begin_push(),
 * end_push() and lane_orphan() in src/variants/arena/arena.c, then evloop__sleep_notify()
 * (src/core/sleep.c). Loop half: evloop__ingress_drain() (take_announced, recheck, settle,
 * reclaim_if_orphaned), _fenced(), _is_empty(), prepare_sleep() and fence_if_wanted()
 * (src/core/tick.c), run_until_drained() (src/core/loop.c). Close: evloop_stop() with
 * evloop__ingress_close().
 *
 * Memory model: x86-TSO. Each thread's plain stores go through its own FIFO store buffer
 * (sb[]), which the Memory process drains to memory one store at a time, at any moment; a
 * thread's loads see its own newest buffered store first. A seq_cst fence and every
 * read-modify-write (exchange, CAS) first empty the thread's own buffer; membarrier() empties
 * every buffer in one step. The light barrier is a seq_cst fence in fence mode and nothing in
 * membarrier mode (a compiler barrier: TSO keeps program order but store -> load). The
 * announce stack is a set of lanes (the consumer takes it whole); its pushes and the take are
 * read-modify-writes. C11 without fences is weaker than TSO, so a bug found here is one there.
 *
 * Threads: producer 0 pushes NTASKS0 tasks into lane 0 and exits (lane_orphan, unless
 * -DNO_EXIT); producer 1 pushes NTASKS1 into lane 1; the loop ticks (take, drain, settle,
 * reclaim), may tick again, fence (fence_if_wanted) or sleep. -DWITH_CLOSE adds a thread
 * running evloop_stop(), and the loop returns once it reads `closed` and then _is_empty().
 *
 * Properties (assertions; a loop blocked for good is also an invalid end state):
 *  (a) no lost wake: the loop never blocks for good with a published task undrained;
 *  (b) every accepted task is drained exactly once: head never passes tail, and when every
 *      thread is done head == tail on every lane (with close: after the loop returned);
 *  (c) a lane is reclaimed only once drained and out of the announce stack; a reclaimed
 *      lane is never pushed to, announced again or taken from the stack; the work list
 *      never holds a lane twice; the orphaned lane is not left where no tick will find it.
 *
 * Two flaws of arena.c as first written, both found by this model (the first also by
 * tests/stress): each has a variant that puts the original back, and spin rejects both:
 *   -DBROKEN_EXIT_NO_NOTIFY  lane_orphan() announces without a wake. The consumer lets go
 *       of a lane undrained when its CAS of announced (0 -> 1) fails, relying on the winner
 *       to push the lane and notify. Counterexample: the thread's last push reads announced
 *       1 (the loop holds the lane) and skips the announce; the loop settles the lane
 *       (announced = 0, probation) before seeing that tail; the thread exits: its exchange
 *       gets 0; the loop's fenced() sees the task, loses the CAS to the exchange and drops
 *       the lane; its re-check finds an empty stack and it blocks; the exit then pushes the
 *       lane without a wake. The fix (arena.c): lane_orphan() calls the queue's notify (the
 *       loop's evloop__sleep_notify) after its announce push.
 *   -DCLOSE_BUSY_BEFORE_ANNOUNCE  end_push clears busy before the announce. Counterexample:
 *       a push into a lane the loop does not hold (new, or let go) reads closed == 0, stores
 *       tail, clears busy and is about to push the lane on the stack; close sees busy == 0
 *       and returns, stop sets closed; the loop reads closed, _is_empty() sees no stack and
 *       no held lane, and returns; the push then announces and returns 0, and its task is
 *       never run. The fix: clear busy after the announce, so once close has returned every
 *       accepted task is in a lane the loop holds or on the announce stack.
 *   -DBROKEN_LET_GO  the consumer drops a lane from its work list when its CAS loses, and
 *       nothing waits for the winner's push: with close, the loop can end first (see let_go).
 *
 * The loop pays its heavy barrier before a sleep only while its work list holds a lane
 * (evloop__ingress_needs_heavy): a lane let go after a barrier, or never announced, is
 * announced again by an exchange, a full barrier, before its producer reads the word.
 *   -DBROKEN_STACK_NOT_WORK  the sleep re-check takes the announce stack but counts only
 *       undrained tasks as work (arena.c's _is_empty() before the barrier was skipped). spin
 *       finds a lost wake with three pushes on one lane (-DNTASKS0=3 -DNTASKS1=0 -DNO_EXIT):
 *       the re-check takes a lane whose producer was still announcing it, finds its tasks
 *       drained already, and the loop sleeps, its barrier skipped, holding the lane ACTIVE
 *       with announced 1; the next push skips the exchange, and its read of the word passes
 *       its own tail store: no wake. The fix: a lane taken there is work (tick again).
 *
 * Fenced pushes (arena.c, "fenced pushes"): with -DSWITCH, producer 0 may switch its lane
 * between plain and fenced pushes between any two pushes (up to NSWITCH times): it bumps
 * mode_req (odd: fenced) and fences from that request on; it stops fencing only once it
 * reads mode_ack equal to its plain request. The loop, when it drains or re-checks lane 0,
 * acts on a new mode_req and echoes it in mode_ack; while it believes the lane fenced, it
 * settles the lane as fence mode does (announced = 0; fence; re-read tail), with no
 * probation and no heavy barrier needed for it.
 *   -DBROKEN_STOP_UNECHOED  the producer stops fencing as soon as it asks for plain pushes,
 *       without waiting for the echo: the loop, still believing the lane fenced, lets it go
 *       while a plain push's read of announced passes its tail store: must fail
 *   -DBROKEN_ONE_BIT  mode_req and mode_ack are one bit: a request for fenced pushes the
 *       loop read but has not echoed yet, then a request for plain pushes, reads as echoed
 *       (ack 0 == 0): must fail
 *
 * Variants (tests/model/CMakeLists.txt runs each):
 *   (default)                       membarrier mode: must pass
 *   -DALWAYS_HEAVY                  the heavy barrier before every sleep (as before): must pass
 *   -DBROKEN_STACK_NOT_WORK         see above: must fail
 *   -DFENCE_MODE                    the fallback: producers and the loop fence: must pass
 *   -DWITH_CLOSE                    close racing pushes (either mode): must pass
 *   -DBROKEN_NO_MEMBARRIER          membarrier mode, the heavy barrier a no-op: must fail
 *   -DBROKEN_SLEEP_BEFORE_TAIL      the producer reads the sleep word before its tail store
 *   -DBROKEN_RECLAIM_UNDRAINED      reclaim_if_orphaned() without the emptiness check
 *   -DBROKEN_FALLBACK_NO_FENCE      fence mode, light barrier a compiler barrier, heavy a
 *                                   local fence: must fail
 *   -DBROKEN_RECLAIM_ON_PROBATION   a probation lane found empty and orphaned is reclaimed
 *                                   without taking announced back first: the exiting thread
 *                                   then announces a reclaimed lane: must fail
 *   -DSWITCH (-DNSWITCH=n, default 3)   fenced pushes on lane 0: must pass (as is, 13M states
 *                                   and 1.6 GB; ctest runs it with producer 1 silent)
 *   -DSWITCH -DBROKEN_STOP_UNECHOED, -DSWITCH -DBROKEN_ONE_BIT: must fail
 *   -DBROKEN_EXIT_NO_NOTIFY and -DBROKEN_LET_GO together (arena.c as first written),
 *   -DBROKEN_LET_GO with close, -DCLOSE_BUSY_BEFORE_ANNOUNCE (with -DWITH_CLOSE): must fail
 * Sizes: -DNTASKS0=, -DNTASKS1=, -DBUFSZ= (defaults 2, 1, 3; 1, 1, 3 with close). */

#ifndef NTASKS0
#ifdef WITH_CLOSE
#define NTASKS0 1
#else
#define NTASKS0 2
#endif
#endif
#ifndef NTASKS1
#define NTASKS1 1
#endif
#define TOTAL (NTASKS0 + NTASKS1)
#ifdef NO_EXIT
#define EXIT0 false
#else
#define EXIT0 true /* producer 0 exits after its last push */
#endif

#ifdef BROKEN_FALLBACK_NO_FENCE
#define FENCE_MODE
#endif

#define NL 2     /* lanes = producers */
#define NT 4     /* threads with a store buffer: producers 0 and 1, the loop, the closer */
#define LOOP 2
#define CLOSER 3
#ifndef BUFSZ
#define BUFSZ 3 /* stores a thread may have in flight */
#endif

/* Addresses of the shared words. */
#define TAIL(l) (l)
#define BUSY(l) (2 + (l))
#define ANN(l) (4 + (l))
#define ORPH(l) (6 + (l))
#define CLOSED 8
#define SLEEPW 9
#define REQ 10 /* lane 0's mode_req */
#define ACK 11 /* lane 0's mode_ack */
#define NADDR 12

#ifndef NSWITCH
#define NSWITCH 3
#endif
#ifdef BROKEN_ONE_BIT
#define REQV(r) ((r) % 2)
#else
#define REQV(r) (r)
#endif

#define AWAKE 0
#define SLEEP 1

/* lane.state */
#define OFF 0
#define ACT 1
#define PROB 2
#define HAND 3 /* the consumer lost its CAS: kept in the work list until taken */

/* recheck() */
#define STILL 0
#define NOW_ACTIVE 1
#define GONE 2

byte mem[NADDR];
typedef sbuf {
    byte a[BUFSZ];
    byte v[BUFSZ];
    byte n
};
sbuf sb[NT];
byte sk; /* scratch index for the buffer helpers, always 0 between steps */

/* Ghost and SC state. The announce stack is a set (the consumer takes it whole); all
 * its operations are read-modify-writes or acquire loads of its head. */
bool on_stack[NL];
byte st[NL];         /* where the consumer holds the lane: OFF, ACT, PROB */
byte head[NL];       /* consumer's */
byte pushed[NL];     /* tasks the producer stored (its tail in program order) */
bool reclaimed[NL];
bool futex_blocked = false;
bool loop_closed = false; /* loop->closed: seq_cst store by the closer */
byte mode_seen = 0;       /* the loop's: lane 0's last mode_req read */
bool pushes_fenced = false; /* the loop's: mode_seen is odd */

/* ---- the store buffers ---- */

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

/* evloop__barrier_light / evloop__barrier_heavy */
inline light(t) {
#if defined(FENCE_MODE) && !defined(BROKEN_FALLBACK_NO_FENCE)
    fence(t)
#else
    skip /* a compiler barrier */
#endif
}

inline heavy(t) {
#if defined(BROKEN_NO_MEMBARRIER)
    skip
#elif defined(FENCE_MODE)
    fence(t)
#else
    d_step { drain_all(0); drain_all(1); drain_all(2); drain_all(3) } /* membarrier() */
#endif
}

/* end_push()'s barrier between the tail store and the read of announced: the light one,
 * or a fence while the lane's pushes are fenced. */
inline push_barrier(t, fencing) {
#if defined(FENCE_MODE) && !defined(BROKEN_FALLBACK_NO_FENCE)
    fence(t)
#else
    d_step { if :: fencing -> drain_all(t) :: else -> skip fi }
#endif
}

proctype Memory() {
end:
    do
    :: d_step { sb[0].n > 0 -> flush_one(0) }
    :: d_step { sb[1].n > 0 -> flush_one(1) }
    :: d_step { sb[2].n > 0 -> flush_one(2) }
    :: d_step { sb[3].n > 0 -> flush_one(3) }
    od
}

inline futex_wake() {
    futex_blocked = false
}

/* ---- producers ---- */

inline announce_push(t, l) {
    d_step {
        drain_all(t);
        assert(!reclaimed[l]); /* (c) a reclaimed lane handed to the consumer again */
        assert(!on_stack[l]);  /* a Treiber stack node pushed twice */
        on_stack[l] = true
    }
}

/* evloop__sleep_notify(), after the light barrier (or, broken, the early read). */
inline notify(me, sw, old) {
    if
    :: sw != AWAKE ->
        xchg(me, SLEEPW, AWAKE, old);
        if :: old == SLEEP -> futex_wake() :: else -> skip fi
    :: else -> skip
    fi
}

proctype Producer(byte me; byte ntasks; bool exits) {
    byte i = 0, v, sw, old;
    byte req = 0, nsw = 0; /* lane 0: mode requests made */
    bool fencing = false;  /* this producer's pushes fence before reading announced */
    do
    :: i < ntasks ->
        assert(!reclaimed[me]);             /* (c) no push into a reclaimed lane */
#ifdef SWITCH
        /* ask_mode_switch(), between two pushes: fenced from the request on */
        if
        :: me == 0 && nsw < NSWITCH ->
            d_step { req++; nsw++; if :: req % 2 == 1 -> fencing = true :: else -> skip fi };
            store(me, REQ, REQV(req))
        :: true -> skip
        fi;
#endif
        /* begin_push() */
        store(me, BUSY(me), 1);
        light(me);
        load(me, CLOSED, v);
        if
        :: v != 0 -> store(me, BUSY(me), 0)  /* -ESHUTDOWN */
        :: else ->
#ifdef BROKEN_SLEEP_BEFORE_TAIL
            load(me, SLEEPW, sw);
#endif
            /* end_push(): plain again once the plain request is echoed; tail (release),
             * busy = 0 (release), light (a fence while fencing), announce */
            if
            :: fencing && req % 2 == 0 ->
#ifdef BROKEN_STOP_UNECHOED
                fencing = false
#else
                load(me, ACK, v);
                if :: v == REQV(req) -> fencing = false :: else -> skip fi;
                v = 0
#endif
            :: else -> skip
            fi;
            d_step {
                sb[me].n < BUFSZ ->
                sb[me].a[sb[me].n] = TAIL(me); sb[me].v[sb[me].n] = pushed[me] + 1; sb[me].n++;
                pushed[me]++
            };
#ifdef CLOSE_BUSY_BEFORE_ANNOUNCE
            store(me, BUSY(me), 0);
#endif
            push_barrier(me, fencing);
            load(me, ANN(me), v);
            if
            :: v == 0 ->
                xchg(me, ANN(me), 1, old);
                if :: old == 0 -> announce_push(me, me) :: else -> skip fi
            :: else -> skip
            fi;
#ifndef CLOSE_BUSY_BEFORE_ANNOUNCE
            store(me, BUSY(me), 0);   /* after the announce: see the header */
#endif
            /* push_and_notify(): evloop__sleep_notify() */
            light(me);
#ifndef BROKEN_SLEEP_BEFORE_TAIL
            load(me, SLEEPW, sw);
#endif
            notify(me, sw, old)
        fi;
        d_step { i++; v = 0; sw = 0; old = 0 } /* dead values would only split states */
    :: else -> break
    od;
    if
    :: exits ->
        /* lane_orphan(): the thread's reference keeps the lane's memory alive across
         * these accesses, so touching `announced` after the consumer reclaimed it is
         * allowed; handing it to the consumer again is not (announce_push asserts). */
        store(me, ORPH(me), 1);
        xchg(me, ANN(me), 1, old);
        if
        :: old == 0 ->
            announce_push(me, me);
#ifndef BROKEN_EXIT_NO_NOTIFY
            light(me);                       /* arena.c's fix: notify as a push does */
            load(me, SLEEPW, sw);
            notify(me, sw, old)
#else
            skip
#endif
        :: else -> skip
        fi;
        old = 0;
        sw = 0
    :: else -> skip
    fi
}

/* ---- the loop ---- */

/* reclaim_announce(): CAS announced 0 -> 1 */
inline cas_announce(l, ok) {
    d_step {
        drain_all(LOOP);
        if
        :: mem[ANN(l)] == 0 -> mem[ANN(l)] = 1; ok = true
        :: else -> ok = false
        fi
    }
}

inline do_reclaim(l) {
    d_step {
        assert(head[l] == pushed[l]); /* (c) reclaimed with an undrained task */
        assert(!on_stack[l]);         /* (c) reclaimed while linked in the announce stack */
        reclaimed[l] = true;
        st[l] = OFF
    }
}

/* reclaim_if_orphaned(): orphaned (acquire), then empty? (acquire of tail) */
inline reclaim_if_orphaned(l, ok) {
    o = mem[ORPH(l)];
    t = mem[TAIL(l)];
#ifdef BROKEN_RECLAIM_UNDRAINED
    ok = (o != 0);
#else
    ok = (o != 0 && t == head[l]);
#endif
    if :: ok -> do_reclaim(l) :: else -> skip fi
}

/* The consumer lost the CAS on `announced`: whoever won pushes the lane on the announce
 * stack (and notifies). arena.c keeps the lane in the work list as HANDED, drained like an
 * ACTIVE one but never settled or reclaimed, until the push arrives: its tasks stay where
 * the sleep re-check and the final drain look. -DBROKEN_LET_GO drops it from the work list
 * instead (arena.c as first written): a stop can then end the loop before the exiting
 * thread's push, with the lane's last task never run (found by the review of issue 11 with
 * -DWITH_CLOSE -DNTASKS0=2 -DNTASKS1=0). */
inline let_go(l) {
#ifndef BROKEN_LET_GO
    st[l] = HAND
#else
    st[l] = OFF
#endif
}

/* sync_mode(): lane 0's mode_req (acquire; the loop never stores it), acted on and echoed. */
inline sync_mode(l) {
#ifdef SWITCH
    if
    :: l == 0 && mem[REQ] != mode_seen ->
        d_step { mode_seen = mem[REQ]; pushes_fenced = (mode_seen % 2 == 1) };
        store(LOOP, ACK, mode_seen)
    :: else -> skip
    fi
#else
    skip
#endif
}

#ifdef FENCE_MODE
#define FENCED(l) true
#else
#define FENCED(l) ((l) == 0 && pushes_fenced)
#endif

/* let_go() of arena.c: announced is 0; every push into the lane fences before reading it. */
inline let_go_fenced(l, r) {
    fence(LOOP);
    o = mem[ORPH(l)];
    t = mem[TAIL(l)];
    if
    :: t == head[l] && o == 0 -> st[l] = OFF; r = GONE
    :: else ->
        cas_announce(l, ok);
        if
        :: !ok -> let_go(l); r = NOW_ACTIVE
        :: else ->
            reclaim_if_orphaned(l, ok);   /* or it stays ACTIVE */
            if :: ok -> r = GONE :: else -> r = NOW_ACTIVE fi
        fi
    fi
}

/* settle(): an ACTIVE lane found empty. */
inline settle(l) {
    reclaim_if_orphaned(l, ok);
    if
    :: ok -> skip
    :: else ->
        store(LOOP, ANN(l), 0);
        if
        :: FENCED(l) -> let_go_fenced(l, r)
        :: else -> st[l] = PROB  /* let go only after the next heavy barrier */
        fi
    fi
}

inline recheck_plain(l, r) {
    o = mem[ORPH(l)];
    t = mem[TAIL(l)];
    if
    :: t == head[l] && o == 0 -> r = STILL
#ifdef BROKEN_RECLAIM_ON_PROBATION
    :: t == head[l] && o != 0 -> do_reclaim(l); r = GONE
    :: t != head[l] ->
#else
    :: else ->
#endif
        cas_announce(l, ok);
        if
#ifndef BROKEN_LET_GO
        :: !ok -> let_go(l); r = NOW_ACTIVE
#else
        :: !ok -> let_go(l); r = GONE
#endif
        :: else ->
            st[l] = ACT;
            reclaim_if_orphaned(l, ok);
            if :: ok -> r = GONE :: else -> r = NOW_ACTIVE fi
        fi
    fi
}

/* recheck(): a lane on probation; one whose pushes became fenced is let go as settle would. */
inline recheck(l, r) {
    sync_mode(l);
    if
    :: FENCED(l) -> st[l] = ACT; let_go_fenced(l, r)
    :: else -> recheck_plain(l, r)
    fi
}

/* take_announced(): exchange(announce, NULL), acquire */
inline take_announced() {
    d_step {
        if
        :: on_stack[0] || on_stack[1] ->
            drain_all(LOOP);
            sk = 0;
            do
            :: sk < NL ->
                if
                :: on_stack[sk] ->
                    assert(!reclaimed[sk]);  /* (c) a reclaimed lane in the stack */
                    assert(st[sk] != ACT);   /* the work list never holds a lane twice */
                    on_stack[sk] = false;
                    st[sk] = ACT
                :: else -> skip
                fi;
                sk++
            :: else -> break
            od;
            sk = 0
        :: else -> skip
        fi
    }
}

/* One lane's turn in evloop__ingress_drain(). */
inline drain_lane(l) {
    if
    :: st[l] == ACT || st[l] == HAND -> r = NOW_ACTIVE
    :: st[l] == PROB -> recheck(l, r)
    :: else -> r = STILL
    fi;
    if
    :: r == NOW_ACTIVE ->
        sync_mode(l);
        t = mem[TAIL(l)];               /* drain_lane(): acquire */
        assert(t >= head[l]);           /* (b) never drained twice */
        head[l] = t;
        t = mem[TAIL(l)];               /* lane_is_empty() */
        if :: t == head[l] && st[l] == ACT -> settle(l) :: else -> skip fi
    :: else -> skip
    fi;
    d_step { t = 0; o = 0; r = 0; ok = false }
}

/* _fenced(): right after a heavy barrier. */
inline fenced() {
    if
    :: st[0] == PROB -> recheck(0, r); if :: r == STILL -> st[0] = OFF :: else -> skip fi
    :: else -> skip
    fi;
    if
    :: st[1] == PROB -> recheck(1, r); if :: r == STILL -> st[1] = OFF :: else -> skip fi
    :: else -> skip
    fi
}

/* _is_empty(): the announce stack's head (a lane there is work, drained or not; arena.c
 * takes the stack at once, this model at the next tick), then every lane the consumer holds. */
inline has_work(work) {
    work = on_stack[0] || on_stack[1];
    if :: !work && st[0] != OFF -> t = mem[TAIL(0)]; work = (t != head[0]) :: else -> skip fi;
    if :: !work && st[1] != OFF -> t = mem[TAIL(1)]; work = (t != head[1]) :: else -> skip fi;
    t = 0
}

proctype Loop() {
    byte t, o, r, v;
    bool ok, work, needs_heavy;
    do
    :: take_announced();
        drain_lane(0);
        drain_lane(1);
#ifdef WITH_CLOSE
        /* run_until_drained(): `closed` (seq_cst) first, then has_work(): only once every
         * queue is closed is "no work" final. */
        if
        :: loop_closed -> has_work(work); if :: !work -> break :: else -> skip fi
        :: else -> skip
        fi;
#endif
        has_work(work);
        if
        :: work -> work = false                  /* tick again */
        :: !work -> skip                         /* a timer or an fd: tick again */
        :: work = false; heavy(LOOP); fenced();  /* fence_if_wanted() */
            d_step { t = 0; o = 0; r = 0; ok = false }
        :: !work ->
            /* prepare_sleep(): announce (the word, a full fence, the heavy barrier only while
             * the work list holds a lane: needs_heavy), _fenced, re-check, block */
            store(LOOP, SLEEPW, SLEEP);
#ifdef ALWAYS_HEAVY
            heavy(LOOP);
#else
            fence(LOOP);
            needs_heavy = (st[0] != OFF || st[1] != OFF);
            if
            :: needs_heavy -> heavy(LOOP); needs_heavy = false /* not last: spin's d_step */
            :: else -> skip
            fi;
#endif
            fenced();
            d_step { t = 0; o = 0; r = 0; ok = false };
#ifndef BROKEN_STACK_NOT_WORK
            has_work(work);
#else
            /* the re-check takes the stack but counts only undrained tasks */
            take_announced();
            work = false;
            if :: st[0] != OFF -> t = mem[TAIL(0)]; work = (t != head[0]) :: else -> skip fi;
            if :: !work && st[1] != OFF -> t = mem[TAIL(1)]; work = (t != head[1]) :: else -> skip fi;
            t = 0;
#endif
            if
            :: work || loop_closed ->
                work = false;
                store(LOOP, SLEEPW, AWAKE)      /* evloop__sleep_cancel */
            :: else ->
                d_step {
                    drain_all(LOOP);   /* the futex takes a lock: the word is in memory */
                    if :: mem[SLEEPW] == SLEEP -> futex_blocked = true :: else -> skip fi
                };
#ifndef WITH_CLOSE
                if
                :: head[0] + head[1] == TOTAL ->
end_idle:           !futex_blocked   /* nothing left to do: blocking for good is fine */
                :: else ->
                    !futex_blocked
                fi;
#else
                !futex_blocked;
#endif
                xchg(LOOP, SLEEPW, AWAKE, v);          /* evloop__sleep_finish */
                v = 0
            fi
        fi
    od
}

#ifdef WITH_CLOSE
/* evloop_stop(): evloop__ingress_close(), then loop->closed (seq_cst), then the kick. */
proctype Closer() {
    byte sw, old;
    store(CLOSER, CLOSED, 1);
    heavy(CLOSER);
    /* Under q->lock, every registered lane (a reclaimed one is unlinked): busy == 0,
     * acquire. The closer never stores busy, so it reads memory. */
    (reclaimed[0] || mem[BUSY(0)] == 0);
    (reclaimed[1] || mem[BUSY(1)] == 0);
    d_step { drain_all(CLOSER); loop_closed = true };
    /* evloop__sleep_kick(): the epoch's fetch_add, light barrier, the word */
    fence(CLOSER);
    load(CLOSER, SLEEPW, sw);
    notify(CLOSER, sw, old)
}
#endif

init {
    atomic {
        run Memory();
        run Loop();
        run Producer(0, NTASKS0, EXIT0);
        run Producer(1, NTASKS1, false);
#ifdef WITH_CLOSE
        run Closer();
#endif
    }
    timeout; /* every thread finished or blocked for good, every store buffer empty */
    d_step {
        assert(head[0] == pushed[0]); /* (a), (b): nothing accepted is left undrained */
        assert(head[1] == pushed[1]);
#ifndef WITH_CLOSE
        assert(pushed[0] + pushed[1] == TOTAL);
        /* (c) the orphaned lane is reclaimed, or held where the loop's next tick finds it */
        assert(!EXIT0 || reclaimed[0] || on_stack[0] || st[0] != OFF)
#endif
    }
}
