"""Searching the stored history for the TUI (Ctrl+F in a channel, Tab or Alt+F in all).

The store's search (:meth:`storage.Store.search`) matches the raw content bytes,
JSON keys and names included (``"name"`` is in every line). :func:`search_channel`
keeps only the messages whose shown text contains the words (any case), paging
through the store's results newest first until it has ``limit`` of them or has
looked at :data:`SCAN_LIMIT` rows; parts of a message that are not lines of their
own (file segments, reactions, edits, deletions) are never results.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

from app.chat.content import decode_content
from app.chat.lines import TYPED_KINDS, split_typed, visible
from app.chat.redaction import is_tombstone
from storage import Cursor, LogEntry, Store

__all__ = [
    "FIND_LIMIT",
    "FindState",
    "search_all",
    "search_channel",
    "search_mentions",
    "shown_text",
]

FIND_LIMIT = 500
"""Most matches Ctrl+F steps through in a channel (newest first)."""

ALL_LIMIT = 100
"""Most results listed for all channels together (newest first)."""

SCAN_LIMIT = 5_000
"""Most stored rows looked at per channel and search."""

_NOT_LINES = ("segment", "react", "unreact", "edit", "delete")


def shown_text(entry: LogEntry) -> str | None:
    """The text the log shows for ``entry`` (as first sent), or None for content that
    is not a line of its own."""
    if is_tombstone(entry.content):  # deleted by its author: no text left to find
        return None
    c = decode_content(entry.content)
    if c.kind in _NOT_LINES:
        return None
    return split_typed(c.text)[1] if c.kind == "reply" else c.text


async def search_channel(
    store: Store, channel: str, text: str, *, limit: int = FIND_LIMIT
) -> list[LogEntry]:
    """Messages of ``channel`` whose shown text contains ``text`` (any case), newest
    first, at most ``limit``."""
    want = text.casefold()
    found: list[LogEntry] = []
    if not want.strip():
        return found
    before: Cursor | None = None
    page = 200
    for _ in range(SCAN_LIMIT // page):  # bounded
        entries = await store.search(channel, text, before=before, limit=page)
        for e in entries:
            shown = shown_text(e)
            if shown is not None and want in visible(shown, newlines=True).casefold():
                found.append(e)
                if len(found) >= limit:
                    return found
        if len(entries) < page:
            break
        before = entries[-1].cursor
    return found


async def search_all(
    store: Store, channels: Sequence[str], text: str, *, limit: int = ALL_LIMIT
) -> list[tuple[str, LogEntry]]:
    """``text`` in every channel of ``channels``: (channel, message), newest first."""
    out: list[tuple[str, LogEntry]] = []
    for channel in channels:
        for e in await search_channel(store, channel, text, limit=limit):
            out.append((channel, e))
    out.sort(key=lambda ce: ce[1].cursor, reverse=True)
    return out[:limit]


async def search_mentions(
    store: Store,
    channels: Iterable[str],
    words: Sequence[str],
    *,
    me: str,
    mentions: Callable[[str], bool],
    limit: int = 50,
) -> list[tuple[str, LogEntry]]:
    """``/mentions``: the newest lines for you in ``channels`` (channel, message; newest
    first, at most ``limit``): the messages of others whose text ``mentions`` says is
    for you, found by the store's search for each of ``words`` (``@name`` and the
    highlight words); reactions, edits and deletions are not lines (replies are). A
    channel whose search fails is left out."""
    found: list[tuple[str, LogEntry]] = []
    for channel in channels:
        seen: set[str] = set()
        for word in words:
            with contextlib.suppress(Exception):
                for e in await store.search(channel, word, limit=limit):
                    c = decode_content(e.content)
                    if e.message_id in seen or e.sender_id == me:
                        continue
                    if c.kind in TYPED_KINDS and c.kind != "reply":
                        continue
                    if mentions(c.text):
                        seen.add(e.message_id)
                        found.append((channel, e))
    found.sort(key=lambda ce: ce[1].lamport, reverse=True)
    return found[:limit]


@dataclass
class FindState:
    """Ctrl+F in one channel: the text, its matches (newest first) and the one shown."""

    channel: str
    text: str = ""
    results: list[LogEntry] = field(default_factory=list)
    index: int = -1
    """The match shown (0: the newest); -1 before the first search."""
    searched: bool = False
    start_at: str | None = None
    """The message id to show first (a result picked in the all-channel search), not
    the newest match."""

    def first_index(self) -> int:
        """Which match to show when the results come: ``start_at``'s, else the newest."""
        for i, entry in enumerate(self.results):
            if entry.message_id == self.start_at:
                return i
        return 0

    def status(self) -> str:
        if not self.text.strip():
            return "type to find · Tab: all channels · Esc"
        if not self.searched:
            return "searching…"
        if not self.results:
            return "no match · Tab: all channels · Esc"
        more = "+" if len(self.results) >= FIND_LIMIT else ""
        return f"{self.index + 1} of {len(self.results)}{more} · ↑↓ · Enter · Esc · Tab: all"
