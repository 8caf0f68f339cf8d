"""The input line: history (Up/Down) and tab completion of commands, channels and names."""

from __future__ import annotations

from collections.abc import Callable
from typing import ClassVar

from textual.binding import Binding, BindingType
from textual.widgets import Input

from app.tui.commands import complete

__all__ = ["ChatInput", "CompletionSource"]

MAX_HISTORY = 500

CompletionSource = Callable[[], tuple[list[str], list[str], list[str]]]
"""Returns ``(names, joined channels, known channels)`` for completion."""


class ChatInput(Input):
    """An :class:`~textual.widgets.Input` with line history and tab completion."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up", "history(-1)", "previous line", show=False),
        Binding("down", "history(1)", "next line", show=False),
        Binding("tab", "complete", "complete", show=False),
    ]

    def __init__(self, source: CompletionSource | None = None, **kwargs: object) -> None:
        super().__init__(**kwargs)  # type: ignore[arg-type]
        self.history: list[str] = []
        self._pos: int | None = None
        self._draft = ""
        self._source = source
        self.last_candidates: list[str] = []

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
