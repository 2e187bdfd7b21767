"""What both extension modules share: the fd event bits, the exception classes, the state
enum and the default exception handler. Imported by evloop._arena and evloop._chunk at their import,
so an error raised by either variant is the same Python class."""

from __future__ import annotations

import enum
import sys
import traceback
from typing import Any


# The fd event bits of include/evloop.h, the same in either variant (tests/test_stubs.py
# checks them against both modules): the asyncio loop reads them here, from no variant.
READABLE = 1
WRITABLE = 2
HANGUP = 4
ERROR = 8


class Error(OSError):
    """An error returned by the evloop C library, as an OSError with its errno kept
    (``err.errno``, e.g. ``errno.EEXIST`` for an fd already registered)."""


class LoopClosedError(Error):
    """The loop is stopping, terminated or closed: the work was not accepted
    (errno ``ESHUTDOWN``)."""


class State(str, enum.Enum):
    """A loop's state (``Loop.state``). Compares equal to its lower-case name."""

    AWAKE = "awake"
    """Created, not running."""
    RUNNING = "running"
    """Inside run(), working."""
    SLEEPING = "sleeping"
    """Inside run(), waiting for work (the GIL is released)."""
    TERMINATING = "terminating"
    """stop() was called: new work is refused, accepted work still runs."""
    TERMINATED = "terminated"
    """run() has returned, or will; also a closed loop."""

    def __str__(self) -> str:
        return self.value


def default_exception_handler(exc: BaseException, callback: Any) -> None:
    """The handler a loop uses until ``set_exception_handler`` replaces it: prints
    ``Exception in callback <callback>`` and the traceback to ``sys.stderr``; the loop
    keeps running."""
    try:
        name = repr(callback)
    except Exception:  # a broken __repr__ must not hide the real error
        name = f"<{type(callback).__name__} object>"
    lines = traceback.format_exception(type(exc), exc, exc.__traceback__)
    sys.stderr.write(f"evloop: exception in callback {name}\n" + "".join(lines))
    sys.stderr.flush()
