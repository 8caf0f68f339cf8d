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
    from app.members.device_labels import DeviceBook
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
    with fingerprints where two look alike.

    With ``devices`` (the device logs held, :mod:`app.members.device_labels`), a line of
    a device its person's log certifies is written as that person outside members
    channels: the name its devices claimed last, told apart by the ROOT's id (its
    fingerprint is the root's, what others verify)."""

    def __init__(self, devices: DeviceBook | None = None) -> None:
        self._books: dict[str, NameBook] = {}
        self.devices = devices

    def note(self, channel: str, sender_id: str, name: str | None) -> None:
        """``sender_id`` claimed ``name`` in ``channel`` (not a members channel)."""
        devices = self.devices
        if devices is not None:
            devices.note_name(sender_id, name)
            name, sender_id = devices.name_of(sender_id, name), devices.author_of(sender_id)
        self._books.setdefault(channel, NameBook()).note(sender_id, name)

    def name(self, sender_id: str, name: str | None) -> str | None:
        """The name a line of ``sender_id`` claiming ``name`` shows (outside members
        channels): its person's when a device log certifies it."""
        return name if self.devices is None else self.devices.name_of(sender_id, name)

    def label(self, channel: str, sender_id: str, name: str | None,
              roster: Roster | None = None) -> str:  # fmt: skip
        """How ``sender_id`` is written in ``channel``; ``name`` as :func:`authored`
        gave it."""
        if roster is not None:
            return roster.label_of(sender_id)
        if self.devices is not None:
            name, sender_id = self.name(sender_id, name), self.devices.author_of(sender_id)
        book = self._books.get(channel)
        return book.label(name, sender_id) if book is not None else (
            NameBook().label(name, sender_id))  # fmt: skip

    def forget(self, channel: str) -> None:
        self._books.pop(channel, None)
