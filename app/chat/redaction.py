"""A deleted message's text leaves the disk: its stored content becomes a tombstone.

``/delete`` sends a typed ``delete`` message naming its target. When a node
delivers one (or sends its own), :func:`redact_deleted` overwrites, in SQLite,
the content of the target **if the deleter is its author**, and of the author's
edits of it, with a tombstone: the author's name and kind kept, the text gone
(``messages.content``, the outbox copy of an own message; ``secure_delete``
zeroes the freed bytes). So search (Ctrl+F, Alt+F) no longer finds it and
``sdschat history`` shows ``message deleted``.

Overwritten means gone from every file: storage runs the redaction with
``secure_delete = ON`` and then empties the WAL, whose older frames held the text
(:mod:`storage.erasure`).

A deletion can come before what it deletes: a target declared lost and recovered
later, a catch-up from a store peer in another order, an edit of the target that
arrives late. :class:`Deletions` remembers the deletions of this run
(:data:`DELETIONS_KEPT`) and overwrites such a message as soon as it is stored.

What stays: the encrypted envelope while the message is in the recent window
(members repair each other from it; it is dropped with the window), and copies
held by members who have not received the deletion yet, by a store peer, or
captured on the way. A deletion withdraws a line from view and from this disk;
it cannot unsay it.
"""

from __future__ import annotations

import json
from collections import OrderedDict

from app.chat.content import decode_content
from app.chat.lines import CONTENT_VERSION, encode_content, split_typed, typed_text
from storage import Store

__all__ = ["DELETIONS_KEPT", "TOMBSTONE_TEXT", "Deletions", "is_tombstone", "redact_deleted",
           "tombstone"]

TOMBSTONE_TEXT = "message deleted"

_MARK = b'"deleted":true'

DELETIONS_KEPT = 10_000
"""Deletions remembered per run for a target (or an edit of it) that comes after them
(the oldest forgotten beyond it)."""


def tombstone(original: bytes) -> bytes:
    """The content that replaces ``original``: its author's name, no text."""
    c = decode_content(original)
    if c.kind == "edit" and c.target:  # stays an edit of the target (a hidden row)
        return encode_content(typed_text(c.target, TOMBSTONE_TEXT), c.name or "", "edit")
    kind = c.kind if c.kind in ("msg", "me") else "msg"
    obj = {"v": CONTENT_VERSION, "name": c.name or "", "kind": kind, "text": TOMBSTONE_TEXT,
           "deleted": True}  # fmt: skip
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def is_tombstone(content: bytes) -> bool:
    """Whether stored ``content`` is what :func:`tombstone` left of a deleted message."""
    if not content.startswith(b"{") or _MARK not in content:
        return False
    try:
        obj = json.loads(content)
    except ValueError:
        return False
    return isinstance(obj, dict) and obj.get("deleted") is True


async def redact_deleted(store: Store, channel: str, deleter: str, target: str) -> int:
    """``deleter`` deleted ``target`` in ``channel``: overwrite the stored text of the
    target (if ``deleter`` wrote it) and of ``deleter``'s edits of it; how many rows."""
    kept = (await store.get_messages(channel, [target])).get(target)
    if kept is None or kept.sender_id != deleter:
        return 0  # not there (yet: Deletions), or not the author's to delete
    out = []
    if not is_tombstone(kept.content):
        out.append((target, deleter, tombstone(kept.content)))
    for entry in await store.search(channel, target, limit=200):  # its edits name it
        if entry.sender_id != deleter or entry.message_id == target:
            continue
        c = decode_content(entry.content)
        if c.kind == "edit" and c.target == target and split_typed(c.text)[1] != TOMBSTONE_TEXT:
            out.append((entry.message_id, deleter, tombstone(entry.content)))
    return await store.replace_content(channel, out)


class Deletions:
    """The deletions of this run, so that what comes after its deletion is overwritten
    as it is stored (see the module docstring). The node calls :meth:`deleted` for each
    deletion delivered or sent, and :meth:`stored` for each message delivered."""

    def __init__(self, kept: int = DELETIONS_KEPT) -> None:
        self._kept = kept
        #: (channel, target, deleter): only its author's deletion counts, and another
        #: member's deletion of the same target must not displace it
        self._deleted: OrderedDict[tuple[str, str, str], None] = OrderedDict()

    def __len__(self) -> int:
        return len(self._deleted)

    async def deleted(self, store: Store, channel: str, deleter: str, target: str) -> int:
        """``deleter`` deleted ``target``: overwritten now if stored; remembered either
        way (its late edits). How many rows were overwritten."""
        deleted = self._deleted
        key = (channel, target, deleter)
        deleted[key] = None
        deleted.move_to_end(key)
        while len(deleted) > self._kept:
            deleted.popitem(last=False)
        return await redact_deleted(store, channel, deleter, target)

    def pending(self, channel: str, message_id: str, sender_id: str, kind: str,
                text: str) -> str | None:  # fmt: skip
        """The target to overwrite now that this message was delivered: itself (it was
        deleted before it came), the target of a late edit of a deleted message by its
        deleter, else ``None``. Cheap: one look-up (two for an edit)."""
        deleted = self._deleted
        if not deleted:
            return None
        if (channel, message_id, sender_id) in deleted:
            return message_id
        if kind == "edit":
            target = split_typed(text)[0]
            if (channel, target, sender_id) in deleted:
                return target
        return None

    async def stored(self, store: Store, channel: str, sender_id: str, target: str) -> int:
        """A message :meth:`pending` named is stored: overwrite ``target`` and the
        deleter's edits of it; how many rows."""
        return await redact_deleted(store, channel, sender_id, target)

