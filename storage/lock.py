"""One sdschat instance per data directory: an exclusive ``flock`` on ``<data_dir>/lock``.

``flock`` locks belong to an open file description, so a second opener is
refused whether it lives in another process or in this one, and the kernel
drops the lock when the holder exits, even by ``kill -9``: a crash never leaves
a stale lock behind. The holder writes its pid into the file, for the error
message only (the lock, not the pid, is what counts).
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from .errors import DataDirLockedError

LOCK_FILENAME = "lock"


class DataDirLock:
    """A held lock on a data directory. Obtain with :meth:`acquire`; :meth:`release` once."""

    def __init__(self, data_dir: Path, fd: int) -> None:
        self.data_dir = data_dir
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, data_dir: Path) -> DataDirLock:
        """Take the lock without waiting; raise :class:`DataDirLockedError` if it is held.

        The file descriptor is not inheritable, so child processes of the node
        never keep the lock alive.
        """
        path = data_dir / LOCK_FILENAME
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _read_pid(fd)
            os.close(fd)
            raise DataDirLockedError(data_dir, holder) from None
        except BaseException:
            os.close(fd)
            raise
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        return cls(data_dir, fd)

    @property
    def held(self) -> bool:
        """Whether this object still holds the lock."""
        return self._fd is not None

    def release(self) -> None:
        """Give the lock up (idempotent)."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def _read_pid(fd: int) -> int | None:
    try:
        text = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
        return int(text) if text.isdigit() else None
    except OSError:
        return None
