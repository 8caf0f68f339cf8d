"""Typed content between real processes over a real relay: replies, reactions, edits,
deletions, topics and a file, shown identically by both sides' ``history --json``."""

from __future__ import annotations

import hashlib
import random
from pathlib import Path
from typing import Any

from e2e_helpers import Proc, cluster, history


def _ready(*nodes: Proc) -> None:
    for p in nodes:
        p.wait_for(lambda p=p: bool(p.select("channel")), 20, "joined")
        p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 20, "connected")


def _own_id(p: Proc, text: str) -> str:
    p.wait_for(lambda: bool(p.select("own", state="logged", text=text)), 20, f"{text!r} logged")
    return str(p.select("own", state="logged", text=text)[0]["message_id"])


def _delivered(p: Proc, n: int) -> None:
    p.wait_for(lambda: len(p.select("delivered")) >= n, 60, f"{n} deliveries")


def _folded(h: list[dict[str, Any]]) -> list[tuple[object, ...]]:
    keys = ("id", "sender", "kind", "content", "edited", "deleted", "reactions", "reply_to")
    return [tuple(str(x[k]) for k in keys) for x in h]


def test_reply_reaction_edit_delete_topic_shown_alike(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice, bob = c.node("alice", url), c.node("bob", url)
        _ready(alice, bob)
        alice.send("hello bob", "typo here")
        hello, typo = _own_id(alice, "hello bob"), _own_id(alice, "typo here")
        _delivered(bob, 2)
        bob.send(f"/reply {hello[:10]} hi alice", f"/react {hello} 👍", f"/edit {hello} nope")
        bob.wait_for(lambda: bool(bob.select("error")), 20, "refused edit of alice's line")
        assert "only its author" in bob.select("error")[0]["message"]
        _delivered(alice, 2)
        alice.send(
            f"/edit {hello} hello bob!",
            f"/delete {typo}",
            f"/react {hello} 🎉",
            f"/react {hello} 🎉",  # the same again takes it back
            "/topic plans for friday",
        )
        _delivered(bob, 2 + 5)
        for p in (alice, bob):
            p.close_stdin()
        for p in (alice, bob):
            assert p.wait(30) == 0, p.tail()
        ha, hb = history(tmp_path / "alice"), history(tmp_path / "bob")
        assert _folded(ha) == _folded(hb)
        by_id = {x["id"]: x for x in ha}
        first = by_id[hello]
        assert (first["content"], first["edited"]) == ("hello bob!", True)
        assert first["reactions"] == {"👍": [bob.select("ready")[0]["sender"]]}
        assert by_id[typo]["deleted"] and by_id[typo]["content"] == ""
        reply = next(x for x in ha if x["kind"] == "reply")
        assert reply["content"] == "hi alice"
        assert reply["reply_to"]["id"] == hello and reply["reply_to"]["quote"] == "hello bob!"
        assert [x["kind"] for x in ha] == ["msg", "msg", "reply", "topic"]
        assert ha[-1]["content"] == "plans for friday"


def test_300_kb_file_with_30_percent_loss_arrives_intact(tmp_path: Path) -> None:
    data = random.Random(15).randbytes(300_000)
    src = tmp_path / "photo.bin"
    src.write_bytes(data)
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        lossy = ["--drop-rate", "0.3", "--drop-seed", "4", "--lost-timeout-ms", "90000"]
        alice, bob = c.node("alice", url), c.node("bob", url, extra=lossy)
        _ready(alice, bob)
        alice.send(f"/send {src}")
        manifest = _own_id_kind(alice, "file")
        # 1 manifest + 7 segments of 48 KiB, all delivered despite the loss
        _delivered(bob, 8)
        out_dir = tmp_path / "chosen"
        out_dir.mkdir()
        bob.send(f"/save {manifest[:12]}", f"/save {manifest[:12]} {out_dir}")
        bob.wait_for(lambda: len(_saved(bob)) + len(bob.select("error")) >= 2, 30, "saved")
        assert not bob.select("error"), bob.select("error")
        saved = [Path(x) for x in _saved(bob)]
        assert saved == [tmp_path / "bob" / "files" / "photo.bin", out_dir / "photo.bin"]
        for path in saved:
            assert hashlib.sha256(path.read_bytes()).digest() == hashlib.sha256(data).digest()
        for p in (alice, bob):
            p.close_stdin()
        for p in (alice, bob):
            assert p.wait(30) == 0, p.tail()
        [item] = [x for x in history(tmp_path / "bob") if x["kind"] == "file"]
        assert item["file"]["complete"] and item["file"]["intact"]
        assert (item["file"]["segments"], item["file"]["total"]) == (7, 7)
        assert bob.select("closed")[-1]["counters"].get("internal_errors", 0) == 0
        sent = alice.select("closed")[-1]["counters"]
        assert sent.get("resent", 0) + sent.get("repair_sent", 0) > 0  # the loss was real


def _own_id_kind(p: Proc, kind: str) -> str:
    p.wait_for(lambda: bool(p.select("own", state="logged", kind=kind)), 30, f"own {kind}")
    return str(p.select("own", state="logged", kind=kind)[0]["message_id"])


def _saved(p: Proc) -> list[str]:
    return [str(e["data"]["saved"]) for e in p.select("info") if "saved" in e.get("data", {})]


def test_typed_content_missed_while_away_is_caught_up_after_a_restart(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        _store, store_url = c.store(url, tmp_path / "store", channels=("room",))
        alice = c.node("alice", url, extra=["--store", store_url])
        bob = c.node("bob", url, extra=["--store", store_url])
        _ready(alice, bob)
        alice.send("target line")
        target = _own_id(alice, "target line")
        _delivered(bob, 1)
        bob.close_stdin()
        assert bob.wait(30) == 0
        alice.send(f"/edit {target} target line, edited", f"/react {target} 👀", "/topic away")
        alice.wait_for(lambda: len(alice.select("own", state="sent")) >= 4, 20, "all sent")
        bob2 = c.node("bob", url, extra=["--store", store_url], label="bob-again")
        _ready(bob2)
        _delivered(bob2, 3)
        bob2.send(f"/reply {target[:8]} seen it")
        _delivered(alice, 1)
        for p in (alice, bob2):
            p.close_stdin()
        for p in (alice, bob2):
            assert p.wait(30) == 0, p.tail()
        ha, hb = history(tmp_path / "alice"), history(tmp_path / "bob")
        assert _folded(ha) == _folded(hb)
        assert [x["kind"] for x in hb] == ["msg", "topic", "reply"]
        assert hb[0]["content"] == "target line, edited" and hb[0]["edited"]
        assert list(hb[0]["reactions"]) == ["👀"]
        assert hb[2]["reply_to"]["quote"] == "target line, edited"
