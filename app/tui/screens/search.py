"""Alt+F / ``/search --all`` (Tab in the find bar): search every joined channel's
stored history as you type, and jump to a result (channel, author, time listed)."""

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
from textual.timer import Timer
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from app.chat.content import decode_content
from app.chat.lines import visible
from app.tui.find import shown_text
from storage import LogEntry

__all__ = ["SearchScreen"]

Searcher = Callable[[str], Awaitable[list[tuple[str, LogEntry]]]]
"""text -> (channel, message) found, newest first."""

TYPING_PAUSE = 0.2
"""Seconds after the last key before the search runs (incremental search)."""


class SearchScreen(ModalScreen[tuple[str, LogEntry] | None]):
    """Type (it searches as you type, newest first); Down to the results, Enter jumps."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(
        self, title: str, search: Searcher, query: str = "", *, tz: tzinfo | None = None
    ) -> None:
        super().__init__(id="search")
        self.title_text = title
        self._search = search
        self.query_text = query
        self.tz = tz
        self.results: list[tuple[str, LogEntry]] = []
        self._timer: Timer | None = None
        self.searched: str | None = None
        """The text whose results are listed."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog search"):
            yield Static(self.title_text, classes="dialog-title")
            yield Input(value=self.query_text, placeholder="text to find", id="search-input")
            yield OptionList(id="search-results")
            yield Static(
                "type to search · ↓ then Enter jumps to a message · Esc closes",
                classes="dialog-hint",
                id="search-hint",
            )

    def on_mount(self) -> None:
        self.query_one(Input).focus()
        if self.query_text:
            self.run_search(self.query_text)

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        if event.value == self.query_text:
            return
        self.query_text = event.value
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.set_timer(TYPING_PAUSE, lambda: self.run_search(self.query_text))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        """Enter: the results of this text (searched now if not yet), then Enter jumps."""
        event.stop()
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        results = self.query_one(OptionList)
        if self.results and event.value == self.searched and results.option_count:
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
            self.searched = text
            return
        found = await self._search(text)
        self.results = found
        self.searched = text
        results.clear_options()
        for i, (channel, entry) in enumerate(found):
            results.add_option(Option(self._label(channel, entry, text), id=str(i)))
        hint.update(
            f"{len(found)}{'+' if len(found) >= 100 else ''} found · ↓ then Enter jumps · "
            "Esc closes"
            if found
            else "nothing found · Esc closes"
        )
        if found:
            results.highlighted = 0

    def _label(self, channel: str, entry: LogEntry, text: str) -> Text:
        c = decode_content(entry.content)
        when = datetime.fromtimestamp(entry.lamport / 1000.0, self.tz).strftime(
            "%Y-%m-%d %H:%M"
        )  # the author's send time (the Lamport timestamp), as in the log
        out = Text()
        out.append(f"{when} ", "dim")
        out.append(f"#{visible(channel)} ", "italic")
        out.append(f"{visible(c.name or entry.sender_id[:8])}: ", "bold")
        shown = shown_text(entry) or c.text
        body = Text(visible(shown.replace("\n", " ")[:200]))
        body.highlight_words([text], "reverse", case_sensitive=False)
        out.append_text(body)
        return out

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        """A result picked: (channel, message) for the app to jump to."""
        event.stop()
        idx = int(event.option.id or 0)
        self.dismiss(self.results[idx] if idx < len(self.results) else None)

    def action_cancel(self) -> None:
        self.dismiss(None)
