"""A deleted message's text leaves the disk: its stored content becomes a tombstone.

``/delete`` sends a typed ``delete`` message naming its target. When a node
delivers one (or sends its own), :func:`redact_deleted` overwrites, in SQLite,
the content of the target **if the deleter is its author**, and of the author's
edits of it, with a tombstone: the author's name and kind kept, the text gone
(``messages.content``, the outbox copy of an own message; ``secure_delete``
zeroes the freed bytes). So search (Ctrl+F, Alt+F) no longer finds it and
``sdschat history`` shows ``message deleted``.

What stays: the encrypted envelope while the message is in the recent window
(members repair each other from it; it is dropped with the window), and copies
held by members who have not received the deletion yet, by a store peer, or
captured on the way. A deletion withdraws a line from view and from this disk;
it cannot unsay it.
"""

from __future__ import annotations

import json

from app.chat.content import decode_content
from app.chat.lines import CONTENT_VERSION, encode_content, split_typed, typed_text
from storage import Store

__all__ = ["TOMBSTONE_TEXT", "is_tombstone", "redact_deleted", "tombstone"]

TOMBSTONE_TEXT = "message deleted"

_MARK = b'"deleted":true'


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
        return 0  # not there (yet), or not the author's to delete
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
