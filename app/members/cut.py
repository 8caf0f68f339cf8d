"""A removal is a cut: exactly which of the removed member's messages stay accepted.

A ``remove`` (or ``leave``) carries a ``Cut``: the ids of the removed member's SDS
content messages that its author held when it removed (lines, key shares, file
segments, reactions, control messages: anything the member signed in the channel),
with their count and digest, inline or, when many, in signed ``Part`` records sent
before the removal (:func:`make_cut`). Once the removal is in the resolved chain,
every member accepts of that member only the messages of that span whose id is in
the cut, whatever their Lamport time, epoch, key or clock; a message already shown
that falls outside is marked refused (:class:`MessageRefused`, logged with the
message so that ``sdschat history`` prints the mark).

Why an id set: a message id is checked against its content by the SDS core
(``sds/ids.py``: a hash of the channel, author, Lamport time, nonce and content, or
of the content), so a removed member cannot make a new message under an id in its
cut (a second preimage of SHA-256), and the cut is signed by the removal's author.
The member's *spans* tell its memberships apart when it was removed and added
again: every line and control message of a members channel names the first 8
bytes of the hash of the event that admitted its author (``Encrypted.span``,
``Control.span``; absent: its first span), so lines of an earlier span are judged
by that span's cut even after a new add.

Pure: no I/O, no clock.
"""

from __future__ import annotations

import hashlib
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Final

from app.members import members_pb2 as pb

__all__ = [
    "CUT_CHUNK",
    "CUT_INLINE",
    "SPAN_BYTES",
    "MessageRefused",
    "cut_digest",
    "id_bytes",
    "make_cut",
    "span_tag",
]

CUT_LABEL: Final = b"sdschat-members-cut-v1"
SPAN_BYTES: Final = 8
"""Bytes of the admitting event's hash a message names as its author's span."""

CUT_INLINE: Final = 600
"""Cut ids carried in the removal itself (34 bytes each: 20 KB, beside up to 300
sealed epoch keys of 155 bytes in the 64 KiB of one SDS content)."""

CUT_CHUNK: Final = 1700
"""Cut ids per ``Part`` record (58 KB, under the 64 KiB content limit)."""


def id_bytes(message_id: str) -> bytes | None:
    """The 32 bytes of a 64-hex SDS message id (the only form the core accepts)."""
    if len(message_id) != 64:
        return None
    try:
        raw = bytes.fromhex(message_id)
    except ValueError:
        return None
    return raw if raw.hex() == message_id else None


def cut_digest(ids: Iterable[bytes]) -> bytes:
    """``sha256(CUT_LABEL || the sorted ids)``."""
    h = hashlib.sha256(CUT_LABEL)
    for raw in sorted(set(ids)):
        h.update(raw)
    return h.digest()


def span_tag(admitted_by: bytes) -> bytes:
    """What a message names as its author's span: the admitting event's hash, cut short."""
    return admitted_by[:SPAN_BYTES]


def make_cut(message_ids: Iterable[str]) -> tuple[pb.Cut, list[pb.Part]]:
    """The ``Cut`` for these held ids, and the ``Part`` bodies to sign and post before
    the removal when they do not fit in it."""
    ids = sorted({raw for raw in map(id_bytes, message_ids) if raw is not None})
    cut = pb.Cut(count=len(ids), digest=cut_digest(ids))
    if len(ids) <= CUT_INLINE:
        cut.ids.extend(ids)
        return cut, []
    nonce = os.urandom(16)
    parts = [pb.Part(nonce=nonce, ids=ids[i : i + CUT_CHUNK])
             for i in range(0, len(ids), CUT_CHUNK)]  # fmt: skip
    cut.parts_nonce = nonce
    cut.parts = len(parts)
    return cut, parts


@dataclass(slots=True)
class HeldCut:
    """A removal's cut as a member holds it: complete once its parts came and their
    count and digest match (a cut whose parts do not match accepts nothing)."""

    member_id: str
    author_id: str
    cut: pb.Cut
    ids: frozenset[bytes] = frozenset()
    complete: bool = False
    bad: bool = False
    parts_seen: set[bytes] = field(default_factory=set)

    def settle(self, parts: Iterable[pb.Part]) -> bool:
        """Merge the parts come so far; True when the cut just became complete."""
        if self.complete:
            return False
        collected = list(parts)
        if len(collected) < self.cut.parts:
            return False
        ids = {bytes(i) for i in self.cut.ids}
        for part in collected:
            ids.update(bytes(i) for i in part.ids)
        self.complete = True
        if len(ids) != self.cut.count or cut_digest(ids) != bytes(self.cut.digest):
            self.bad = True
            self.ids = frozenset()
        else:
            self.ids = frozenset(ids)
        return True

    def accepts(self, message_id: str) -> bool:
        raw = id_bytes(message_id)
        return self.complete and raw is not None and raw in self.ids


@dataclass(frozen=True, slots=True)
class MessageRefused:
    """A message of a removed member outside its removal's cut: not accepted, or (if it
    was shown before the removal arrived) marked refused. Logged in the event log with
    the message's id; ``sdschat history`` marks the line."""

    channel: str
    message_id: str
    sender_id: str
    reason: str
    removal: str
    """The hash (hex) of the removal whose cut leaves it out."""
