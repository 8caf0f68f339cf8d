"""The node's worker inputs and the one queue they wait in.

Everything that reaches the SDS core goes through one worker task
(:mod:`app.node.runtime`): typed lines (:class:`Send`), lines left pending in the
outbox (:class:`Pending`), received envelopes (:class:`EnvelopeIn`), timer ticks, state
saves, calls to run between rounds (:class:`Call`), markers resolved after a commit
(:class:`Barrier`) and the stop marker. :class:`Inbox` is their FIFO; received envelopes
in it are bounded, so a transport delivering faster than the worker works waits
(backpressure) instead of filling memory.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Barrier",
    "Call",
    "EnvelopeIn",
    "Inbox",
    "Item",
    "Pending",
    "SaveState",
    "Send",
    "Stop",
    "Tick",
    "release_barriers",
]


@dataclass(slots=True)
class Send:
    """A typed line (:meth:`Node.post`); numbered by the worker (its outbox ``local_id``)."""

    channel: str
    content: bytes
    text: str
    kind: str
    future: asyncio.Future[int]
    local_id: int | None = None


@dataclass(slots=True)
class Pending:
    """A line already in the outbox (durable as pending), to be produced now."""

    channel: str
    content: bytes
    local_id: int


@dataclass(slots=True)
class EnvelopeIn:
    """An envelope as the transport (or the store peer) delivered it."""

    data: bytes


@dataclass(slots=True)
class Barrier:
    """Resolved once the round holding it has committed (the worker does not wait)."""

    future: asyncio.Future[None]


@dataclass(slots=True)
class Tick:
    """The protocol timer fired (or a probe of a full disk is due)."""


@dataclass(slots=True)
class SaveState:
    """The state-save timer fired: this round exports the cores' state."""


@dataclass(slots=True)
class Call:
    """A function to run inside the worker, between rounds (every earlier round committed)."""

    fn: Callable[[], Awaitable[Any]]
    future: asyncio.Future[Any]


@dataclass(slots=True)
class Stop:
    """The worker finishes what came before and ends."""


Item = Send | Pending | EnvelopeIn | Tick | SaveState | Call | Barrier | Stop


def release_barriers(items: Iterable[Item]) -> None:
    """Resolve the barriers among ``items`` (their round is over, committed or not)."""
    for item in items:
        if isinstance(item, Barrier) and not item.future.done():
            item.future.set_result(None)


class Inbox:
    """FIFO of worker inputs; received envelopes are bounded (their producer waits)."""

    def __init__(self, max_envelopes: int) -> None:
        self._items: deque[Item] = deque()
        self._wake = asyncio.Event()
        self._space = asyncio.Event()
        self._space.set()
        self._envelopes = 0
        self._max = max_envelopes

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: Item) -> None:
        self._items.append(item)
        self._wake.set()

    def put_front(self, items: Sequence[Item]) -> None:
        self._items.extendleft(reversed(items))
        self._wake.set()

    def requeue_envelopes(self, envelopes: Sequence[bytes]) -> None:
        """Envelopes to receive again first (a members channel's held messages)."""
        self._envelopes += len(envelopes)
        self.put_front([EnvelopeIn(e) for e in envelopes])

    def put_envelope_now(self, item: EnvelopeIn) -> None:
        """An envelope the node itself gives back (held ones): counted, never waits."""
        self._envelopes += 1
        self.put(item)

    async def put_envelope(self, item: EnvelopeIn) -> None:
        while self._envelopes >= self._max:  # bounded: woken when the worker takes some
            self._space.clear()
            await self._space.wait()
        self._envelopes += 1
        self.put(item)

    async def take(self, limit: int) -> list[Item]:
        while not self._items:  # bounded: woken by put
            self._wake.clear()
            await self._wake.wait()
        out: list[Item] = []
        while self._items and len(out) < limit:
            item = self._items.popleft()
            if isinstance(item, EnvelopeIn):
                self._envelopes -= 1
            out.append(item)
        if self._envelopes < self._max:
            self._space.set()
        return out
