"""Lean storage (schema 2): the bounded recent window, the migration of a schema-1
database, row digests and the damage checks (issue 13 §3, issue 14 §7)."""

from __future__ import annotations

import gzip
import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from storage_testkit import REPO_ROOT, mid, msg, open_with_channel, python_child, run

from storage import (
    DB_FILENAME,
    Batch,
    CorruptDatabaseError,
    OwnState,
    Store,
)
from storage.doctor import diagnose
from storage.records import DAMAGED_CONTENT
from storage.schema import DEFAULT_RECENT_WINDOW, MIGRATIONS, SCHEMA_VERSION

FIXTURE = Path(__file__).parent / "data" / "schema1.sqlite.gz"
"""A database written by sdschat's schema-1 code (main at 7b7e47f) with
``data/make_schema1.py``: 60 messages on two channels, own messages in every
state, some without an envelope, a pending outbox line, a core state, an event."""


def fixture_dir(tmp_path: Path) -> Path:
    d = tmp_path / "old"
    d.mkdir(mode=0o700)
    (d / DB_FILENAME).write_bytes(gzip.decompress(FIXTURE.read_bytes()))
    return d


def schema1_rows(path: Path) -> list[tuple[object, ...]]:
    with sqlite3.connect(path) as db:
        assert db.execute("PRAGMA user_version").fetchone()[0] == 1
        return db.execute(
            "SELECT channel, message_id, sender_id, lamport, state, delivered_at, received_at, "
            "content, retrieval_hint, causal_history, envelope FROM messages ORDER BY rowid"
        ).fetchall()


def test_a_schema_1_database_migrates_in_place_with_its_history_intact(tmp_path: Path) -> None:
    data_dir = fixture_dir(tmp_path)
    old = schema1_rows(data_dir / DB_FILENAME)
    assert len(old) == 60

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert (store.migrated_from, store.schema_version) == (1, SCHEMA_VERSION)
            for channel in ("general", "random"):
                rows = [r for r in old if r[0] == channel]
                log = [e async for e in store.iter_log(channel)]
                assert [(e.message_id, e.sender_id, e.lamport, e.content) for e in log] == sorted(
                    ((r[1], r[2], r[3], r[7]) for r in rows), key=lambda t: (t[2], t[0])
                )
                assert not any(e.damaged for e in log)
                assert {e.message_id: e.state for e in log} == {
                    r[1]: None if r[4] is None else OwnState(r[4]) for r in rows
                }
                full = await store.get_messages(channel, [r[1] for r in rows])
                envelopes = await store.get_envelopes(channel, [r[1] for r in rows])
                for r in rows:
                    m = full[r[1]]
                    assert (m.retrieval_hint, m.delivered_at, m.received_at) == (r[8], r[5], r[6])
                    # all 60 are within the default window: nothing was dropped
                    assert m.envelope == r[10]
                    assert envelopes.get(r[1]) == r[10]
                    assert len(m.causal_history) == min(3, int(r[3]) - 1000)
            assert [p.content for p in await store.pending_outgoing()] == [
                b'{"v":1,"name":"alice","kind":"msg","text":"pending"}'
            ]
            assert await store.load_core_state("general") == b'{"version":1}'
            assert await store.count_events() == 1
            ident = await store.load_identity()
            assert ident is not None and ident.sender_id == "a" * 64
            await store.check_integrity()
        # and it stays a healthy schema-2 database
        report = diagnose(data_dir)
        assert report.healthy and report.messages == 60 and report.unchecked_rows == 0

    run(body)


def make_schema1(data_dir: Path, n: int, envelope_bytes: int) -> None:
    """A schema-1 database built by the schema-1 migration, rows as schema-1 code wrote them."""
    data_dir.mkdir(mode=0o700)
    db = sqlite3.connect(data_dir / DB_FILENAME, isolation_level=None)
    db.execute("PRAGMA page_size = 16384")
    db.execute("PRAGMA journal_mode = WAL")
    db.execute("BEGIN")
    MIGRATIONS[0](db)
    db.execute("PRAGMA user_version = 1")
    db.execute("INSERT INTO channels VALUES ('general', x'01', 1, 1, NULL)")
    db.executemany(
        "INSERT INTO messages VALUES (?,?,?,?,?,?,?,?,?,?,?)",
        [
            (
                "general", mid(i), "me" if i in (3, 4) else "bob", i,
                "sent" if i == 3 else "acknowledged" if i == 4 else None,
                i, i, b"text %d" % i, b"h", b"", os.urandom(envelope_bytes),
            )
            for i in range(n)
        ],
    )
    db.execute("COMMIT")
    db.close()


def test_the_migration_keeps_a_window_of_envelopes_and_gives_the_space_back(
    tmp_path: Path,
) -> None:
    data_dir = tmp_path / "big"
    n = DEFAULT_RECENT_WINDOW + 300
    make_schema1(data_dir, n, 4000)
    before = (data_dir / DB_FILENAME).stat().st_size

    async def body() -> None:
        async with await Store.open(data_dir) as store:
            assert await store.count_messages("general") == n
            kept = await store.get_envelopes("general", [mid(i) for i in range(n)])
            # the newest window, and own message 3 (sent, not acknowledged: resends need it)
            assert set(kept) == {mid(i) for i in range(300, n)} | {mid(3)}
            assert len(await store.page("general", limit=n)) == n

    run(body)
    after = (data_dir / DB_FILENAME).stat().st_size
    assert after < before * (DEFAULT_RECENT_WINDOW + 10) / n


def test_only_the_recent_window_and_pinned_own_messages_keep_envelopes(tmp_path: Path) -> None:
    async def body() -> None:
        store = await open_with_channel(tmp_path / "d")
        store.recent.__init__(10)  # a small window for the test
        try:
            own = msg("own", 0, sender="me", state=OwnState.SENT, envelope=b"OWN",
                      history=(mid("x"),))
            await store.insert_messages([own])
            for i in range(1, 40):
                await store.insert_messages([msg(i, i, envelope=b"E%d" % i, history=(mid(i - 1),))])
            ids = [mid("own")] + [mid(i) for i in range(1, 40)]
            envs = await store.get_envelopes("general", ids)
            assert set(envs) == {mid("own")} | {mid(i) for i in range(30, 40)}
            full = await store.get_messages("general", [mid(5), mid(35), mid("own")])
            assert full[mid(5)].envelope is None and full[mid(5)].causal_history == ()
            assert full[mid(5)].content == b"message 5"  # the compact row stays
            assert full[mid(35)].causal_history == (mid(34),)
            assert full[mid("own")].envelope == b"OWN"
            # acknowledged: no longer needed for resends, it leaves at the next prune
            await store.update_own_state("general", [mid("own")], OwnState.ACKNOWLEDGED)
            await store.insert_messages([msg(40, 40, envelope=b"E40")])
            assert mid("own") not in await store.get_envelopes("general", [mid("own")])
            assert await store.count_messages("general") == 41
        finally:
            await store.close()

    run(body)


def flip_in_file(path: Path, marker: bytes) -> None:
    data = bytearray(path.read_bytes())
    at = data.find(marker)
    assert at > 0 and data.find(marker, at + 1) == -1
    data[at + len(marker) - 1] ^= 0x01  # "...TEXT" -> "...TEXU"
    path.write_bytes(bytes(data))


def test_a_byte_flipped_in_a_stored_message_is_reported_not_shown(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    marker = b"the meeting is at NOON-TEXT"
    other = b"lunch at ONE-TEXT"

    async def write() -> None:
        async with await open_with_channel(data_dir) as store:
            await store.insert_messages(
                [msg(1, 1), msg(2, 2, content=marker), msg(3, 3, state=OwnState.FAILED,
                                                           sender="me", content=other)]
            )

    run(write)
    flip_in_file(data_dir / DB_FILENAME, other)  # the failed own message
    flip_in_file(data_dir / DB_FILENAME, marker)
    report = diagnose(data_dir)
    assert report.structure == []  # SQLite's own check cannot see it ...
    assert set(report.damaged_rows) == {("general", mid(2)), ("general", mid(3))}  # ours does

    async def read() -> None:
        async with await Store.open(data_dir) as store:
            page = await store.page("general")
            assert [e.damaged for e in page] == [False, True, True]
            assert page[1].content == DAMAGED_CONTENT and page[1].message_id == mid(2)
            assert all(b"NOON" not in e.content for e in page)
            found = await store.search("general", "NOON")
            assert [e.damaged for e in found] == [True]
            full = await store.get_messages("general", [mid(2)])
            assert full[mid(2)].content == DAMAGED_CONTENT
            assert await store.own_failed("general") == []  # never resent as text

    run(read)

    # the CLI: history shows the marker, never the flipped text; doctor says damaged
    env = dict(os.environ, PYTHONPATH=str(REPO_ROOT))
    history = subprocess.run(
        [sys.executable, "-m", "app.cli", "history", "general", "--data-dir", str(data_dir)],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert "NOON" not in history.stdout and "damaged in storage" in history.stdout
    doctor = subprocess.run(
        [sys.executable, "-m", "app.cli", "doctor", "--data-dir", str(data_dir)],
        capture_output=True, text=True, env=env, timeout=60,
    )
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert f"damaged message: channel 'general' id {mid(2)}" in doctor.stdout


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


def damage_structure(path: Path) -> None:
    """Scribble over the b-tree page header of the last page (a leaf of the log)."""
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    last = len(data) // page - 1
    data[last * page : last * page + 12] = b"\xff" * 12
    path.write_bytes(bytes(data))


def test_structural_damage_is_caught_at_start_after_an_unclean_exit(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"
    child = python_child(WRITE_AND_WAIT.format(data_dir=str(data_dir)))
    try:
        assert child.stdout is not None
        assert child.stdout.readline().strip() == "written"
        # let the background checkpointer copy the WAL into the file
        run(lambda: __import__("asyncio").sleep(1.0))
    finally:
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=30)
    db = data_dir / DB_FILENAME
    wal = db.with_name(DB_FILENAME + "-wal")
    assert wal.exists() and wal.stat().st_size > 0  # what an unclean exit leaves
    # Copy the WAL's pages into the file (the WAL file stays, empty), so that the
    # damage below is not hidden by newer copies of the same pages in the WAL.
    raw = sqlite3.connect(db)
    raw.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    raw.close()
    if not wal.exists():
        wal.touch()  # (a last connection may delete it; the killed node's would not)
    damage_structure(db)

    unchecked = tmp_path / "copy"
    unchecked.mkdir(mode=0o700)
    (unchecked / DB_FILENAME).write_bytes(db.read_bytes())

    async def body() -> None:
        with pytest.raises(CorruptDatabaseError, match=r"integrity check failed|malformed"):
            await Store.open(data_dir)
        # what would happen without the check: the node opens the damaged file
        store = await Store.open(unchecked, integrity_check=False)
        await store.close()

    run(body)
    assert diagnose(data_dir).structure


def test_a_clean_close_skips_the_check_and_doctor_finds_the_damage(tmp_path: Path) -> None:
    data_dir = tmp_path / "d"

    async def write() -> None:
        async with await open_with_channel(data_dir) as store:
            await store.insert_messages([msg(i, i, content=b"y" * 300) for i in range(400)])
        async with await Store.open(data_dir) as store:
            assert not store.integrity_checked  # closed cleanly: no WAL left, no check

    run(write)
    damage_structure(data_dir / DB_FILENAME)
    report = diagnose(data_dir)
    assert not report.healthy and report.structure


def test_the_recent_window_survives_batches_with_own_state_changes(tmp_path: Path) -> None:
    async def body() -> None:
        store = await open_with_channel(tmp_path / "d")
        store.recent.__init__(4)
        try:
            batch = Batch()
            batch.insert_messages(
                [msg(i, i, sender="me", state=OwnState.QUEUED, envelope=b"E") for i in range(8)]
            )
            await store.commit_batch(batch)
            # all pinned: none dropped, even beyond the window
            assert len(await store.get_envelopes("general", [mid(i) for i in range(8)])) == 8
            batch = Batch()
            batch.set_own_state("general", [mid(i) for i in range(6)], OwnState.ACKNOWLEDGED)
            batch.insert_message(msg(9, 9, envelope=b"E"))
            await store.commit_batch(batch)
            await store.insert_messages([msg(10, 10, envelope=b"E")])
            left = await store.get_envelopes("general", [mid(i) for i in range(11)])
            assert set(left) == {mid(6), mid(7), mid(9), mid(10)}
        finally:
            await store.close()

    run(body)
