"""Driving an evloop loop from another event loop, here the stock asyncio one: the outer
loop watches evloop's backend fd (readable while evloop has work ready) and calls
run_once(0) when it is, or when evloop's next timer is due (backend_timeout()). Everything
evloop runs then runs on the outer loop's thread, between its callbacks. Linux (epoll or
io_uring under evloop).

    python drive_from_asyncio.py
"""

import asyncio
import threading

import evloop


def embed(inner: evloop.Loop, outer: asyncio.AbstractEventLoop):
    """Makes outer run inner's work as it comes: the fd for tasks, a timer for timers.
    Returns the function that undoes it."""
    timer = None

    def pump() -> None:
        nonlocal timer
        inner.run_once(0)  # runs what is ready, never blocks
        if timer is not None:
            timer.cancel()
        delay = inner.backend_timeout()  # None: nothing timed; else seconds to the next timer
        timer = None if delay is None else outer.call_later(delay, pump)

    def detach() -> None:
        outer.remove_reader(inner.fileno())
        if timer is not None:
            timer.cancel()

    outer.add_reader(inner.fileno(), pump)
    pump()
    return detach


async def main() -> None:
    outer = asyncio.get_running_loop()
    with evloop.Loop() as inner:
        ticks = []
        inner.call_every(0.1, lambda: ticks.append(outer.time()))  # an evloop timer
        detach = embed(inner, outer)

        got = []
        done = asyncio.Event()

        def producer() -> None:  # another thread hands work to the evloop loop
            for i in range(1000):
                inner.submit(got.append, i)
            inner.submit(outer.call_soon, done.set)  # runs on the asyncio thread: safe

        t = threading.Thread(target=producer)
        t.start()
        await done.wait()
        t.join()
        await asyncio.sleep(0.35)
        detach()
    print(f"evloop ran {len(got)} tasks from another thread and its timer fired "
          f"{len(ticks)} times, all on the asyncio loop's thread")


if __name__ == "__main__":
    asyncio.run(main())
