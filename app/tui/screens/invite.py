"""The dialog an ``/invite`` opens: the code on one line, whole (it scrolls sideways
where the terminal is narrower), and a copy action, so that nobody has to select a
code wrapped over two lines inside a box drawn over the log."""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, tzinfo
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import HorizontalScroll, Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["InviteScreen"]

HINT = "c copies the code · Enter copies and closes · ← → scroll it · Esc closes"


class InviteScreen(ModalScreen[None]):
    """An invite code to copy and pass on. ``copy(code)`` copies it and returns where
    it went (:func:`app.tui.clipboard.copy_text`); the dialog says so."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "copy", "copy", show=False),
        Binding("enter", "copy_close", "copy and close", show=False),
        Binding("escape,q", "close", "close", show=False),
        Binding("left", "scroll(-8)", show=False),
        Binding("right", "scroll(8)", show=False),
    ]

    def __init__(
        self,
        channel: str,
        code: str,
        expires_ms: int,
        copy: Callable[[str], list[str]],
        *,
        tz: tzinfo | None = None,
    ) -> None:
        super().__init__(classes="invite")
        self.channel = channel
        self.code = code
        self.expires_ms = expires_ms
        self._copy = copy
        self._tz = tz
        self.copied: list[str] = []
        """Where the code was copied to, once it was."""

    def compose(self) -> ComposeResult:
        until = datetime.fromtimestamp(self.expires_ms / 1000, self._tz)
        with Vertical(classes="dialog invite-dialog"):
            yield Static(f"Invite to #{self.channel}", classes="dialog-title")
            with HorizontalScroll(id="invite-code-box"):
                yield Static(self.code, id="invite-code", markup=False)
            yield Static(
                "Give this one line to the newcomer, who runs: sdschat join --invite CODE. "
                f"Single use; valid until {until:%Y-%m-%d %H:%M}. This sdschat lets them "
                "in while it runs.",
                classes="dialog-body-text",
            )
            yield Static(HINT, classes="dialog-hint", id="invite-hint")

    def action_scroll(self, step: int) -> None:
        box = self.query_one("#invite-code-box", HorizontalScroll)
        box.scroll_to(x=max(0, box.scroll_x + step), animate=False)

    def action_copy(self) -> None:
        self.copied = self._copy(self.code)
        self.query_one("#invite-hint", Static).update(
            f"copied to {' and '.join(self.copied)} · Esc closes")

    def action_copy_close(self) -> None:
        self.action_copy()
        self.dismiss(None)

    def action_close(self) -> None:
        self.dismiss(None)
