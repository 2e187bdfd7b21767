"""A gunicorn worker class that runs uvicorn on evloop's asyncio loop:

    gunicorn -k evloop.uvicorn_worker.UvicornWorker app:app

gunicorn picks a worker by class path and uvicorn's worker picks its loop from a class
attribute, so there is no command-line word for the loop: this subclass is that word. It
extends the worker of the ``uvicorn-worker`` package where installed (the one uvicorn points
to), else ``uvicorn.workers`` (deprecated there, still shipped). Importing this module needs
gunicorn and uvicorn; ``import evloop`` never imports it.
"""

from __future__ import annotations

from typing import Any, Dict

try:
    from uvicorn_worker import UvicornWorker as _Base
except ImportError:
    import warnings

    with warnings.catch_warnings():  # uvicorn's own notice that the module moved out
        warnings.simplefilter("ignore", DeprecationWarning)
        from uvicorn.workers import UvicornWorker as _Base

__all__ = ["UvicornWorker", "UvicornH11Worker"]


class UvicornWorker(_Base):  # type: ignore[misc,valid-type]
    """uvicorn's gunicorn worker with ``loop="evloop:new_event_loop"`` (HTTP parser: auto,
    httptools where installed)."""

    CONFIG_KWARGS: Dict[str, Any] = {**_Base.CONFIG_KWARGS, "loop": "evloop:new_event_loop"}


class UvicornH11Worker(UvicornWorker):
    """The same with the pure-Python h11 parser."""

    CONFIG_KWARGS: Dict[str, Any] = {**UvicornWorker.CONFIG_KWARGS, "http": "h11"}
