"""Who wrote a line, as every view writes it: in a members channel the roster's name,
never the name claimed inside the content; elsewhere the claimed name. Confusable names
get their author's fingerprint (:mod:`app.names`).

``authored`` decodes stored or delivered content with its author's name from the
roster (and membership events described with the roster's names: "removed dave", not
"removed 0b29d54b"); the node (delivered lines), the TUI (lines read back from SQLite)
and ``sdschat history`` call it. :class:`Authors` keeps, per channel, what a label
needs: the roster (members channels) or the claimed names seen (the others).
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from app.chat.content import decode_content
from app.chat.lines import ChatContent
from app.members.display import describe, is_members_content
from app.names import NameBook

if TYPE_CHECKING:
    from app.members.roster import Roster

__all__ = ["Authors", "authored"]


def authored(content: bytes, sender_id: str, roster: Roster | None) -> ChatContent:
    """``content`` decoded (:func:`~app.chat.content.decode_content`), its ``name`` the
    roster's for ``sender_id`` when ``roster`` is given (``None`` if it never was a
    member: shown by its id), else the name the content claims."""
    decoded = decode_content(content)
    if roster is None:
        return decoded
    if is_members_content(content):
        kind, text = describe(content, roster.name_of)
        decoded = ChatContent(text=text, name=None, kind=kind)
    return replace(decoded, name=roster.name_of(sender_id))


class Authors:
    """Author labels of every channel a node or a reader sees: a members channel's from
    its roster (:meth:`Roster.label_of`), another's from the names its authors claimed,
    with fingerprints where two look alike."""

    def __init__(self) -> None:
        self._books: dict[str, NameBook] = {}

    def note(self, channel: str, sender_id: str, name: str | None) -> None:
        """``sender_id`` claimed ``name`` in ``channel`` (not a members channel)."""
        self._books.setdefault(channel, NameBook()).note(sender_id, name)

    def label(self, channel: str, sender_id: str, name: str | None,
              roster: Roster | None = None) -> str:  # fmt: skip
        """How ``sender_id`` is written in ``channel``; ``name`` as :func:`authored`
        gave it."""
        if roster is not None:
            return roster.label_of(sender_id)
        book = self._books.get(channel)
        return book.label(name, sender_id) if book is not None else (
            NameBook().label(name, sender_id))  # fmt: skip

    def forget(self, channel: str) -> None:
        self._books.pop(channel, None)
