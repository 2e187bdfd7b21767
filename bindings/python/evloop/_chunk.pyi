"""Type stubs for evloop._chunk: the same extension source as evloop._arena, built against
the chunk ingress variant, so the same API (see _arena.pyi)."""

from ._arena import *  # noqa: F401,F403
from ._arena import _set_lazy_gil as _set_lazy_gil  # a star import leaves out _names
from ._arena import _c_api as _c_api
