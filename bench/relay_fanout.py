"""Relay fan-out benchmark: envelope deliveries per second, relay vs bare websockets.

One publisher and 20 subscribers on loopback. Two servers run side by side,
each in its own child process (so the server gets a core of its own):

* ``relay``: ``net.relay.RelayServer`` (subscribe by topic, Publish -> Deliver,
  all its defences on, limits raised so they do not throttle the benchmark);
* ``bare``: the floor — a websockets server whose handler calls
  ``websockets.broadcast`` to every other connection for each message.

The clients (parent process) are deliberately cheap: raw asyncio sockets with a
minimal websocket handshake; subscribers count received bytes and divide by the
known frame size, so the numbers measure the servers rather than a client
library. The publisher keeps at most ``--window`` messages in flight (every
subscriber must have received message ``k - window`` before message ``k`` is
sent), the same flow control for both servers. Rounds are interleaved (the
order alternates each round) and the median of ``--rounds`` is reported,
because this machine's speed drifts within seconds.

Usage::

    .venv/bin/python bench/relay_fanout.py                  # 1 KiB envelopes
    .venv/bin/python bench/relay_fanout.py --size 40000 --messages 400

Everything is bounded: each measurement has a timeout, each child is killed
by its PID at the end.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from net import envelope_pb2  # noqa: E402
from net.relay_frames import encode_deliver, encode_ping, encode_publish, encode_subscribe  # noqa: E402

TOPIC = bytes(range(16))


# --------------------------------------------------------------------- servers


async def _serve_relay() -> None:
    from net.relay import RelayServer
    from net.relay_config import RelayConfig
    from net.relay_log import RelayLogger

    config = RelayConfig(
        port=0,
        max_clients=10_000,
        rate=1e9,
        burst=10**9,
        queue=4096,
        stats_interval=0,
        ping_interval=None,
        ping_timeout=None,
    )
    with open(os.devnull, "w") as devnull:
        server = RelayServer(config, logger=RelayLogger("json", devnull, level="error"))
        await server.start()
        await _announce_and_wait(server.port)
        await server.close()


async def _serve_bare() -> None:
    from websockets.asyncio.server import ServerConnection, broadcast, serve
    from websockets.exceptions import ConnectionClosed

    conns: set[ServerConnection] = set()

    async def handler(ws: ServerConnection) -> None:
        conns.add(ws)
        try:
            async for message in ws:
                broadcast([c for c in conns if c is not ws], message)
        except ConnectionClosed:
            pass
        finally:
            conns.discard(ws)

    server = await serve(
        handler, "127.0.0.1", 0, compression=None, ping_interval=None, max_size=2**20
    )
    await _announce_and_wait(int(server.sockets[0].getsockname()[1]))
    server.close()
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(5):
            await server.wait_closed()


async def _announce_and_wait(port: int) -> None:
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    print(f"PORT {port}", flush=True)
    await stop.wait()


# --------------------------------------------------------------------- clients


def _client_frame(payload: bytes, opcode: int = 2) -> bytes:
    """A masked client-to-server websocket frame."""
    mask = os.urandom(4)
    n = len(payload)
    if n < 126:
        head = bytes([0x80 | opcode, 0x80 | n])
    elif n < 65536:
        head = bytes([0x80 | opcode, 0x80 | 126]) + n.to_bytes(2, "big")
    else:
        head = bytes([0x80 | opcode, 0x80 | 127]) + n.to_bytes(8, "big")
    key = (mask * (n // 4 + 1))[:n]
    masked = (int.from_bytes(payload, "big") ^ int.from_bytes(key, "big")).to_bytes(n, "big")
    return head + mask + masked


def _server_frame_len(payload_len: int) -> int:
    """Length on the wire of an unmasked server-to-client frame."""
    if payload_len < 126:
        return 2 + payload_len
    if payload_len < 65536:
        return 4 + payload_len
    return 10 + payload_len


class Tracker:
    """Counts deliveries per subscriber and wakes the publisher when all reach a target."""

    def __init__(self, n: int) -> None:
        self.counts = [0] * n
        self.target = 0
        self.pending = 0
        self.reached = asyncio.Event()
        self.reached.set()

    def set_target(self, target: int) -> None:
        self.target = target
        self.pending = sum(1 for c in self.counts if c < target)
        if self.pending:
            self.reached.clear()
        else:
            self.reached.set()

    def update(self, i: int, count: int) -> None:
        before = self.counts[i]
        self.counts[i] = count
        if before < self.target <= count:
            self.pending -= 1
            if self.pending == 0:
                self.reached.set()


class RawWs(asyncio.Protocol):
    """Minimal websocket client: handshake, then parse frames, then count bytes."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buf = bytearray()
        self.handshake_done = asyncio.get_running_loop().create_future()
        self.mode = "handshake"
        self.frames: asyncio.Queue[tuple[int, bytes]] = asyncio.Queue()
        self.counted_bytes = 0
        self.frame_len = 1
        self.index = 0
        self.tracker: Tracker | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport

    def data_received(self, data: bytes) -> None:
        if self.mode == "count":
            self.counted_bytes += len(data)
            assert self.tracker is not None
            self.tracker.update(self.index, self.counted_bytes // self.frame_len)
            return
        self.buf += data
        if self.mode == "handshake":
            end = self.buf.find(b"\r\n\r\n")
            if end < 0:
                return
            head = bytes(self.buf[:end])
            del self.buf[: end + 4]
            self.mode = "frames"
            if not head.startswith(b"HTTP/1.1 101"):
                self.handshake_done.set_exception(RuntimeError(head.decode(errors="replace")))
                return
            self.handshake_done.set_result(None)
        self._parse_frames()

    def _parse_frames(self) -> None:
        buf = self.buf
        for _ in range(100_000):  # bounded: each iteration consumes a frame
            if len(buf) < 2:
                return
            opcode, n, off = buf[0] & 0x0F, buf[1] & 0x7F, 2
            if n == 126:
                if len(buf) < 4:
                    return
                n, off = int.from_bytes(buf[2:4], "big"), 4
            elif n == 127:
                if len(buf) < 10:
                    return
                n, off = int.from_bytes(buf[2:10], "big"), 10
            if len(buf) < off + n:
                return
            self.frames.put_nowait((opcode, bytes(buf[off : off + n])))
            del buf[: off + n]

    def start_counting(self, index: int, frame_len: int, tracker: Tracker) -> None:
        """Switch to byte counting (at a frame boundary: nothing may be buffered)."""
        assert not self.buf, "bytes pending at the switch to counting"
        self.index, self.frame_len, self.tracker = index, frame_len, tracker
        self.counted_bytes = 0
        self.mode = "count"

    def send(self, data: bytes) -> None:
        assert self.transport is not None
        self.transport.write(data)

    def close(self) -> None:
        if self.transport is not None:
            self.transport.abort()


async def _open_raw(port: int) -> RawWs:
    loop = asyncio.get_running_loop()
    _, proto = await loop.create_connection(RawWs, "127.0.0.1", port)
    key = base64.b64encode(os.urandom(16)).decode()
    proto.send(
        (
            f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
            f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
        ).encode()
    )
    await asyncio.wait_for(proto.handshake_done, 10)
    return proto


def _fake_envelope(size: int) -> bytes:
    body = max(0, size - 40)
    return envelope_pb2.Envelope(
        version=1, topic=TOPIC, nonce=os.urandom(12), ciphertext=os.urandom(body)
    ).SerializeToString()


async def measure(
    kind: str, port: int, subscribers: int, messages: int, window: int, size: int
) -> float:
    """Deliveries per second through one server (one publisher, N subscribers)."""
    env = _fake_envelope(size)
    publish = encode_publish(env)
    delivered_payload = encode_deliver(env) if kind == "relay" else publish
    frame_len = _server_frame_len(len(delivered_payload))
    pub_frame = _client_frame(publish)

    subs = [await _open_raw(port) for _ in range(subscribers)]
    pub = await _open_raw(port)
    try:
        if kind == "relay":
            for i, s in enumerate(subs):
                s.send(_client_frame(encode_subscribe([TOPIC])))
                s.send(_client_frame(encode_ping(i + 1)))
            for s in subs:
                opcode, _ = await asyncio.wait_for(s.frames.get(), 10)  # the Pong
                assert opcode == 2
        tracker = Tracker(subscribers)
        for i, s in enumerate(subs):
            s.start_counting(i, frame_len, tracker)
        # warm-up: until one message reaches every subscriber (bare: all registered)
        for warm in range(1, 201):
            pub.send(pub_frame)
            tracker.set_target(warm)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(tracker.reached.wait(), 0.2)
                break
        else:
            raise RuntimeError("subscribers never all received the warm-up message")
        base = min(tracker.counts)
        tracker.counts = [c - base for c in tracker.counts]  # in-order: all equal now
        for s in subs:
            s.counted_bytes = 0
        tracker.counts = [0] * subscribers
        tracker.set_target(0)

        start = time.perf_counter()
        sent = 0
        deadline = start + 60.0
        while sent < messages:  # bounded by count and by the deadline
            burst = min(window // 2 or 1, messages - sent)
            pub.send(pub_frame * burst)
            sent += burst
            tracker.set_target(max(0, sent - window // 2))
            await asyncio.wait_for(tracker.reached.wait(), max(0.1, deadline - time.perf_counter()))
        tracker.set_target(messages)
        await asyncio.wait_for(tracker.reached.wait(), max(0.1, deadline - time.perf_counter()))
        elapsed = time.perf_counter() - start
        return messages * subscribers / elapsed
    finally:
        for s in [*subs, pub]:
            s.close()


def _start_child(kind: str) -> tuple[subprocess.Popen[str], int]:
    proc = subprocess.Popen(
        [sys.executable, str(Path(__file__).resolve()), "--serve", kind],
        stdout=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        cwd=ROOT,
    )
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("PORT "):
        proc.kill()
        raise RuntimeError(f"{kind} server did not start: {line!r}")
    return proc, int(line.split()[1])


def _stop_child(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(5)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--serve", choices=("relay", "bare"), help=argparse.SUPPRESS)
    parser.add_argument("--subscribers", type=int, default=20)
    parser.add_argument("--messages", type=int, default=3000, help="publishes per measurement")
    parser.add_argument("--size", type=int, default=1024, help="envelope size in bytes")
    parser.add_argument("--window", type=int, default=64, help="messages in flight")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args(argv)

    if args.serve == "relay":
        asyncio.run(_serve_relay())
        return 0
    if args.serve == "bare":
        asyncio.run(_serve_bare())
        return 0

    children = {}
    try:
        for kind in ("bare", "relay"):
            children[kind] = _start_child(kind)
        results: dict[str, list[float]] = {"bare": [], "relay": []}
        for r in range(args.rounds):
            order = ("bare", "relay") if r % 2 == 0 else ("relay", "bare")
            for kind in order:
                rate = asyncio.run(
                    measure(
                        kind,
                        children[kind][1],
                        args.subscribers,
                        args.messages,
                        args.window,
                        args.size,
                    )
                )
                results[kind].append(rate)
                print(f"round {r + 1} {kind:5s} {rate:12,.0f} deliveries/s", file=sys.stderr)
    finally:
        for proc, _ in children.values():
            _stop_child(proc)

    bare = statistics.median(results["bare"])
    relay = statistics.median(results["relay"])
    print(
        f"\nrelay fan-out: {args.subscribers} subscribers, 1 publisher, "
        f"{args.size}-byte envelopes, {args.messages} publishes x {args.rounds} rounds "
        f"(median), window {args.window}"
    )
    print(f"{'server':<8}{'deliveries/s':>16}")
    print(f"{'bare':<8}{bare:>16,.0f}")
    print(f"{'relay':<8}{relay:>16,.0f}")
    print(f"relay / bare = {relay / bare:.2f}  (target >= 0.50)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
