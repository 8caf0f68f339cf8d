"""One round of the node's worker: what its core calls produced, to commit and then publish.

The worker (:mod:`app.node.runtime`) makes a :class:`Round` for the items it took, and
every part that handles a core call writes into it: the storage rows of the round's
ONE transaction (``batch``), the events to emit once it committed, the envelopes to
publish after them, and the look-ups the core asked for (``missing``,
``repair_needed``, ``need_envelope``), which :meth:`Effects.follow_ups
<app.node.effects.Effects.follow_ups>` answers before the commit. Nothing here does I/O.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from app.node.events import Delivered, Lost, NodeEvent, Rejected
from app.node.inbox import Send
from storage import Batch

__all__ = ["Receiving", "Round", "coalesce_lost", "reject"]


@dataclass(slots=True)
class Receiving:
    """The envelope whose SDS bytes the core is processing right now."""

    hash: bytes
    envelope: bytes
    sds_bytes: bytes
    consumed: bool = False  # delivered at once: its envelope went with the message
    settled: bool = False  # sync, ephemeral or dropped: nothing will wait for it
    plain: bytes | None = None  # a members channel's content as decrypted for the core


@dataclass(slots=True)
class Round:
    """What one round produced, to commit and then publish."""

    batch: Batch = field(default_factory=Batch)
    events: list[NodeEvent] = field(default_factory=list)
    delivered: list[tuple[str, str, Delivered]] = field(default_factory=list)
    own_new: list[tuple[str, str, bytes]] = field(default_factory=list)
    publish: list[tuple[str, str | None, bytes]] = field(default_factory=list)
    need_envelope: list[tuple[str, str, str]] = field(default_factory=list)
    missing: dict[str, set[str]] = field(default_factory=dict)
    repair_needed: dict[str, set[str]] = field(default_factory=dict)
    local_id: int | None = None
    typed_at: int | None = None  # the line being produced is new: recorded in one step
    typed: list[Send] = field(default_factory=list)  # futures resolved after the commit
    current: Receiving | None = None  # the envelope being received
    core_called: bool = False
    received: list[bytes] = field(default_factory=list)  # envelope hashes taken in
    # members channels' read marks at this round's state save: their keys go once it
    # is committed (GroupKeys.read_marks / forget_read)
    read_marks: dict[str, dict[tuple[str, str], int]] = field(default_factory=dict)


def reject(counters: Counter[str], out: Round, reason: str, channel: str | None,
           detail: str) -> None:  # fmt: skip
    """Count a refused input by ``reason`` and report it (:class:`Rejected`) in ``out``."""
    key = f"rejected_{reason}"
    counters[key] += 1
    out.events.append(Rejected(reason, channel, detail, counters[key]))


def coalesce_lost(events: list[NodeEvent]) -> list[NodeEvent]:
    """One :class:`Lost` per channel per round, at the place of its first one, listing
    every id given up in the round (the core reports them one by one)."""
    firsts: dict[str, int] = {}
    ids: dict[str, list[str]] = {}
    waiting: dict[str, dict[str, None]] = {}
    out: list[NodeEvent] = []
    for ev in events:
        if not isinstance(ev, Lost):
            out.append(ev)
            continue
        if ev.channel not in firsts:
            firsts[ev.channel] = len(out)
            out.append(ev)
            ids[ev.channel] = []
            waiting[ev.channel] = {}
        ids[ev.channel].extend(ev.message_ids or (ev.message_id,))
        waiting[ev.channel].update(dict.fromkeys(ev.waiting))
    for ch, at in firsts.items():
        first = out[at]
        assert isinstance(first, Lost)
        if len(ids[ch]) > 1:
            out[at] = Lost(ch, first.message_id, tuple(waiting[ch]), tuple(ids[ch]), first.ts)
    return out
