"""A copied data dir is refused, never silently broken (issue 40 §4): real processes, a
relay on loopback, a data dir copied with ``cp -a`` as a user copies it."""

from __future__ import annotations

import subprocess
from pathlib import Path

from e2e_helpers import T, cluster, history

from app.members.device_copy import DEVICE_FILE


def _ready(*procs: object) -> None:
    for p in procs:
        p.wait_for(lambda p=p: bool(p.select("channel")), 30, "joined")  # type: ignore[attr-defined]
        p.wait_for(lambda p=p: bool(p.select("connection", state="connected")),  # type: ignore[attr-defined]
                   30, "connected")  # fmt: skip


def _sees(p: object, text: str) -> None:
    p.wait_for(lambda: any(e.get("text") == text for e in p.select("delivered")),  # type: ignore[attr-defined]
               30, f"{text!r} delivered")  # fmt: skip


def _cp_a(src: Path, dst: Path) -> None:
    subprocess.run(["cp", "-a", str(src), str(dst)], check=True, timeout=T(30))


def test_a_copied_data_dir_is_refused_at_start_and_the_original_goes_on(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        bob = c.node("bob", url)
        _ready(bob)
        bob.send("before the copy")
        bob.wait_for(lambda: bool(bob.select("own", state="sent")), 30, "sent")
        bob.close_stdin()
        assert bob.wait(60) == 0, bob.tail()
        laptop = tmp_path / "bob-laptop"
        _cp_a(tmp_path / "bob", laptop)
        before = sorted(p.name for p in laptop.iterdir())
        hist = history(laptop)

        copy = c.node("bob", url, data_dir=laptop, label="bob-laptop")
        assert copy.wait(60) == 7, copy.tail()
        err = copy.select("error", fatal=True)
        assert err and err[0]["exit"] == 7
        text = err[0]["message"]
        assert f"is a copy of {(tmp_path / 'bob').resolve()}" in text
        assert "--moved" in text and "sdschat join --link CODE" in text
        assert not copy.select("own") and not copy.select("ready")  # nothing sent
        assert sorted(p.name for p in laptop.iterdir()) == before
        assert history(laptop) == hist  # nothing lost, nothing changed

        bob = c.node("bob", url, label="bob-again")  # the original is not a copy
        carol = c.node("carol", url)
        _ready(bob, carol)
        bob.send("the original goes on")
        _sees(carol, "the original goes on")
        bob.close_stdin()
        carol.close_stdin()
        assert bob.wait(60) == 0, bob.tail()
        assert carol.wait(60) == 0, carol.tail()

        # the user says the original is gone for good: the copy is the device now
        moved = c.node("bob", url, data_dir=laptop, label="bob-moved", extra=["--moved"])
        _ready(moved)
        assert not moved.select("error", fatal=True)
        moved.close_stdin()
        assert moved.wait(60) == 0, moved.tail()


def test_two_copies_running_at_once_are_told_by_what_arrives_and_the_line_is_kept(
        tmp_path: Path) -> None:  # fmt: skip
    """A copy the start check cannot see (made before sdschat recorded where the key
    lives, or a VM snapshot): the first line one copy sends stops the other, saying so."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        bob = c.node("bob", url)
        _ready(bob)
        bob.close_stdin()
        assert bob.wait(60) == 0, bob.tail()
        snapshot = tmp_path / "bob-snapshot"
        _cp_a(tmp_path / "bob", snapshot)
        for d in (tmp_path / "bob", snapshot):  # as an older sdschat left them
            (d / DEVICE_FILE).unlink()
        carol = c.node("carol", url)
        bob = c.node("bob", url, label="bob-2")
        twin = c.node("bob", url, data_dir=snapshot, label="bob-twin")
        _ready(carol, bob, twin)
        bob.send("from the original")
        _sees(carol, "from the original")
        twin.wait_for(lambda: bool(twin.select("device_copy")), 30, "the copy told")
        assert twin.wait(60) == 7, twin.tail()
        ev = twin.select("device_copy")[0]
        assert ev["channel"] == "room"
        assert "another process is using this device's key" in ev["text"]
        fatal = twin.select("error", fatal=True)
        assert fatal and fatal[0]["exit"] == 7
        # the original, which has not heard a line of the twin's, goes on; carol holds
        # every line; nobody else was told anything
        bob.send("still here")
        _sees(carol, "still here")
        assert not bob.select("device_copy") and not carol.select("device_copy")
        bob.close_stdin()
        carol.close_stdin()
        assert bob.wait(60) == 0, bob.tail()
        assert carol.wait(60) == 0, carol.tail()
        texts = [h["content"] for h in history(tmp_path / "carol")]
        assert texts == ["from the original", "still here"]


def test_the_others_are_told_when_an_old_copy_of_a_member_speaks(tmp_path: Path) -> None:
    """bob's data dir restored from an old backup (or a VM snapshot) speaks while carol
    holds bob's later line: its line does not know bob's own, and carol is told, once;
    she keeps every line."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        carol = c.node("carol", url)
        bob = c.node("bob", url)
        _ready(carol, bob)
        carol.send("before the backup")
        carol.send("and this one")  # the copy's history starts with these two, in order
        _sees(bob, "and this one")
        bob.close_stdin()
        assert bob.wait(60) == 0, bob.tail()
        backup = tmp_path / "bob-backup"
        _cp_a(tmp_path / "bob", backup)
        (backup / DEVICE_FILE).unlink()  # as an older sdschat left it
        bob = c.node("bob", url, label="bob-2")
        _ready(bob)
        bob.send("after the backup")
        _sees(carol, "after the backup")
        bob.close_stdin()
        assert bob.wait(60) == 0, bob.tail()
        old = c.node("bob", url, data_dir=backup, label="bob-old")
        _ready(old)
        old.send("from the old copy")
        _sees(carol, "from the old copy")
        carol.wait_for(lambda: bool(carol.select("device_twins")), 30, "carol told")
        ev = carol.select("device_twins")[0]
        assert ev["channel"] == "room" and ev["name"] == "bob"
        assert "two copies of one data directory" in ev["text"]
        old.send("and again")
        _sees(carol, "and again")
        assert len(carol.select("device_twins")) == 1  # once per member and channel
        old.close_stdin()
        carol.close_stdin()
        assert old.wait(60) == 0, old.tail()
        assert carol.wait(60) == 0, carol.tail()
        texts = [h["content"] for h in history(tmp_path / "carol")]
        assert texts == ["before the backup", "and this one", "after the backup",
                         "from the old copy", "and again"]
