"""The default executor of evloop's asyncio loop: ``loop.run_in_executor(None, fn, *args)`` runs
fn on the library's work pool (``evloop_work_submit``; src/aio/executor.cpp) instead of a
``concurrent.futures.ThreadPoolExecutor`` (docs/asyncio.md, "The default executor").

``_PoolExecutor`` is what ``loop._default_executor`` holds once the loop first needs it: a
``concurrent.futures.Executor`` whose ``submit`` may be called from any thread and whose
``shutdown`` is what ``loop.close()`` and ``loop.shutdown_default_executor()`` call. A loop
given an executor of the caller's own (``set_default_executor``, or an executor passed to
``run_in_executor``) uses it as the stdlib does."""

from __future__ import annotations

import concurrent.futures
import functools
import os
import threading
from typing import Any, Callable


class _PoolExecutor(concurrent.futures.Executor):
    """evloop's asyncio loop's default executor: calls on the loop's work pool."""

    def __init__(self, loop: Any) -> None:
        self._loop = loop
        self._shutdown = False
        # ThreadPoolExecutor's default size, not the library's (the CPUs less one): calls that
        # block on I/O (getaddrinfo, files) run as many at once as on the stock loop. Idle
        # pool threads sleep. A pool already started keeps its size.
        loop._evloop_work_threads(_stdlib_pool_size())
        # A loop whose selector someone replaced is not polled for the pool's replies: its
        # calls go to a stdlib pool instead, made on first need.
        self._fallback: Any = None

    def __repr__(self) -> str:
        return f"<evloop._PoolExecutor shutdown={self._shutdown}>"

    def submit(self, fn: Callable[..., Any], /, *args: Any,
               **kwargs: Any) -> concurrent.futures.Future:
        if self._shutdown:
            raise RuntimeError("cannot schedule new futures after shutdown")
        if kwargs:
            fn = functools.partial(fn, *args, **kwargs)
            args = ()
        cf: concurrent.futures.Future = concurrent.futures.Future()
        self._submit(cf, fn, args)
        return cf

    def _submit(self, cf: concurrent.futures.Future, fn: Callable[..., Any],
                args: tuple) -> None:
        loop = self._loop
        taken = loop._evloop_work_submit(cf, fn, args)
        if taken:
            return
        if taken is False:
            # Another thread drives the loop now: a task of its RawLoop hands the call to the
            # pool on that thread (every accepted task runs, by the loop's end at the latest).
            try:
                loop._evloop_raw.submit(self._submit_later, cf, fn, args)
                return
            except Exception:  # closed meanwhile: a stdlib pool runs it, as it would have
                pass
        self._stdlib_pool().submit(_settle, cf, fn, args)

    def _submit_later(self, cf: concurrent.futures.Future, fn: Callable[..., Any],
                      args: tuple) -> None:
        if cf.cancelled():
            return
        try:
            if self._loop._evloop_work_submit(cf, fn, args):
                return
        except Exception:
            pass
        self._stdlib_pool().submit(_settle, cf, fn, args)

    def _stdlib_pool(self) -> concurrent.futures.ThreadPoolExecutor:
        if self._fallback is None:
            self._fallback = concurrent.futures.ThreadPoolExecutor(thread_name_prefix="asyncio")
        return self._fallback

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        """As ThreadPoolExecutor's: no new calls; with wait, returns once every call accepted
        has returned (the loop settles their futures). cancel_futures applies to the stdlib
        pool that serves a loop whose selector was replaced; the work pool's calls are all
        run."""
        self._shutdown = True
        if self._fallback is not None:
            self._fallback.shutdown(wait=wait, cancel_futures=cancel_futures)
        if not wait:
            return
        loop = self._loop
        if loop._evloop_work_drain():  # this thread may drive the loop: it polls until done
            return
        done = threading.Event()
        if loop._evloop_work_idle(done):
            done.wait()


def _stdlib_pool_size() -> int:
    """ThreadPoolExecutor's default max_workers on this Python."""
    count = getattr(os, "process_cpu_count", os.cpu_count)()
    return min(32, (count or 1) + 4)


def _settle(cf: concurrent.futures.Future, fn: Callable[..., Any], args: tuple) -> None:
    """ThreadPoolExecutor's _WorkItem.run for a call the fallback pool runs."""
    if not cf.set_running_or_notify_cancel():
        return
    try:
        result = fn(*args)
    except BaseException as exc:
        cf.set_exception(exc)
    else:
        cf.set_result(result)
