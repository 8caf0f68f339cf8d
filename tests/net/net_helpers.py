"""Shared helpers for the net/ tests: one timeout scale, an async runner, relay peers.

Every wait in these tests is bounded by :func:`T` (a base number of seconds
times ``SDSCHAT_TEST_TIMEOUT_SCALE``, default 1), so slow machines can stretch
them all at once.
"""

from __future__ import annotations

import asyncio
import io
from collections.abc import Awaitable, Callable, Coroutine, Iterable
from typing import Any, TypeVar

from websockets.asyncio.client import ClientConnection, connect

from net import envelope_pb2
from net.channel_key import TEST_KDF, ChannelKey, derive_channel_key
from net.envelope import seal
from net.identity import Identity
from net.relay import RelayServer
from net.relay_config import RelayConfig
from net.relay_frames import decode_frame, encode_ping, encode_publish, encode_subscribe
from net.relay_log import RelayLogger
from sds import sds_pb2
from sds.ids import message_id_for
from tests.procs import T

R = TypeVar("R")


def run(coro: Coroutine[Any, Any, R], base_timeout: float = 20.0) -> R:
    """Run ``coro`` in a fresh event loop, bounded by ``T(base_timeout)``."""

    async def bounded() -> R:
        return await asyncio.wait_for(coro, T(base_timeout))

    return asyncio.run(bounded())


def channel(name: str = "general", passphrase: str | None = "secret") -> ChannelKey:
    """A channel key derived with the cheap test KDF parameters."""
    return derive_channel_key(name, passphrase, params=TEST_KDF)


def sds_message(
    identity: Identity, content: bytes = b"hello", *, sender_id: str | None = None, n: int = 0
) -> bytes:
    """A serialised content SDS message from ``identity`` (or a forged ``sender_id``)."""
    return sds_pb2.SdsMessage(
        sender_id=identity.sender_id if sender_id is None else sender_id,
        message_id=sds_id(
            "general", identity.sender_id if sender_id is None else sender_id, 1_000 + n, content, n
        ),
        channel_id="general",
        lamport_timestamp=1_000 + n,
        content=content,
    ).SerializeToString()


def envelope(
    identity: Identity | None = None, key: ChannelKey | None = None, content: bytes = b"hello"
) -> bytes:
    """A valid sealed envelope (fresh identity and test channel by default)."""
    ident = identity if identity is not None else Identity.generate()
    return seal(sds_message(ident, content), ident, key if key is not None else channel())


class CapturingLogger(RelayLogger):
    """A relay logger that keeps every record and lets tests await events."""

    def __init__(self) -> None:
        super().__init__("json", io.StringIO(), level="debug")
        self.records: list[dict[str, Any]] = []
        self._changed: asyncio.Event | None = None

    def log(self, level: str, event: str, **fields: Any) -> None:
        self.records.append({"level": level, "event": event, **fields})
        if self._changed is not None:
            self._changed.set()

    def events(self, name: str) -> list[dict[str, Any]]:
        """Records of the event called ``name``, oldest first."""
        return [r for r in self.records if r["event"] == name]

    async def wait_for(
        self,
        name: str,
        predicate: Callable[[dict[str, Any]], bool] = lambda r: True,
        base_timeout: float = 5.0,
    ) -> dict[str, Any]:
        """Wait (bounded) for a record of event ``name`` matching ``predicate``."""
        if self._changed is None:
            self._changed = asyncio.Event()

        async def wait() -> dict[str, Any]:
            assert self._changed is not None
            while True:  # bounded by the timeout below
                for record in self.records:
                    if record["event"] == name and predicate(record):
                        return record
                self._changed.clear()
                await self._changed.wait()

        return await asyncio.wait_for(wait(), T(base_timeout))


def relay_test_config(**changes: Any) -> RelayConfig:
    """A relay config for tests: port 0, generous limits, no periodic stats."""
    base = RelayConfig(port=0, rate=10_000.0, burst=10_000, stats_interval=0, close_timeout=T(2))
    return base.replace(**changes)


async def start_relay(**changes: Any) -> tuple[RelayServer, CapturingLogger]:
    """Start an in-process relay on 127.0.0.1 with :func:`relay_test_config` changes."""
    log = CapturingLogger()
    server = RelayServer(relay_test_config(**changes), logger=log)
    await server.start()
    return server, log


class Peer:
    """A bare websocket client speaking relay frames, for precise relay tests."""

    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self._nonce = 0

    @classmethod
    async def open(cls, url: str, **kwargs: Any) -> Peer:
        """Connect to ``url`` (no proxy, no compression)."""
        ws = await asyncio.wait_for(
            connect(url, proxy=None, compression=None, open_timeout=None, **kwargs), T(5)
        )
        return cls(ws)

    async def close(self) -> None:
        """Close the connection (bounded)."""
        try:
            await asyncio.wait_for(self.ws.close(), T(5))
        except TimeoutError:
            self.ws.transport.abort()

    async def send(self, data: bytes | str) -> None:
        """Send one raw websocket message."""
        await asyncio.wait_for(self.ws.send(data), T(5))

    async def recv_frame(self, base_timeout: float = 5.0) -> envelope_pb2.RelayFrame:
        """Receive and decode the next frame (bounded)."""
        data = await asyncio.wait_for(self.ws.recv(), T(base_timeout))
        assert isinstance(data, bytes)
        return decode_frame(data)

    async def barrier(self) -> list[envelope_pb2.RelayFrame]:
        """Ping the relay and return every frame received before the matching Pong.

        The relay handles a connection's frames in order, so once this returns
        everything sent earlier on this connection has been processed.
        """
        self._nonce += 1
        nonce = self._nonce
        await self.send(encode_ping(nonce))
        before: list[envelope_pb2.RelayFrame] = []
        for _ in range(10_000):  # bounded: also by the per-frame timeout
            frame = await self.recv_frame()
            if frame.WhichOneof("body") == "pong" and frame.pong.nonce == nonce:
                return before
            before.append(frame)
        raise AssertionError("no pong after 10,000 frames")

    async def subscribe(self, topics: Iterable[bytes]) -> list[envelope_pb2.RelayFrame]:
        """Subscribe and wait until the relay has processed it."""
        await self.send(encode_subscribe(list(topics)))
        return await self.barrier()

    async def publish(self, envelope_bytes: bytes) -> None:
        """Send a Publish frame."""
        await self.send(encode_publish(envelope_bytes))


async def gather_bounded(*aws: Awaitable[Any], base_timeout: float = 10.0) -> list[Any]:
    """``asyncio.gather`` bounded by ``T(base_timeout)``."""
    return list(await asyncio.wait_for(asyncio.gather(*aws), T(base_timeout)))


def sds_id(channel: str, sender_id: str, lamport: int, content: bytes, n: int) -> str:
    """The verifiable sdschat id of a hand-made message (nonce ``n``): nodes check ids."""
    return message_id_for(channel, sender_id, lamport, content, n.to_bytes(8, "big"))
