"""Give the memory freed after a big transient allocation back to the system.

Restoring a channel with thousands of own unacknowledged lines (a bot's, issue 41
item 8) parses a saved core state of megabytes (each line's SDS bytes, hex in JSON)
and the stored rows that reconcile it; all of that is freed once the core holds the
lines, but glibc's allocator keeps the freed pages of its heap mapped, so the
process's resident memory stays as high as at the peak. :func:`release_freed` asks
glibc (``malloc_trim(0)``) to return every whole free page at once; elsewhere
(another libc, no ``libc.so.6``) it does nothing.

Called by :class:`app.node.joining.Joiner` after a join's restore, once per channel
(never on a hot path: a trim walks the heap, a few milliseconds).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

__all__ = ["release_freed"]

_libc: Any = None
_tried = False


def release_freed() -> bool:
    """Return freed heap pages to the system; whether anything was returned."""
    global _libc, _tried
    if not _tried:
        _tried = True
        if sys.platform.startswith("linux"):
            try:
                lib = ctypes.CDLL("libc.so.6")
                _libc = lib if hasattr(lib, "malloc_trim") else None
            except OSError:  # not glibc
                _libc = None
    if _libc is None:
        return False
    return bool(_libc.malloc_trim(0))
