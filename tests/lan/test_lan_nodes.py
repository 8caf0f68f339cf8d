"""Real ``sdschat join --headless`` nodes over LAN gossip (no relay, no server).

* on 127.0.0.1 (zeroconf bound to loopback): three nodes find each other,
  chat, see peers come and go; a fourth bridges LAN and a relay;
* in three network namespaces on a private bridge (created and deleted by the
  test; skipped with the reason when that is impossible, e.g. not root):
  three nodes discover each other over zeroconf and converge with
  ``--drop-rate 0.3``.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lan_helpers import cluster
from netns import bridged_namespaces, netns_unavailable
from store_helpers import comparable, history, sdschat, texts_delivered, wait_until

LOOPBACK_FLAGS = ["--interface", "127.0.0.1"]


def lan_peers(p) -> set[str]:  # type: ignore[no-untyped-def]
    """Peers this node reports connected (from its lan_peer events)."""
    up: set[str] = set()
    for e in p.select("lan_peer"):
        if e.get("state") == "connected":
            up.add(e["peer"])
        elif e.get("state") in ("disconnected", "gone"):
            up.discard(e["peer"])
    return up


def test_three_nodes_chat_over_lan_on_loopback_and_see_peers_come_and_go(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        nodes = [
            c.node(name, tmp_path / name, extra=LOOPBACK_FLAGS)
            for name in ("alice", "bob", "carol")
        ]
        for p in nodes:
            p.wait_for(lambda p=p: len(lan_peers(p)) == 2, 30, "two LAN peers")
            assert p.select("connection", state="connected")
        for i, p in enumerate(nodes):
            p.send(*[f"lan line {i}-{k}" for k in range(5)])
        everything = {f"lan line {i}-{k}" for i in range(3) for k in range(5)}
        for i, p in enumerate(nodes):
            mine = {f"lan line {i}-{k}" for k in range(5)}
            p.wait_for(lambda p=p, m=mine: texts_delivered(p) >= everything - m, 40, "all lines")
        # carol leaves: the others see her go
        carol = nodes[2]
        carol.close_stdin()
        assert carol.wait(30) == 0
        for p in nodes[:2]:
            p.wait_for(lambda p=p: len(lan_peers(p)) == 1, 30, "carol gone")
        for p in nodes[:2]:
            p.close_stdin()
            assert p.wait(30) == 0
    logs = [comparable(history(tmp_path / n)) for n in ("alice", "bob", "carol")]
    assert logs[0] == logs[1] == logs[2] and len(logs[0]) == 15


def test_a_node_bridges_lan_and_relay(tmp_path: Path) -> None:
    """alice is on the LAN only, carol on the relay only, bob on both: one conversation."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", tmp_path / "alice", extra=LOOPBACK_FLAGS)
        bob = c.node("bob", tmp_path / "bob", relay=url, extra=["--lan", *LOOPBACK_FLAGS])
        carol = c.node("carol", tmp_path / "carol", relay=url)
        alice.wait_for(lambda: len(lan_peers(alice)) == 1, 30, "bob on the LAN")
        carol.wait_for(lambda: bool(carol.select("connection", state="connected")), 30,
                       "carol on the relay")
        bob.wait_for(lambda: any("relay" in str(e.get("reason")) and "lan" in str(e.get("reason"))
                                 for e in bob.select("connection", state="connected")),
                     30, "bob on both")
        alice.send("from the LAN")
        carol.send("from the relay")
        alice.wait_for(lambda: "from the relay" in texts_delivered(alice), 30, "relay -> LAN")
        carol.wait_for(lambda: "from the LAN" in texts_delivered(carol), 30, "LAN -> relay")
        for p in (alice, bob, carol):
            p.close_stdin()
            assert p.wait(30) == 0
    logs = [comparable(history(tmp_path / n)) for n in ("alice", "bob", "carol")]
    assert logs[0] == logs[1] == logs[2] and len(logs[0]) == 2


def test_three_hosts_in_network_namespaces_discover_each_other_and_converge_with_drops(
    tmp_path: Path,
) -> None:
    reason = netns_unavailable()
    if reason is not None:
        print(f"SKIP multi-host LAN test: {reason}")
        pytest.skip(reason)
    names = ("alice", "bob", "carol")
    with bridged_namespaces(3) as hosts, cluster(tmp_path) as c:
        nodes = []
        for name, host in zip(names, hosts, strict=True):
            argv = sdschat("join", "room", "--data-dir", str(tmp_path / name), "--name", name,
                           "--headless", "--fast", "--interface", host.address,
                           "--drop-rate", "0.3", "--drop-seed", str(len(nodes) + 1),
                           # not --fast's 20 s: see test_three_nodes_300_messages_... (e2e)
                           "--lost-timeout-ms", "90000")
            nodes.append(c.start(host.wrap(argv), name))
        for p in nodes:
            p.wait_for(lambda p=p: len(lan_peers(p)) == 2, 40, "two LAN peers across hosts")
        per_node = 10
        for i, p in enumerate(nodes):
            p.send(*[f"ns line {i}-{k}" for k in range(per_node)])
        everything = {f"ns line {i}-{k}" for i in range(3) for k in range(per_node)}
        for i, p in enumerate(nodes):
            mine = {f"ns line {i}-{k}" for k in range(per_node)}
            p.wait_for(lambda p=p, m=mine: texts_delivered(p) >= everything - m, 90,
                       "every line despite 30% drops")

        def converged() -> bool:
            logs = [comparable(history(tmp_path / n)) for n in names]
            return logs[0] == logs[1] == logs[2] and len(logs[0]) == 3 * per_node

        wait_until(converged, 60, "identical logs", step=1.0)
        for p in nodes:
            p.close_stdin()
            assert p.wait(30) == 0
