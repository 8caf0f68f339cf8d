"""Relay + headless nodes as real processes: loss, kill -9, relay restart. Loopback only."""

from __future__ import annotations

import sys
import threading
import time
from collections import Counter
from pathlib import Path

from e2e_helpers import (
    T,
    cluster,
    comparable,
    free_port,
    history,
    log_count,
    write_lines_paced,
)


def _type_in_parallel(jobs: list[tuple[object, list[str], float]]) -> None:
    threads = [threading.Thread(target=write_lines_paced, args=job, daemon=True) for job in jobs]
    for t in threads:
        t.start()
    for t in threads:
        t.join(T(120))


def _assert_no_duplicate_deliveries(*procs: object) -> None:
    for p in procs:
        ids = [e["message_id"] for e in p.select("delivered")]  # type: ignore[attr-defined]
        dup = [m for m, n in Counter(ids).items() if n > 1]
        assert not dup, f"{p.name} delivered twice: {dup[:3]}"  # type: ignore[attr-defined]


def test_three_nodes_300_messages_with_30_percent_loss(tmp_path: Path) -> None:
    per_node = 100
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        names = ("alice", "bob", "carol")
        # --fast gives up on a missing message after 20 s. At 30% loss each way a
        # message acknowledged by one peer but missed by another must come back by
        # SDS-R repair (request and answer each cross two lossy hops); on a busy
        # machine 20 s of repair rounds is sometimes not enough and the message is
        # (correctly) reported lost, which is not what this test is about.
        lossy = ["--drop-rate", "0.3", "--lost-timeout-ms", "90000"]
        nodes = [
            c.node(n, url, extra=[*lossy, "--drop-seed", str(i)]) for i, n in enumerate(names)
        ]
        for p in nodes:
            p.wait_for(lambda p=p: bool(p.select("channel")), 20, "joined")
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 20, "connected")
        assert all(p.select("channel")[0]["public"] for p in nodes)
        _type_in_parallel(
            [(p, [f"{p.name} says {i}" for i in range(per_node)], 40.0) for p in nodes]
        )
        total = per_node * len(nodes)
        for p in nodes:
            p.wait_for(lambda p=p: log_count(p) >= total, 150, f"{total} messages in the log")
        for p in nodes:
            p.wait_for(
                lambda p=p: len(p.select("own", state="acknowledged")) == per_node,
                90,
                "every own message acknowledged",
            )
        _assert_no_duplicate_deliveries(*nodes)
        for p in nodes:
            assert len(p.select("own", state="queued")) == per_node
            assert not p.select("own", state="failed")
            assert log_count(p) == total
            p.close_stdin()
        for p in nodes:
            assert p.wait(30) == 0, p.tail()
            closed = p.select("closed")[-1]["counters"]
            assert closed.get("internal_errors", 0) == 0
            assert closed.get("resent", 0) > 0  # the loss was real and repaired
        hists = [history(tmp_path / n) for n in names]
        assert comparable(hists[0]) == comparable(hists[1]) == comparable(hists[2])
        assert len(hists[0]) == total
        assert len({h["id"] for h in hists[0]}) == total
        assert sorted(h["content"] for h in hists[0]) == sorted(
            f"{n} says {i}" for n in names for i in range(per_node)
        )
        for n, hist in zip(names, hists, strict=True):
            own = [h for h in hist if h["name"] == n]
            assert {h["state"] for h in own} == {"acknowledged"}


def test_kill_9_mid_burst_loses_nothing_and_duplicates_nothing(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        a = c.node("alice", url, label="alice-1")
        b = c.node("bob", url)
        carol = c.node("carol", url)
        for p in (a, b, carol):
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 20, "up")
            p.wait_for(lambda p=p: bool(p.select("channel")), 20, "joined")
        b.send(*[f"bob before {i}" for i in range(10)])
        a.wait_for(lambda: len(a.select("delivered")) == 10, 20, "bob's messages")
        burst = [f"burst line {i}" for i in range(400)]
        a.send(*burst)  # one write: the node reads and enqueues as fast as it can
        a.wait_for(lambda: len(a.select("own", state="queued")) >= 60, 20, "part of the burst")
        a.kill9()
        confirmed = {e["text"] for e in a.select("own", state="queued")}
        logged = {e["text"] for e in a.select("own", state="logged")}
        sent = len(a.select("own", state="sent"))
        print(f"at kill -9: {len(confirmed)} queued, {len(logged)} logged, {sent} sent")
        assert len(confirmed) >= 60
        carol.send(*[f"carol meanwhile {i}" for i in range(10)])

        a2 = c.node("alice", url, label="alice-2")
        a2.wait_for(lambda: bool(a2.select("connection", state="connected")), 20, "restarted")
        a2.send("after restart")
        expected = confirmed | {"after restart"}

        def texts(p: object) -> set[str]:
            return {e["text"] for e in p.select("delivered")}  # type: ignore[attr-defined]

        for p in (b, carol):
            p.wait_for(lambda p=p: expected <= texts(p), 60, "every confirmed line")
        meanwhile = {f"carol meanwhile {i}" for i in range(10)}
        try:
            a2.wait_for(lambda: meanwhile <= texts(a2), 60, "carol's messages at restarted alice")
        except AssertionError as exc:  # say how far it got (a rare failure, not reproduced)
            kinds = Counter(e.get("event") for e in a2.snapshot())
            carol_ids = {e["message_id"] for e in carol.select("own", state="logged")
                         if e["text"] in meanwhile}
            named = {m for e in a2.select("missing") for m in e.get("ids") or ()}
            raise AssertionError(
                f"{exc}\nat alice-2: {len(meanwhile & texts(a2))}/10 of carol's lines; "
                f"{len(carol_ids & named)}/10 noticed missing; events {dict(kinds)}"
            ) from None
        # let resends/repairs settle, then check exactly-once everywhere
        for p in (a2, b, carol):
            p.wait_for(lambda p=p: not _unacked(p), 60, "own messages acknowledged")
        _assert_no_duplicate_deliveries(a, a2, b, carol)
        first_run = {e["message_id"] for e in a.select("delivered")}
        second_run = {e["message_id"] for e in a2.select("delivered")}
        assert not first_run & second_run, "alice delivered a message again after restart"
        for p in (a2, b, carol):
            p.close_stdin()
            assert p.wait(30) == 0, p.tail()
        hists = {n: history(tmp_path / n) for n in ("alice", "bob", "carol")}
        assert comparable(hists["alice"]) == comparable(hists["bob"]) == comparable(hists["carol"])
        contents = Counter(h["content"] for h in hists["bob"])
        assert all(n == 1 for n in contents.values()), "a line was sent twice"
        assert expected <= set(contents)
        unconfirmed_seen = {t for t in contents if t.startswith("burst")} - confirmed
        assert unconfirmed_seen <= set(burst)  # read before the kill, event not yet printed


def _unacked(p: object) -> set[str]:
    """Own message ids logged but not yet acknowledged (per the node's events)."""
    logged = {e["message_id"] for e in p.select("own", state="logged")}  # type: ignore[attr-defined]
    acked = {e["message_id"] for e in p.select("own", state="acknowledged")}  # type: ignore[attr-defined]
    return logged - acked


def test_relay_restart_mid_conversation(tmp_path: Path) -> None:
    port = free_port()
    with cluster(tmp_path) as c:
        relay, url = c.relay(port)
        names = ("alice", "bob", "carol")
        nodes = [c.node(n, url) for n in names]
        for p in nodes:
            p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 20, "up")
            p.wait_for(lambda p=p: bool(p.select("channel")), 20, "joined")
        for p in nodes:
            p.send(*[f"{p.name} before {i}" for i in range(5)])
        for p in nodes:
            p.wait_for(lambda p=p: log_count(p) >= 15, 30, "first round")
        relay.kill9()
        for p in nodes:
            p.wait_for(
                lambda p=p: bool(p.select("connection", state="disconnected")),
                20,
                "noticed the relay is gone",
            )
            p.send(*[f"{p.name} during outage {i}" for i in range(5)])
        for p in nodes:
            p.wait_for(
                lambda p=p: len(p.select("own", state="logged")) >= 10,
                20,
                "lines typed during the outage are logged",
            )
        time.sleep(0.5)
        relay2, _ = c.relay(port, name="relay-2")
        for p in nodes:
            p.wait_for(
                lambda p=p: len(p.select("connection", state="connected")) >= 2, 40, "reconnected"
            )
        for p in nodes:
            p.send(*[f"{p.name} after {i}" for i in range(5)])
        for p in nodes:
            p.wait_for(lambda p=p: log_count(p) >= 45, 60, "all 45 messages")
            p.wait_for(lambda p=p: not _unacked(p), 60, "own messages acknowledged")
        _assert_no_duplicate_deliveries(*nodes)
        for p in nodes:
            p.close_stdin()
            assert p.wait(30) == 0, p.tail()
        hists = [history(tmp_path / n) for n in names]
        assert comparable(hists[0]) == comparable(hists[1]) == comparable(hists[2])
        assert len(hists[0]) == 45
        del relay2
    assert sys.platform.startswith("linux") or True
