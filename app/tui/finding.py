"""Ctrl+F and Alt+F: finding in the stored history, as you type.

The find bar over the input searches the channel shown (:func:`app.tui.find.search_channel`)
a moment after the last key (:data:`FIND_PAUSE`); matches are highlighted in the log,
Up/Down step to older/newer ones (each shown in the middle of its context), Enter
stays at the match (selected, for ``/reply`` or ``/info``), Esc leaves (back to the
newest), Tab searches every channel. Alt+F (and ``/search -a``) opens the list of
results in every channel (:class:`~app.tui.screens.search.SearchScreen`); picking one
jumps there with the find bar on its text.

:class:`Finder` owns the search under way (:attr:`Finder.state`) and its timer; the
app creates it and passes the bar's messages down. It asks its :class:`FindHost` (the
app) for the node, the screens and workers.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from datetime import tzinfo
from typing import Any, Protocol

from app.node.runtime import Node
from app.tui.find import FindState, search_all, search_channel
from app.tui.host import AppHost
from app.tui.screens.search import SearchScreen
from app.tui.widgets.chat_input import ChatInput
from app.tui.widgets.find_bar import FindBar
from app.tui.widgets.message_log import MessageLog
from storage import LogEntry

__all__ = ["FIND_PAUSE", "FindHost", "Finder"]

FIND_PAUSE = 0.15
"""Seconds after the last key in the find bar before it searches (as you type)."""


class FindHost(AppHost, Protocol):
    """What the finder asks of the app."""

    @property
    def node(self) -> Node | None: ...

    def action_log_end(self, direction: int) -> None: ...


class Finder:
    """The find bar's search in the channel shown, and the all-channels search."""

    def __init__(
        self,
        host: FindHost,
        *,
        jump_to: Callable[[str, LogEntry], Awaitable[None]],
        push_search: Callable[[SearchScreen, Callable[[tuple[str, LogEntry] | None], None]],
                              Any],
        cancel_workers: Callable[[], None],
        tz: tzinfo | None,
    ) -> None:  # fmt: skip
        self.host = host
        self._jump_to = jump_to
        self._push_search = push_search
        self._cancel_workers = cancel_workers
        self._tz = tz
        self.state: FindState | None = None
        """What is searched in the channel shown, while the find bar is open."""
        self._timer: Any = None

    def open(self, query: str = "", at: str | None = None) -> None:
        """Ctrl+F: the find bar over the input, searching this channel's stored history as
        you type; matches highlighted in the log, Up/Down older/newer match, Enter stays,
        Esc leaves (back to the newest), Tab: the same text in every channel."""
        host = self.host
        channel = host.model.current
        if channel is None or host.node is None or not host.chat_ready():
            return
        bar = host.chat.query_one(FindBar)
        box = bar.input
        if bar.display and not query:  # open already: back to its text
            box.focus()
            return
        self.state = FindState(channel, start_at=at)
        bar.display = True
        box.focus()
        if box.value != query:
            box.value = query  # its Changed message starts the search
            box.cursor_position = len(query)
        else:
            self._find_text(query)

    def search_all(self, query: str = "") -> None:
        """Alt+F, ``/search --all TEXT``: search every joined channel (a list: channel,
        author, time); picking a result jumps there with the find bar on its text."""
        node = self.host.node
        if node is None:
            return
        channels = list(self.host.model.order)

        async def search(text: str) -> list[tuple[str, LogEntry]]:
            return await search_all(node.store, channels, text)

        def done(found: tuple[str, LogEntry] | None) -> None:
            if found is not None:
                channel, entry = found
                self.host.run_worker(self._jump_found(channel, entry, screen.query_text),
                                     group="jump", exclusive=True)  # fmt: skip

        screen = SearchScreen("Search all channels", search, query, tz=self._tz)
        self._push_search(screen, done)

    async def _jump_found(self, channel: str, entry: LogEntry, text: str) -> None:
        """A result of the all-channels search: show it, the find bar on its text there."""
        if channel != self.host.model.current:
            self.host.leave_current()
        await self._jump_to(channel, entry)
        self.open(text, at=entry.message_id)  # the picked match, not the newest

    def text_changed(self, value: str) -> None:
        """The find bar's text changed: search once typing pauses a moment."""
        if self._timer is not None:
            self._timer.stop()
        self._timer = self.host.set_timer(FIND_PAUSE, lambda: self._find_text(value))

    def _find_text(self, text: str) -> None:
        self._timer = None
        state = self.state
        if state is None:
            return
        host = self.host
        state.channel = host.model.current or state.channel
        state.text, state.searched, state.results, state.index = text, False, [], -1
        host.chat.query_one(MessageLog).set_find(text.strip() or None)
        self._status()
        if text.strip():
            host.run_worker(self._run(state, text), group="find", exclusive=True)

    async def _run(self, state: FindState, text: str) -> None:
        node = self.host.node
        if node is None:
            return
        results = await search_channel(node.store, state.channel, text)
        if self.state is not state or state.text != text:
            return  # typed on meanwhile, or closed
        state.results, state.searched = results, True
        self._status()
        if results:
            first, state.start_at = state.first_index(), None  # once: later texts, newest
            await self._show(state, first)

    async def _show(self, state: FindState, index: int) -> None:
        """Show match ``index`` (0: the newest), selected, in the middle of its context."""
        entry = state.results[index]
        state.index = index
        self._status()
        host = self.host
        log = host.chat.query_one(MessageLog)
        view = host.model.channels.get(state.channel)
        row = view.find_message(entry.message_id) if view is not None else None
        if row is not None and state.channel == host.model.current:
            log.select(row.key)  # in the window: no need to read the store again
            return
        await self._jump_to(state.channel, entry)

    def _status(self) -> None:
        if self.state is not None and self.host.chat_ready():
            self.host.chat.query_one(FindBar).set_status(self.state.status())

    def step(self, step: int) -> None:
        """Up/Down in the find bar: the next older (+1) or newer (-1) match."""
        state = self.state
        if state is None:
            return
        if state.channel != self.host.model.current:  # switched channel: search there
            self._find_text(state.text)
            return
        if not state.results:
            return
        index = max(0, min(len(state.results) - 1, state.index + step))
        if index == state.index:
            self.host.notify("no older match" if step > 0 else "no newer match", timeout=2)
            return
        self.host.run_worker(self._show(state, index), group="find", exclusive=True)

    def close(self, keep: bool) -> None:
        """Enter (``keep``): stay at the match (selected, for /reply, /info...); Esc: the
        newest."""
        self.state = None
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        self._cancel_workers()  # a search or a jump still under way
        chat = self.host.chat
        bar = chat.query_one(FindBar)
        bar.display = False
        log = chat.query_one(MessageLog)
        log.set_find(None)
        chat.query_one(ChatInput).focus()
        if not keep:
            log.select(None)
            self.host.action_log_end(1)
