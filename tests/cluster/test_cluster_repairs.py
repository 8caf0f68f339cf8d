"""Repairs through a relay cluster, with real processes (issue 26, item 1).

Two ``sdschat relay --cluster`` on one real nats-server, two headless nodes on
relay A (one of them dropping 30% of envelopes each way) and one on relay B.
SDS resends and SDS-R answers re-send the identical stored envelope: a cluster
relay must carry each of them, as a lone relay does, and never drop one as a
duplicate of what it forwarded before.
"""

from __future__ import annotations

import signal
from pathlib import Path

from cluster_helpers import assert_no_duplicate_deliveries, cluster_relay, unacked
from nats_servers import NatsServers

from tests.procs import Cluster, comparable, history, running

LINES = 30


def test_a_lossy_node_is_repaired_through_a_relay_cluster(
    tmp_path: Path, nats: NatsServers
) -> None:
    with running(Cluster(tmp_path)) as c:
        (ra, url_a), (rb, url_b) = (cluster_relay(c, nats.urls, n) for n in ("relay-a", "relay-b"))
        alice = c.headless("alice", tmp_path / "alice", relay=url_a)
        bob = c.headless(
            "bob", tmp_path / "bob", relay=url_a,
            extra=["--drop-rate", "0.3", "--drop-seed", "7", "--lost-timeout-ms", "120000"],
        )
        carol = c.headless("carol", tmp_path / "carol", relay=url_b)
        nodes = (alice, bob, carol)
        for p in nodes:
            p.wait_for(lambda p=p: bool(p.select("channel")), 30, "joined")
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30, "up")
        lines = [f"alice says {i}" for i in range(LINES)]
        alice.send(*lines)
        for p in (bob, carol):
            p.wait_for(lambda p=p: set(lines) <= {e["text"] for e in p.select("delivered")},
                       120, "every line of alice")
        alice.wait_for(lambda: not unacked(alice) and len(alice.select("own", state="logged"))
                       == LINES, 120, "alice's lines acknowledged")
        assert_no_duplicate_deliveries(*nodes)
        for p in nodes:
            p.close_stdin()
            assert p.wait(30) == 0, p.tail()
        counters = alice.select("closed")[-1]["counters"]
        bob_counters = bob.select("closed")[-1]["counters"]
        # the loss was real and was repaired by re-sending stored envelopes (SDS-R, resends)
        repairs = sum(k.get(n, 0) for k in (counters, bob_counters)
                      for n in ("resent", "repair_sent"))
        assert repairs > 0, (counters, bob_counters)
        for relay in (ra, rb):
            relay.signal(signal.SIGTERM)
            assert relay.wait(30) == 0, relay.tail()
            final = [r for r in relay.log_records() if r.get("event") == "relay_stats"][-1]
            cluster = final["cluster"]
            # no envelope a client published was dropped as a "duplicate"
            assert cluster.get("duplicate", 0) == 0, (relay.name, cluster)
        ha, hb, hc = (history(tmp_path / n) for n in ("alice", "bob", "carol"))
        assert comparable(ha) == comparable(hb) == comparable(hc) and len(ha) == LINES
