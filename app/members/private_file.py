"""Writing a file only its owner may read, atomically (the members files)."""

from __future__ import annotations

import contextlib
import os
from pathlib import Path

__all__ = ["write_private"]


def write_private(path: Path, data: bytes) -> None:
    """Replace ``path`` with ``data``: mode 0600 from the first byte, written beside it,
    fsynced, renamed over it, and the directory fsynced (a crash leaves the old file
    or the new one). The parent directory is made with mode 0700 if missing."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with contextlib.suppress(FileNotFoundError):
        tmp.unlink()
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    dfd = os.open(path.parent, os.O_RDONLY)
    try:
        os.fsync(dfd)
    finally:
        os.close(dfd)
