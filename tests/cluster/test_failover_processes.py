"""Failover with real processes: lines typed while a node's relay is dead all arrive."""

from __future__ import annotations

from pathlib import Path

from cluster_helpers import (
    assert_no_duplicate_deliveries,
    cluster_relay,
    connected_to,
    relay_flags,
    unacked,
)
from nats_servers import NatsServers

from net.urls import display_address
from tests.procs import Cluster, comparable, history, running


def test_lines_typed_during_a_failover_are_not_lost(tmp_path: Path, nats: NatsServers) -> None:
    with running(Cluster(tmp_path)) as c:
        (ra, url_a), (_rb, url_b) = (cluster_relay(c, nats.urls, n) for n in ("relay-a", "relay-b"))
        alice = c.headless("alice", tmp_path / "alice", relay=url_a, extra=relay_flags([url_b]))
        bob = c.headless("bob", tmp_path / "bob", relay=url_b, extra=relay_flags([url_a]))
        for p in (alice, bob):
            p.wait_for(lambda p=p: bool(p.select("channel")), 30, "joined")
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30, "up")
        alice.send(*[f"before {i}" for i in range(5)])
        bob.wait_for(lambda: len(bob.select("delivered")) == 5, 30, "the first lines")
        ra.kill9()
        alice.wait_for(lambda: bool(alice.select("connection", state="disconnected")), 20,
                       "noticed relay-a is gone")
        during = [f"during failover {i}" for i in range(10)]
        alice.send(*during)  # typed while alice has no relay
        alice.wait_for(lambda: len(alice.select("connection", state="connected")) >= 2, 30,
                       "failed over")
        assert connected_to(alice) == [f"connected to {display_address(u)}"
                                       for u in (url_a, url_b)]
        alice.send("after")
        want = {f"before {i}" for i in range(5)} | set(during) | {"after"}
        bob.wait_for(lambda: want <= {e["text"] for e in bob.select("delivered")}, 30,
                     "every line alice typed")
        alice.wait_for(lambda: not unacked(alice), 30, "alice's lines acknowledged")
        assert_no_duplicate_deliveries(alice, bob)
        for p in (alice, bob):
            p.close_stdin()
            assert p.wait(30) == 0, p.tail()
        ha, hb = history(tmp_path / "alice"), history(tmp_path / "bob")
        assert comparable(ha) == comparable(hb) and len(ha) == 16
