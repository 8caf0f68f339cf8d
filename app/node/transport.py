"""How a node's envelopes leave and arrive: a small :class:`Transport` protocol and its kinds.

A transport moves opaque envelope bytes (``net/envelope.py``) between the
members of a topic. The node never looks inside one for routing: the
envelope carries its topic. Implementations here:

* :class:`RelayTransport`: a websocket relay (``sdschat relay``) through
  :class:`net.relay_client.RelayClient` (reconnects with backoff and jitter).
* :class:`MemoryHub` / :class:`MemoryTransport`: an in-process broadcast bus for
  tests and for a UI under test (no sockets).
* :class:`LossyTransport`: wraps any transport and drops a fraction of the
  envelopes in each direction (``--drop-rate``, for demos and tests).

LAN gossip will be another implementation of the same protocol.

Contract the node relies on:

* :meth:`Transport.start` is called once, inside the running loop, with the
  node's ``on_envelope(envelope_bytes)`` (a coroutine function: awaiting it is
  the backpressure) and ``on_status(TransportStatus)`` (plain function, must not
  block).
* :meth:`Transport.publish` returns ``False`` when the envelope certainly did not
  leave (not connected); the transport never buffers: the node keeps what it
  must resend (durably) and publishes again after ``connected``.
* :meth:`Transport.subscribe` / :meth:`Transport.unsubscribe` may be called
  before :meth:`Transport.start`; subscriptions survive reconnections.
* A transport never delivers an envelope back to the connection that published
  it (the relay does not echo; the memory hub does the same).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from net.envelope import EnvelopeError, peek_topic
from net.relay_client import RelayClient, StateChange
from net.urls import check_ws_url

__all__ = [
    "EnvelopeCallback",
    "LossyTransport",
    "MemoryHub",
    "MemoryTransport",
    "RelayTransport",
    "StatusCallback",
    "Transport",
    "TransportStatus",
]


@dataclass(frozen=True, slots=True)
class TransportStatus:
    """A transport's connection state change.

    Attributes:
        state: ``"connecting"``, ``"connected"``, ``"disconnected"`` or ``"closed"``.
        reason: why (for ``disconnected``/``closed``), for people and logs.
        retry_in: seconds until the next connection attempt (``disconnected``).
        attempt: consecutive failed attempts so far.
    """

    state: str
    reason: str | None = None
    retry_in: float | None = None
    attempt: int = 0

    @property
    def connected(self) -> bool:
        """Whether :meth:`Transport.publish` can send now."""
        return self.state == "connected"


EnvelopeCallback = Callable[[bytes], Awaitable[None]]
"""``await on_envelope(envelope_bytes)`` for every envelope that arrives."""

StatusCallback = Callable[[TransportStatus], None]
"""``on_status(status)`` on every connection state change."""


@runtime_checkable
class Transport(Protocol):
    """What a node needs from a network (see the module docstring for the contract)."""

    @property
    def connected(self) -> bool:
        """Whether publishing works right now."""
        ...

    def start(self, on_envelope: EnvelopeCallback, on_status: StatusCallback) -> None:
        """Begin delivering envelopes and status changes (once, inside the loop)."""
        ...

    async def publish(self, envelope: bytes) -> bool:
        """Send one envelope to the other subscribers of its topic; False if it did not leave."""
        ...

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        """Receive the envelopes of ``topics`` from now on (and after reconnections)."""
        ...

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        """Stop receiving ``topics``."""
        ...

    async def close(self) -> None:
        """Disconnect for good (idempotent)."""
        ...


# --------------------------------------------------------------------------- relay


class RelayTransport:
    """A :class:`Transport` over one websocket relay (``sdschat relay``).

    Args:
        url: ``ws://host:port`` of the relay, or several (relays of one
            cluster): connected to one at a time, failing over to the next.
        rng: jitter source for reconnect backoff (seed it in tests).
        backoff_base, backoff_max: reconnect delays in seconds (see
            :func:`net.relay_client.backoff_delay`).
    """

    def __init__(
        self,
        url: str | Sequence[str],
        *,
        rng: random.Random | None = None,
        backoff_base: float = 0.5,
        backoff_max: float = 10.0,
    ) -> None:
        self.urls = (url,) if isinstance(url, str) else tuple(url)
        for u in self.urls:
            check_ws_url(u, "relay URL")
        self.url = self.urls[0]
        self._topics: set[bytes] = set()
        self._rng = rng
        self._backoff = (backoff_base, backoff_max)
        self._client: RelayClient | None = None

    @property
    def connected(self) -> bool:
        return self._client is not None and self._client.connected

    def start(self, on_envelope: EnvelopeCallback, on_status: StatusCallback) -> None:
        def on_state(change: StateChange) -> None:
            on_status(
                TransportStatus(change.state.value, change.reason, change.retry_in, change.attempt)
            )

        client = RelayClient(
            self.urls,
            sorted(self._topics),
            on_envelope,
            on_state=on_state,
            rng=self._rng,
            backoff_base=self._backoff[0],
            backoff_max=self._backoff[1],
        )
        self._client = client
        client.start()

    async def publish(self, envelope: bytes) -> bool:
        client = self._client
        if client is None:
            return False
        return await client.publish(envelope)

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        new = set(topics)
        self._topics |= new
        client = self._client
        if client is not None:
            await client.subscribe(new)

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        gone = set(topics)
        self._topics -= gone
        client = self._client
        if client is not None:
            await client.unsubscribe(gone)

    async def close(self) -> None:
        client = self._client
        if client is not None:
            await client.close()


# --------------------------------------------------------------------------- memory


class MemoryHub:
    """An in-process broadcast bus: every :class:`MemoryTransport` of a topic hears the others.

    Delivery is asynchronous (each receiver has its own FIFO task) and in
    publish order per receiver; nothing is lost unless a :class:`LossyTransport`
    wraps an endpoint. ``hub.online = False`` disconnects everyone (status
    ``disconnected``) until set back with :meth:`set_online`.
    """

    def __init__(self) -> None:
        self._members: list[MemoryTransport] = []
        self.online = True
        self.published = 0

    def transport(self) -> MemoryTransport:
        """A new endpoint on this hub."""
        t = MemoryTransport(self)
        self._members.append(t)
        return t

    def set_online(self, online: bool) -> None:
        """Take the whole bus down (or bring it back): members see the status change."""
        self.online = online
        for member in self._members:
            member._notify()

    def _broadcast(self, sender: MemoryTransport, envelope: bytes) -> None:
        try:
            topic = peek_topic(envelope)
        except EnvelopeError:
            return
        self.published += 1
        for member in self._members:
            if member is not sender and topic in member.topics and member.is_started:
                member._inbox.put_nowait(envelope)


class MemoryTransport:
    """One endpoint of a :class:`MemoryHub` (see there)."""

    def __init__(self, hub: MemoryHub) -> None:
        self._hub = hub
        self.topics: set[bytes] = set()
        self._inbox: asyncio.Queue[bytes] = asyncio.Queue()
        self._task: asyncio.Task[None] | None = None
        self._on_status: StatusCallback | None = None
        self._closed = False
        self.sent: list[bytes] = []

    @property
    def is_started(self) -> bool:
        """Started and not closed."""
        return self._task is not None and not self._closed

    @property
    def connected(self) -> bool:
        return self.is_started and self._hub.online

    def start(self, on_envelope: EnvelopeCallback, on_status: StatusCallback) -> None:
        self._on_status = on_status
        self._task = asyncio.create_task(self._pump(on_envelope), name="memory-transport")
        self._notify()

    def _notify(self) -> None:
        if self._on_status is None:
            return
        if self._closed:
            self._on_status(TransportStatus("closed", "closed by the application"))
        elif self._hub.online:
            self._on_status(TransportStatus("connected"))
        else:
            self._on_status(TransportStatus("disconnected", "hub offline", None, 1))

    async def _pump(self, on_envelope: EnvelopeCallback) -> None:
        while True:  # ends when cancelled by close()
            envelope = await self._inbox.get()
            await on_envelope(envelope)

    async def publish(self, envelope: bytes) -> bool:
        if not self.connected:
            return False
        self.sent.append(envelope)
        self._hub._broadcast(self, envelope)
        return True

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        self.topics |= set(topics)

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        self.topics -= set(topics)

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        task = self._task
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        self._notify()


# --------------------------------------------------------------------------- loss


class LossyTransport:
    """Drops a fraction ``rate`` of envelopes in each direction (for demos and tests only).

    A dropped outgoing envelope is reported as sent (``publish`` returns True):
    exactly what a lossy network looks like to the sender. ``dropped_out`` and
    ``dropped_in`` count the losses.
    """

    def __init__(self, inner: Transport, rate: float, rng: random.Random | None = None) -> None:
        if not 0.0 <= rate < 1.0:
            raise ValueError(f"drop rate must be in [0, 1), got {rate}")
        self.inner = inner
        self.rate = rate
        self._rng = rng if rng is not None else random.Random()
        self.dropped_out = 0
        self.dropped_in = 0

    @property
    def connected(self) -> bool:
        return self.inner.connected

    def start(self, on_envelope: EnvelopeCallback, on_status: StatusCallback) -> None:
        async def maybe_deliver(envelope: bytes) -> None:
            if self._rng.random() < self.rate:
                self.dropped_in += 1
                return
            await on_envelope(envelope)

        self.inner.start(maybe_deliver, on_status)

    async def publish(self, envelope: bytes) -> bool:
        if not self.inner.connected:
            return False
        if self._rng.random() < self.rate:
            self.dropped_out += 1
            return True
        return await self.inner.publish(envelope)

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        await self.inner.subscribe(topics)

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        await self.inner.unsubscribe(topics)

    async def close(self) -> None:
        await self.inner.close()
