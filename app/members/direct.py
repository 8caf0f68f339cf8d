"""Direct messages: a members channel of two, opened through a channel both are in.

``/msg bob hi`` in members channel #team: alice's node creates a members channel
of two named :func:`direct_name` (the same name at both members, derived from
their two ids), with both as admins, and posts in #team a ``direct_invite``
control message for bob: the new channel's outer key and its control history,
sealed to bob's share key (:func:`seal_direct`). Bob's node opens it
(:func:`open_direct`), checks the history (a create by the inviter, an add of
bob), saves the keys and joins. From then on the conversation is an ordinary
members channel: end-to-end encrypted with Megolm sessions shared between the
two, reliable by SDS, kept in SQLite, listed with the channels.

Two members opening a conversation at the same moment make two channels of the
same name; each keeps the one whose channel id is smaller (:func:`prefer`), so
both end in the same one.
"""

from __future__ import annotations

import hashlib

from nacl.public import PublicKey, SealedBox

from app.members import members_pb2 as pb
from app.members.events import CONTROL_VERSION, _frame

__all__ = ["DIRECT_PREFIX", "DirectOffer", "direct_name", "encode_direct_invite",
           "open_direct", "prefer", "seal_direct"]  # fmt: skip

DIRECT_PREFIX = "dm-"


def direct_name(id_a: str, id_b: str) -> str:
    """The channel name of the conversation between two members (order-free)."""
    low, high = sorted((id_a, id_b))
    return DIRECT_PREFIX + hashlib.sha256(f"{low}:{high}".encode()).hexdigest()[:12]


def prefer(channel_id_a: bytes, channel_id_b: bytes) -> bytes:
    """Of two channels of one conversation, the one both members keep."""
    return min(channel_id_a, channel_id_b)


def seal_direct(recipient_share_key: bytes, channel: str, channel_id: bytes,
                epoch_keys: list[bytes], controls: list[bytes]) -> bytes:  # fmt: skip
    """The sealed ``DirectChannel`` for the recipient (``controls``: the channel's
    membership records)."""
    plain = pb.DirectChannel(channel=channel, channel_id=channel_id, epoch_keys=epoch_keys,
                             controls=controls).SerializeToString()  # fmt: skip
    return bytes(SealedBox(PublicKey(recipient_share_key)).encrypt(plain))


def encode_direct_invite(recipient_id: str, sealed: bytes) -> bytes:
    """The control content offering ``recipient_id`` a direct channel."""
    assert CONTROL_VERSION == 1
    return _frame(pb.Control(direct_invite=pb.DirectInvite(recipient_id=recipient_id,
                                                           sealed=sealed)))  # fmt: skip


class DirectOffer:
    """A direct channel offered to us: its name, id, outer keys and membership records
    (``Record`` bytes, :meth:`MembersChannel.membership_records`: each event signed by
    its author, checked when imported)."""

    def __init__(self, channel: str, channel_id: bytes, epoch_keys: list[bytes],
                 records: list[bytes]) -> None:  # fmt: skip
        self.channel = channel
        self.channel_id = channel_id
        self.epoch_keys = epoch_keys
        self.records = records


def open_direct(plain: bytes, inviter_id: str, own_id: str) -> DirectOffer | str:
    """Check an opened ``DirectChannel``; a reason string when it cannot be used.

    The channel's name must be the two members' :func:`direct_name`; the roster
    check (a create by the inviter, an add of us, every event signed by its author)
    is the caller's, as for an invite.
    """
    msg = pb.DirectChannel()
    try:
        msg.ParseFromString(plain)
    except Exception:
        return "malformed"
    if msg.channel != direct_name(inviter_id, own_id):
        return "wrong_name"
    keys = [bytes(k) for k in msg.epoch_keys]
    if not keys or any(len(k) != 32 for k in keys) or len(msg.channel_id) != 32:
        return "malformed"
    return DirectOffer(msg.channel, bytes(msg.channel_id), keys, [bytes(c) for c in msg.controls])
