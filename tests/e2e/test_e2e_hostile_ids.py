"""A member attacks message ids; a restarted sender republishes: real processes, a real relay.

The attacker is a raw relay client (``Spy``) holding the channel key (a member: on
a public channel, anyone) and builds envelopes with the project's own ``net``
modules. The nodes are real ``sdschat join --headless`` processes.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from e2e_helpers import Proc, T, cluster, history, log_count
from test_e2e_security import _up, spy

from app.chat.lines import encode_content
from net.channel_key import derive_channel_key
from net.envelope import open_envelope, seal
from net.identity import Identity
from sds import sds_pb2

ROOM = derive_channel_key("room", None)  # the cluster's default channel: public


def _same(hist: list[dict[str, Any]]) -> list[tuple[str, str, int, str, str]]:
    """What must be equal everywhere: id, author, timestamp, text and content digest."""
    return [(h["id"], h["sender"], h["lamport"], h["content"], h["digest"]) for h in hist]


def _sds(envelope: bytes) -> sds_pb2.SdsMessage:
    message = open_envelope(envelope, ROOM).sds_message
    assert message is not None
    return message


def _stats(p: Proc) -> dict[str, int]:
    """The node's counters now (``/stats``)."""
    before = len(p.select("info", text="stats"))
    p.send("/stats")
    p.wait_for(lambda: len(p.select("info", text="stats")) > before, 10, "/stats")
    counters: dict[str, int] = p.select("info", text="stats")[-1]["data"]["counters"]
    return counters


def _until(p: Proc, cond: Callable[[dict[str, int]], bool], what: str) -> None:
    deadline = time.monotonic() + T(20)
    while not cond(_stats(p)):  # bounded by the deadline
        if time.monotonic() > deadline:
            raise AssertionError(f"{p.name}: {what}: {_stats(p)}")
        time.sleep(0.1)


def test_copied_id_signed_by_another_member_never_replaces_the_genuine_message(
    tmp_path: Path,
) -> None:
    """Issue 14 §2. Mallory copies the id, timestamp and causal history of alice's
    message, writes her own text under alice's display name, signs it as herself (so
    every envelope check passes) and publishes it to a peer before the genuine one.
    Before ids were verified that peer kept the forgery and dropped alice's message as
    a duplicate: same ids in the same order, different texts and authors."""
    mallory = Identity.generate()
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        a = c.node("alice", url)
        b = c.node("bob", url)
        _up(a, b)
        with spy(url, [ROOM.topic]) as s:
            a.send("first")
            b.wait_for(lambda: log_count(b) == 1, 20, "first")
            a.send("pay bob 10 coins")
            b.wait_for(lambda: log_count(b) == 2, 20, "the genuine message")
            s.drain()
            wanted = encode_content("pay bob 10 coins", "alice")
            genuine_env = next(
                e for e in s.captured if _sds(e).content == wanted  # a member reads it
            )
            genuine = _sds(genuine_env)

            forged = sds_pb2.SdsMessage()
            forged.CopyFrom(genuine)  # id, timestamp, history, filter
            forged.sender_id = mallory.sender_id
            forged.content = encode_content("pay mallory 1000 coins", "alice")
            forged_env = seal(forged.SerializeToString(), mallory, ROOM)

            # carol comes (back) online; the forgery reaches her first
            carol = c.node("carol", url)
            _up(carol)
            s.publish(forged_env)
            s.publish(genuine_env)
            carol.wait_for(lambda: log_count(carol) >= 2, 30, "both of alice's messages")
            carol.wait_for(
                lambda: bool(carol.select("rejected", reason="unverifiable_id")), 10, "refusal"
            )
        a.send("after the attack")
        for p in (b, carol):
            p.wait_for(lambda p=p: log_count(p) == 3, 30, "the next message")
        got = [(e["sender"], e["text"]) for e in carol.select("delivered")]
        a_id = a.select("ready")[0]["sender"]
        assert got == [
            (a_id, "first"),
            (a_id, "pay bob 10 coins"),
            (a_id, "after the attack"),
        ]
        assert all(e["sender"] != mallory.sender_id for e in carol.select("delivered"))
        for p in (a, b, carol):
            p.close_stdin()
            assert p.wait(30) == 0
        logs = [_same(history(tmp_path / n)) for n in ("alice", "bob", "carol")]
        assert logs[0] == logs[1] == logs[2]
        assert [h[3] for h in logs[2]] == ["first", "pay bob 10 coins", "after the attack"]
        counters = carol.select("closed")[0]["counters"]
        assert counters["rejected_unverifiable_id"] == 1
        assert counters.get("conflicts", 0) == 0


def test_same_js_waku_id_from_two_authors_is_a_reported_conflict(tmp_path: Path) -> None:
    """js-waku ids are sha256(content): two authors of one content share an id. The
    first stays, the second is reported (event, counter, history mark), not dropped
    silently."""
    m1, m2 = Identity.generate(), Identity.generate()
    content = encode_content("ok", "someone")
    wid = hashlib.sha256(content).hexdigest()

    def waku_message(ident: Identity) -> bytes:
        return sds_pb2.SdsMessage(
            sender_id=ident.sender_id, message_id=wid, channel_id="room",
            lamport_timestamp=1_700_000_000_000, content=content,
        ).SerializeToString()  # fmt: skip

    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        b = c.node("bob", url)
        _up(b)
        with spy(url, [ROOM.topic]) as s:
            s.publish(seal(waku_message(m1), m1, ROOM))
            b.wait_for(lambda: log_count(b) == 1, 20, "the first copy")
            s.publish(seal(waku_message(m2), m2, ROOM))
            b.wait_for(lambda: bool(b.select("conflict")), 20, "the conflict")
        ev = b.select("conflict")[0]
        assert (ev["message_id"], ev["sender"], ev["other_sender"], ev["reason"]) == (
            wid, m1.sender_id, m2.sender_id, "author"
        )  # fmt: skip
        b.close_stdin()
        assert b.wait(30) == 0
        (line,) = history(tmp_path / "bob")
        assert (line["id"], line["sender"], line["conflict"]) == (wid, m1.sender_id, True)
        assert line["digest"] == hashlib.sha256(content).hexdigest()
        assert b.select("closed")[0]["counters"]["conflicts"] == 1


def test_restarted_sender_republishing_is_counted_as_duplicates_not_rejections(
    tmp_path: Path,
) -> None:
    """Issue 14 §8: a sender restarted with unacknowledged messages republished their
    envelopes; each receiver saw hundreds of ``rejected``/``replayed`` events. An
    honest copy is a counted duplicate.

    A restart no longer republishes what left while nobody is heard (the copies go with
    the core's resends once someone is: issue 41 item 8), so the copies are the ones a
    restarted sender of the earlier rule sent, and a relay replays: the same envelope
    bytes, published again after alice's restart."""
    n = 40
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        # bob never acknowledges (no sync for minutes, no content): alice's stay unacked
        b = c.node("bob", url, extra=["--sync-ms", "600000"])
        a = c.node("alice", url, extra=["--resend-ms", "600000"])
        _up(a, b)
        with spy(url, [ROOM.topic]) as s:
            a.send(*[f"line {i}" for i in range(n)])
            b.wait_for(lambda: log_count(b) == n, 30, "every line")
            a.close_stdin()
            assert a.wait(30) == 0
            a2 = c.node("alice", url, extra=["--resend-ms", "600000"], label="alice-again")
            _up(a2)
            s.drain()
            lines = {encode_content(f"line {i}", "alice") for i in range(n)}
            copies = {_sds(e).message_id: e for e in s.captured if _sds(e).content in lines}
            assert len(copies) == n
            for env in copies.values():
                s.publish(env)
        _until(b, lambda k: k.get("duplicate_envelopes", 0) >= n, "bob got the copies")
        a2.close_stdin()
        assert a2.wait(30) == 0
        assert a2.select("closed")[0]["counters"].get("republished", 0) == 0
        b.close_stdin()
        assert b.wait(30) == 0
        assert b.select("rejected") == []
        counters = b.select("closed")[0]["counters"]
        assert counters["duplicate_envelopes"] == n
        assert not any(k.startswith("rejected_") for k in counters)
        assert log_count(b) == n
