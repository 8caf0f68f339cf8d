"""Shared helpers for the SDS core unit tests: channels, crafted messages, a virtual network.

Everything runs in virtual time: ``now_ms`` values are plain integers chosen by
the test, and every channel gets its own seeded ``random.Random``.
"""

from __future__ import annotations

import random
from collections.abc import Iterable, Sequence
from typing import Any, TypeVar

import mmh3

import sds
from sds.bloom import BloomFilter

T = TypeVar("T")

CID = "chan"


def make_channel(
    sender: str = "a",
    channel: str = CID,
    now: int = 1_000,
    seed: int | None = None,
    config: sds.Config | None = None,
    **changes: Any,
) -> sds.Channel:
    """A channel with a deterministic rng; ``changes`` tweak the default Config."""
    cfg = config if config is not None else sds.Config()
    if changes:
        cfg = cfg.with_changes(**changes)
    rng = random.Random(seed if seed is not None else hash_seed(sender))
    return sds.Channel(channel, sender, cfg, now, rng)


def hash_seed(text: str) -> int:
    return mmh3.hash(text, 7, signed=False)


def entry(mid: str, hint: bytes | None = None, sender: str | None = None) -> sds.HistoryEntry:
    return sds.HistoryEntry(mid, hint, sender)


def msg(
    sender: str,
    mid: str,
    lamport: int | None,
    history: Iterable[str | sds.HistoryEntry] = (),
    content: bytes | None = b"x",
    channel: str = CID,
    bloom: bytes | None = None,
    repair: Iterable[sds.HistoryEntry] = (),
) -> bytes:
    """Wire bytes of a hand-made message (history given as ids or entries)."""
    hist = tuple(h if isinstance(h, sds.HistoryEntry) else sds.HistoryEntry(h) for h in history)
    return sds.encode(
        sds.Message(
            sender_id=sender,
            message_id=mid,
            channel_id=channel,
            lamport_timestamp=lamport,
            causal_history=hist,
            bloom_filter=bloom,
            content=content,
            repair_request=tuple(repair),
        )
    )


def bloom_with(
    *ids: str, capacity: int | None = None, error_rate: float | None = None
) -> bytes:
    """Wire bytes of a plain filter holding ``ids`` (sized as ``sds.Config()``'s)."""
    default = sds.Config()
    f = BloomFilter(
        capacity if capacity is not None else default.bloom_capacity,
        error_rate if error_rate is not None else default.bloom_error_rate,
    )
    for i in ids:
        f.add(i)
    return f.to_bytes()


def own_filter(ch: sds.Channel) -> BloomFilter:
    """The channel's current filter, read with the channel's own parameters."""
    return BloomFilter.from_bytes(
        ch.bloom_filter_bytes(), ch.config.bloom_capacity, ch.config.bloom_error_rate
    )


def of(events: Iterable[object], cls: type[T]) -> list[T]:
    return [e for e in events if isinstance(e, cls)]


def delivered_ids(events: Iterable[object]) -> list[str]:
    return [e.message_id for e in of(events, sds.MessageDelivered)]


def drops(
    events: Iterable[object], reason: sds.DropReason | None = None
) -> list[sds.MessageDropped]:
    return [e for e in of(events, sds.MessageDropped) if reason is None or e.reason == reason]


def sent_id(ch: sds.Channel, events: Sequence[object] | None = None) -> str:
    """Id of the last MessageSent among ``events`` (drained from ``ch`` if not given)."""
    evs = ch.events() if events is None else events
    return of(evs, sds.MessageSent)[-1].message_id


def run_timers(ch: sds.Channel, until: int) -> tuple[list[object], list[sds.Datagram]]:
    """Fire ``ch``'s timer at each deadline up to ``until``; collect events and datagrams."""
    events: list[object] = []
    grams: list[sds.Datagram] = []
    for _ in range(100_000):
        t = ch.get_timer()
        if t is None or t > until:
            break
        ch.handle_timer(t)
        events.extend(ch.events())
        grams.extend(ch.datagrams_to_send())
    else:  # pragma: no cover - a timer that never advances is a bug
        raise AssertionError("timer did not advance")
    return events, grams


class Net:
    """A lossless broadcast network in virtual time (optionally with blocked links).

    ``events[sender_id]`` accumulates every event of that channel.
    """

    def __init__(self, *channels: sds.Channel, now: int = 1_000) -> None:
        self.channels = list(channels)
        self.now = now
        self.events: dict[str, list[object]] = {ch.sender_id: [] for ch in channels}
        self.blocked: set[tuple[str, str]] = set()
        self.wire: list[tuple[str, bytes]] = []

    def by_id(self, sender: str) -> sds.Channel:
        return next(ch for ch in self.channels if ch.sender_id == sender)

    def send(self, sender: str, content: bytes) -> str:
        ch = self.by_id(sender)
        data = ch.send(content, self.now)
        evs = ch.events()
        self.events[sender].extend(evs)
        mid = sent_id(ch, evs)
        self.broadcast(ch, data)
        return mid

    def broadcast(self, src: sds.Channel, data: bytes) -> None:
        self.wire.append((src.sender_id, data))
        for ch in self.channels:
            if ch is src or (src.sender_id, ch.sender_id) in self.blocked:
                continue
            ch.receive(data, self.now)
        self.flush()

    def flush(self) -> None:
        for ch in self.channels:
            self.events[ch.sender_id].extend(ch.events())
            for d in ch.datagrams_to_send():
                self.broadcast(ch, d.data)

    def advance(self, until: int) -> None:
        """Run every timer due up to ``until`` (in deadline order), then set the clock."""
        for _ in range(100_000):
            due = [t for t in (ch.get_timer() for ch in self.channels) if t is not None]
            if not due or min(due) > until:
                break
            self.now = max(self.now, min(due))
            for ch in self.channels:
                t = ch.get_timer()
                if t is not None and t <= self.now:
                    ch.handle_timer(self.now)
            self.flush()
        self.now = max(self.now, until)

    def take(self, sender: str) -> list[object]:
        out, self.events[sender] = self.events[sender], []
        return out
