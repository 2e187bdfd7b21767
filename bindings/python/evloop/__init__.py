"""evloop: a C11 event loop for programs that hand work to a loop thread from other
threads, from Python.

    import threading, evloop

    loop = evloop.Loop()                        # backend "auto", variant "arena"
    t = threading.Thread(target=loop.run)
    t.start()
    loop.submit(print, "hello from the loop")   # from any thread
    loop.call_later(0.01, loop.stop)
    t.join()
    loop.close()

Both ingress variants of the C library are in the package (``evloop._arena`` and
``evloop._chunk``, each statically linking one); ``Loop(variant="chunk")`` picks one, so
a script can compare them in one process. See ``help(evloop.Loop)``.
"""

from __future__ import annotations

import abc
import os
from typing import Any, Dict, List, Optional, Union

from ._common import Error, LoopClosedError, State, default_exception_handler
from . import _arena, _chunk

__all__ = [
    "Loop",
    "TimerHandle",
    "Error",
    "LoopClosedError",
    "State",
    "backends",
    "variants",
    "autotune",
    "default_exception_handler",
    "READABLE",
    "WRITABLE",
]

__version__ = "0.1.0"

_MODULES = {"arena": _arena, "chunk": _chunk}

READABLE = 1
WRITABLE = 2


def variants() -> List[str]:
    """The ingress variants in this package: ``["arena", "chunk"]``."""
    return list(_MODULES)


def _module(variant: Optional[str]) -> Any:
    if variant is None:
        variant = os.environ.get("EVLOOP_VARIANT") or "arena"
    try:
        return _MODULES[variant]
    except KeyError:
        raise ValueError(f"unknown variant {variant!r}: expected one of {variants()}") from None


_backends_cache: Optional[List[str]] = None
_PRIORITY = ("io_uring", "epoll", "kqueue")


def backends() -> List[str]:
    """The pollers that work on this machine, best first (e.g. ``["io_uring", "epoll"]``):
    those compiled in for which a loop can really start here (io_uring can be disabled by
    the kernel, a sysctl or seccomp). ``Loop(backend=None)`` takes the first, unless the
    ``EVLOOP_BACKEND`` environment variable names another."""
    global _backends_cache
    if _backends_cache is None:
        built = _arena.compiled_backends()
        # the C library's own preference (src/core/backend.c), then anything else built
        order = [b for b in _PRIORITY if b in built] + [b for b in built if b not in _PRIORITY]
        _backends_cache = [b for b in order if _arena.probe_backend(b) == 0]
    return list(_backends_cache)


_PathLike = Union[str, "os.PathLike[str]"]


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
    return _arena.autotune(max_seconds, None if save is None else os.fspath(save))


class Loop(metaclass=abc.ABCMeta):
    """An evloop event loop.

    ``Loop(backend=None, variant=None, spin_ns=-1, batch_budget=0, profile=None)``

    - backend: ``None``/``"auto"`` (the best that starts here, or ``$EVLOOP_BACKEND``),
      ``"epoll"``, ``"io_uring"`` or ``"kqueue"``. One that cannot start raises
      ``evloop.Error`` with ``errno.ENOTSUP``.
    - variant: the ingress queue, ``"arena"`` (lock-free ring) or ``"chunk"`` (mutex and
      chunk pool); ``None`` means ``$EVLOOP_VARIANT`` or ``"arena"``.
    - spin_ns: how long the loop spins before sleeping: -1 adaptive, 0 never, else ns.
    - batch_budget: external tasks run per tick: 0 adaptive, else a fixed count.
    - profile: a profile saved by ``evloop.autotune(save=...)`` (or the ``evloop_autotune``
      tool) to start from: it sets the starting spin window and its cap, the starting
      batch budget and the backend tried first, wherever the arguments above leave them
      adaptive or "auto". ``None`` means ``$EVLOOP_PROFILE`` if set, ``""`` no profile. A
      missing or malformed file raises ``evloop.Error`` (``ENOENT``, ``EINVAL``).

    The object returned is an instance of ``evloop._arena.Loop`` or
    ``evloop._chunk.Loop``; ``isinstance(obj, evloop.Loop)`` holds for both.

    Threads: ``run()`` runs the loop on the calling thread; every other method may be
    called from any thread, including from callbacks, which run on the loop thread one at
    a time. The GIL is released while the loop waits. A callback that raises an
    ``Exception`` goes to the exception handler (default: the traceback is printed and
    the loop keeps running); ``KeyboardInterrupt`` (also Ctrl-C while ``run()`` blocks
    on the main thread) and ``SystemExit`` stop the loop and are raised from ``run()``.

    The loop is also a context manager: ``with evloop.Loop() as loop:`` closes it on
    exit. Close loops you are done with: ``close()`` runs tasks still queued and releases
    every callback the loop holds.
    """

    def __new__(  # type: ignore[misc]
        cls,
        backend: Optional[str] = None,
        variant: Optional[str] = None,
        spin_ns: int = -1,
        batch_budget: int = 0,
        profile: Optional[_PathLike] = None,
    ) -> "Loop":
        mod = _module(variant)
        path = None if profile is None else os.fspath(profile)
        return mod.Loop(backend, mod.VARIANT, spin_ns, batch_budget, path)


class TimerHandle(metaclass=abc.ABCMeta):
    """What ``Loop.call_later`` and ``Loop.call_every`` return: ``cancel()``,
    ``cancelled()``, ``active``, ``periodic``, ``interval``."""

    def __new__(cls, *args: Any, **kwargs: Any) -> "TimerHandle":  # pragma: no cover
        raise TypeError("TimerHandle objects come from Loop.call_later / Loop.call_every")


for _mod in _MODULES.values():
    Loop.register(_mod.Loop)
    TimerHandle.register(_mod.TimerHandle)

# help(evloop.Loop) and evloop.Loop.submit.__doc__ show the methods: the descriptors of
# one concrete class, for documentation only (instances are of the concrete classes).
for _cls, _src in ((Loop, _arena.Loop), (TimerHandle, _arena.TimerHandle)):
    for _name, _attr in vars(_src).items():
        if not _name.startswith("_") and _name not in vars(_cls):
            setattr(_cls, _name, _attr)
del _cls, _src, _name, _attr, _mod
