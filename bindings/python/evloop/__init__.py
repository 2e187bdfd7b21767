"""evloop: a C11 event loop for programs that hand work to a loop thread from other
threads, from Python.

    import evloop

    with evloop.Loop() as loop:                 # backend "auto", variant "arena"
        loop.run_in_thread()
        loop.submit(print, "hello from the loop")   # from any thread
    # leaving the block: the loop stops, runs what it accepted, and is closed;
    # a Ctrl-C in the block does the same, then KeyboardInterrupt propagates

Both ingress variants of the C library are in the package (``evloop._arena`` and
``evloop._chunk``, each statically linking one and binding its C API 1:1 as ``RawLoop``);
``Loop(variant="chunk")`` picks one, so a script can compare them in one process. See
``help(evloop.Loop)``.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Union

from ._common import Error, LoopClosedError, State, default_exception_handler
from . import _arena, _chunk
from ._loop import READABLE, WRITABLE, Loop, TimerHandle

__all__ = [
    "Loop",
    "TimerHandle",
    "Error",
    "LoopClosedError",
    "State",
    "backends",
    "backends_left_out",
    "variants",
    "autotune",
    "now_ns",
    "default_exception_handler",
    "READABLE",
    "WRITABLE",
    "EventLoop",
    "EventLoopPolicy",
    "new_event_loop",
    "run",
    "install",
]

# The asyncio loop (evloop/_aio.py) is imported on first use, so that `import evloop` does
# not import asyncio.
_AIO_NAMES = ("EventLoop", "EventLoopPolicy", "new_event_loop", "run", "install")
if TYPE_CHECKING:  # what __getattr__ imports on first use, as type checkers see it
    from ._aio import EventLoop, EventLoopPolicy, install, new_event_loop, run


def __getattr__(name: str) -> Any:
    if name in _AIO_NAMES:
        from . import _aio

        return getattr(_aio, name)
    raise AttributeError(f"module 'evloop' has no attribute {name!r}")


__version__: str = _arena.version()  # the C library's, "MAJOR.MINOR.PATCH"

_PathLike = Union[str, "os.PathLike[str]"]


def variants() -> List[str]:
    """The ingress variants in this package: ``["arena", "chunk"]``."""
    return ["arena", "chunk"]


_backends_cache: Optional[List[str]] = None
_PRIORITY = ("epoll", "io_uring", "kqueue")  # auto's order (src/core/backend.c)


def backends() -> List[str]:
    """The pollers that work on this machine, best first (e.g. ``["epoll", "io_uring"]``):
    those compiled in for which a loop can really start here (io_uring can be disabled by
    the kernel, a sysctl or seccomp). ``Loop(backend=None)`` takes the first, unless the
    ``EVLOOP_BACKEND`` environment variable names another."""
    global _backends_cache
    if _backends_cache is None:
        built = [b for b in _arena.BACKENDS.split(",") if b]
        # the C library's own preference (src/core/backend.c), then anything else built
        order = [b for b in _PRIORITY if b in built] + [b for b in built if b not in _PRIORITY]
        _backends_cache = [b for b in order if _starts(b)]
    return list(_backends_cache)


def backends_left_out() -> Dict[str, str]:
    """The pollers this build of the package left out, each with why: on Linux, without
    pkg-config or liburing at build time (a build from the sdist with only a compiler),
    ``{"io_uring": "no pkg-config to find liburing with (...)"}``; ``{}`` when nothing was.
    ``backends()`` then has epoll alone; rebuilding with liburing-dev and pkg-config installed
    brings io_uring in."""
    left = {}
    for entry in filter(None, _arena.LEFT_OUT.split(";")):
        name, _, why = entry.partition(": ")
        left[name] = why
    return left


def _starts(backend: str) -> bool:
    try:
        _arena.RawLoop(backend, profile="").free()
    except Error:
        return False
    return True


def now_ns() -> int:
    """The loop's clock (``evloop_now_ns``: CLOCK_MONOTONIC, as timers use it), in ns."""
    return int(_arena.now_ns())


def autotune(max_seconds: float = 2.0, save: Optional[_PathLike] = None) -> Dict[str, Any]:
    """Calibrates this machine (the C library's ``evloop_autotune``) in at most about
    ``max_seconds`` (0: the default, about 2 s), with the GIL released, and returns the
    profile as a dict with the keys of the profile file: ``version``, ``ncpu``,
    ``backend`` (the fastest poller that started), ``spin_ns`` and ``spin_max_ns`` (the
    spin window to start from and its cap; 0 = never spin), ``batch_budget``, ``wake_ns``
    (hand-off to a sleeping loop), ``handoff_ns`` (to a spinning one),
    ``readiness_epoll_ns``, ``readiness_io_uring_ns``, ``readiness_kqueue_ns`` (fd round
    trip; 0 = not available). ``save``: a path to save the profile at, which
    ``Loop(profile=...)`` or the ``EVLOOP_PROFILE`` environment variable then loads.
    Raises ``ValueError`` for a bad ``max_seconds`` and ``evloop.Error`` when the
    calibration or the save fails."""
    if not 0 <= max_seconds <= 3600:
        raise ValueError("max_seconds must be between 0 (the default, about 2 s) and 3600")
    return dict(_arena.autotune(max_seconds, None if save is None else os.fspath(save)))


def _stats_getitem(self: Any, key: str) -> Any:
    if key not in self._fields:
        raise KeyError(key)
    return getattr(self, key)


def _stats_as_dict(self: Any) -> Dict[str, Any]:
    """The fields as a dict."""
    return {k: getattr(self, k) for k in self._fields}


def _stats_repr(self: Any) -> str:
    return "evloop.Stats(" + ", ".join(f"{k}={getattr(self, k)!r}" for k in self._fields) + ")"


for _mod in (_arena, _chunk):
    _mod.Stats.__getitem__ = _stats_getitem
    _mod.Stats.as_dict = _stats_as_dict
    _mod.Stats.__repr__ = _stats_repr
del _mod
