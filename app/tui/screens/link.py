"""The dialog ``/link`` opens: the link code on one line, its QR code (``segno``), what to
type on the new device, and how the link is going (the six digits both screens show,
then linked or failed), updated in place. ``c`` copies the code; Esc closes the dialog
(the link goes on: its result is also a notice)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from app.members.link_offer import link_hint
from app.members.qr import qr_lines

__all__ = ["LinkScreen", "link_text"]

HINT = "c copies the code · Esc closes (the link goes on)"


def link_text(code: str) -> Text:
    """The body: the code, its QR code (dark on light, whatever the theme), the hint."""
    out = Text()
    out.append(f"{code}\n\n", "bold")
    for line in qr_lines(code):
        out.append("  ")
        out.append(line, "#000000 on #ffffff")
        out.append("\n")
    out.append("\n" + link_hint(code) + "\n")
    out.append("Once it answers, both screens show the same six digits; this device "
               "then hands it your channels, DMs and their keys.", "dim")  # fmt: skip
    return out


class LinkScreen(ModalScreen[None]):
    """A link code under way; :meth:`progress` shows what happened since."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("c", "copy", "copy", show=False),
        Binding("escape,q,enter", "close", "close", show=False),
    ]

    def __init__(self, code: str, copy: Callable[[str], list[str]]) -> None:
        super().__init__(classes="link")
        self.code = code
        self._copy = copy
        self.status = "waiting for the new device"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog link-dialog"):
            yield Static("Link a new device", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(link_text(self.code), id="link-text")
            yield Static(self.status, id="link-status", markup=False)
            yield Static(HINT, classes="dialog-hint", id="link-hint")

    def progress(self, text: str) -> None:
        self.status = text
        self.query_one("#link-status", Static).update(text)

    def action_copy(self) -> None:
        where = self._copy(self.code)
        self.query_one("#link-hint", Static).update(f"copied to {' and '.join(where)} · Esc "
                                                    "closes")  # fmt: skip

    def action_close(self) -> None:
        self.dismiss(None)
