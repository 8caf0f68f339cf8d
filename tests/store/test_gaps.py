"""Filling gaps: SDS-R repair from peers without a store; a dependency nobody has (not
in SQLite, not at the store, no peer answers SDS-R) is reported lost once.

Real processes (relay + headless nodes) on 127.0.0.1, fast protocol timings.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from store_helpers import (
    T,
    cluster,
    comparable,
    history,
    run,
    texts_delivered,
    wait_connected,
)

from app.chat.lines import encode_content
from net.channel_key import derive_channel_key
from net.envelope import seal
from net.identity import Identity
from net.relay_client import RelayClient
from sds import sds_pb2
from sds.ids import message_id_for


def test_sds_r_repair_from_peers_fills_a_gap_without_a_store(tmp_path: Path) -> None:
    """Carol joins after alice left; bob's messages name alice's: bob repairs them."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", tmp_path / "alice", relay=url)
        bob = c.node("bob", tmp_path / "bob", relay=url)
        wait_connected(alice, bob)
        lines = [f"before carol {i}" for i in range(5)]
        alice.send(*lines)
        bob.wait_for(lambda: texts_delivered(bob) >= set(lines), 30, "alice's lines")
        alice.close_stdin()
        assert alice.wait(30) == 0  # alice is gone: she cannot resend anything
        carol = c.node("carol", tmp_path / "carol", relay=url)
        wait_connected(carol)
        bob.send("bob says hi to carol")
        carol.wait_for(
            lambda: texts_delivered(carol) >= {*lines, "bob says hi to carol"},
            40,
            "alice's lines repaired by bob",
        )
        assert carol.select("missing"), "carol noticed the gap first"
        assert not carol.select("lost")
        bob.send("/stats")
        bob.wait_for(lambda: any("counters" in (e.get("data") or {}) for e in bob.select("info")),
                     10, "stats")
        stats = next(e["data"] for e in bob.select("info") if "counters" in (e.get("data") or {}))
        assert stats["counters"].get("repair_datagrams", 0) >= 1  # bob rebroadcast them
        for p in (bob, carol):
            p.close_stdin()
            assert p.wait(30) == 0
    hb, hc = history(tmp_path / "bob"), history(tmp_path / "carol")
    assert comparable(hb) == comparable(hc)
    assert len(hb) == 6


def _orphan_envelope(channel: str, missing_id: str, hint: bytes) -> tuple[bytes, str]:
    """A signed message whose causal history names ``missing_id``, which nobody has."""
    key = derive_channel_key(channel, None)  # the public channel the nodes joined
    ident = Identity.generate()
    lamport = time.time_ns() // 1_000_000
    content = encode_content("the orphan", "mallory")
    # nodes check ids (sds.ids): the verifiable sdschat form
    mid = message_id_for(channel, ident.sender_id, lamport, content, os.urandom(8))
    msg = sds_pb2.SdsMessage(
        sender_id=ident.sender_id,
        message_id=mid,
        channel_id=channel,
        lamport_timestamp=lamport,
        causal_history=[sds_pb2.HistoryEntry(message_id=missing_id, retrieval_hint=hint)],
        content=content,
    )
    return seal(msg.SerializeToString(), ident, key), mid


def test_a_dependency_nobody_has_is_reported_lost_once_after_the_timeout(
    tmp_path: Path,
) -> None:
    missing_id = os.urandom(32).hex()
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        _store, store_url = c.store(url, tmp_path / "store", channels=("room",))
        timeout_ms = 4000
        bob = c.node("bob", tmp_path / "bob", relay=url,
                     extra=["--lost-timeout-ms", str(timeout_ms), "--store", store_url])
        wait_connected(bob)
        env, orphan_id = _orphan_envelope("room", missing_id, os.urandom(32))

        async def publish() -> None:  # the test plays a participant who then vanishes
            client = RelayClient(url, [], lambda _e: None)
            client.start()
            try:
                assert await client.wait_connected(T(10))
                assert await client.publish(env)
            finally:
                await client.close()

        t0 = time.monotonic()
        run(publish())
        bob.wait_for(lambda: bool(bob.select("missing")), 15, "the gap noticed")
        bob.wait_for(lambda: bool(bob.select("lost")), 30, "the loss reported")
        waited = time.monotonic() - t0
        assert waited >= timeout_ms / 1000 * 0.9
        lost = bob.select("lost")
        assert len(lost) == 1 and lost[0]["message_id"] == missing_id
        bob.wait_for(lambda: "the orphan" in texts_delivered(bob), 10, "waiter delivered")
        delivered = next(e for e in bob.select("delivered") if e.get("text") == "the orphan")
        assert delivered["missing_before"] == 1
        time.sleep(T(3))  # several more sweeps: still exactly one report
        assert len(bob.select("lost")) == 1
        bob.send("/stats")
        bob.wait_for(lambda: any("counters" in (e.get("data") or {}) for e in bob.select("info")),
                     10, "stats")
        stats = next(e["data"] for e in bob.select("info") if "counters" in (e.get("data") or {}))
        assert stats["store"]["fetch_misses"] >= 2  # the store was asked, with backoff
        assert stats["counters"].get("repair_requested", 0) >= 1  # and the peers, by SDS-R
        bob.close_stdin()
        assert bob.wait(30) == 0
    assert [h["id"] for h in history(tmp_path / "bob")] == [orphan_id]

