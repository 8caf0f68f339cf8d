"""RelayClient: subscribe/publish, state reporting, backoff, reconnect after a relay restart."""

from __future__ import annotations

import asyncio
import random

import pytest
from net_helpers import CapturingLogger, Peer, T, channel, envelope, run, start_relay

from net.relay import RelayServer
from net.relay_client import ConnectionState, RelayClient, StateChange, backoff_delay
from net.relay_config import RelayConfig
from tests.procs import free_port

KEY = channel("general")


class Recorder:
    """Collects envelopes and state changes and lets a test await them (bounded)."""

    def __init__(self) -> None:
        self.envelopes: list[bytes] = []
        self.states: list[StateChange] = []
        self.changed = asyncio.Event()

    def on_envelope(self, env: bytes) -> None:
        self.envelopes.append(env)
        self.changed.set()

    def on_state(self, change: StateChange) -> None:
        self.states.append(change)
        self.changed.set()

    async def until(self, predicate: object, base_timeout: float = 5.0) -> None:
        assert callable(predicate)

        async def wait() -> None:
            while not predicate():  # bounded by the timeout
                self.changed.clear()
                await self.changed.wait()

        await asyncio.wait_for(wait(), T(base_timeout))

    def names(self) -> list[str]:
        return [s.state.value for s in self.states]


def fast_client(url: str, rec: Recorder, **kwargs: object) -> RelayClient:
    return RelayClient(
        url,
        [KEY.topic],
        rec.on_envelope,
        on_state=rec.on_state,
        rng=random.Random(7),
        backoff_base=0.05,
        backoff_max=0.2,
        connect_timeout=T(2),
        subscribe_timeout=T(2),
        **kwargs,  # type: ignore[arg-type]
    )


def test_subscribe_receive_publish_close() -> None:
    async def main() -> None:
        server, _ = await start_relay()
        try:
            rec = Recorder()
            client = fast_client(server.url, rec)
            assert await client.publish(b"x") is False  # not started
            client.start()
            assert await client.wait_connected(T(5))
            assert rec.names() == ["connecting", "connected"]
            other = await Peer.open(server.url)
            await other.subscribe([KEY.topic])
            env = envelope(key=KEY)
            await other.publish(env)
            await rec.until(lambda: rec.envelopes == [env])
            env2 = envelope(key=KEY)
            assert await client.publish(env2) is True
            assert (await other.recv_frame()).deliver.envelope == env2
            with pytest.raises(ValueError):
                await client.publish(b"\x00" * (300 * 1024))
            await client.close()
            assert client.state is ConnectionState.CLOSED
            assert rec.names()[-1] == "closed"
            assert await client.publish(env2) is False
            await client.close()  # idempotent
            await other.close()
        finally:
            await server.close()

    run(main())


def test_async_handler_and_handler_errors_do_not_stop_the_client() -> None:
    async def main() -> None:
        server, _ = await start_relay()
        got: list[bytes] = []
        done = asyncio.Event()

        async def on_envelope(env: bytes) -> None:
            await asyncio.sleep(0)
            if not got:
                got.append(env)
                raise RuntimeError("handler bug")
            got.append(env)
            done.set()

        try:
            client = RelayClient(server.url, [KEY.topic], on_envelope, rng=random.Random(1))
            client.start()
            assert await client.wait_connected(T(5))
            pub = await Peer.open(server.url)
            envs = [envelope(key=KEY), envelope(key=KEY)]
            for e in envs:
                await pub.publish(e)
            await asyncio.wait_for(done.wait(), T(5))
            assert got == envs
            assert client.connected
            await client.close()
            await pub.close()
        finally:
            await server.close()

    run(main())


def test_live_subscribe_and_unsubscribe() -> None:
    async def main() -> None:
        server, _ = await start_relay()
        try:
            rec = Recorder()
            client = fast_client(server.url, rec)
            client.start()
            assert await client.wait_connected(T(5))
            other = channel("other")
            assert await client.subscribe([other.topic]) is True  # confirmed by the relay
            assert await client.subscribe([other.topic]) is True  # nothing new: no-op
            assert client.topics == {KEY.topic, other.topic}
            pub = await Peer.open(server.url)
            env = envelope(key=other)
            await pub.publish(env)
            await rec.until(lambda: rec.envelopes == [env])
            assert await client.unsubscribe([other.topic]) is True  # confirmed
            assert await client.unsubscribe([other.topic]) is True  # nothing to do
            assert client.topics == {KEY.topic}
            await pub.publish(envelope(key=other))
            await pub.publish(last := envelope(key=KEY))
            await rec.until(lambda: len(rec.envelopes) == 2)
            assert rec.envelopes[1] == last  # nothing on the unsubscribed topic
            with pytest.raises(ValueError):
                await client.subscribe([b""])
            await client.close()
            assert await client.subscribe([channel("third").topic]) is False
            assert await client.unsubscribe([channel("third").topic]) is False
            await pub.close()
        finally:
            await server.close()

    run(main())


def test_unreachable_relay_reports_and_gives_up() -> None:
    async def main() -> None:
        rec = Recorder()
        client = fast_client(f"ws://127.0.0.1:{free_port()}", rec, max_attempts=3)
        client.start()
        await rec.until(lambda: client.state is ConnectionState.CLOSED)
        disconnected = [s for s in rec.states if s.state is ConnectionState.DISCONNECTED]
        assert len(disconnected) == 2
        for s in disconnected:
            assert s.reason is not None and s.reason.startswith("unreachable")
            assert s.retry_in is not None and 0 < s.retry_in <= 0.2
        assert [s.attempt for s in disconnected] == [1, 2]
        assert rec.states[-1].reason is not None
        assert rec.states[-1].reason.startswith("gave up after 3 attempts: unreachable")
        assert not await client.wait_connected(0.01)
        await client.close()

    run(main())


def test_relay_full_is_a_reason_not_a_crash() -> None:
    async def main() -> None:
        server, _ = await start_relay(max_clients=1)
        try:
            holder = await Peer.open(server.url)
            await holder.barrier()
            rec = Recorder()
            client = fast_client(server.url, rec)
            client.start()
            await rec.until(
                lambda: any(s.state is ConnectionState.DISCONNECTED for s in rec.states)
            )
            first = next(s for s in rec.states if s.state is ConnectionState.DISCONNECTED)
            assert first.reason is not None and "1013" in first.reason
            # room frees up: the client gets in by itself
            await holder.close()
            assert await client.wait_connected(T(5))
            await client.close()
        finally:
            await server.close()

    run(main())


def test_reconnects_and_resubscribes_after_relay_restart() -> None:
    async def main() -> None:
        cfg = RelayConfig(port=0, stats_interval=0, close_timeout=T(2))
        server = RelayServer(cfg, logger=CapturingLogger())
        await server.start()
        port = server.port
        rec_a, rec_b = Recorder(), Recorder()
        a, b = fast_client(server.url, rec_a), fast_client(server.url, rec_b)
        a.start()
        b.start()
        assert await a.wait_connected(T(5)) and await b.wait_connected(T(5))
        env1 = envelope(key=KEY)
        assert await a.publish(env1)
        await rec_b.until(lambda: rec_b.envelopes == [env1])

        await server.close()
        await rec_a.until(lambda: client_state(a) is not ConnectionState.CONNECTED)
        await rec_b.until(lambda: client_state(b) is not ConnectionState.CONNECTED)
        assert await a.publish(envelope(key=KEY)) is False  # no buffering inside
        lost = [s for s in rec_b.states if s.state is ConnectionState.DISCONNECTED]
        assert lost and lost[0].reason is not None and "1001" in lost[0].reason

        server2 = RelayServer(cfg.replace(port=port), logger=CapturingLogger())
        await server2.start()
        try:
            assert await a.wait_connected(T(10)) and await b.wait_connected(T(10))
            # CONNECTED means the relay confirmed the re-subscription
            env2 = envelope(key=KEY)
            assert await a.publish(env2)
            await rec_b.until(lambda: rec_b.envelopes == [env1, env2])
            assert rec_b.names().count("connected") == 2
            await a.close()
            await b.close()
        finally:
            await server2.close()

    run(main(), base_timeout=30)


def client_state(client: RelayClient) -> ConnectionState:
    return client.state


def test_backoff_delay() -> None:
    rng = random.Random(42)
    for attempt in range(40):
        ceiling = min(30.0, 0.5 * 2**attempt)
        d = backoff_delay(attempt, 0.5, 30.0, rng)
        assert ceiling / 2 <= d <= ceiling
    a = [backoff_delay(i, 0.5, 30.0, random.Random(3)) for i in range(5)]
    b = [backoff_delay(i, 0.5, 30.0, random.Random(3)) for i in range(5)]
    assert a == b  # injectable randomness: reproducible
    assert backoff_delay(10_000, 0.5, 30.0, rng) <= 30.0


def test_rejects_bad_arguments() -> None:
    with pytest.raises(ValueError):
        RelayClient("http://127.0.0.1:1", [], lambda e: None)
    # URLs that could never connect are refused by every client, not only by the CLI
    from app.node.transport import RelayTransport
    from net.store_client import StoreClient

    for bad in ("ws://127.0.0.1:99999", "ws://[::1", "ws://", "ws://h:0"):
        with pytest.raises(ValueError, match="relay URL"):
            RelayClient(bad, [], lambda e: None)
        with pytest.raises(ValueError, match="relay URL"):
            RelayTransport(bad)
        with pytest.raises(ValueError, match="store URL"):
            StoreClient(bad)
    with pytest.raises(ValueError):
        RelayClient("ws://127.0.0.1:1", [b"x" * 65], lambda e: None)
    with pytest.raises(ValueError):
        RelayClient("ws://127.0.0.1:1", [], lambda e: None, backoff_base=0)


def test_failure_reasons_are_never_empty() -> None:
    """A wss:// client against a plain ws:// relay fails with a bare
    ConnectionResetError(), whose str() is empty: the reason still says what happened."""
    from net.relay_client import _describe_failure

    assert _describe_failure(ConnectionResetError()) == "unreachable: ConnectionResetError"
    assert _describe_failure(ConnectionRefusedError(111, "Connection refused")) == (
        "unreachable: [Errno 111] Connection refused"
    )
    assert _describe_failure(TimeoutError()) == "unreachable: timed out"


def test_a_topic_subscribed_while_the_first_subscription_is_being_confirmed_is_subscribed() -> None:
    """A node that joins a channel while its connection is still being set up (a members
    channel joins at once: no passphrase to derive) must receive that channel's envelopes
    on this connection, not only after a reconnection."""

    async def main() -> None:
        server, _ = await start_relay()
        try:
            rec = Recorder()
            client = fast_client(server.url, rec)
            late = channel("joined while connecting")
            real = client._send_confirmed
            calls = 0

            async def send_confirmed(*args: object) -> bool:
                nonlocal calls
                calls += 1
                if calls == 1:  # the connect-time subscription: a join happens meanwhile
                    assert await client.subscribe([late.topic]) is False  # no connection yet
                return await real(*args)  # type: ignore[arg-type]

            client._send_confirmed = send_confirmed  # type: ignore[method-assign]
            client.start()
            assert await client.wait_connected(T(5))
            await rec.until(lambda: calls >= 2)  # the late topic went out on this connection
            pub = await Peer.open(server.url)
            env = envelope(key=late)
            await pub.publish(env)
            await rec.until(lambda: rec.envelopes == [env])
            await pub.close()
            await client.close()
        finally:
            await server.close()

    run(main())
