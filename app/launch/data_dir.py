"""Where ``sdschat`` keeps a participant's data, and the check of a ``--data-dir``
made before anything is asked or opened."""

from __future__ import annotations

import os
from pathlib import Path

from storage import DataDirUnusableError

__all__ = ["default_data_dir", "prepare_data_dir"]


def default_data_dir() -> Path:
    """Where ``sdschat join`` (and ``sdschat history``) keep and find data without
    ``--data-dir``."""
    return Path.home() / ".local" / "share" / "sdschat"


def _blocker(path: Path) -> Path | None:
    """The nearest existing ancestor of ``path`` (or ``path``) that is no directory."""
    for p in (path, *path.parents):
        if p.exists() or p.is_symlink():
            return None if p.is_dir() else p
    return None


def prepare_data_dir(path: Path) -> Path:
    """Make sure ``path`` is a directory this user can write to (created with mode 0700
    when missing), before a passphrase is asked or a node opened: a ``--data-dir`` that
    cannot work is said first, naming why.

    Raises:
        DataDirUnusableError: a file where the directory (or one of its parents) should
            be, a directory that cannot be created (``/proc``, a read-only file system,
            no permission) or written to.
    """
    hint = "give --data-dir a directory you can write to"
    blocker = _blocker(path)
    if blocker is not None:
        where = "it" if blocker == path else str(blocker)
        raise DataDirUnusableError(path, f"{where} is a file, not a directory; {hint}")
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as exc:
        why = (exc.strerror or type(exc).__name__).lower()
        raise DataDirUnusableError(path, f"it cannot be created ({why}); {hint}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise DataDirUnusableError(path, f"it is not writable by this user; {hint}")
    return path
