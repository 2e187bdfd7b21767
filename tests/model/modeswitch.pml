/* The futex <-> poller mode switch of design.md: the loop sleeps on its futex word while
 * no fd is registered and in the poller (woken through the backend's eventfd) while one
 * is. Registering the first fd from another thread (evloop_io_add -> count_change ->
 * evloop__kick in src/core/io.c and submit.c) must wake a loop asleep on the word, or the
 * new fd's readiness is never seen. The loop half is poll_or_sleep()/prepare_sleep() in
 * src/core/tick.c: it reads the epoch and the fd count, announces sleep with the value of
 * the mode it chose, and re-checks the queues, the epoch and the fd count.
 *
 * Property: the loop neither blocks for good with the fd readable nor with a task queued
 * (invalid end state otherwise).
 *   (default)      epoll: poller sleep is SLEEP_POLLER, woken by an eventfd write
 *   -DWORD_WAKE    io_uring with a futex-wait SQE: poller sleep is SLEEP_WORD too, and the
 *                  poller wait also returns on a futex wake of the word
 *   -DBROKEN       the re-check after announcing sleep covers the queues only, not the
 *                  epoch or the fd count: spin must find the loop asleep on the word while
 *                  the fd it was never told about is readable. */

#define AWAKE 0
#define SLEEP_WORD 1
#define SLEEP_POLLER 2

byte word = AWAKE;
byte nfds = 0;
byte epoch = 0;
bool fd_ready = false;      /* registered with the poller and readable */
bool delivered = false;     /* its callback ran */
byte evfd = 0;              /* the backend's eventfd counter */
bool futex_blocked = false;
byte queued = 0, ran = 0;
#define NTASKS 1

inline wake_loop(old) {
    if
    :: word == AWAKE -> skip
    :: else ->
        atomic { old = word; word = AWAKE };
        if
        :: old == SLEEP_WORD -> futex_blocked = false      /* FUTEX_WAKE */
        :: old == SLEEP_POLLER -> evfd++                     /* backend->wake() */
        :: else -> skip
        fi
    fi
}

proctype Adder() {
    byte before, old;
    fd_ready = true;                  /* backend->add of a readable fd, under io_lock */
    atomic { before = nfds; nfds++ }  /* count_change(): seq_cst fetch_add */
    if
    :: before == 0 ->                 /* switched to poller mode from another thread */
        epoch++;                      /* evloop__kick() */
        wake_loop(old)
    :: else -> skip
    fi
}

proctype Producer() {
    byte old;
    queued++;
    wake_loop(old)
}

inline dispatch_fd() {
    if :: nfds > 0 && fd_ready -> delivered = true; fd_ready = false :: else -> skip fi
}

proctype Loop() {
    bool poller;
    byte e, value;
    do
    :: atomic { ran = ran + queued; queued = 0 };
        if
        :: delivered && ran == NTASKS -> break         /* all work seen: the test is over */
        :: queued > 0 -> dispatch_fd()                 /* has_work: poll with timeout 0 */
        :: else ->
            e = epoch;
            poller = nfds > 0;
#ifdef WORD_WAKE
            value = SLEEP_WORD;
#else
            if :: poller -> value = SLEEP_POLLER :: else -> value = SLEEP_WORD fi;
#endif
            word = value;
            if
#ifdef BROKEN
            :: queued > 0 -> word = AWAKE
#else
            :: queued > 0 || e != epoch || (nfds > 0) != poller -> word = AWAKE
#endif
            :: else ->
                if
                :: poller ->
#ifdef WORD_WAKE
                    atomic { if :: word == value -> futex_blocked = true :: else -> skip fi };
                    (!futex_blocked || fd_ready);
                    futex_blocked = false;
#else
                    (evfd > 0 || fd_ready);            /* epoll_wait */
                    evfd = 0;                          /* the wait drains the eventfd */
#endif
                    dispatch_fd()
                :: else ->
                    atomic { if :: word == value -> futex_blocked = true :: else -> skip fi };
                    !futex_blocked                     /* FUTEX_WAIT */
                fi;
                word = AWAKE
            fi
        fi
    od
}

init {
    atomic {
        run Loop();
        run Adder();
        run Producer()
    }
}
