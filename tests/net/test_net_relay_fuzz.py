"""Hypothesis-generated garbage at a live relay: no crash, no hang, bounded memory.

The relay runs in its own thread and event loop; the fuzzing client is a
synchronous websockets client, so every example is a plain blocking exchange
(each receive bounded by the test timeout).
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from net_helpers import CapturingLogger, T, channel, envelope, relay_test_config
from websockets.sync.client import ClientConnection, connect

from net import envelope_pb2
from net.relay import RelayServer
from net.relay_frames import decode_frame, encode_ping, encode_publish, encode_subscribe

QUEUE = 16


@dataclass
class RelayThread:
    server: RelayServer
    loop: asyncio.AbstractEventLoop
    thread: threading.Thread
    stop: asyncio.Event

    @property
    def url(self) -> str:
        return self.server.url

    def call(self, fn: object) -> object:
        """Run ``fn()`` on the relay's loop and return its result (bounded)."""
        assert callable(fn)

        async def wrapper() -> object:
            return fn()

        return asyncio.run_coroutine_threadsafe(wrapper(), self.loop).result(T(5))


@pytest.fixture(scope="module")
def relay() -> Iterator[RelayThread]:
    ready = threading.Event()
    box: dict[str, object] = {}

    def serve() -> None:
        async def main() -> None:
            server = RelayServer(relay_test_config(queue=QUEUE), logger=CapturingLogger())
            await server.start()
            box["server"], box["loop"], box["stop"] = (
                server,
                asyncio.get_running_loop(),
                (stop := asyncio.Event()),
            )
            ready.set()
            await stop.wait()
            await server.close()

        try:
            asyncio.run(main())
        except BaseException as exc:  # report to the test thread instead of dying silently
            box["error"] = exc
            ready.set()

    thread = threading.Thread(target=serve, name="relay-under-fuzz", daemon=True)
    thread.start()
    assert ready.wait(T(10)), "relay thread did not start"
    assert "error" not in box, box.get("error")
    rt = RelayThread(box["server"], box["loop"], thread, box["stop"])  # type: ignore[arg-type]
    yield rt
    rt.loop.call_soon_threadsafe(rt.stop.set)
    thread.join(T(15))
    assert not thread.is_alive(), "relay thread did not stop"
    assert "error" not in box, box.get("error")


def _frame_bodies() -> st.SearchStrategy[envelope_pb2.RelayFrame]:
    topics = st.lists(st.binary(max_size=80), max_size=5)
    env_bytes = st.one_of(
        st.binary(max_size=600),
        st.builds(
            lambda v, t, n, c: envelope_pb2.Envelope(
                version=v, topic=t, nonce=n, ciphertext=c
            ).SerializeToString(),
            st.integers(0, 2**32 - 1),
            st.binary(max_size=80),
            st.binary(max_size=20),
            st.binary(max_size=200),
        ),
    )
    version = st.one_of(st.just(1), st.integers(0, 2**32 - 1))
    body = st.one_of(
        st.builds(lambda t: {"subscribe": envelope_pb2.Subscribe(topics=t)}, topics),
        st.builds(lambda t: {"unsubscribe": envelope_pb2.Unsubscribe(topics=t)}, topics),
        st.builds(lambda e: {"publish": envelope_pb2.Publish(envelope=e)}, env_bytes),
        st.builds(lambda e: {"deliver": envelope_pb2.Deliver(envelope=e)}, env_bytes),
        st.builds(
            lambda c, r: {"error": envelope_pb2.Error(code=c, reason=r)},
            st.text(max_size=20),
            st.text(max_size=20),
        ),
        st.builds(lambda n: {"pong": envelope_pb2.Pong(nonce=n)}, st.integers(0, 2**64 - 1)),
        st.just({}),
    )
    return st.builds(lambda v, b: envelope_pb2.RelayFrame(version=v, **b), version, body)


GARBAGE = st.one_of(
    st.binary(max_size=1024),
    st.text(max_size=100),
    _frame_bodies().map(lambda f: f.SerializeToString()),
    # a valid frame with random bytes appended or cut short
    st.tuples(_frame_bodies(), st.binary(max_size=16), st.integers(0, 8)).map(
        lambda x: x[0].SerializeToString()[: max(0, len(x[0].SerializeToString()) - x[2])] + x[1]
    ),
)


def _barrier(ws: ClientConnection, nonce: int) -> list[envelope_pb2.RelayFrame]:
    """Ping and collect every frame before the matching Pong (bounded)."""
    ws.send(encode_ping(nonce))
    before: list[envelope_pb2.RelayFrame] = []
    for _ in range(50):
        data = ws.recv(timeout=T(5))
        assert isinstance(data, bytes)
        frame = decode_frame(data)
        if frame.WhichOneof("body") == "pong" and frame.pong.nonce == nonce:
            return before
        before.append(frame)
    raise AssertionError("no pong within 50 frames")


def test_garbage_frames_then_good_clients_still_served(relay: RelayThread) -> None:
    counter = iter(range(1, 10**9))
    with connect(relay.url, proxy=None, compression=None, open_timeout=T(5)) as fuzz:

        @settings(
            max_examples=100,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
            database=None,
        )
        @given(frames=st.lists(GARBAGE, min_size=1, max_size=4))
        def feed(frames: list[bytes | str]) -> None:
            for data in frames:
                fuzz.send(data)
            answers = _barrier(fuzz, next(counter))
            # garbage earns Error frames (or a Pong for a garbage Ping), never a crash
            for frame in answers:
                assert frame.WhichOneof("body") in ("error", "pong")
            sizes = relay.call(relay.server.queue_sizes)
            assert isinstance(sizes, list) and max(sizes) <= QUEUE

        feed()
        # the fuzzed connection itself is still alive and answering
        assert _barrier(fuzz, 0) == []

    # good clients are served normally afterwards
    key = channel("after-fuzz")
    with (
        connect(relay.url, proxy=None, compression=None, open_timeout=T(5)) as sub,
        connect(relay.url, proxy=None, compression=None, open_timeout=T(5)) as pub,
    ):
        sub.send(encode_subscribe([key.topic]))
        assert _barrier(sub, 1) == []
        env = envelope(key=key)
        pub.send(encode_publish(env))
        data = sub.recv(timeout=T(5))
        assert isinstance(data, bytes)
        assert decode_frame(data).deliver.envelope == env
    stats = relay.call(lambda: relay.server.stats.as_dict())
    assert isinstance(stats, dict)
    assert stats["frames_received"] > 100
    assert stats["dropped"]["malformed"] > 0
