"""A copied data directory is refused at start (app/members/device_copy.py): a real
directory, copied as ``cp -a`` copies it, moved as ``mv`` moves it."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from app.members.device_copy import (
    DEVICE_FILE,
    DataDirCopiedError,
    EchoWatch,
    check_home,
    forget_home,
)
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
    assert "--moved" in text and "its own invite" in text
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
