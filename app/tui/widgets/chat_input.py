"""The input line: history (Up/Down), tab completion of commands, channels and names, and
pastes of several lines (handed to the app as one message to confirm)."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual import events
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.widgets import Input

from app.commands.table import complete

__all__ = ["ChatInput", "CompletionSource"]

MAX_HISTORY = 500

NEW_LINE_KEYS = ("alt+enter", "shift+enter", "ctrl+j")
"""Keys that start a second line (xterm and tmux send Alt+Enter as ESC CR, which
:func:`app.tui.keys.use_alt_enter` makes ``ctrl+j``; kitty's protocol sends
``alt+enter`` / ``shift+enter`` as such)."""

CompletionSource = Callable[[], tuple[list[str], list[str], list[str]]]
"""Returns ``(names, joined channels, known channels)`` for completion."""


class ChatInput(Input):
    """An :class:`~textual.widgets.Input` with line history and tab completion."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "previous line", show=False),
        Binding("down", "history(1)", "next line", show=False),
        Binding("tab", "complete", "complete", show=False),
    ]

    class Line(Message):
        """A line was entered (the input is already cleared and the line in the history)."""

        def __init__(self, line: str) -> None:
            super().__init__()
            self.line = line

    class MultiLine(Message):
        """Several lines were pasted: ``text`` is the input's text with the paste put in
        at the cursor (or over the selection). The input itself is left unchanged."""

        def __init__(self, text: str) -> None:
            super().__init__()
            self.text = text

    def __init__(self, source: CompletionSource | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.history: list[str] = []
        self._pos: int | None = None
        self._draft = ""
        self._source = source
        self.last_candidates: list[str] = []

    def refused(self, reason: str) -> None:
        """The line in the box was refused: ``reason`` is shown under it until it is edited."""
        self.border_subtitle = f"✗ {reason}"
        self._refused_value = self.value

    def _watch_value(self, value: str) -> None:
        if self.border_subtitle and value != getattr(self, "_refused_value", None):
            self.border_subtitle = None
        # Input's watcher sets ``virtual_size`` (the text's width, for scrolling
        # it sideways), a reactive that lays out the whole screen again: a few ms
        # per keystroke, more while messages arrive. This box's size never
        # depends on its text, so set it without a layout; the repaint of the
        # changed value still happens, and scrolling to the cursor reads it.
        self.set_reactive(Input.virtual_size, Size(self.content_width, 1))
        super()._watch_value(value)

    async def _on_key(self, event: events.Key) -> None:
        if event.key in NEW_LINE_KEYS:
            # Alt+Enter (Shift+Enter where the terminal reports it, Ctrl+J): a second
            # line: the multi-line dialog opens with the text so far and a new line
            event.stop()
            event.prevent_default()
            at = self.cursor_position
            self.post_message(self.MultiLine(self.value[:at] + "\n" + self.value[at:]))
            return
        if event.key == "enter":
            # Here, in key order: a binding's action would run after the keys typed next.
            event.stop()
            event.prevent_default()
            await self.action_submit()
            return
        await super()._on_key(event)

    def _on_paste(self, event: events.Paste) -> None:
        # Input keeps the first line of a paste and drops the rest without a word; a
        # paste of several lines (code, a log) goes to the app as one message instead
        text = event.text.replace("\r\n", "\n").replace("\r", "\n").strip("\n")
        if "\n" not in text:
            return  # Input's own handler inserts it
        event.stop()
        event.prevent_default()
        start, end = sorted((self.selection.start, self.selection.end))
        self.post_message(self.MultiLine(self.value[:start] + text + self.value[end:]))

    async def action_submit(self) -> None:
        """Enter: take the line and clear the input in the same step, so keys typed right
        after (a fast typist, a paste, tmux send-keys) start the next line."""
        line = self.value
        self.value = ""
        self.cursor_position = 0
        self.remember(line)
        self.post_message(self.Line(line))

    def use_history(self, lines: list[str]) -> None:
        """Up/Down go through ``lines`` from now on (a channel's own history; the list is
        kept and extended in place)."""
        self.history = lines
        del lines[:-MAX_HISTORY]
        self._pos = None
        self._draft = ""

    def remember(self, line: str) -> None:
        """Add a submitted line to the history (consecutive duplicates once)."""
        if line and (not self.history or self.history[-1] != line):
            self.history.append(line)
            del self.history[:-MAX_HISTORY]
        self._pos = None
        self._draft = ""

    def action_history(self, step: int) -> None:
        if not self.history:
            return
        if self._pos is None:
            if step > 0:
                return
            self._draft = self.value
            pos = len(self.history) - 1
        else:
            pos = self._pos + step
        if pos >= len(self.history):
            self._pos = None
            self.value = self._draft
        else:
            self._pos = max(0, pos)
            self.value = self.history[self._pos]
        self.cursor_position = len(self.value)

    def action_complete(self) -> None:
        names: list[str] = []
        joined: list[str] = []
        known: list[str] = []
        if self._source is not None:
            names, joined, known = self._source()
        result = complete(
            self.value, self.cursor_position, names=names, joined=joined, known_channels=known
        )
        if result is None:
            self.last_candidates = []
            self.app.bell()
            return
        line, cursor, candidates = result
        self.last_candidates = candidates
        self.value = line
        self.cursor_position = cursor
        if len(candidates) > 1:
            self.notify("  ".join(candidates[:12]), title="completions", timeout=3)
