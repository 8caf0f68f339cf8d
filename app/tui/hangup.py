"""End the TUI when its terminal goes away, even if no SIGHUP reaches it.

Closing a terminal window (or tmux killing a pane) hangs the pseudo-terminal up.
The kernel signals only the terminal's session leader and foreground group; a TUI
started by a shell that does not pass SIGHUP on, or under ``nohup``, gets nothing.
Its output thread then fails on the dead terminal and the app blocks for ever,
holding the data directory (the next ``sdschat join`` on it is refused) and staying
in the channel unseen.

A daemon thread checks once a second whether the descriptors that were terminals at
start still are (a hung-up terminal is not: ``isatty`` fails with EIO). When one is
not, it asks the app to exit and, if the process is still alive ``grace`` seconds
later, ends it with status 129 (128 + SIGHUP, as the kernel's hangup would). Nothing
typed is lost: every line is committed to SQLite when it is entered, as for a kill.
"""

from __future__ import annotations

import os
import signal
import threading
from collections.abc import Callable

__all__ = ["EXIT_HANGUP", "watch_terminal"]

EXIT_HANGUP = 128 + signal.SIGHUP


def _isatty(fd: int) -> bool:
    try:
        return os.isatty(fd)
    except OSError:
        return False


def watch_terminal(
    request_exit: Callable[[], None],
    *,
    fds: tuple[int, ...] = (0, 1, 2),
    interval: float = 1.0,
    grace: float = 3.0,
    hard_exit: Callable[[int], None] = os._exit,
) -> threading.Event:
    """Start the watch; set the returned event to stop it (when the app has ended).

    ``request_exit`` runs in a thread of its own (it may block: the app's loop may be
    stuck writing to the dead terminal).
    """
    stop = threading.Event()
    ttys = tuple(fd for fd in fds if _isatty(fd))
    if not ttys:
        return stop  # no terminal to lose (output redirected, tests)

    def watch() -> None:
        while not stop.wait(interval):
            if all(_isatty(fd) for fd in ttys):
                continue
            threading.Thread(target=request_exit, name="sdschat-hangup-exit", daemon=True).start()
            if not stop.wait(grace):
                hard_exit(EXIT_HANGUP)
            return

    threading.Thread(target=watch, name="sdschat-terminal-watch", daemon=True).start()
    return stop
