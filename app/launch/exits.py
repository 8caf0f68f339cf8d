"""Exit statuses of ``sdschat join`` shared by the TUI and headless mode (docs/chat.md).

Headless mode adds :data:`app.headless.line_feed.EXIT_UNSENT` (lines that could not
leave), the TUI :data:`app.tui.hangup.EXIT_HANGUP` (its terminal went away)."""

from __future__ import annotations

__all__ = [
    "EXIT_DATABASE",
    "EXIT_DEVICE_COPY",
    "EXIT_LINK",
    "EXIT_LOCKED",
    "EXIT_PASSPHRASE",
    "EXIT_USAGE",
]

EXIT_USAGE = 2
EXIT_LOCKED = 3
EXIT_DATABASE = 4
EXIT_PASSPHRASE = 5
EXIT_DEVICE_COPY = 7
"""The data directory is a copy of one in use elsewhere (app/members/device_copy.py)."""
EXIT_LINK = 8
"""A device link did not happen: a wrong, used-up or expired code, nobody answered, or
the link broke (``sdschat link``, ``sdschat join --link``; nothing was changed)."""
