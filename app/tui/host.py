"""What the app's parts ask of the app itself (:class:`AppHost`): the screens, the
model, Textual's workers, timers and notices, and the channel shown.

A part (:mod:`app.tui.finding`, :mod:`app.tui.commanding`) is given the app as a host
of its own protocol, which extends this one; it never imports the app, and mypy
checks that :class:`~app.tui.app.SdsChatApp` is what each protocol says.
"""

from __future__ import annotations

from typing import Any, Protocol

from app.tui.model import ChatModel
from app.tui.screens.chat import ChatScreen

__all__ = ["AppHost"]


class AppHost(Protocol):
    """The app as its parts see it."""

    @property
    def model(self) -> ChatModel: ...

    @property
    def chat(self) -> ChatScreen: ...

    def chat_ready(self) -> bool:
        """Whether the chat screen's widgets exist (not yet while it is composed)."""

    def leave_current(self) -> None:
        """Mark the channel shown read and save, before another is shown."""

    def run_worker(self, work: Any, name: str | None = "", group: str = "default",
                   description: str = "", exit_on_error: bool = True, start: bool = True,
                   exclusive: bool = False, thread: bool = False) -> Any: ...  # fmt: skip

    def set_timer(self, delay: float, callback: Any = None, *, name: str | None = None,
                  pause: bool = False) -> Any: ...  # fmt: skip

    def push_screen(self, screen: Any, callback: Any = None,
                    wait_for_dismiss: bool = False) -> Any: ...  # fmt: skip

    def notify(self, message: str, *, title: str = "", severity: Any = "information",
               timeout: float | None = None, markup: bool = True) -> None: ...  # fmt: skip
