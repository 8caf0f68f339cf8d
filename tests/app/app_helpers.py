"""Shared helpers for the app/ tests: one timeout scale, nodes on an in-memory hub.

Every wait is bounded by :func:`T` (base seconds times ``SDSCHAT_TEST_TIMEOUT_SCALE``).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import sds
from app.node.events import Delivered, NodeEvent, OwnMessage, Rejected
from app.node.runtime import Node, NodeOptions
from app.node.transport import LossyTransport, MemoryHub, Transport
from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key
from tests.procs import T

R = TypeVar("R")

#: Protocol timings for in-process tests: every period is a few hundred ms.
FAST = sds.Config.fast(100)


def run(coro: Coroutine[Any, Any, R], base_timeout: float = 30.0) -> R:
    """Run ``coro`` in a fresh loop, bounded by ``T(base_timeout)``."""

    async def bounded() -> R:
        return await asyncio.wait_for(coro, T(base_timeout))

    return asyncio.run(bounded())


def key(channel: str = "general", passphrase: str | None = "secret") -> ChannelKey:
    """A channel key with the cheap test KDF."""
    return derive_channel_key(channel, passphrase, params=TEST_KDF)


async def wait_until(cond: Callable[[], bool], base_timeout: float = 10.0, what: str = "") -> None:
    """Poll ``cond`` every 10 ms until true; AssertionError after ``T(base_timeout)``."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + T(base_timeout)
    while not cond():  # bounded by the deadline
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what or cond}")
        await asyncio.sleep(0.01)


@dataclass
class Harness:
    """A node with the events it emitted."""

    node: Node
    data_dir: Path
    events: list[NodeEvent] = field(default_factory=list)

    def delivered(self, channel: str = "general") -> list[Delivered]:
        return [e for e in self.events if isinstance(e, Delivered) and e.channel == channel]

    def own(self, state: str) -> list[OwnMessage]:
        return [e for e in self.events if isinstance(e, OwnMessage) and e.state == state]

    def rejected(self, reason: str) -> list[Rejected]:
        return [e for e in self.events if isinstance(e, Rejected) and e.reason == reason]

    def texts(self, channel: str = "general") -> list[str]:
        return [e.text for e in self.delivered(channel)]


def options(config: sds.Config = FAST, **changes: Any) -> NodeOptions:
    base: dict[str, Any] = {"config": config, "kdf": TEST_KDF, "rng": random.Random(7)}
    base.update(changes)
    return NodeOptions(**base)


async def start_node(
    data_dir: Path,
    hub: MemoryHub | None = None,
    *,
    name: str = "n",
    channels: tuple[str, ...] = ("general",),
    passphrase: str | None = "secret",
    drop: float = 0.0,
    seed: int = 0,
    transport: Transport | None = None,
    **opts: Any,
) -> Harness:
    """Open, start and join a node on ``hub``; its events are recorded."""
    if transport is None:
        assert hub is not None
        transport = hub.transport()
        if drop:
            transport = LossyTransport(transport, drop, random.Random(seed))
    # a seed of its own per node: with one seed for all, every node drew the same id nonces,
    # and two members' messages shared their first 16 hex digits (a /save ID prefix of 10
    # named both; which ones depended on timing, since sync jitter draws from it too)
    opts.setdefault("rng", random.Random(f"7:{name}:{data_dir.name}"))
    node = await Node.open(data_dir, transport, name=name, options=options(**opts))
    h = Harness(node, data_dir)
    node.subscribe(h.events.append)
    try:
        await node.start()
        for ch in channels:
            await node.join(ch, passphrase, key=key(ch, passphrase))
    except BaseException:
        await node.close()  # a failed start must not leave the database open
        raise
    return h


async def crash(node: Node) -> None:
    """Stop ``node`` the way ``kill -9`` would: no final state save, nothing flushed.

    The worker and timers stop where they are, the transport is dropped and the
    store is closed without the node writing anything more.
    """
    node._closing = True
    node._cancel_timers()
    if node._worker is not None:
        node._worker.cancel()
        with contextlib.suppress(asyncio.CancelledError, Exception):
            await node._worker
    with contextlib.suppress(Exception):
        await node.transport.close()
    node._closed = True
    await node.store.close()


class DeafTransport:
    """Publishes, never receives: a member the others hear (its periodic syncs) who
    never gets, so never acknowledges, what they send (their lines then fail instead of
    waiting for someone to be heard, app/node/unheard.py)."""

    def __init__(self, inner: Transport) -> None:
        self.inner = inner

    @property
    def connected(self) -> bool:
        return self.inner.connected

    def start(self, on_envelope: Any, on_status: Any) -> None:
        async def drop(envelope: bytes) -> None:
            return None

        self.inner.start(drop, on_status)

    async def publish(self, envelope: bytes) -> bool:
        return await self.inner.publish(envelope)

    async def subscribe(self, topics: Any) -> None:
        await self.inner.subscribe(topics)

    async def unsubscribe(self, topics: Any) -> None:
        await self.inner.unsubscribe(topics)

    async def close(self) -> None:
        await self.inner.close()


async def start_deaf_listener(data_dir: Path, hub: MemoryHub, **opts: Any) -> Harness:
    """A node on ``hub`` that is heard in #general (it said a line) but hears nothing."""
    h = await start_node(data_dir, transport=DeafTransport(hub.transport()), name="deaf", **opts)
    await h.node.send("general", "I am here but hear nothing")
    return h
