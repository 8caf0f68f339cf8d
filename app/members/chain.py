"""Chained membership events on the wire: signed by their author, named by hash, linked to
the events they build on.

A chained membership event is a control message (``CONTROL_MAGIC`` + ``Control``)
whose body is ``Signed``: the serialized ``Chained`` message and the author's Ed25519
signature over ``EVENT_LABEL || body``. ``Chained`` names the channel, the author's
identity key, and the **parents**: the hashes of the membership events its author knew
as heads when it signed. The event's hash is ``sha256(HASH_LABEL || body)`` (the
signature is not part of it: one event, however many valid signatures).

Because an event carries its own signature, it is kept in the members file and handed
to a newcomer without the SDS envelope that carried it (no bloom filter, no causal
history: a few hundred bytes). The SDS sender of a chained event must be its author
(:func:`decode_chained` is told who signed the envelope).

``Part`` records (a removal's cut ids, a genesis's members) are signed the same way,
have no parents, and are not membership events: the event they belong to names them
by nonce and checks them by count and digest.

Pure: no I/O, no clock. :func:`decode_chained` never raises for bad bytes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from app.members import members_pb2 as pb
from app.members.events import (
    CONTROL_MAGIC,
    CONTROL_VERSION,
    BadControl,
    MemberInfo,
    _member_problem,
    member_info,
)
from app.names import check_nick
from net.identity import PUBLIC_KEY_BYTES, Identity, sender_id_for, verify_signature

__all__ = [
    "CHAINED_BODIES",
    "EVENT_LABEL",
    "HASH_BYTES",
    "MAX_PARENTS",
    "ROOT_BODIES",
    "ChainEvent",
    "decode_chained",
    "event_hash",
    "sign_chained",
]

EVENT_LABEL: Final = b"sdschat-members-event-v1\0"
"""What an author's signature covers, before the ``Chained`` bytes."""

HASH_LABEL: Final = b"sdschat-members-event-hash-v1\0"
"""Domain of an event's hash."""

HASH_BYTES: Final = 32
MAX_PARENTS: Final = 16
"""Parents an event may name (an author names the heads it knows: a few)."""

ROOT_BODIES: Final = frozenset({"create", "genesis"})
"""The events that start a chain (no parents)."""

CHAINED_BODIES: Final = frozenset({"create", "genesis", "add", "remove", "leave", "set_role",
                                   "rekey", "share_key", "rename", "add_device"})  # fmt: skip
"""The membership events (a ``part`` is not one)."""

MAX_NAME_CHARS: Final = 64


def event_hash(body: bytes) -> bytes:
    """The hash naming the event (or part) whose ``Chained`` bytes are ``body``."""
    return hashlib.sha256(HASH_LABEL + body).digest()


@dataclass(frozen=True, slots=True)
class ChainEvent:
    """A decoded, signature-checked chained event or part."""

    hash: bytes
    author_id: str
    author_key: bytes
    parents: tuple[bytes, ...]
    body: str
    msg: pb.Chained
    content: bytes
    """The control content that carries it (``CONTROL_MAGIC`` + ``Control{signed}``)."""

    @property
    def target(self) -> str:
        """The member the event is about (its author for self events)."""
        m = self.msg
        if self.body == "create":
            return member_info(m.create.creator).member_id
        if self.body == "add":
            return member_info(m.add.member).member_id
        if self.body == "add_device":
            return member_info(m.add_device.device).member_id
        if self.body == "remove":
            return m.remove.member_id
        if self.body == "set_role":
            return m.set_role.member_id
        return self.author_id

    @property
    def short(self) -> str:
        """The hash's first 12 hex characters (for people)."""
        return self.hash.hex()[:12]


def sign_chained(identity: Identity, channel_id: bytes, parents: Sequence[bytes],
                 body: pb.Chained) -> bytes:  # fmt: skip
    """The control content of ``body`` (its oneof set) as ``identity`` signs it, naming
    ``parents`` (sorted, deduplicated) and ``channel_id``."""
    body.channel_id = channel_id
    body.author_key = identity.public_key
    del body.parents[:]
    body.parents.extend(sorted(set(parents)))
    raw = body.SerializeToString(deterministic=True)
    signed = pb.SignedEvent(body=raw, signature=identity.sign(EVENT_LABEL + raw))
    msg = pb.Control(version=CONTROL_VERSION, signed=signed)
    return CONTROL_MAGIC + msg.SerializeToString()


def decode_chained(control: pb.Control, content: bytes, channel_id: bytes | None,
                   signer_id: str | None = None) -> ChainEvent | BadControl:  # fmt: skip
    """Check a ``Control`` whose body is ``signed``: the signature, the channel, the
    parents and the body's own fields. ``signer_id``: who signed the SDS envelope that
    carried it (must be the author), ``None`` for a stored or handed-on record."""
    signed = control.signed
    chained = pb.Chained()
    try:
        chained.ParseFromString(signed.body)
    except Exception:
        return BadControl("malformed", "not a Chained message")
    key = bytes(chained.author_key)
    if len(key) != PUBLIC_KEY_BYTES or not verify_signature(key, bytes(signed.signature),
                                                            EVENT_LABEL + bytes(signed.body)):
        return BadControl("bad_signature")
    author = sender_id_for(key)
    if signer_id is not None and signer_id != author:
        return BadControl("wrong_author", "the envelope's signer is not the event's author")
    if channel_id is not None and bytes(chained.channel_id) != channel_id:
        return BadControl("wrong_channel")
    body = chained.WhichOneof("body")
    if body is None:
        return BadControl("unknown_body")
    parents = tuple(bytes(p) for p in chained.parents)
    if (len(parents) > MAX_PARENTS or any(len(p) != HASH_BYTES for p in parents)
            or len(set(parents)) != len(parents)):  # fmt: skip
        return BadControl("malformed", "bad parents")
    rootless = body in ROOT_BODIES or body == "part"
    if rootless and parents:
        return BadControl("malformed", f"a {body} names no parents")
    if not rootless and not parents:
        return BadControl("malformed", f"a {body} names the events it builds on")
    problem = _body_problem(chained, body)
    if problem:
        return BadControl("malformed", problem)
    return ChainEvent(event_hash(bytes(signed.body)), author, key, parents, body, chained,
                      content)  # fmt: skip


def _body_problem(m: pb.Chained, body: str) -> str:
    members: list[pb.Member] = []
    if body == "create":
        members = [m.create.creator]
        if len(m.create.nonce) != 32 or len(m.create.channel_id) != 32:
            return "a create names a 32-byte channel id and nonce"
    elif body == "genesis":
        members = [m.genesis.create.creator, *(e.member for e in m.genesis.members)]
    elif body == "add":
        members = [m.add.member]
    elif body == "add_device":
        members = [m.add_device.device]
        if len(m.add_device.root) != PUBLIC_KEY_BYTES or len(m.add_device.pop) != 64:
            return "a device names a 32-byte root key and a 64-byte proof"
        if bytes(m.add_device.device.identity_key) == bytes(m.add_device.root):
            return "a root is not its own device"
    elif body == "part":
        members = [e.member for e in m.part.members]
        if len(m.part.nonce) != 16:
            return "a part's nonce is 16 bytes"
    elif body == "share_key":
        if len(m.share_key.share_key) != 32:
            return "a share key is 32 bytes"
    elif body == "rename":
        try:
            if check_nick(m.rename.name) != m.rename.name:
                raise ValueError("surrounding spaces")
        except ValueError as exc:
            return f"not a name: {exc}"
    for member in members:
        info = MemberInfo(bytes(member.identity_key), bytes(member.share_key), member.name)
        problem = _member_problem(info)
        if problem:
            return problem
    return ""
