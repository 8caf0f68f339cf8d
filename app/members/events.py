"""The control messages of a members channel on the wire: framing, encoding, decoding.

A control message is an SDS content message whose content bytes are
:data:`CONTROL_MAGIC` followed by a serialised ``Control`` (``members.proto``):
a membership event (create, add, remove, set role, share key) or a key share.
The author of a control message is the envelope's authenticated sender; the
bytes claim no author of their own.

:func:`decode_control` never raises for bad bytes: it returns a
:class:`BadControl` with a stable ``reason`` so that the roster can count it.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Final

from app.members import members_pb2 as pb
from net.identity import PUBLIC_KEY_BYTES, sender_id_for

__all__ = [
    "CONTROL_MAGIC",
    "CONTROL_VERSION",
    "ENCRYPTED_MAGIC",
    "ROLE_ADMIN",
    "ROLE_MEMBER",
    "SHARE_KEY_BYTES",
    "BadControl",
    "MemberInfo",
    "channel_id_for",
    "decode_control",
    "decode_encrypted",
    "encode_add",
    "encode_create",
    "encode_encrypted",
    "encode_epoch_keys",
    "encode_key_share",
    "encode_rekey",
    "encode_remove",
    "encode_set_role",
    "encode_share_key",
    "is_control",
]

CONTROL_MAGIC: Final = b"\xffSM\x01"
"""First bytes of a control message's SDS content (0xFF never starts UTF-8 text)."""

CONTROL_VERSION: Final = 1
"""The ``Control.version`` this code writes and accepts."""

SHARE_KEY_BYTES: Final = 32
"""Length of an X25519 public key (the key shares are sealed to)."""

ROLE_MEMBER: Final = "member"
ROLE_ADMIN: Final = "admin"

_ROLE_NAMES: Final[dict[int, str]] = {pb.ROLE_UNSPECIFIED: ROLE_MEMBER, pb.ROLE_MEMBER: ROLE_MEMBER,
                      pb.ROLE_ADMIN: ROLE_ADMIN}  # fmt: skip
_ROLE_VALUES: Final = {ROLE_MEMBER: pb.ROLE_MEMBER, ROLE_ADMIN: pb.ROLE_ADMIN}

MAX_NAME_CHARS: Final = 64
"""Longest display name a member event may carry."""


@dataclass(frozen=True, slots=True)
class MemberInfo:
    """A member as an event names it: identity key, share key, display name."""

    identity_key: bytes
    share_key: bytes
    name: str

    @property
    def member_id(self) -> str:
        """The member's id: the sender id of its identity key."""
        return sender_id_for(self.identity_key)


@dataclass(frozen=True, slots=True)
class BadControl:
    """Control bytes that cannot be used; ``reason`` is stable, for counters."""

    reason: str
    detail: str = ""


def is_control(content: bytes) -> bool:
    """Whether SDS content bytes are a members-channel control message."""
    return content[: len(CONTROL_MAGIC)] == CONTROL_MAGIC


def _member_pb(m: MemberInfo) -> pb.Member:
    return pb.Member(identity_key=m.identity_key, share_key=m.share_key, name=m.name)


def _frame(msg: pb.Control) -> bytes:
    msg.version = CONTROL_VERSION
    return CONTROL_MAGIC + msg.SerializeToString()


def _check_member(m: MemberInfo) -> None:
    problem = _member_problem(m)
    if problem:
        raise ValueError(problem)


_CHANNEL_ID_LABEL: Final = b"sdschat-members-channel-v1"


def channel_id_for(creator_identity_key: bytes, nonce: bytes) -> bytes:
    """A members channel's id: ``sha256(label || creator's identity key || nonce)``."""
    return hashlib.sha256(_CHANNEL_ID_LABEL + creator_identity_key + nonce).digest()


def encode_create(channel: str, creator: MemberInfo, nonce: bytes) -> tuple[bytes, bytes]:
    """The first event of a members channel, made by its first admin: returns the
    channel id and the event's content."""
    _check_member(creator)
    if len(nonce) != 32:
        raise ValueError(f"a create nonce is 32 bytes, got {len(nonce)}")
    channel_id = channel_id_for(creator.identity_key, nonce)
    create = pb.Create(channel=channel, channel_id=channel_id, creator=_member_pb(creator),
                       nonce=nonce)  # fmt: skip
    return channel_id, _frame(pb.Control(create=create))


def encode_add(member: MemberInfo, *, invite_id: bytes = b"", role: str = ROLE_MEMBER) -> bytes:
    """An admin adds ``member`` (``invite_id``: the invite it redeemed, if any)."""
    _check_member(member)
    return _frame(pb.Control(add=pb.Add(member=_member_pb(member), invite_id=invite_id,
                                        role=_ROLE_VALUES[role])))  # fmt: skip


def _sealed(boxes: dict[str, bytes]) -> list[pb.SealedKey]:
    return [pb.SealedKey(recipient_id=rid, sealed=box) for rid, box in sorted(boxes.items())]


def encode_remove(member_id: str, epoch_keys: dict[str, bytes] | None = None, *,
                  epoch_nonce: bytes = b"", epoch_parts: int = 0) -> bytes:  # fmt: skip
    """An admin removes a member, or a member removes itself; ``epoch_keys``: the
    next outer key sealed to each remaining member (member id -> sealed box), or
    those not in the ``epoch_parts`` :func:`encode_epoch_keys` parts sent before
    it under ``epoch_nonce``."""
    return _frame(pb.Control(remove=pb.Remove(
        member_id=member_id, epoch_keys=_sealed(epoch_keys or {}),
        epoch_nonce=epoch_nonce, epoch_parts=epoch_parts)))  # fmt: skip


def encode_rekey(epoch_keys: dict[str, bytes], *, epoch_nonce: bytes = b"",
                 epoch_parts: int = 0) -> bytes:  # fmt: skip
    """An admin starts a new epoch: the next outer key sealed to each member (as in
    :func:`encode_remove`)."""
    return _frame(pb.Control(rekey=pb.Rekey(epoch_keys=_sealed(epoch_keys),
                                            epoch_nonce=epoch_nonce,
                                            epoch_parts=epoch_parts)))  # fmt: skip


def encode_epoch_keys(epoch_nonce: bytes, epoch_keys: dict[str, bytes]) -> bytes:
    """A part of the next epoch's sealed keys, sent before its remove or rekey."""
    return _frame(pb.Control(epoch_keys=pb.EpochKeys(epoch_nonce=epoch_nonce,
                                                     epoch_keys=_sealed(epoch_keys))))  # fmt: skip


ENCRYPTED_MAGIC: Final = b"\xffSE\x01"
"""First bytes of an ordinary message's content in a members channel (Megolm)."""


def encode_encrypted(session_id: str, megolm: bytes, span: bytes = b"") -> bytes:
    """The SDS content of a Megolm-encrypted message (``span``: its sender's span tag,
    app/members/cut.py)."""
    msg = pb.Encrypted(session_id=session_id, megolm=megolm, span=span)
    return ENCRYPTED_MAGIC + msg.SerializeToString()


def encrypted_span(content: bytes) -> bytes:
    """The span tag of :func:`encode_encrypted` content (empty if none or not one)."""
    msg = pb.Encrypted()
    try:
        msg.ParseFromString(content[len(ENCRYPTED_MAGIC) :])
    except Exception:
        return b""
    return bytes(msg.span)


def decode_encrypted(content: bytes) -> tuple[str, bytes] | None:
    """``(session_id, megolm bytes)`` of :func:`encode_encrypted` content, else ``None``."""
    if content[: len(ENCRYPTED_MAGIC)] != ENCRYPTED_MAGIC:
        return None
    msg = pb.Encrypted()
    try:
        msg.ParseFromString(content[len(ENCRYPTED_MAGIC) :])
    except Exception:
        return None
    if not msg.session_id or not msg.megolm:
        return None
    return msg.session_id, bytes(msg.megolm)


def encode_set_role(member_id: str, role: str) -> bytes:
    """An admin makes a member an admin (``"admin"``) or a plain member (``"member"``)."""
    return _frame(pb.Control(set_role=pb.SetRole(member_id=member_id, role=_ROLE_VALUES[role])))


def encode_share_key(share_key: bytes) -> bytes:
    """A member replaces its own share key."""
    if len(share_key) != SHARE_KEY_BYTES:
        raise ValueError(f"a share key is {SHARE_KEY_BYTES} bytes, got {len(share_key)}")
    return _frame(pb.Control(share_key=pb.ShareKey(share_key=share_key)))


def encode_key_share(session_id: str, first_index: int, sealed: dict[str, bytes]) -> bytes:
    """One sender's Megolm session key, sealed to each recipient (id -> sealed box)."""
    share = pb.KeyShare(session_id=session_id, first_index=first_index, keys=_sealed(sealed))
    return _frame(pb.Control(key_share=share))


def _member_problem(m: MemberInfo) -> str:
    if len(m.identity_key) != PUBLIC_KEY_BYTES:
        return f"identity key of {len(m.identity_key)} bytes"
    if len(m.share_key) != SHARE_KEY_BYTES:
        return f"share key of {len(m.share_key)} bytes"
    if not m.name or len(m.name) > MAX_NAME_CHARS or not m.name.isprintable():
        return "display name empty, too long or holding control characters"
    return ""


def _member(m: pb.Member) -> MemberInfo | BadControl:
    info = MemberInfo(identity_key=bytes(m.identity_key), share_key=bytes(m.share_key),
                      name=m.name)  # fmt: skip
    problem = _member_problem(info)
    return BadControl("malformed", problem) if problem else info


ControlBody = pb.Create | pb.Add | pb.Remove | pb.SetRole | pb.ShareKey | pb.KeyShare


def decode_control(content: bytes) -> pb.Control | BadControl:
    """Parse control bytes; a :class:`BadControl` (never an exception) for bad ones."""
    if not is_control(content):
        return BadControl("not_control")
    msg = pb.Control()
    try:
        msg.ParseFromString(content[len(CONTROL_MAGIC) :])
    except Exception:
        return BadControl("malformed", "not a Control message")
    if msg.version != CONTROL_VERSION:
        return BadControl("unsupported_version", f"version {msg.version}")
    body = msg.WhichOneof("body")
    if body is None:
        return BadControl("unknown_body")
    for member in _members_of(msg):
        checked = _member(member)
        if isinstance(checked, BadControl):
            return checked
    return msg


def _members_of(msg: pb.Control) -> list[pb.Member]:
    body = msg.WhichOneof("body")
    if body == "create":
        return [msg.create.creator]
    if body == "add":
        return [msg.add.member]
    return []


def member_info(m: pb.Member) -> MemberInfo:
    """A checked ``Member`` (from :func:`decode_control`) as a :class:`MemberInfo`."""
    return MemberInfo(identity_key=bytes(m.identity_key), share_key=bytes(m.share_key),
                      name=m.name)  # fmt: skip


def role_name(role: int) -> str:
    """``"admin"`` or ``"member"`` for a ``Role`` value (unknown values: member)."""
    return _ROLE_NAMES.get(role, ROLE_MEMBER)
