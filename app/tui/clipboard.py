"""Copying text out of the TUI: the terminal's clipboard by OSC 52 (xterm, kitty, WezTerm,
iTerm2, Windows Terminal, foot; tmux passes it on with ``set -g set-clipboard on``; over
ssh too), and, inside tmux, tmux's own paste buffer (``tmux load-buffer``: Prefix + ]
pastes it), which works whatever the outer terminal allows."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable, Mapping

__all__ = ["copy_text"]


def copy_text(text: str, osc52: Callable[[str], None],
              env: Mapping[str, str] | None = None) -> list[str]:  # fmt: skip
    """Copy ``text``: ``osc52(text)`` writes it to the terminal's clipboard (the terminal
    may ignore it), and inside tmux (``$TMUX``) it goes to tmux's paste buffer too.
    Returns where it went, for the notice ("the terminal's clipboard (OSC 52)", "tmux's
    paste buffer (Prefix + ])")."""
    env = os.environ if env is None else env
    osc52(text)
    where = ["the terminal's clipboard (OSC 52)"]
    tmux = shutil.which("tmux") if env.get("TMUX") else None
    if tmux is not None:
        try:  # the tmux of $TMUX (its socket is in the variable); a few ms, bounded
            subprocess.run([tmux, "load-buffer", "-"], input=text.encode("utf-8"),
                           env=dict(env), capture_output=True, timeout=2,
                           check=True)  # fmt: skip
            where.append("tmux's paste buffer (Prefix + ])")
        except (OSError, subprocess.SubprocessError):
            pass
    return where
