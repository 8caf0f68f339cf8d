"""The relay in-process: routing, isolation and every defence, over real websockets."""

from __future__ import annotations

import asyncio
import socket

import pytest
from net_helpers import Peer, T, channel, envelope, run, start_relay
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from net import envelope_pb2
from net.envelope import MAX_ENVELOPE_BYTES
from net.relay import TokenBucket
from net.relay_config import DEFAULT_MAX_FRAME, RelayConfig
from net.relay_frames import (
    encode_deliver,
    encode_error,
    encode_ping,
    encode_publish,
    encode_subscribe,
    encode_unsubscribe,
)

TOPIC_A = channel("a").topic
TOPIC_B = channel("b").topic


def kinds(frames: list[envelope_pb2.RelayFrame]) -> list[str]:
    return [str(f.WhichOneof("body")) for f in frames]


def error_codes(frames: list[envelope_pb2.RelayFrame]) -> list[str]:
    return [f.error.code for f in frames if f.WhichOneof("body") == "error"]


def test_forwards_to_other_subscribers_only() -> None:
    async def main() -> None:
        server, _ = await start_relay()
        try:
            a, b, c = [await Peer.open(server.url) for _ in range(3)]
            for p in (a, b, c):
                assert await p.subscribe([TOPIC_A]) == []
            env = envelope(key=channel("a"))
            await a.publish(env)
            for p in (b, c):
                frame = await p.recv_frame()
                assert frame.WhichOneof("body") == "deliver"
                assert frame.deliver.envelope == env  # byte for byte
            # the publisher gets nothing back: everything before its pong is empty
            assert await a.barrier() == []
            # a publisher need not be subscribed itself
            d = await Peer.open(server.url)
            await d.publish(env)
            assert await d.barrier() == []
            for p in (a, b, c):
                assert (await p.recv_frame()).deliver.envelope == env
            assert server.stats.published == 2
            assert server.stats.deliveries == 5
            for p in (a, b, c, d):
                await p.close()
        finally:
            await server.close()

    run(main())


def test_topic_isolation_and_unsubscribe() -> None:
    async def main() -> None:
        server, _ = await start_relay()
        try:
            pub, on_a, on_b = [await Peer.open(server.url) for _ in range(3)]
            await on_a.subscribe([TOPIC_A])
            await on_b.subscribe([TOPIC_B])
            env_a = envelope(key=channel("a"))
            env_b = envelope(key=channel("b"))
            await pub.publish(env_a)
            await pub.publish(env_b)
            await pub.barrier()
            assert [f.deliver.envelope for f in await on_a.barrier()] == [env_a]
            assert [f.deliver.envelope for f in await on_b.barrier()] == [env_b]
            # after unsubscribing, nothing more arrives
            await on_a.send(encode_unsubscribe([TOPIC_A]))
            await on_a.barrier()
            await pub.publish(env_a)
            await pub.barrier()
            assert await on_a.barrier() == []
            assert server.stats.unrouted == 1
            for p in (pub, on_a, on_b):
                await p.close()
        finally:
            await server.close()

    run(main())


def test_disconnected_subscriber_is_forgotten() -> None:
    async def main() -> None:
        server, log = await start_relay()
        try:
            pub, sub = await Peer.open(server.url), await Peer.open(server.url)
            await sub.subscribe([TOPIC_A])
            await sub.close()
            await log.wait_for("connection_closed")
            await pub.publish(envelope(key=channel("a")))
            await pub.barrier()
            assert server.stats.unrouted == 1
            assert server.connection_count == 1
            await pub.close()
        finally:
            await server.close()

    run(main())


def test_max_clients() -> None:
    async def main() -> None:
        server, log = await start_relay(max_clients=2)
        try:
            a, b = await Peer.open(server.url), await Peer.open(server.url)
            await a.barrier()
            await b.barrier()
            extra = await Peer.open(server.url)
            with pytest.raises(ConnectionClosed) as info:
                await extra.recv_frame()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1013
            assert server.stats.connections_rejected == 1
            assert log.events("connection_rejected")
            # the admitted ones still work; once one leaves, a new one is admitted
            await a.close()
            await log.wait_for("connection_closed")
            c = await Peer.open(server.url)
            await c.barrier()
            await b.close()
            await c.close()
        finally:
            await server.close()

    run(main())


def test_oversized_frame_closes_with_1009() -> None:
    async def main() -> None:
        server, log = await start_relay(max_frame=4096)
        try:
            peer = await Peer.open(server.url, max_size=None)
            await peer.send(b"\x00" * 5000)
            with pytest.raises(ConnectionClosed) as info:
                await peer.recv_frame()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1009
            await log.wait_for("connection_closed", lambda r: r["reason"] == "frame too large")
            assert server.stats.dropped["frame_too_large"] == 1
            # the relay is fine
            other = await Peer.open(server.url)
            await other.barrier()
            await other.close()
        finally:
            await server.close()

    run(main())


def test_oversized_envelope_inside_allowed_frame_gets_error() -> None:
    async def main() -> None:
        server, _ = await start_relay(max_frame=MAX_ENVELOPE_BYTES * 2)
        try:
            peer = await Peer.open(server.url)
            await peer.publish(b"\x00" * (MAX_ENVELOPE_BYTES + 1))
            assert error_codes(await peer.barrier()) == ["oversized"]
            assert server.stats.dropped["oversized"] == 1
            await peer.close()
        finally:
            await server.close()

    run(main())


def test_malformed_frames_get_errors_and_connection_survives() -> None:
    too_many = [bytes([i]) * 16 for i in range(70)]
    cases: list[tuple[bytes | str, str]] = [
        ("a text frame", "malformed"),
        (b"", "malformed"),
        (b"\xff\xff\xff", "malformed"),
        (envelope_pb2.RelayFrame(version=1).SerializeToString(), "malformed"),
        (
            envelope_pb2.RelayFrame(version=2, ping=envelope_pb2.Ping()).SerializeToString(),
            "unsupported_version",
        ),
        (
            envelope_pb2.RelayFrame(version=0, ping=envelope_pb2.Ping()).SerializeToString(),
            "malformed",
        ),
        (encode_publish(b"\xff\xff"), "malformed"),
        (encode_publish(b""), "bad_topic"),
        (encode_publish(envelope_pb2.Envelope(topic=b"x" * 65).SerializeToString()), "bad_topic"),
        (encode_subscribe([b""]), "bad_topic"),
        (encode_subscribe([b"x" * 65]), "bad_topic"),
        (encode_subscribe(too_many), "too_many_topics"),
        (encode_deliver(envelope()), "unexpected_frame"),
    ]

    async def main() -> None:
        server, _ = await start_relay()
        try:
            peer, sub = await Peer.open(server.url), await Peer.open(server.url)
            await sub.subscribe([TOPIC_A])
            for data, code in cases:
                await peer.send(data)
                assert error_codes(await peer.barrier()) == [code], (data, code)
            # Error and Pong frames from a client are ignored, never answered
            await peer.send(encode_error("x", "y"))
            await peer.send(
                envelope_pb2.RelayFrame(version=1, pong=envelope_pb2.Pong()).SerializeToString()
            )
            assert await peer.barrier() == []
            # still fully functional
            env = envelope(key=channel("a"))
            await peer.publish(env)
            assert (await sub.recv_frame()).deliver.envelope == env
            assert server.stats.dropped["malformed"] == 6
            await peer.close()
            await sub.close()
        finally:
            await server.close()

    run(main())


def test_rate_limit_errors_then_disconnects_abuser() -> None:
    async def main() -> None:
        server, log = await start_relay(rate=0.001, burst=5, abuse_strikes=10)
        try:
            peer = await Peer.open(server.url)
            sub = await Peer.open(server.url)
            await sub.subscribe([TOPIC_A])  # 2 of sub's 5 tokens
            env = envelope(key=channel("a"))
            for _ in range(8):
                await peer.publish(env)
            # 5 go through, the next 3 are refused with an Error each
            delivered = [await sub.recv_frame() for _ in range(5)]
            assert kinds(delivered) == ["deliver"] * 5
            frames = [await peer.recv_frame() for _ in range(3)]
            assert error_codes(frames) == ["rate_limited"] * 3
            assert server.stats.dropped["rate_limited"] == 3
            # keep going: after abuse_strikes more refusals the relay hangs up (1008)
            with pytest.raises(ConnectionClosed) as info:
                for _ in range(100):  # bounded; the close comes after ~8 more
                    await peer.publish(env)
                    await asyncio.sleep(0)
                for _ in range(200):
                    await peer.recv_frame()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1008
            await log.wait_for("connection_dropped", lambda r: r["reason"] == "abuse")
            assert server.stats.dropped["abuse"] == 1
            await sub.close()
        finally:
            await server.close()

    run(main())


def test_token_bucket() -> None:
    bucket = TokenBucket(rate=2.0, capacity=3, now=0.0)
    assert [bucket.take(0.0) for _ in range(4)] == [True, True, True, False]
    assert bucket.take(0.5) and not bucket.take(0.5)  # one token per 0.5 s
    assert [bucket.take(100.0) for _ in range(4)] == [True, True, True, False]  # capped


async def _non_reading_client(url: str, port: int) -> tuple[socket.socket, object]:
    """A websocket client with a tiny receive buffer that never reads."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), T(5))
    ws = await asyncio.wait_for(
        connect(url, sock=sock, proxy=None, compression=None, max_queue=1, max_size=None), T(5)
    )
    return sock, ws


def test_slow_consumer_is_disconnected_and_memory_stays_bounded() -> None:
    queue_limit = 4

    async def main() -> None:
        server, log = await start_relay(queue=queue_limit)
        try:
            _, slow = await _non_reading_client(server.url, server.port)
            await slow.send(encode_subscribe([TOPIC_A]))  # type: ignore[attr-defined]
            await log.wait_for("subscribed", lambda r: r["conn"] == 1)  # slow is conn 1
            fast = await Peer.open(server.url)
            await fast.subscribe([TOPIC_A])
            pub = await Peer.open(server.url)
            env = envelope(key=channel("a"), content=b"x" * 200_000)
            dropped = asyncio.create_task(
                log.wait_for("connection_dropped", lambda r: r["reason"] == "slow_consumer", 20)
            )
            sent = 0
            for _ in range(2_000):  # bounded; ~10-100 frames fill the socket buffers
                await pub.publish(env)
                sent += 1
                # lock-step with the fast subscriber, so only the slow one lags
                assert (await fast.recv_frame()).deliver.envelope == env
                assert max(server.queue_sizes()) <= queue_limit
                if dropped.done():
                    break
            record = await dropped
            assert record["close_code"] == 1008
            assert record["discarded_frames"] <= queue_limit
            assert server.stats.dropped["slow_consumer"] == 1
            await log.wait_for("connection_closed", lambda r: r["conn"] == record["conn"], 10)
            assert server.connection_count == 2
            # the slow client, once it reads, finds the connection closed
            with pytest.raises(ConnectionClosed):
                for _ in range(sent + 10):
                    await asyncio.wait_for(slow.recv(), T(10))  # type: ignore[attr-defined]
            # the fast subscriber is unaffected
            await pub.publish(envelope(key=channel("a")))
            assert (await fast.recv_frame()).WhichOneof("body") == "deliver"
            await pub.close()
            await fast.close()
        finally:
            await server.close()

    run(main(), base_timeout=40)


def test_close_disconnects_everyone_with_1001() -> None:
    async def main() -> None:
        server, log = await start_relay()
        peers = [await Peer.open(server.url) for _ in range(3)]
        for p in peers:
            await p.barrier()
        await server.close()
        for p in peers:
            with pytest.raises(ConnectionClosed) as info:
                await p.recv_frame()
            assert info.value.rcvd is not None and info.value.rcvd.code == 1001
        final = log.events("relay_stats")[-1]
        assert final["final"] is True
        assert final["connections_total"] == 3
        assert log.events("relay_stopped")
        await server.close()  # idempotent

    run(main())


def test_ping_pong_and_config_defaults() -> None:
    assert DEFAULT_MAX_FRAME == MAX_ENVELOPE_BYTES + 1024
    cfg = RelayConfig()
    assert cfg.host == "127.0.0.1" and cfg.port == 8765
    with pytest.raises(ValueError):
        RelayConfig(queue=0)
    with pytest.raises(ValueError):
        RelayConfig(rate=0)

    async def main() -> None:
        server, _ = await start_relay()
        try:
            peer = await Peer.open(server.url)
            await peer.send(encode_ping(2**64 - 1))
            frame = await peer.recv_frame()
            assert frame.pong.nonce == 2**64 - 1
            await peer.close()
        finally:
            await server.close()

    run(main())
