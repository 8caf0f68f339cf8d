"""Reading a channel's stored log into its window (:class:`~app.tui.model.ChannelView`):
the tail at start, older and newer pages as the reader scrolls, the first or the
newest page at once (Ctrl+Home, Ctrl+End), a message in the middle of its context (a
search result, ``/goto``), and what rows still need from the store after a page
(the quote of a reply whose target is outside the window, a file's progress).

:class:`Pager` is created by the app and reads through the node's store; a page is
turned into rows a few at a time (:data:`ROWS_PER_SLICE`) so keys and frames get
through while it is read. It never imports the app: it is given the node (when
open), the model, the chat screen and the app's ``run_worker``.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
from collections.abc import Callable, Sequence
from typing import Any

from app.chat.content import decode_content
from app.node.runtime import Node
from app.tui.model import PAGE, ChatModel, Row, quote_of
from app.tui.screens.chat import ChatScreen
from app.tui.widgets.message_log import SLICE_PAUSE, MessageLog
from storage import LogEntry

__all__ = ["ROWS_PER_SLICE", "Pager"]

ROWS_PER_SLICE = 10
"""A page read in the background is turned into rows ROWS_PER_SLICE at a time,
with a :data:`~app.tui.widgets.message_log.SLICE_PAUSE` between slices."""


class Pager:
    """The windows' reads from the stored log (see the module docstring)."""

    def __init__(
        self,
        *,
        node: Callable[[], Node | None],
        model: ChatModel,
        chat: ChatScreen,
        chat_ready: Callable[[], bool],
        run_worker: Callable[..., Any],
        switch: Callable[[str], None],
        last_read: Callable[[str], tuple[int, str] | None],
    ) -> None:
        self._node = node
        self.model = model
        self.chat = chat
        self._chat_ready = chat_ready
        self._run_worker = run_worker
        self._switch = switch
        self._last_read = last_read
        self._files_running: set[str] = set()
        """Channels whose file lines are being read from the store (:meth:`check_files`)."""

    def _log(self) -> MessageLog:
        return self.chat.query_one(MessageLog)

    # ------------------------------------------------------------------ the tail

    async def _find_topic(self, channel: str) -> None:
        """The channel's newest topic line, wherever it is in the stored log (the tail
        page may not reach it)."""
        node, view = self._node(), self.model.channels.get(channel)
        if node is None or view is None:
            return
        with contextlib.suppress(Exception):
            for e in await node.store.search(channel, '"kind":"topic"', limit=20):
                if decode_content(e.content).kind == "topic":
                    view.set_topic(self.model.row_from_entry(e))
                    return

    async def load_tail(self, channel: str) -> None:
        """The newest page of ``channel`` (and its topic, and where you left off)."""
        node = self._node()
        view = self.model.channels.get(channel)
        if node is None or view is None:
            return
        if view.topic_key is None:
            await self._find_topic(channel)
        entries = await node.store.page(channel, limit=PAGE)
        view.set_page(
            self.model.rows_from_entries(entries), at_tail=True, more_before=len(entries) == PAGE
        )
        stored = self._last_read(channel)
        if stored is not None and view.last_read is None:
            view.last_read = stored
        self.after_page(channel)

    async def count_unread(self) -> None:
        """Each channel's messages of others after where you left off (at most 1,000)."""
        node = self._node()
        if node is None:
            return
        for name, view in self.model.channels.items():
            if view.last_read is None:
                continue
            after = await node.store.page(name, after=view.last_read, limit=1000)
            view.unread = sum(1 for e in after if e.sender_id != node.sender_id)

    async def _rows(self, entries: Sequence[LogEntry]) -> list[Row]:
        """Rows for a page of log entries, a few at a time so keys and frames get through."""
        rows: list[Row] = []
        for i in range(0, len(entries), ROWS_PER_SLICE):
            rows.extend(self.model.rows_from_entries(entries[i : i + ROWS_PER_SLICE]))
            await asyncio.sleep(SLICE_PAUSE)
        return rows

    async def _prerender(self, channel: str, rows: Sequence[Row]) -> None:
        if channel == self.model.current and self._chat_ready():
            await self._log().prerender(rows)

    def after_page(self, channel: str) -> None:
        self.fill(channel)
        if channel == self.model.current:
            self._log().page_loaded()
        gc.freeze()  # the page's rows and lines: out of the collector's passes too (see _boot)

    def fill(self, channel: str) -> None:
        """What ``channel``'s rows still need from the store: the quotes of replies whose
        target is outside the window, the state of file lines."""
        view = self.model.channels.get(channel)
        if view is not None and view.unquoted:
            self._run_worker(self._resolve_quotes(channel), group="quotes")
        self.check_files(channel)

    # ------------------------------------------------------------------ scrolling

    def older(self, channel: str) -> None:
        """The page before the window (the reader scrolls up), in the background."""
        self._run_worker(self._page_older(channel), group="page")

    def newer(self, channel: str) -> None:
        """The page after the window (the reader scrolls down), in the background."""
        self._run_worker(self._page_newer(channel), group="page")

    async def _page_older(self, channel: str) -> None:
        node = self._node()
        view = self.model.channels.get(channel)
        if node is None or view is None or view.oldest_cursor is None:
            self.after_page(channel)
            return
        entries = await node.store.page(channel, before=view.oldest_cursor, limit=PAGE)
        rows = await self._rows(entries)
        await self._prerender(channel, rows)
        view.prepend(rows, more_before=len(entries) == PAGE)
        view.trim(keep_end=False)
        self.after_page(channel)

    async def _page_newer(self, channel: str) -> None:
        node = self._node()
        view = self.model.channels.get(channel)
        if node is None or view is None:
            return
        cursor = view.newest_cursor
        if cursor is None:
            await self.load_tail(channel)
            return
        entries = await node.store.page(channel, after=cursor, limit=PAGE)
        rows = await self._rows(entries)
        await self._prerender(channel, rows)
        view.append_page(rows, at_tail=len(entries) < PAGE)
        view.trim(keep_end=True)
        self.after_page(channel)

    async def jump_to(self, channel: str, entry: LogEntry) -> None:
        """Show ``entry`` (a search result) in the middle of its context, selected."""
        node = self._node()
        view = self.model.channels.get(channel)
        if node is None or view is None:
            return
        half = PAGE // 2
        before = await node.store.page(channel, before=entry.cursor, limit=half)
        after = await node.store.page(channel, after=entry.cursor, limit=half)
        rows = self.model.rows_from_entries([*before, entry, *after])
        view.set_page(rows, at_tail=len(after) < half, more_before=len(before) == half)
        self._switch(channel)
        log = self._log()
        log.follow = False
        log.sync(force=True)
        log.select(entry.cursor)

    def to_oldest(self, channel: str) -> None:
        """Ctrl+Home: the channel's first page, in the background."""
        self._run_worker(self._to_oldest(channel), group="page")

    async def _to_oldest(self, channel: str) -> None:
        """The channel's first page, read from SQLite by keyset (one query, whatever the
        history's length), the window starting at its first message."""
        node = self._node()
        view = self.model.channels.get(channel)
        if node is None or view is None:
            return
        entries = await node.store.page(channel, after=(-1, ""), limit=PAGE)
        rows = await self._rows(entries)
        view.set_page(rows, at_tail=len(entries) < PAGE, more_before=False)
        self.after_page(channel)
        if channel == self.model.current:
            log = self._log()
            log.follow = False
            log.sync(force=True)
            log.to_top()

    def to_newest(self, channel: str) -> None:
        """Ctrl+End while the window ends before the newest message: the newest page."""
        self._run_worker(self._to_newest(channel), group="page")

    async def _to_newest(self, channel: str) -> None:
        await self.load_tail(channel)
        if channel == self.model.current:
            log = self._log()
            log.follow = True
            log.sync(force=True)
            log.to_bottom()

    async def first_of_day(self, channel: str, ms: int) -> LogEntry | None:
        """The first message of ``channel`` sent at ``ms`` (the author's clock) or later."""
        node = self._node()
        if node is None:
            return None
        entries = await node.store.page(channel, after=(max(-1, ms - 1), "\U0010ffff"), limit=1)
        return entries[0] if entries else None

    # ------------------------------------------------------------------ what rows need

    def check_files(self, channel: str) -> None:
        """File lines of ``channel`` whose manifest is not read yet, or that have every
        segment and are not checked yet: read them from the store (app/tui/files.py),
        one worker per channel at a time."""
        view = self.model.channels.get(channel)
        if view is None or not view.files_todo or channel in self._files_running:
            return
        self._files_running.add(channel)
        self._run_worker(self._read_files(channel), group="files")

    async def _read_files(self, channel: str) -> None:
        from app.tui.files import read_file_state

        try:
            for _ in range(1000):  # bounded: each pass takes what was asked meanwhile
                node, view = self._node(), self.model.channels.get(channel)
                if node is None or view is None or not view.files_todo:
                    return
                todo, view.files_todo = view.files_todo, set()
                for mid in todo:
                    try:
                        state = await read_file_state(node.store, channel, mid)
                    except Exception:  # a closed store at exit, a damaged row: not shown
                        continue
                    if state is not None and self.model.channels.get(channel) is view:
                        view.set_file(mid, state)
                if channel == self.model.current and self._chat_ready():
                    self._log().sync()
        finally:
            self._files_running.discard(channel)

    async def _resolve_quotes(self, channel: str) -> None:
        """Replies whose target is outside the window: quote it from the store."""
        node, view = self._node(), self.model.channels.get(channel)
        if node is None or view is None or not view.unquoted:
            return
        ids = list(view.unquoted)[:200]
        try:
            found = await node.store.get_messages(channel, ids)
        except Exception:
            return
        changed = False
        for mid, msg in found.items():
            c = decode_content(msg.content)
            target = Row((msg.lamport, mid), msg.sender_id, c.name, c.kind, c.text, msg.lamport)
            text = quote_of(target)
            for reply in view.unquoted.pop(mid, []):
                reply.quote = text
                reply.touch()
                changed = True
        if changed and channel == self.model.current:
            self._log().sync()
