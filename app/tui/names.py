"""Names nobody can fake: two members with one display name are always told apart, and
two authors in a channel's window never share a colour (issue 25 item 4, TUI side).

A display name is only what a member claims; its sender id is its key. When two
sender ids are seen with the same name (any case), every line, the peer list (F2)
and completion show both with a short fingerprint of the id: ``alice (3f9a)``,
``alice (77b2)``. One name alone is shown bare.

Colours: the first :data:`~app.tui.render` palette size of authors seen in a
channel each get their own colour (the hashed one when it is free, else the next
free one), kept for the session; only beyond that many authors can two share one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable

__all__ = ["FINGERPRINT_HEX", "ColourSlots", "NameBook", "fingerprint", "label"]

FINGERPRINT_HEX = 4
"""Hex digits of the sender id shown after a shared name (the id's first ones)."""


def fingerprint(sender_id: str) -> str:
    """The short fingerprint shown after a shared name: the id's first hex digits."""
    return sender_id[:FINGERPRINT_HEX]


def label(name: str | None, sender_id: str, shared: bool) -> str:
    """How an author is written: ``name``, ``name (3f9a)`` when ``shared``, or the id's
    start when there is no name."""
    if not name:
        return sender_id[:8]
    return f"{name} ({fingerprint(sender_id)})" if shared else name


class NameBook:
    """Which sender ids claim which names (case-insensitively), for the whole session."""

    def __init__(self) -> None:
        self._ids: dict[str, set[str]] = {}
        self._last: dict[str, str] = {}
        """sender id -> the name it was last seen with."""
        self.on_shared: Callable[[str], None] | None = None
        """Called with a name when a second sender id is seen using it."""

    def note(self, sender_id: str, name: str | None) -> bool:
        """``sender_id`` uses ``name``; True if that made the name shared (a second id)."""
        if not name or not sender_id:
            return False
        self._last[sender_id] = name
        ids = self._ids.setdefault(name.casefold(), set())
        if sender_id in ids:
            return False
        ids.add(sender_id)
        return len(ids) == 2

    def shared(self, name: str | None) -> bool:
        return bool(name) and len(self._ids.get((name or "").casefold(), ())) > 1

    def label(self, name: str | None, sender_id: str) -> str:
        return label(name, sender_id, self.shared(name))

    def name_of(self, sender_id: str) -> str | None:
        return self._last.get(sender_id)

    def ids_of(self, name: str) -> set[str]:
        return set(self._ids.get(name.casefold(), ()))


class ColourSlots:
    """Author colours of one channel: a distinct palette index per sender id while the
    palette lasts (the id's hashed index when free)."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self._slot: dict[str, int] = {}

    def slot(self, sender_id: str) -> int:
        got = self._slot.get(sender_id)
        if got is not None:
            return got
        digest = hashlib.sha256(sender_id.encode("utf-8", "replace")).digest()
        want = int.from_bytes(digest[:4], "big") % self.size  # as author_color chooses
        taken = set(self._slot.values())
        if len(taken) < self.size:
            while want in taken:
                want = (want + 1) % self.size
        self._slot[sender_id] = want
        return want
