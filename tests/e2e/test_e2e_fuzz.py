"""Garbage straight at a node process, through a fake relay the test controls.

The real relay refuses anything that is not an envelope of a plausible size,
so to hit the node itself the test runs its own websocket server speaking the
relay frame protocol (Pong for Ping, Deliver of anything it likes). The node is
a real ``sdschat join --headless`` process. Hypothesis generates raw websocket
messages, undecodable frames and Deliver frames carrying garbage envelopes;
after all of them the node must still be alive, responsive, within a memory
bound, and deliver a genuine message.
"""

from __future__ import annotations

import asyncio
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from e2e_helpers import Cluster, Proc, T, free_port
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from websockets.asyncio.server import ServerConnection, serve

from app.chat.lines import encode_content
from net import envelope_pb2
from net.channel_key import derive_channel_key
from net.envelope import AAD_DOMAIN, ENVELOPE_VERSION, MAX_ENVELOPE_BYTES, seal
from net.identity import Identity
from net.relay_frames import decode_frame, encode_deliver, encode_pong
from sds import sds_pb2
from sds.ids import message_id_for

ROOM = derive_channel_key("room", None)


class FakeRelay:
    """Answers Pings (so the node's subscription is confirmed) and delivers what we say."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.port = free_port()
        self.conns: list[ServerConnection] = []
        self.server = self.call(self._start())

    def call(self, coro: Any, timeout: float = 10.0) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(T(timeout))

    async def _start(self) -> Any:
        return await serve(self._handle, "127.0.0.1", self.port, max_size=None)

    async def _handle(self, ws: ServerConnection) -> None:
        self.conns.append(ws)
        async for message in ws:
            try:
                frame = decode_frame(message if isinstance(message, bytes) else b"")
            except Exception:
                continue
            if frame.WhichOneof("body") == "ping":
                await ws.send(encode_pong(frame.ping.nonce))

    def deliver(self, frames: list[bytes]) -> None:
        async def send() -> None:
            for ws in list(self.conns):
                for f in frames:
                    await ws.send(f)

        self.call(send())

    def close(self) -> None:
        async def stop() -> None:
            self.server.close()
            await self.server.wait_closed()

        self.call(stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(T(5))
        self.loop.close()


class Target:
    def __init__(self, tmp: Path) -> None:
        self.relay = FakeRelay()
        self.cluster = Cluster(tmp)
        self.node: Proc = self.cluster.node("bob", f"ws://127.0.0.1:{self.relay.port}")
        self.node.wait_for(
            lambda: bool(self.node.select("connection", state="connected")),
            20,
            "connected to the fake relay",
        )
        self.node.wait_for(lambda: bool(self.node.select("channel")), 20, "joined")
        self.ident = Identity.generate()
        self.n = 0

    def genuine(self, text: str) -> bytes:
        self.n += 1
        content = encode_content(text, "tester")
        lamport = 1_000 + self.n
        # nodes check ids: the verifiable sdschat form (sds.ids)
        mid = message_id_for("room", self.ident.sender_id, lamport, content, os.urandom(8))
        sds = sds_pb2.SdsMessage(
            sender_id=self.ident.sender_id,
            message_id=mid,
            channel_id="room",
            lamport_timestamp=lamport,
            content=content,
        ).SerializeToString()
        return seal(sds, self.ident, ROOM)

    def ping_node(self, text: str) -> None:
        """Deliver a genuine message and wait until the node reports it: it is responsive."""
        self.relay.deliver([encode_deliver(self.genuine(text))])
        self.node.wait_for(
            lambda: bool(self.node.select("delivered", text=text)), 10, f"delivery of {text!r}"
        )

    def close(self) -> None:
        try:
            self.cluster.close()
        finally:
            self.relay.close()


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Target]:
    t = Target(tmp_path_factory.mktemp("fuzz"))
    try:
        yield t
    finally:
        t.close()


def _sealed_garbage(payload: bytes) -> bytes:
    nonce = os.urandom(12)
    aad = AAD_DOMAIN + ENVELOPE_VERSION.to_bytes(4, "big") + ROOM.topic
    ct = ChaCha20Poly1305(ROOM.key).encrypt(nonce, payload, aad)
    return envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=ROOM.topic, nonce=nonce, ciphertext=ct
    ).SerializeToString()


envelopes = st.one_of(
    st.binary(max_size=2048),
    st.builds(
        lambda v, n, c: envelope_pb2.Envelope(
            version=v, topic=ROOM.topic, nonce=n, ciphertext=c
        ).SerializeToString(),
        st.integers(0, 3),
        st.binary(max_size=16),
        st.binary(max_size=1024),
    ),
    st.builds(_sealed_garbage, st.binary(max_size=1024)),
    st.builds(
        lambda sds, pk, sig: _sealed_garbage(
            envelope_pb2.SealedPayload(
                sds=sds, sender_public_key=pk, signature=sig
            ).SerializeToString()
        ),
        st.binary(max_size=512),
        st.binary(min_size=32, max_size=32),
        st.binary(min_size=64, max_size=64),
    ),
)
frames = st.one_of(
    st.builds(encode_deliver, envelopes),
    st.binary(max_size=512),  # not a relay frame at all
)


def test_oversized_envelope_is_rejected_by_the_node(target: Target) -> None:
    big = envelope_pb2.Envelope(
        version=ENVELOPE_VERSION,
        topic=ROOM.topic,
        nonce=b"\x00" * 12,
        ciphertext=b"\x00" * MAX_ENVELOPE_BYTES,
    ).SerializeToString()
    assert len(big) > MAX_ENVELOPE_BYTES
    target.relay.deliver([encode_deliver(big)])
    target.node.wait_for(
        lambda: bool(target.node.select("rejected", reason="oversized")), 10, "oversized rejection"
    )
    target.ping_node("alive after oversized")


@settings(
    max_examples=60,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(batch=st.lists(frames, min_size=1, max_size=20))
def test_garbage_frames_never_crash_or_hang_the_node(target: Target, batch: list[bytes]) -> None:
    target.relay.deliver(batch)
    assert target.node.popen.poll() is None, target.node.tail()


def test_node_is_responsive_and_bounded_after_the_garbage(target: Target) -> None:
    before = target.node.rss_kib()
    target.relay.deliver([encode_deliver(b"\x0a\x00" * 1000)] * 500)
    target.ping_node("still here")
    after = target.node.rss_kib()
    assert after - before < 64 * 1024, f"RSS grew from {before} to {after} KiB"
    assert not target.node.select("error")

    def refused() -> int:  # each line's ``count`` is the node's running total per reason
        totals: dict[str, int] = {}
        for e in target.node.select("rejected"):
            totals[e["reason"]] = max(totals.get(e["reason"], 0), int(e.get("count", 1)))
        return sum(totals.values())

    # the garbage was seen, and refused: a few lines per reason at once, then one line
    # per window with the total (app/headless/rejected.py)
    target.node.wait_for(lambda: refused() >= 500, 60, "every garbage envelope refused")
    assert target.node.popen.poll() is None
