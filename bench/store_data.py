"""Realistic envelopes for the store benchmarks: real SDS cores, real sealing.

:func:`make_history` lets ``senders`` participants (default 2) write ``n``
content messages in turn on one channel, each receiving the others' messages
first (so causal histories interleave, as in a conversation), sealed with
their own Ed25519 identities and the channel key, with retrieval hints set as
the node sets them. With the default protocol settings every message carries
200 history entries and the 18.75 KB bloom filter: about 38 KB an envelope
once the history is full.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

import sds
from app.chat.lines import encode_content
from net.channel_key import ChannelKey
from net.envelope import envelope_hash, seal
from net.identity import Identity

__all__ = ["History", "make_history"]


@dataclass(frozen=True)
class History:
    """``envelopes[i]`` carries message ``ids[i]``; ``hashes[i]`` is its retrieval hint."""

    envelopes: list[bytes]
    hashes: list[bytes]
    ids: list[str]


def make_history(
    key: ChannelKey, n: int, *, senders: int = 2, config: sds.Config | None = None, seed: int = 7
) -> History:
    """``n`` sealed content messages on ``key.channel`` (see the module docstring)."""
    cfg = config if config is not None else sds.Config()
    idents = [Identity.generate() for _ in range(senders)]
    parts = [
        sds.Participant(i.sender_id, cfg, random.Random(seed + k)) for k, i in enumerate(idents)
    ]
    now = 1_700_000_000_000
    chans = [p.join(key.channel, now) for p in parts]
    out = History([], [], [])
    for i in range(n):
        now += 5
        k = i % senders
        ch = chans[k]
        data = ch.send(encode_content(f"message {i} from sender {k}", f"user{k}"), now)
        env = seal(data, idents[k], key)
        digest = envelope_hash(env)
        mid = next(ev.message_id for ev in ch.events() if isinstance(ev, sds.MessageSent))
        ch.set_retrieval_hint(mid, digest)
        ch.datagrams_to_send()
        for j, other in enumerate(chans):
            if j != k:
                other.receive(data, now, digest)
                other.events()
                other.datagrams_to_send()
        out.envelopes.append(env)
        out.hashes.append(digest)
        out.ids.append(mid)
    return out
