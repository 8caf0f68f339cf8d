"""Carried copies at the node: other members' envelopes riding on our own lines.

The core decides what rides (``sds.Channel.to_carry``: recent messages of the
channel that, at the channel's size and loss, some members probably lack). The
node attaches those messages' envelopes (``SealedPayload.carried``,
net/envelope.py), so a member that missed one gets it from a later line, without
asking and without a repair broadcast of its own. A carried envelope is the
author's, without what it carried itself (``without_carried``: re-encrypted with a
fresh nonce, the author's signature untouched), so carried envelopes never nest; it
is then a new envelope with a hash of its own, and a member that gets a line only
that way records that hash as its retrieval hint. On receipt every carried
envelope is opened and checked on its own, exactly as if it had arrived alone,
after the carrier passed its own checks.

A carried envelope we already hold (the usual case: most members got the
original) is recognised by its hash before any decryption, and the core is told
that one more copy of that message went over the wire: what keeps the number of
copies of a line near what the core asked for.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence

from net.channel_key import ChannelKey
from net.envelope import MAX_CARRIED, MAX_ENVELOPE_BYTES, EnvelopeError, without_carried

__all__ = ["BARE_KEPT", "CARRY_BUDGET_BYTES", "IDS_REMEMBERED", "Carrier"]

BARE_KEPT = 64
"""Carried envelopes kept ready (a line rides on up to 3 later ones)."""

IDS_REMEMBERED = 4096
"""Envelope hashes remembered with the message they carry (~0.5 MB): a carried
copy of any of them is recognised without opening it."""

CARRY_BUDGET_BYTES = MAX_ENVELOPE_BYTES // 4
"""Most bytes of carried envelopes on one of our envelopes (64 KiB): a line stays
well within the relay's envelope limit whatever rides on it."""


class Carrier:
    """Which envelope hashes name which message (to recognise a carried copy we
    hold without opening it), and which stored envelopes ride on a new line."""

    def __init__(self, capacity: int) -> None:
        self._capacity = max(1, capacity)
        self._ids: OrderedDict[bytes, tuple[str, str]] = OrderedDict()
        #: the envelopes we carried, without what they carried, by (channel, id)
        self._bare: OrderedDict[tuple[str, str], bytes] = OrderedDict()

    def remember(self, digest: bytes, channel: str, message_id: str) -> None:
        """``digest`` (an envelope hash) carries ``message_id`` of ``channel``."""
        ids = self._ids
        ids[digest] = (channel, message_id)
        ids.move_to_end(digest)
        while len(ids) > self._capacity:
            ids.popitem(last=False)

    def named(self, digest: bytes) -> tuple[str, str] | None:
        """The (channel, message id) an envelope hash we remember carries."""
        return self._ids.get(digest)

    def attach(
        self,
        channel: str,
        wanted: list[tuple[str, bytes]],
        envelopes: Mapping[tuple[str, str], bytes],
        keys: Sequence[ChannelKey],
    ) -> list[bytes]:
        """The envelopes to carry for ``wanted`` (the core's (id, SDS bytes) picks):
        each as stored, without what it carried itself (``without_carried``: carried
        envelopes never nest), at most :data:`~net.envelope.MAX_CARRIED` and
        :data:`CARRY_BUDGET_BYTES` in all. One we do not have in memory, or cannot
        open, does not ride (best effort: the repair rounds still cover it)."""
        out: list[bytes] = []
        budget = CARRY_BUDGET_BYTES
        bare = self._bare
        for mid, _sds in wanted:
            env = bare.get((channel, mid))
            if env is None:
                stored = envelopes.get((channel, mid))
                if stored is None:
                    continue
                try:
                    env = without_carried(stored, keys)
                except EnvelopeError:
                    continue
                bare[(channel, mid)] = env
                while len(bare) > BARE_KEPT:
                    bare.popitem(last=False)
            if len(env) > budget:
                continue
            out.append(env)
            budget -= len(env)
            if len(out) == MAX_CARRIED:
                break
        return out
