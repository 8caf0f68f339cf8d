"""Ctrl+F / ``/search``: search a channel's stored history and jump to a result."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import datetime, tzinfo
from typing import ClassVar

from rich.text import Text
from textual import events, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from app.chat_content import decode_content, visible
from storage import LogEntry

__all__ = ["SearchScreen"]

Searcher = Callable[[str], Awaitable[list[LogEntry]]]


class SearchScreen(ModalScreen[LogEntry | None]):
    """Type, Enter searches (newest first); Down to the results, Enter jumps there."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(
        self, channel: str, search: Searcher, query: str = "", *, tz: tzinfo | None = None
    ) -> None:
        super().__init__(id="search")
        self.channel = channel
        self._search = search
        self.query_text = query
        self.tz = tz
        self.results: list[LogEntry] = []

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog search"):
            yield Static(f"Search #{self.channel}", classes="dialog-title")
            yield Input(value=self.query_text, placeholder="text to find", id="search-input")
            yield OptionList(id="search-results")
            yield Static(
                "Enter searches · ↓ then Enter jumps to a message · Esc closes",
                classes="dialog-hint",
                id="search-hint",
            )

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        if self.query_text:
            self.run_search(self.query_text)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        results = self.query_one(OptionList)
        if self.results and event.value == self.query_text and results.option_count:
            results.focus()
            return
        self.query_text = event.value
        self.run_search(event.value)

    def on_key(self, event: events.Key) -> None:
        results = self.query_one(OptionList)
        if event.key == "down" and self.query_one(Input).has_focus and results.option_count:
            event.stop()
            event.prevent_default()
            results.focus()
            results.highlighted = 0

    @work(exclusive=True, group="search")
    async def run_search(self, text: str) -> None:
        hint = self.query_one("#search-hint", Static)
        results = self.query_one(OptionList)
        if not text.strip():
            results.clear_options()
            self.results = []
            return
        found = await self._search(text)
        self.results = found
        results.clear_options()
        for i, entry in enumerate(found):
            results.add_option(Option(self._label(entry, text), id=str(i)))
        hint.update(
            f"{len(found)}{'+' if len(found) >= 50 else ''} found · ↓ then Enter jumps · Esc closes"
            if found
            else "nothing found · Esc closes"
        )
        if found:
            results.highlighted = 0

    def _label(self, entry: LogEntry, text: str) -> Text:
        c = decode_content(entry.content)
        when = datetime.fromtimestamp(entry.lamport / 1000.0, self.tz).strftime(
            "%Y-%m-%d %H:%M"
        )  # the author's send time (the Lamport timestamp), as in the log
        out = Text()
        out.append(f"{when} ", "dim")
        out.append(f"{c.name or entry.sender_id[:8]}: ", "bold")
        body = Text(visible(c.text.replace("\n", " ")[:200]))
        body.highlight_words([text], "reverse", case_sensitive=False)
        out.append_text(body)
        return out

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        idx = int(event.option.id or 0)
        self.dismiss(self.results[idx] if idx < len(self.results) else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
