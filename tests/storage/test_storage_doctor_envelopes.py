"""``sdschat doctor`` checks stored envelopes too (issue 26 §13): a byte flipped in the
file inside a message's envelope, or inside a store peer's archived envelope, is found."""

from __future__ import annotations

import dataclasses
import hashlib
import os
import signal
import subprocess
import sys
from pathlib import Path

from storage_testkit import REPO_ROOT, mid, msg, open_with_channel, python_child, run

from storage import DB_FILENAME, ArchivedEnvelope, Store
from storage.doctor import diagnose


def flip_in_file(path: Path, needle: bytes) -> None:
    """Flip one bit of the file's byte in the middle of ``needle`` (found once)."""
    data = bytearray(path.read_bytes())
    at = data.find(needle)
    assert at >= 0 and data.find(needle, at + 1) < 0
    data[at + len(needle) // 2] ^= 0x10
    path.write_bytes(bytes(data))


def doctor(data_dir: Path) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    return subprocess.run(
        [sys.executable, "-m", "app.cli", "doctor", "--data-dir", str(data_dir)],
        capture_output=True, text=True, env=env, timeout=60,
    )


def test_a_flipped_byte_in_a_stored_envelope_is_found(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    envelopes = [os.urandom(900) for _ in range(3)]

    async def write() -> None:
        async with await open_with_channel(data_dir) as store:
            rows = []
            for i, env in enumerate(envelopes):
                m = msg(i, i + 1, envelope=env)  # the hint the node stores: its sha256
                rows.append(dataclasses.replace(m, retrieval_hint=hashlib.sha256(env).digest()))
            await store.insert_messages(rows)

    run(write)
    before = doctor(data_dir)
    assert before.returncode == 0, before.stdout + before.stderr
    assert "3 envelopes match their hash" in before.stdout
    flip_in_file(data_dir / DB_FILENAME, envelopes[1][100:164])
    report = diagnose(data_dir)
    assert not report.structure and not report.damaged_rows  # the row itself is intact
    assert report.damaged_envelopes == [("general", mid(1))]
    after = doctor(data_dir)
    assert after.returncode == 1, after.stdout + after.stderr
    assert f"damaged envelope: channel 'general' id {mid(1)}" in after.stdout


def test_a_flipped_byte_in_an_archived_envelope_is_found(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    envelopes = [os.urandom(700) for _ in range(2)]

    async def write() -> None:
        async with await open_with_channel(data_dir) as store:
            await store.archive.put_many(
                ArchivedEnvelope(hashlib.sha256(e).digest(), b"topic", 1000 + i, e)
                for i, e in enumerate(envelopes)
            )

    run(write)
    assert diagnose(data_dir).healthy
    flip_in_file(data_dir / DB_FILENAME, envelopes[0][200:264])
    report = diagnose(data_dir)
    assert report.damaged_envelopes == [("archive", hashlib.sha256(envelopes[0]).hexdigest())]
    assert doctor(data_dir).returncode == 1


WRITE_AND_WAIT = """
import asyncio
from storage import Store, StoredMessage

async def main():
    store = await Store.open({data_dir!r})
    await store.join_channel("general", b"topic", is_public=True)
    await store.insert_messages([StoredMessage("general", "%064x" % i, "bob", i, b"x" * 300)
                                 for i in range(400)])
    print("written", flush=True)
    await asyncio.sleep(60)

asyncio.run(main())
"""


def test_a_last_page_written_in_part_beside_a_wal_opens(tmp_path: Path) -> None:
    """A checkpoint cut short by a full disk leaves the file's last page written in part
    (seen on a full 20 MiB tmpfs, issue 26 §2); SQLite repairs it from the WAL, so it is
    no reason to refuse the database (before: "truncated: ... not a whole number")."""
    data_dir = tmp_path / "d"
    child = python_child(WRITE_AND_WAIT.format(data_dir=str(data_dir)))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    db = data_dir / DB_FILENAME
    wal = db.with_name(DB_FILENAME + "-wal")
    assert wal.exists() and wal.stat().st_size > 0
    with db.open("ab") as f:
        f.write(b"\0" * 5000)  # a page begun, not finished

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert len(await store.page("general", limit=1000)) == 400

    run(body)
    report = diagnose(data_dir)
    assert not report.structure and not report.damaged_rows
