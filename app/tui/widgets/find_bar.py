"""Ctrl+F: the find bar over the input line, searching this channel as you type.

The bar is an input and a status (``3 of 27``). Its keys go to the app as
messages: the text changed (the app searches the stored history, highlights the
matches in the log and shows the newest), Up / Down (an older / newer match),
Enter (stay at the match and close), Esc (close, back to the newest messages)
and Tab (the same text in every joined channel: a list to pick from).
"""

from __future__ import annotations

from typing import ClassVar

from textual import events
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Input, Static

__all__ = ["FindBar", "FindInput"]


class FindInput(Input):
    """The find bar's input; Up/Down/Enter/Esc/Tab become :class:`FindBar.Step` etc."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "step(1)", "older match", show=False),
        Binding("down", "step(-1)", "newer match", show=False),
        Binding("escape", "close(False)", "close", show=False),
        Binding("tab", "everywhere", "all channels", show=False),
    ]

    async def _on_key(self, event: events.Key) -> None:
        if event.key == "enter":
            event.stop()
            event.prevent_default()
            self.post_message(FindBar.Close(keep=True))
            return
        await super()._on_key(event)

    def action_step(self, step: int) -> None:
        self.post_message(FindBar.Step(step))

    def action_close(self, keep: bool) -> None:
        self.post_message(FindBar.Close(keep=keep))

    def action_everywhere(self) -> None:
        self.post_message(FindBar.Everywhere(self.value))


class FindBar(Horizontal):
    """The find bar (hidden until Ctrl+F; see the module docstring)."""

    DEFAULT_CSS = """
    FindBar {
        height: 1;
        display: none;
        background: $boost;
    }
    FindBar > Static#find-label {
        width: auto;
        padding: 0 1;
        text-style: bold;
    }
    FindBar > FindInput {
        width: 1fr;
        height: 1;
        border: none;
        padding: 0;
        background: $boost;
    }
    FindBar > Static#find-status {
        width: auto;
        max-width: 75%;
        padding: 0 1;
        color: $text-muted;
    }
    """

    class Step(Message):
        """Up (+1: an older match) or Down (-1: a newer one)."""

        def __init__(self, step: int) -> None:
            super().__init__()
            self.step = step

    class Close(Message):
        """Enter (``keep``: stay at the match) or Esc (back to the newest messages)."""

        def __init__(self, keep: bool) -> None:
            super().__init__()
            self.keep = keep

    class Everywhere(Message):
        """Tab: search ``text`` in every joined channel."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def compose(self) -> ComposeResult:
        yield Static("find", id="find-label")
        yield FindInput(placeholder="text in this channel's history", id="find-input")
        yield Static("", id="find-status")

    @property
    def input(self) -> FindInput:
        return self.query_one(FindInput)

    def set_status(self, text: str) -> None:
        self.query_one("#find-status", Static).update(text)
