"""Copies of one data directory (app/members/device_copy.py): refused at start (a real
directory, copied as ``cp -a`` copies it, moved as ``mv`` moves it), and found by the
others through real SDS cores (a line that does not know its sender's earlier line)."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sds
from app.members.device_copy import (
    DEVICE_FILE,
    DataDirCopiedError,
    EchoWatch,
    KeyTwins,
    TwinWatch,
    check_home,
    forget_home,
)
from app.node.clock_guard import LamportMemory
from net.identity import Identity


def _data_dir(path: Path) -> tuple[Path, str]:
    ident = Identity.load_or_create(path / "identity.pem")
    return path, ident.sender_id


def test_the_first_start_records_the_directory_and_later_starts_pass(tmp_path: Path) -> None:
    d, sid = _data_dir(tmp_path / "bob")
    check_home(d, sid)
    record = json.loads((d / DEVICE_FILE).read_text())
    assert record["device"] == sid
    assert record["dir_inode"] == d.stat().st_ino
    assert (d / DEVICE_FILE).stat().st_mode & 0o777 == 0o600
    before = (d / DEVICE_FILE).stat().st_mtime_ns
    check_home(d, sid)  # nothing written again
    assert (d / DEVICE_FILE).stat().st_mtime_ns == before


def test_a_copy_made_with_cp_a_is_refused_with_what_to_do_and_nothing_changes(
        tmp_path: Path) -> None:  # fmt: skip
    d, sid = _data_dir(tmp_path / "bob")
    check_home(d, sid)
    copy = tmp_path / "bob-laptop"
    subprocess.run(["cp", "-a", str(d), str(copy)], check=True)
    record = (copy / DEVICE_FILE).read_bytes()
    with pytest.raises(DataDirCopiedError) as err:
        check_home(copy, sid)
    text = str(err.value)
    assert f"is a copy of {d.resolve()}" in text
    assert "--moved" in text and "sdschat join --link CODE" in text
    assert (copy / DEVICE_FILE).read_bytes() == record  # nothing was changed
    with pytest.raises(DataDirCopiedError):
        check_home(copy, sid)  # and refused again at the next start
    check_home(d, sid)  # the original goes on


def test_a_backup_restored_in_place_beside_the_original_is_refused_too(tmp_path: Path) -> None:
    d, sid = _data_dir(tmp_path / "bob")
    check_home(d, sid)
    backup = tmp_path / "backup"
    shutil.copytree(d, backup)
    os.rename(d, tmp_path / "bob.running")  # the original still exists (and may run)
    shutil.copytree(backup, d)
    with pytest.raises(DataDirCopiedError, match="a copy of this directory made earlier"):
        check_home(d, sid)


def test_mv_keeps_the_directory_its_own_and_moved_forgets_a_copy_s_origin(
        tmp_path: Path) -> None:  # fmt: skip
    d, sid = _data_dir(tmp_path / "bob")
    check_home(d, sid)
    moved = tmp_path / "elsewhere"
    os.rename(d, moved)  # one file system: the directory keeps its inode
    check_home(moved, sid)
    key = (moved / "identity.pem").read_bytes()  # a lost key file restored from a backup
    (moved / "identity.pem").unlink()
    (moved / "identity.pem").write_bytes(key)
    check_home(moved, sid)
    copy = tmp_path / "other-disk"
    shutil.copytree(moved, copy)
    shutil.rmtree(moved)  # the original is gone for good: the user says --moved
    forget_home(copy)
    check_home(copy, sid)
    check_home(copy, sid)
    assert json.loads((copy / DEVICE_FILE).read_text())["created_in"] == str(copy.resolve())


def test_a_record_of_another_key_or_unreadable_is_written_again(tmp_path: Path) -> None:
    d, sid = _data_dir(tmp_path / "bob")
    (d / DEVICE_FILE).write_text("{not json")
    check_home(d, sid)
    assert json.loads((d / DEVICE_FILE).read_text())["device"] == sid
    (d / DEVICE_FILE).write_text(json.dumps({"version": 1, "device": "other", "dir_inode": 1,
                                             "created_in": "/x"}))  # fmt: skip
    check_home(d, sid)
    assert json.loads((d / DEVICE_FILE).read_text())["device"] == sid


def test_the_echo_watch_reports_the_first_line_storage_does_not_hold_once() -> None:
    w = EchoWatch()
    assert w.suspect("room", "a")
    assert not w.suspect("room", "a")  # one look-up per id
    assert w.confirm("room", "a", stored=True) is None  # our own line, pruned from memory
    assert w.suspect("room", "b")
    found = w.confirm("room", "b", stored=False)
    assert found is not None and found.message_id == "b"
    assert "another process is using this device's key" in found.text
    assert "#room" in found.text
    assert not w.suspect("room", "c")  # reported once: nothing more is looked up
    assert w.confirm("room", "b", stored=False) is None


# -- the others: a line that does not know its sender's own earlier line ----------------


class _Observer:
    """carol: a real SDS core, and the watch fed by her deliveries as the node feeds it
    (app/node/effects.py)."""

    def __init__(self, config: sds.Config) -> None:
        self.core = sds.Channel("room", "carol", config, 1_000, random.Random(3))
        self.watch = TwinWatch()
        self.lamports = LamportMemory()
        self.found: list[KeyTwins] = []

    def take(self, data: bytes, now: int) -> None:
        self.core.receive(data, now)
        for ev in self.core.events():
            if isinstance(ev, sds.MessageDelivered):
                got = self.watch.delivered(
                    "room", ev.sender_id, ev.message_id, ev.lamport, ev.causal_history,
                    self.lamports.history_start("room", ev.causal_history))
                self.lamports.remember("room", ev.message_id, ev.lamport)
                if got is not None:
                    self.found.append(got)


def _core(sender: str, config: sds.Config, seed: int) -> sds.Channel:
    return sds.Channel("room", sender, config, 1_000, random.Random(seed))


def _config(size: int, floor: int | None) -> sds.Config:
    return sds.Config().with_changes(causal_history_size=size, causal_history_floor=floor)


@settings(max_examples=40, deadline=None)
@given(st.randoms(use_true_random=False), st.integers(min_value=2, max_value=8),
       st.sampled_from([None, 1, 2, 5]))
def test_one_process_per_key_is_never_taken_for_two_whatever_the_arrival_order(
        rnd: random.Random, size: int, floor: int | None) -> None:  # fmt: skip
    """Three honest senders (js-waku's fixed history or the adaptive one), messages
    delivered late, reordered and to some only: carol never reports twins."""
    cfg = _config(size, floor)
    senders = {n: _core(n, cfg, i) for i, n in enumerate(("alice", "bob", "dave"))}
    carol = _Observer(cfg)
    wire: list[bytes] = []
    now = 2_000
    for _ in range(60):
        now += rnd.randint(0, 30)
        if rnd.random() < 0.45 or not wire:
            name = rnd.choice(list(senders))
            wire.append(senders[name].send(f"{name} {now}".encode(), now))
            senders[name].events()
        else:  # one message from the wire, late and out of order, to some of them
            data = wire.pop(rnd.randrange(len(wire)))
            for core in senders.values():
                if rnd.random() < 0.7:
                    core.receive(data, now)
                    core.events()
            carol.take(data, now)
    for data in wire:
        carol.take(data, now)
    assert carol.found == [], carol.found


@pytest.mark.parametrize("floor", [None, 5])
def test_two_processes_signing_as_bob_are_found_by_carol_once(floor: int | None) -> None:
    cfg = _config(30, floor)
    bob1, bob2, alice = _core("bob", cfg, 1), _core("bob", cfg, 2), _core("alice", cfg, 4)
    carol = _Observer(cfg)
    for i in range(2):
        a = alice.send(f"hi {i}".encode(), 2_000 + i)
        for core in (bob1, bob2):
            core.receive(a, 2_002)
        carol.take(a, 2_002)
    m1 = bob1.send(b"from the desktop", 2_010)
    bob2.receive(m1, 2_011)  # dropped by the copy as its own echo
    assert not bob2.has_message(bob1.log_ids()[-1])
    carol.take(m1, 2_011)
    m2 = bob2.send(b"from the copy", 2_020)
    carol.take(m2, 2_021)
    assert len(carol.found) == 1
    twins = carol.found[0]
    assert twins.sender_id == "bob" and twins.unknown == bob1.log_ids()[-1]
    assert "bob (bob)" in twins.text("bob")
    carol.take(bob2.send(b"again", 2_030), 2_031)
    assert len(carol.found) == 1  # once per sender and channel
    assert carol.core.log_size == 5  # every line kept


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a tmpfs needs root")
def test_a_record_that_cannot_be_written_stops_nothing_and_is_written_later(
        tmp_path: Path) -> None:  # fmt: skip
    """A data dir on a file system that refuses writes (a tmpfs remounted read-only):
    the check passes without its record and leaves nothing behind; writable again,
    the next start records it."""
    mnt = tmp_path / "small"
    mnt.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mnt)], check=True)
    try:
        d, sid = _data_dir(mnt / "bob")
        subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)
        check_home(d, sid)
        assert [p.name for p in d.iterdir()] == ["identity.pem"]  # nothing written
        subprocess.run(["mount", "-o", "remount,rw", str(mnt)], check=True)
        check_home(d, sid)
        assert json.loads((d / DEVICE_FILE).read_text())["device"] == sid
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
