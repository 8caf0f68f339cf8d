"""Where ``sdschat`` keeps a participant's data without ``--data-dir``."""

from __future__ import annotations

from pathlib import Path

__all__ = ["default_data_dir"]


def default_data_dir() -> Path:
    """Where ``sdschat join`` (and ``sdschat history``) keep and find data without
    ``--data-dir``."""
    return Path.home() / ".local" / "share" / "sdschat"
