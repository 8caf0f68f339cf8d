"""Putting text on the clipboard from a terminal program: the terminal's clipboard by
OSC 52 (xterm, kitty, WezTerm, iTerm2, Windows Terminal, foot; tmux passes it on with
``set -g set-clipboard on``; over ssh too), and, inside tmux, tmux's own paste buffer
(``tmux set-buffer``: Prefix + ] pastes it, whatever the outer terminal supports)."""

from __future__ import annotations

import base64
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping

__all__ = ["copy_text"]


def copy_text(
    text: str,
    write_terminal: Callable[[str], None],
    *,
    env: Mapping[str, str] | None = None,
) -> list[str]:
    """Copy ``text``; returns where it went (for the notice): the terminal's clipboard
    always (the terminal may ignore OSC 52), tmux's paste buffer when run inside tmux
    (``$TMUX``) and ``tmux set-buffer`` worked."""
    data = base64.b64encode(text.encode("utf-8")).decode("ascii")
    write_terminal(f"\x1b]52;c;{data}\x07")
    where = ["the terminal's clipboard (OSC 52)"]
    env = os.environ if env is None else env
    tmux = shutil.which("tmux") if env.get("TMUX") else None
    if tmux is not None:
        try:  # the tmux of $TMUX (its socket is in the variable)
            done = subprocess.run([tmux, "set-buffer", "--", text], env=dict(env),
                                  capture_output=True, timeout=2, check=False)  # fmt: skip
        except (OSError, subprocess.SubprocessError):
            done = None
        if done is not None and done.returncode == 0:
            where.append("tmux's paste buffer (Prefix + ])")
    return where
