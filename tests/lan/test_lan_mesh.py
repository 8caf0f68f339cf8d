"""LAN gossip in-process on 127.0.0.1: discovery, flooding, hop limit, seen cache, bridge.

Zeroconf is bound to 127.0.0.1 in every test here.
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import replace

import pytest
from lan_helpers import LOOPBACK, T, channel, eventually, run, sealed, topics_known
from websockets.asyncio.client import connect

from net.envelope import envelope_hash
from net.identity import Identity
from net.lan import gossip_pb2
from net.lan.bridge import BridgeTransport
from net.lan.discovery import PeerFound, PeerGone
from net.lan.frames import decode_gossip_frame, encode_gossip, encode_hello
from net.lan.gossip import GossipMesh, LanPeerEvent, SeenCache
from net.lan.transport import LanTransport
from net.relay import RelayServer
from net.relay_client import RelayClient
from net.relay_config import RelayConfig
from net.relay_log import RelayLogger

KEY = channel("room")
OTHER = channel("other")


class Inbox:
    def __init__(self) -> None:
        self.items: list[bytes] = []
        self.events: list[LanPeerEvent] = []
        self.states: list[str] = []

    async def envelope(self, env: bytes) -> None:
        self.items.append(env)

    def status(self, status: object) -> None:
        self.states.append(status.state)  # type: ignore[attr-defined]


async def lan_nodes(n: int, **opts: object) -> tuple[list[LanTransport], list[Inbox]]:
    nodes, boxes = [], []
    for _ in range(n):
        box = Inbox()
        t = LanTransport(replace(LOOPBACK, **opts), on_peer=box.events.append)  # type: ignore[arg-type]
        t.start(box.envelope, box.status)
        await t.subscribe([KEY.topic])
        nodes.append(t)
        boxes.append(box)
    return nodes, boxes


async def close_all(nodes: list) -> None:  # type: ignore[type-arg]
    for t in nodes:
        await t.close()


def test_three_nodes_discover_each_other_and_flood_exactly_once() -> None:
    async def main() -> None:
        nodes, boxes = await lan_nodes(3)
        try:
            await eventually(lambda: all(len(t.peers()) == 2 for t in nodes), 15, "full mesh")
            await eventually(lambda: topics_known(nodes), 10, "topics")
            ident = Identity.generate()
            sent = []
            for i, t in enumerate(nodes):
                env, _ = sealed(ident, KEY, f"from {i}", i)
                sent.append(env)
                assert await t.publish(env)
            await eventually(lambda: all(len(b.items) == 2 for b in boxes), 10, "delivery")
            await asyncio.sleep(0.3)  # flood copies settle
            for i, box in enumerate(boxes):
                # every other node's envelope exactly once, never our own back
                assert sorted(box.items) == sorted(e for j, e in enumerate(sent) if j != i)
            assert sum(t.mesh.counters["duplicates"] for t in nodes) >= 1  # copies were cut
            for box in boxes:
                states = [e.state for e in box.events]
                assert states.count("discovered") == 2 and states.count("connected") == 2
                assert box.states[0] == "connecting" and "connected" in box.states
            # an envelope of a topic nobody joined does not leave
            env, _ = sealed(ident, OTHER, "elsewhere", 9)
            assert not await nodes[0].publish(env)
            # the zeroconf record carries no channel information
            disc = nodes[0].discovery
            assert disc is not None and disc._info is not None
            props = {k.decode(): v for k, v in disc._info.properties.items()}
            assert set(props) == {"v", "id", "role"}
            assert KEY.topic.hex().encode() not in b"".join(v or b"" for v in props.values())
        finally:
            await close_all(nodes)
        # leaving is seen by the others: disconnected, then gone
        for box in boxes:
            assert box.states[-1] == "closed"

    run(main(), 40)


def test_peers_come_and_go() -> None:
    async def main() -> None:
        nodes, boxes = await lan_nodes(2)
        late: LanTransport | None = None
        try:
            await eventually(lambda: all(len(t.peers()) == 1 for t in nodes), 15, "pair")
            await nodes[1].close()
            await eventually(
                lambda: {"disconnected", "gone"} <= {e.state for e in boxes[0].events},
                15, "disconnected + gone",
            )
            assert boxes[0].states[-1] == "disconnected"
            assert not nodes[0].connected
            late_box = Inbox()
            late = LanTransport(LOOPBACK)
            late.start(late_box.envelope, late_box.status)
            await late.subscribe([KEY.topic])
            await eventually(lambda: nodes[0].connected and late.connected, 15, "newcomer")
            env, _ = sealed(Identity.generate(), KEY, "hello again", 1)
            # Connected is not yet subscribed: the old node's topics arrive in its
            # hello just after. Until then publish reaches nobody and says so.
            for _ in range(200):
                if await late.publish(env):
                    break
                await asyncio.sleep(0.05)
            else:
                raise AssertionError("the newcomer never learnt the old node's topic")
            await eventually(lambda: boxes[0].items == [env], 10, "delivery to the old node")
        finally:
            await close_all([nodes[0]] + ([late] if late else []))

    run(main(), 40)


def test_hop_limit_and_no_echo_on_a_line() -> None:
    """A - B - C - D wired by hand (no zeroconf): hops bound how far an envelope goes."""

    async def main() -> None:
        for hop_limit, reach in ((2, 2), (3, 3)):
            boxes = [Inbox() for _ in range(4)]
            ids = sorted(os.urandom(16) for _ in range(4))  # A < B < C < D: left one dials
            meshes = [
                GossipMesh(ids[i], boxes[i].envelope, hosts=["127.0.0.1"], hop_limit=hop_limit,
                           dial_grace_s=0.1)
                for i in range(4)
            ]
            try:
                for m in meshes:
                    await m.start()
                    await m.subscribe([KEY.topic])
                for i in range(3):  # i learns about i+1 and vice versa
                    a, b = meshes[i], meshes[i + 1]
                    a.on_discovery(PeerFound(b.node_id, ("127.0.0.1",), b.port, 1, "node", None))
                    b.on_discovery(PeerFound(a.node_id, ("127.0.0.1",), a.port, 1, "node", None))
                await eventually(
                    lambda ms=meshes: [m.connected_count for m in ms] == [1, 2, 2, 1], 10, "line"
                )
                await eventually(lambda ms=meshes: topics_known(ms), 10, "topics")
                env, _ = sealed(Identity.generate(), KEY, "travels", 1)
                assert await meshes[0].publish(env) == 1
                await asyncio.sleep(0.4)
                got = [len(b.items) for b in boxes]
                assert got == [0] + [1] * reach + [0] * (3 - reach), (hop_limit, got)
                # nothing came back to its origin, and nobody saw a copy twice
                assert meshes[0].counters["received"] == 0
                assert all(m.counters["duplicates"] == 0 for m in meshes)
                # a peer's record withdrawn: reported, not redialled
                meshes[3].on_discovery(PeerGone(meshes[2].node_id))
            finally:
                for m in meshes:
                    await m.close()

    run(main(), 40)


def test_seen_cache_forgets_so_resends_travel_again() -> None:
    now = [0.0]
    cache = SeenCache(1.0, 3, clock=lambda: now[0])
    assert cache.check_and_add(b"a") and not cache.check_and_add(b"a")
    now[0] = 0.5
    assert not cache.check_and_add(b"a")
    now[0] = 1.6  # b"a" was refreshed at 0.0 only (a miss does not refresh)
    assert cache.check_and_add(b"a")
    for k in (b"b", b"c", b"d"):
        cache.add(k)
    assert len(cache) == 3  # capacity: the oldest went
    assert cache.check_and_add(b"a")

    async def main() -> None:
        nodes, boxes = await lan_nodes(2, seen_ttl_s=0.3)
        try:
            await eventually(lambda: all(t.connected for t in nodes), 15, "pair")
            await eventually(lambda: topics_known(nodes), 10, "topics")
            env, _ = sealed(Identity.generate(), KEY, "resent", 1)
            assert await nodes[0].publish(env)
            assert await nodes[0].publish(env)  # at once: a flood copy, cut by the peer
            await asyncio.sleep(0.5)
            assert await nodes[0].publish(env)  # later: an SDS resend, delivered again
            await eventually(lambda: len(boxes[1].items) == 2, 10, "resend delivered")
        finally:
            await close_all(nodes)

    run(main(), 30)


def test_bridge_joins_lan_and_relay_people() -> None:
    """A on the LAN only, B on LAN + relay (bridging), C on the relay only."""

    async def main() -> None:
        relay = RelayServer(RelayConfig(port=0, stats_interval=0),
                            logger=RelayLogger("json", open(os.devnull, "w")))  # noqa: SIM115
        await relay.start()
        a_box, b_box, c_items = Inbox(), Inbox(), []
        a = LanTransport(LOOPBACK)
        b_lan = LanTransport(LOOPBACK)
        from app.node.transport import RelayTransport

        b = BridgeTransport([b_lan, RelayTransport(relay.url)], ["lan", "relay"])
        c = RelayClient(relay.url, [KEY.topic], lambda e: c_items.append(e))
        try:
            a.start(a_box.envelope, a_box.status)
            b.start(b_box.envelope, b_box.status)
            await a.subscribe([KEY.topic])
            await b.subscribe([KEY.topic])
            c.start()
            assert await c.wait_connected(T(10))
            await eventually(lambda: a.connected and b_lan.connected, 15, "LAN pair")
            await eventually(lambda: all(t.connected for t in b.transports), 10, "bridge up")
            # connected is not yet subscribed: each side learns the other's topics
            # from its hello just after; until then a publish reaches nobody
            await eventually(
                lambda: any(p.topics for p in a.peers()) and any(p.topics for p in b_lan.peers()),
                10,
                "LAN topics known",
            )
            ident = Identity.generate()
            from_a, _ = sealed(ident, KEY, "from the LAN", 1)
            from_c, _ = sealed(ident, KEY, "from the relay", 2)
            assert await a.publish(from_a)
            await eventually(lambda: c_items == [from_a], 10, "LAN -> relay")
            assert await c.publish(from_c)
            await eventually(lambda: a_box.items == [from_c], 10, "relay -> LAN")
            await asyncio.sleep(0.3)
            assert sorted(b_box.items) == sorted([from_a, from_c])  # once each
            assert c_items == [from_a] and a_box.items == [from_c]  # no loops, no echoes
            assert b.counters["bridged_lan_to_relay"] == 1
            assert b.counters["bridged_relay_to_lan"] == 1
            assert b_box.states[-1] == "connected"
        finally:
            await c.close()
            await close_all([a, b])
            await relay.close()

    run(main(), 40)


def test_gossip_port_refuses_garbage_and_bounds_peers() -> None:
    async def main() -> None:
        box = Inbox()
        mesh = GossipMesh(os.urandom(16), box.envelope, hosts=["127.0.0.1"], max_peers=1)
        await mesh.start()
        await mesh.subscribe([KEY.topic])
        url = f"ws://127.0.0.1:{mesh.port}"
        try:
            async with connect(url) as ws:  # no Hello first: closed
                await ws.send(b"\xff\x00garbage")
                with pytest.raises(Exception):  # noqa: B017 (ConnectionClosed)
                    for _ in range(3):
                        await ws.recv()
            async with connect(url) as ws:
                await ws.send(encode_hello(os.urandom(16), "node"))
                hello = decode_gossip_frame(await ws.recv())
                assert hello.hello.node_id == mesh.node_id
                sub = decode_gossip_frame(await ws.recv())
                assert list(sub.subscribe.topics) == [KEY.topic]
                await ws.send(b"\x08\x01")  # version 1, no body
                err = decode_gossip_frame(await ws.recv())
                assert err.error.code == "malformed"
                bad_version = gossip_pb2.GossipFrame(
                    version=2, gossip=gossip_pb2.Gossip(envelope=b"x", hops_left=1)
                ).SerializeToString()
                await ws.send(bad_version)
                assert decode_gossip_frame(await ws.recv()).error.code == "unsupported_version"
                await ws.send(encode_gossip(b"not an envelope", 3))
                env, digest = sealed(Identity.generate(), KEY, "ok", 1)
                await ws.send(encode_gossip(env, 3))
                await eventually(lambda: box.items == [env], 5, "a valid one still delivered")
                assert mesh.counters["dropped_malformed"] == 1
                assert envelope_hash(env) == digest
                # a second peer beyond max_peers=1 is refused with 1013
                async with connect(url) as second:
                    await second.send(encode_hello(os.urandom(16), "node"))
                    with pytest.raises(Exception):  # noqa: B017 (closed)
                        for _ in range(5):
                            await second.recv()
                    assert second.close_code == 1013
        finally:
            await mesh.close()

    run(main(), 30)
