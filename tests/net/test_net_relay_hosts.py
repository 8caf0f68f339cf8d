"""Per-host limits count hosts, and a full relay keeps room for a new host (issue 39 §8).

The audit: 20 loopback addresses x 4 connections held all 64 slots of a relay, and an
honest node could not connect for 20 s. All of 127.0.0.0/8 is one host now (so is an
IPv4 /24, an IPv6 /64), and when the relay is full a newcomer from a host holding fewer
connections takes the slot of the biggest host's longest-silent connection, busy or not.

The relay binds 127.0.0.1 and ::1: the attacker's connections come from many
127.x.y.z addresses (client sockets bound to them), the honest nodes from ::1,
another host. Loopback only; every process is killed by PID.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator
from pathlib import Path

from net_helpers import Peer, T, channel, envelope, run, start_relay
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from net.relay_frames import encode_publish, encode_subscribe
from tests.procs import Cluster, Proc, free_port, running, sdschat

SQUAT = channel("squatters")


async def _from(port: int, source: str) -> ClientConnection:
    """A websocket to the relay's IPv4 address from the loopback address ``source``."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.bind((source, 0))
    sock.setblocking(False)
    await asyncio.wait_for(asyncio.get_running_loop().sock_connect(sock, ("127.0.0.1", port)), T(5))
    return await asyncio.wait_for(
        connect(f"ws://127.0.0.1:{port}", sock=sock, proxy=None, compression=None,
                open_timeout=None),
        T(5),
    )  # fmt: skip


class Squatters:
    """Connections from many addresses of 127.0.0.0/8, all subscribed to one topic that
    one of them publishes to every 0.2 s: every one is delivered something all the time
    (none is ever idle), and every one reads what it gets."""

    def __init__(self) -> None:
        self.conns: list[ClientConnection] = []
        self.refused = 0
        self._tasks: list[asyncio.Task[None]] = []

    async def open(self, port: int, sources: list[str]) -> None:
        for source in sources:
            try:
                ws = await _from(port, source)
                await ws.send(encode_subscribe([SQUAT.topic]))
                await asyncio.wait_for(ws.ping(), T(5))  # served, not closed at once
            except (ConnectionClosed, OSError, TimeoutError):
                self.refused += 1
                continue
            self.conns.append(ws)
            self._tasks.append(asyncio.create_task(self._drain(ws)))
        self._tasks.append(asyncio.create_task(self._chatter()))

    @staticmethod
    async def _drain(ws: ClientConnection) -> None:
        with contextlib.suppress(ConnectionClosed):
            async for _ in ws:  # ends when the connection closes
                pass

    async def _chatter(self) -> None:
        for _ in range(3000):  # bounded: 10 minutes at most
            for ws in self.conns:  # the first one still open publishes
                with contextlib.suppress(ConnectionClosed):
                    await ws.send(encode_publish(envelope(key=SQUAT)))
                    break
            await asyncio.sleep(0.2)

    def open_count(self) -> int:
        return sum(1 for ws in self.conns if ws.state.name == "OPEN")

    async def wait_open(self, n: int) -> None:
        """Wait (bounded) until exactly ``n`` of them are still open."""
        for _ in range(int(T(10) / 0.02)):  # bounded
            if self.open_count() == n:
                return
            await asyncio.sleep(0.02)
        raise AssertionError(f"{self.open_count()} squatters open, not {n}")

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for ws in self.conns:
            ws.transport.abort()


@contextlib.asynccontextmanager
async def squatting(port: int, sources: list[str]) -> AsyncIterator[Squatters]:
    squatters = Squatters()
    try:
        await squatters.open(port, sources)
        yield squatters
    finally:
        await squatters.close()


def test_a_full_relay_gives_a_new_host_the_slot_of_the_biggest_hosts_longest_silent() -> None:
    """Busy connections of one host fill the relay (the idle rule sheds none of them);
    a newcomer from another host gets the slot of the biggest host's longest-silent
    connection; once the hosts are within one connection of each other, a newcomer of
    the smaller host is refused (hosts never take turns)."""

    async def main() -> None:
        port = free_port()
        server, log = await start_relay(host="127.0.0.1,::1", port=port, max_clients=6,
                                        max_clients_per_ip=0, idle_timeout=30.0)  # fmt: skip
        try:
            quiet = Peer(await _from(port, "127.0.0.250"))
            await quiet.subscribe([b"a topic nobody else follows"])  # the longest silent
            sources = [f"127.0.{i}.{i + 1}" for i in range(5)]
            async with squatting(port, sources) as squat:
                assert squat.open_count() == 5 and server.connection_count == 6
                await log.wait_for("subscribed", lambda r: r["conn"] == 6)
                first = await Peer.open(f"ws://[::1]:{port}")
                assert await first.subscribe([SQUAT.topic]) == []  # served
                shed = await log.wait_for("connection_shed")
                assert shed["rule"] == "new_host" and shed["conn"] == 1  # the silent one
                assert shed["host"] == "127.0.0.0/8" and shed["for_host"] == "::/64"
                with contextlib.suppress(ConnectionClosed):
                    await quiet.recv_frame()
                # 127.0.0.0/8 holds 5, ::/64 holds 1: room for one more of ::/64
                second = await Peer.open(f"ws://[::1]:{port}")
                assert await second.subscribe([SQUAT.topic]) == []
                await log.wait_for("connection_shed", lambda r: r["conn"] != 1)
                await squat.wait_open(4)
                # 4 against 2: a third newcomer makes it 3 against 3; a fourth would
                # invert them, so it is refused
                third = await Peer.open(f"ws://[::1]:{port}")
                assert await third.subscribe([SQUAT.topic]) == []
                fourth = await Peer.open(f"ws://[::1]:{port}")
                try:
                    await fourth.subscribe([SQUAT.topic])
                    raise AssertionError("the smaller host took a slot from an equal one")
                except ConnectionClosed as exc:
                    assert exc.rcvd is not None and exc.rcvd.reason == "relay full"
                assert server.stats.dropped["shed"] == 3
                await squat.wait_open(3)
                # the newcomers really chat: the squatters' traffic reaches them
                frame = await second.recv_frame()
                assert frame.WhichOneof("body") == "deliver"
        finally:
            await server.close()

    run(main(), 60)


def _honest_pair(c: Cluster, tmp: Path, url: str) -> tuple[Proc, Proc]:
    """Two honest headless nodes of one channel connecting to ``url``."""
    alice = c.headless("alice", tmp / "alice", channel="hosts", relay=url)
    bob = c.headless("bob", tmp / "bob", channel="hosts", relay=url)
    return alice, bob


def _connected_and_chatting(alice: Proc, bob: Proc, base_timeout: float) -> None:
    for p in (alice, bob):
        p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), base_timeout,
                   f"{p.name} connected")  # fmt: skip
    alice.send("through a full relay")
    bob.wait_for(lambda: any(e.get("text") == "through a full relay"
                             for e in bob.select("delivered")), 30, "alice's line")  # fmt: skip


def _relay(c: Cluster, port: int, *flags: str) -> Proc:
    """``sdschat relay`` on 127.0.0.1 and ::1 (two hosts of one machine), 64 slots, an
    idle timeout of 2 s, a generous rate."""
    return c.start(sdschat("relay", "--host", "127.0.0.1,::1", "--port", str(port),
                           "--stats-interval", "0", "--max-clients", "64", "--idle-timeout",
                           "2", "--rate", "5000", "--burst", "10000", *flags),
                   "relay", stdin=False)  # fmt: skip


def test_twenty_loopback_addresses_no_longer_hold_every_slot_of_a_relay_process(
    tmp_path: Path,
) -> None:
    """The audit's attack: a relay with --max-clients 64 --max-clients-per-ip 4, 20
    loopback addresses x 4 busy connections. They are one host now: 4 are served, the
    other 76 refused, and two honest nodes (from ::1) connect at once and chat. Before,
    the 80 attempts took all 64 slots and the honest nodes were refused (relay full)."""
    port = free_port()
    with running(Cluster(tmp_path)) as c:
        relay = _relay(c, port, "--max-clients-per-ip", "4")
        assert relay.wait_log("relay_listening")["ipv4_host_prefix"] == 24

        async def main() -> int:
            sources = [f"127.0.{a}.{a + 2}" for a in range(20) for _ in range(4)]
            async with squatting(port, sources) as squat:
                await squat.wait_open(4)
                alice, bob = _honest_pair(c, tmp_path, f"ws://[::1]:{port}")
                await asyncio.to_thread(_connected_and_chatting, alice, bob, 20)
                return squat.open_count()

        assert run(main(), 120) == 4
        rejected = [r for r in relay.log_records() if r.get("event") == "connection_rejected"]
        # logged at the 1st, 2nd, 4th, ... 64th refusal of the 76: a flood must not flood
        assert [r["rejected_per_ip"] for r in rejected] == [1, 2, 4, 8, 16, 32, 64]
        assert all(r["host"] == "127.0.0.0/8" for r in rejected)


def test_one_busy_host_holding_every_slot_makes_room_for_new_hosts(tmp_path: Path) -> None:
    """With no per-host limit, 64 busy connections of 127.0.0.0/8 fill a relay process
    (none idle, so the idle rule sheds none); two honest nodes from ::1 still connect at
    once and chat, each taking the slot of a squatter. Before, they were refused."""
    port = free_port()
    with running(Cluster(tmp_path)) as c:
        relay = _relay(c, port, "--max-clients-per-ip", "0")
        relay.wait_log("relay_listening")

        async def main() -> int:
            sources = [f"127.1.{n // 4}.{n % 4 + 1}" for n in range(64)]
            async with squatting(port, sources) as squat:
                assert squat.open_count() == 64
                await asyncio.sleep(2.5)  # past --idle-timeout: only traffic keeps them
                alice, bob = _honest_pair(c, tmp_path, f"ws://[::1]:{port}")
                await asyncio.to_thread(_connected_and_chatting, alice, bob, 20)
                await squat.wait_open(62)
                return squat.open_count()

        assert run(main(), 120) == 62
        shed = [r for r in relay.log_records() if r.get("event") == "connection_shed"]
        assert len(shed) == 2 and all(r["rule"] == "new_host" for r in shed), shed
