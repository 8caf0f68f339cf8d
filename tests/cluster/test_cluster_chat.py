"""A relay cluster on a 3-server NATS cluster, headless nodes as real processes (loopback).

The big one: 3 relays on a 3-node NATS cluster (routes on loopback ports), 6
headless nodes spread over them (each knows all three relays, its own first),
300 messages with 20% loss each way; mid-run one relay and one NATS server are
killed with SIGKILL. Every node ends with the identical history, every
message once, nothing typed lost.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from cluster_helpers import (
    assert_no_duplicate_deliveries,
    cluster_relay,
    connected_to,
    log_count,
    relay_flags,
    unacked,
)
from nats_servers import NatsServers

from net.urls import display_address
from tests.procs import Cluster, T, comparable, history, running


def _type(p: object, lines: list[str], per_second: float, stop_at: threading.Event) -> None:
    gap = 1.0 / per_second
    for line in lines:
        p.send(line)  # type: ignore[attr-defined]
        time.sleep(gap)
    stop_at.set()


def test_three_relays_on_three_nats_six_nodes_300_messages_kill_relay_and_nats(
    tmp_path: Path, nats3: NatsServers
) -> None:
    per_node = 50
    with running(Cluster(tmp_path)) as c:
        n_urls = nats3.urls  # relay i prefers NATS server i (the first it is given)
        relays = [
            cluster_relay(c, [n_urls[(i + j) % 3] for j in range(3)], f"relay-{i}")
            for i in range(3)
        ]
        urls = [u for _, u in relays]
        names = [f"node{k}" for k in range(6)]
        nodes = []
        for k, name in enumerate(names):
            mine = [urls[(k + j) % 3] for j in range(3)]  # two nodes prefer each relay
            extra = [*relay_flags(mine[1:]), "--drop-rate", "0.2", "--drop-seed", str(k),
                     "--lost-timeout-ms", "90000"]
            nodes.append(c.headless(name, tmp_path / name, relay=mine[0], extra=extra))
        for p in nodes:
            p.wait_for(lambda p=p: bool(p.select("channel")), 30, "joined")
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30, "up")
        done = [threading.Event() for _ in nodes]
        threads = [
            threading.Thread(
                target=_type,
                args=(p, [f"{p.name} says {i}" for i in range(per_node)], 12.0, done[k]),
                daemon=True,
            )
            for k, p in enumerate(nodes)
        ]
        for t in threads:
            t.start()
        # mid-run: a relay and a NATS server die without a word
        nodes[0].wait_for(lambda: len(nodes[0].select("own", state="logged")) >= 15, 30,
                          "a third typed")
        relays[0][0].kill9()
        nats3.servers[1].kill9()
        for t in threads:
            t.join(T(60))
        total = per_node * len(nodes)
        for p in nodes:
            p.wait_for(lambda p=p: log_count(p) >= total, 120, f"{total} messages in the log")
        for p in nodes:
            p.wait_for(lambda p=p: not unacked(p), 90, "every own message acknowledged")
        assert_no_duplicate_deliveries(*nodes)
        # the clients of the dead relay failed over to another one
        dead = display_address(urls[0])
        movers = [p for k, p in enumerate(nodes) if k % 3 == 0]
        for p in movers:
            reasons = connected_to(p)
            assert reasons[0] == f"connected to {dead}", reasons
            assert any(r != f"connected to {dead}" for r in reasons[1:]), reasons
        # relay-1's NATS server died: it reconnected to another one
        relays[1][0].wait_log("cluster_reconnected", 30)
        for p in nodes:
            assert len(p.select("own", state="queued")) == per_node  # nothing typed lost
            assert not p.select("own", state="failed")
            p.close_stdin()
        for p in nodes:
            assert p.wait(30) == 0, p.tail()
            closed = p.select("closed")[-1]["counters"]
            assert closed.get("internal_errors", 0) == 0
        hists = [history(tmp_path / n) for n in names]
        for h in hists[1:]:
            assert comparable(h) == comparable(hists[0])
        assert len(hists[0]) == total
        assert sorted(h["content"] for h in hists[0]) == sorted(
            f"{n} says {i}" for n in names for i in range(per_node)
        )
