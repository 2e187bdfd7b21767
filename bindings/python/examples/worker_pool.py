"""A pool of worker threads handing their results to an evloop loop: the workers compute,
the loop thread owns the results. Only the loop thread touches `totals`, so it needs no lock;
a worker's hand-off is one Loop.submit (no syscall unless the loop has gone to sleep), or one
Loop.submit_batch for a chunk of results (one publication, at most one wake).

    python worker_pool.py --jobs 2000 --workers 4
"""

import argparse
import hashlib
from concurrent.futures import ThreadPoolExecutor

import evloop


def work(n: int) -> bytes:
    """Something for a worker to chew on (hashlib releases the GIL on large inputs)."""
    return hashlib.sha256(n.to_bytes(8, "little") * 8192).digest()


def main() -> None:
    ap = argparse.ArgumentParser(description="Worker threads handing results to an evloop loop.")
    ap.add_argument("--jobs", type=int, default=2000)
    ap.add_argument("--workers", type=int, default=4)
    ap.add_argument("--chunk", type=int, default=50, help="results per submit_batch")
    args = ap.parse_args()

    totals = {"results": 0, "xor": 0}

    def collect(digest: bytes) -> None:  # runs on the loop thread, one at a time
        totals["results"] += 1
        totals["xor"] ^= digest[0]

    with evloop.Loop() as loop:  # on leaving: stop gracefully, every accepted task runs
        loop.run_in_thread()

        def one(n: int) -> None:
            loop.submit(collect, work(n))

        def chunk(first: int, last: int) -> None:
            loop.submit_batch([(collect, work(n)) for n in range(first, last)])

        half = args.jobs // 2
        with ThreadPoolExecutor(args.workers) as pool:
            for n in range(half):  # one hand-off per result
                pool.submit(one, n)
            for first in range(half, args.jobs, args.chunk):  # one hand-off per chunk
                pool.submit(chunk, first, min(first + args.chunk, args.jobs))
        stats = loop.stats()
    print(f"{totals['results']} results on the loop thread (xor {totals['xor']:#04x}); "
          f"the loop ran {stats.tasks_run} tasks in {stats.ticks} ticks")


if __name__ == "__main__":
    main()
