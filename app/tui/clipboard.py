"""Copying text out of the TUI: the terminal's clipboard by OSC 52 (xterm, kitty, WezTerm,
iTerm2, Windows Terminal; tmux passes it on with ``set -g set-clipboard on``), and,
inside tmux, tmux's own paste buffer too (``tmux load-buffer``), which works whatever
the outer terminal allows."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping

__all__ = ["copy_text"]


def copy_text(text: str, osc52: Callable[[str], None],
              env: Mapping[str, str] | None = None) -> str:  # fmt: skip
    """Copy ``text``; returns where it went, for people ("the terminal's clipboard (OSC
    52) and tmux's paste buffer")."""
    env = os.environ if env is None else env
    osc52(text)
    where = ["the terminal's clipboard (OSC 52)"]
    tmux = shutil.which("tmux") if env.get("TMUX") else None
    if tmux is not None:
        try:  # a few ms; bounded
            subprocess.run([tmux, "load-buffer", "-"], input=text.encode("utf-8"),
                           capture_output=True, timeout=2, check=True)  # fmt: skip
            where.append("tmux's paste buffer (prefix ])")
        except (OSError, subprocess.SubprocessError):
            pass
    return " and ".join(where)
