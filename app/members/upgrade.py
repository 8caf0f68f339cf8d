"""The upgrade of a members channel made before chaining: its genesis.

Such a channel's membership events were folded in ``(Lamport time, message id)``
order (:mod:`app.members.legacy`). On upgrade, its creator's node signs once a
``genesis``: the member list that fold gives (members, roles, share keys, names,
invites used), the channel's create (which proves the creator: the channel id is
the hash of its key and nonce) and a fresh epoch key sealed to every member. The
genesis is the root of the channel's chain; from then on every member folds the
chain, and an unchained membership event is refused (``unchained``). Members
removed before the upgrade are not in the genesis: what they send is refused
(``not_a_member``); what they sent before stays in the logs as it was.

Pure apart from the randomness of the epoch key.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Final

from app.members import members_pb2 as pb
from app.members.events import ROLE_ADMIN
from app.members.legacy import LegacyRoster

__all__ = ["GENESIS_CHUNK", "GENESIS_INLINE", "genesis_contents"]

GENESIS_INLINE: Final = 200
"""Members listed in the genesis itself (~140 bytes each, beside up to 300 epoch keys)."""

GENESIS_CHUNK: Final = 400
"""Members per ``Part`` record of a larger genesis."""


def genesis_contents(legacy: LegacyRoster, sign: Callable[[pb.Chained], bytes],
                     epoch_keys: dict[str, bytes], epoch_nonce: bytes,
                     epoch_parts: int) -> list[bytes]:  # fmt: skip
    """The signed parts (if any) and the genesis of the channel ``legacy`` folded, to post
    in order; ``sign`` signs a root or a part (no parents) as the creator."""
    create = legacy.create_body()
    if create is None:
        raise ValueError("no create to upgrade from")
    entries = [pb.RosterEntry(member=pb.Member(identity_key=m.info.identity_key,
                                               share_key=m.info.share_key, name=m.info.name),
                              role=pb.ROLE_ADMIN if m.role == ROLE_ADMIN else pb.ROLE_MEMBER)
               for _, m in sorted(legacy.members.items())]  # fmt: skip
    genesis = pb.Genesis(create=create, invites_used=sorted(legacy.invites_used()),
                         members_count=len(entries),
                         epoch_keys=[pb.SealedKey(recipient_id=rid, sealed=box)
                                     for rid, box in sorted(epoch_keys.items())],
                         epoch_nonce=epoch_nonce, epoch_parts=epoch_parts)  # fmt: skip
    parts: list[bytes] = []
    if len(entries) <= GENESIS_INLINE:
        genesis.members.extend(entries)
    else:
        nonce = os.urandom(16)
        for i in range(0, len(entries), GENESIS_CHUNK):
            part = pb.Part(nonce=nonce, members=entries[i : i + GENESIS_CHUNK])
            parts.append(sign(pb.Chained(part=part)))
        genesis.members_nonce = nonce
        genesis.members_parts = len(parts)
    return [*parts, sign(pb.Chained(genesis=genesis))]
