"""The node runtime over an in-memory transport: delivery, acks, loss, restart, channels."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest
from app_helpers import FAST, crash, key, run, start_deaf_listener, start_node, wait_until

import sds
from app.chat.history import read_history
from app.chat.lines import encode_content
from app.node.events import ChannelJoined, ConnectionChanged, PeerSeen
from app.node.runtime import Node, PassphraseMismatchError
from app.node.transport import MemoryHub
from storage import OwnState, Store


def _ids(node: Node, channel: str = "general") -> list[str]:
    return node.core(channel).log_ids()


def test_two_nodes_exchange_and_acknowledge(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        try:
            lid = await a.node.send("general", "hello")
            assert lid == 1
            await b.node.send("general", "hi", kind="me")
            await wait_until(lambda: len(b.delivered()) == 1 and len(a.delivered()) == 1)
            got = b.delivered()[0]
            assert (got.text, got.name, got.kind, got.sender_id) == (
                "hello",
                "alice",
                "msg",
                a.node.sender_id,
            )
            assert a.delivered()[0].kind == "me"
            await wait_until(lambda: len(a.own("acknowledged")) == 1, what="ack at a")
            await wait_until(lambda: len(b.own("acknowledged")) == 1, what="ack at b")
            states = [e.state for e in a.events if getattr(e, "local_id", None) == 1]
            assert states[:3] == ["queued", "logged", "sent"]
            assert states[-1] == "acknowledged"
            assert _ids(a.node) == _ids(b.node)
            peers = a.node.peers("general")
            assert [(p.sender_id, p.name) for p in peers] == [(b.node.sender_id, "bob")]
            assert any(isinstance(e, PeerSeen) and e.first for e in a.events)
            assert a.node.counters["internal_errors"] == 0
        finally:
            await a.node.close()
            await b.node.close()

    run(main())
    # stored state of own messages follows the events
    hist = read_history(tmp_path / "a", "general")
    assert sorted((x.text, x.state) for x in hist) == [("hello", "acknowledged"), ("hi", None)]


def test_three_lossy_nodes_converge(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        # FAST gives up on a missing message after 2 s; a message acked by one peer
        # and missed by another needs SDS-R rounds across two lossy hops, which a
        # loaded machine can stretch past that (it is then correctly lost).
        patient = FAST.with_changes(lost_timeout_ms=30_000)
        hs = [
            await start_node(tmp_path / n, hub, name=n, drop=0.3, seed=i, config=patient)
            for i, n in enumerate(("a", "b", "c"))
        ]
        try:
            for i in range(20):
                for h in hs:
                    h.node.post("general", f"{h.node.name}-{i}")
                await asyncio.sleep(0.01)
            # the events (published after each round's commit) are the reference
            await wait_until(
                lambda: all(len(h.delivered()) >= 40 for h in hs), 40, "all deliveries"
            )
            await wait_until(
                lambda: all(len(h.own("acknowledged")) == 20 for h in hs), 40, "all acked"
            )
            logs = [_ids(h.node) for h in hs]
            assert logs[0] == logs[1] == logs[2]
            for h in hs:
                ids = [d.message_id for d in h.delivered()]
                assert h.node.counters["internal_errors"] == 0, h.node.counters
                assert len(ids) == len(set(ids)) == 40, h.node.counters
        finally:
            for h in hs:
                await h.node.close()
        return hs, logs[0]

    hs, log = run(main(), 90)
    stored = [[x.message_id for x in read_history(h.data_dir, "general")] for h in hs]
    assert stored[0] == stored[1] == stored[2] == log
    for h in hs:
        db = sqlite3.connect(h.data_dir / "sdschat.db")
        try:
            # every message (all 40 are within the recent window) keeps its envelope,
            # also those that waited for dependencies (needed to answer repair
            # requests with the author's signed bytes)
            assert db.execute(
                "SELECT count(*) FROM messages m LEFT JOIN recent r USING (channel, message_id) "
                "WHERE r.envelope IS NULL"
            ).fetchone() == (0,)
        finally:
            db.close()


def test_restart_resumes_clock_log_and_identity(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        for i in range(5):
            await a.node.send("general", f"m{i}")
        await wait_until(lambda: len(b.delivered()) == 5)
        sender, clock, log = a.node.sender_id, a.node.core("general").lamport, _ids(a.node)
        await a.node.close()
        a2 = await start_node(tmp_path / "a", hub, name="")
        try:
            assert a2.node.sender_id == sender
            assert a2.node.name == "alice"  # stored display name
            assert _ids(a2.node) == log
            assert a2.node.core("general").lamport >= clock
            joined = [e for e in a2.events if isinstance(e, ChannelJoined)]
            assert joined[0].messages == 5 and not joined[0].public
            await a2.node.send("general", "after restart")
            await wait_until(lambda: len(b.delivered()) == 6)
            assert b.delivered()[-1].lamport > clock
        finally:
            await a2.node.close()
            await b.node.close()

    run(main())


def test_no_saved_state_is_said_once_as_rebuilt(tmp_path: Path) -> None:
    """A kill -9 before the first state save: the restart says the state was rebuilt
    from the log, once, not also that a saved state "was older than the log"."""

    async def main() -> None:
        a = await start_node(tmp_path / "a", MemoryHub(), name="alice")
        await a.node.send("general", "kept")
        await crash(a.node)
        with sqlite3.connect(tmp_path / "a" / "sdschat.db") as db:
            db.execute("DELETE FROM core_state")
        a2 = await start_node(tmp_path / "a", MemoryHub(), name="alice")
        try:
            notes = [e for e in a2.events if type(e).__name__ == "Info" and "state" in e.text]
            assert [e.text for e in notes] == [
                "general: no saved core state: rebuilt from the stored log"
            ]
            assert notes[0].data["log_added"] == 1
            assert len(_ids(a2.node)) == 1
        finally:
            await a2.node.close()

    run(main())


def test_stale_state_after_crash_is_reconciled(tmp_path: Path) -> None:
    """State saved once, then 10 more messages each way, then kill -9: nothing is lost."""

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", state_save_interval_ms=10**9)
        b = await start_node(tmp_path / "b", hub, name="bob")
        await a.node.send("general", "before")
        await wait_until(lambda: len(b.delivered()) == 1)
        # the one state save of this run, with the channel in it (the interval is huge)
        await a.node._call_in_worker(lambda: a.node._save_all_states(durable=True))
        assert await a.node.store.load_core_state("general") is not None
        saves = a.node.counters["state_saves"]
        for i in range(10):
            await a.node.send("general", f"a{i}")
            await b.node.send("general", f"b{i}")
        await wait_until(lambda: len(b.delivered()) == 11 and len(a.delivered()) == 10)
        assert a.node.counters["state_saves"] == saves  # the saved state is stale
        log = _ids(a.node)
        await crash(a.node)
        a2 = await start_node(tmp_path / "a", hub, name="alice")
        try:
            assert _ids(a2.node) == log
            infos = [e for e in a2.events if type(e).__name__ == "Info"]
            assert [e.text for e in infos if "core state" in e.text] == [
                "general: saved core state was older than the log; reconciled"
            ]
            # own messages not yet acknowledged are back in the outgoing buffer, and b
            # (which has them) acknowledges; nothing is delivered twice at b
            await a2.node.send("general", "after")
            await wait_until(lambda: len(b.delivered()) == 12)
            ids = [d.message_id for d in b.delivered()]
            assert len(ids) == len(set(ids))
            await wait_until(lambda: not a2.node.core("general").outgoing_ids(), 20, "acks")
        finally:
            await a2.node.close()
            await b.node.close()

    run(main(), 60)


def test_typed_line_pending_in_outbox_is_sent_once_at_start(tmp_path: Path) -> None:
    """kill -9 between enqueue and record_sent: the line is produced at the next start."""

    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        a = await start_node(tmp_path / "a", hub, name="alice")
        await a.node.close()
        async with await Store.open(tmp_path / "a") as store:
            await store.enqueue_outgoing("general", encode_content("typed before crash", "alice"))
        a2 = await start_node(tmp_path / "a", hub, name="alice")
        try:
            await wait_until(lambda: b.texts() == ["typed before crash"])
        finally:
            await a2.node.close()
        a3 = await start_node(tmp_path / "a", hub, name="alice")
        try:
            await asyncio.sleep(0.5)
            assert b.texts() == ["typed before crash"]  # not produced a second time
            assert not a3.own("logged")
        finally:
            await a3.node.close()
            await b.node.close()

    run(main())


def test_recorded_but_unpublished_messages_go_out_promptly_after_restart(tmp_path: Path) -> None:
    """kill -9 after record_sent, before publish: republished on connect, not after 30 s."""

    async def main() -> None:
        slow = FAST.with_changes(
            resend_unacknowledged_ms=60_000, resend_possibly_acknowledged_ms=120_000
        )
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob", config=slow)
        a = await start_node(tmp_path / "a", hub, name="alice", config=slow)
        hub.set_online(False)
        for i in range(3):
            await a.node.send("general", f"offline {i}")
        await wait_until(lambda: len(a.own("logged")) == 3)
        assert not a.own("sent")
        await crash(a.node)
        hub.set_online(True)
        a2 = await start_node(tmp_path / "a", hub, name="alice", config=slow)
        try:
            await wait_until(lambda: len(b.delivered()) == 3, 5, "republished messages")
            assert sorted(b.texts()) == ["offline 0", "offline 1", "offline 2"]
            await wait_until(lambda: len(a2.own("sent")) == 3)
        finally:
            await a2.node.close()
            await b.node.close()

    run(main())
    hist = read_history(tmp_path / "a", "general")
    assert {x.state for x in hist} <= {"sent", "possibly_acknowledged", "acknowledged"}


def test_sends_while_disconnected_are_published_on_reconnect(tmp_path: Path) -> None:
    async def main() -> None:
        slow = FAST.with_changes(
            resend_unacknowledged_ms=60_000, resend_possibly_acknowledged_ms=120_000
        )
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=slow)
        b = await start_node(tmp_path / "b", hub, name="bob", config=slow)
        try:
            hub.set_online(False)
            await wait_until(lambda: not a.node.connected)
            assert a.node._timer is None  # the protocol timer pauses while offline
            for i in range(4):
                await a.node.send("general", f"queued {i}")
            await asyncio.sleep(0.2)
            assert b.delivered() == []
            hub.set_online(True)
            await wait_until(lambda: len(b.delivered()) == 4, 5, "delivered after reconnect")
            states = [e.state for e in a.events if isinstance(e, ConnectionChanged)]
            assert "disconnected" in states and states[-1] == "connected"
        finally:
            await a.node.close()
            await b.node.close()

    run(main())


def test_the_core_is_told_when_recovery_can_run(tmp_path: Path) -> None:
    """Issue 15 defect 4: lost timeouts count only connected time, so the node tells
    each channel's core when its transport goes down and comes back."""

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        try:
            core = a.node._participant.channel("general")
            assert core.connected
            hub.set_online(False)
            await wait_until(lambda: not a.node.connected)
            assert not core.connected
            hub.set_online(True)
            await wait_until(lambda: a.node.connected)
            assert core.connected
        finally:
            await a.node.close()

    run(main())


def test_a_message_refused_as_too_far_ahead_is_accepted_when_resent_later(
    tmp_path: Path,
) -> None:
    """Issue 14 section 1: a message stamped beyond max_clock_skew_ms of our clock is
    refused, not adopted; its author's resend (the identical envelope) is accepted
    once our clock has caught up: the replay guard does not hold it against it."""
    from app.node.runtime import wall_ms

    async def main() -> None:
        hub = MemoryHub()
        skew = FAST.max_clock_skew_ms
        ahead = [0]
        a = await start_node(
            tmp_path / "a", hub, name="alice", clock=lambda: wall_ms() + 2 * skew
        )
        b = await start_node(tmp_path / "b", hub, name="bob", clock=lambda: wall_ms() + ahead[0])
        try:
            await a.node.send("general", "from the future")
            await wait_until(
                lambda: b.node.counters["dropped_clock_ahead"] >= 1, 5, "refused"
            )
            assert b.delivered() == []
            ahead[0] = 2 * skew  # bob's clock catches up
            await wait_until(lambda: b.texts() == ["from the future"], 10, "the resend")
        finally:
            await a.node.close()
            await b.node.close()

    run(main())


def test_several_channels_join_leave_and_isolation(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", channels=("one", "two"))
        b = await start_node(tmp_path / "b", hub, name="bob", channels=("one",))
        try:
            await a.node.send("one", "in one")
            await a.node.send("two", "in two")
            await wait_until(lambda: b.texts("one") == ["in one"])
            await asyncio.sleep(0.2)
            assert b.texts("two") == []
            await b.node.join("two", "secret", key=key("two"))
            await a.node.send("two", "two again")
            await wait_until(lambda: "two again" in b.texts("two"))
            # the earlier message reaches b through the protocol (resend / causal history)
            await wait_until(lambda: set(b.texts("two")) == {"in two", "two again"}, 10)
            assert await b.node.leave("two")
            assert not await b.node.leave("two")
            assert sorted(b.node.channels) == ["one"]
            await a.node.send("two", "after leave")
            await asyncio.sleep(0.3)
            assert "after leave" not in b.texts("two")
            with pytest.raises(KeyError):
                b.node.post("two", "not joined")
            with pytest.raises(PassphraseMismatchError):
                await b.node.join("two", "other", key=key("two", "other"))
        finally:
            await a.node.close()
            await b.node.close()

    run(main())


def test_public_channel_and_wrong_passphrase_do_not_mix(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", passphrase=None)
        b = await start_node(tmp_path / "b", hub, name="bob", passphrase="nope")
        try:
            assert [e.public for e in a.events if isinstance(e, ChannelJoined)] == [True]
            assert [e.public for e in b.events if isinstance(e, ChannelJoined)] == [False]
            await a.node.send("general", "public words")
            await b.node.send("general", "private words")
            await asyncio.sleep(0.5)
            assert a.delivered() == [] and b.delivered() == []
        finally:
            await a.node.close()
            await b.node.close()

    run(main())


def test_data_dir_remembers_the_passphrase_topic(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub)
        await a.node.close()
        with pytest.raises(PassphraseMismatchError):
            await start_node(tmp_path / "a", hub, passphrase="different")

    run(main())


def test_dependencies_beyond_the_window_come_from_storage(tmp_path: Path) -> None:
    """A peer names ids our core evicted from its window: storage vouches for them."""

    async def main() -> None:
        small = FAST.with_changes(causal_history_size=2, log_window=3)
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=small)
        b = await start_node(tmp_path / "b", hub, name="bob", config=small)
        c = await start_node(tmp_path / "c", hub, name="carol")  # default-size window
        try:
            for i in range(6):
                await b.node.send("general", f"b{i}")
            await wait_until(lambda: len(a.delivered()) == 6 and len(c.delivered()) == 6)
            window = set(_ids(a.node))
            assert len(window) == 3  # b0..b2 evicted from a's core window
            evicted = {d.message_id for d in a.delivered()} - window
            await c.node.send("general", "names everything")  # history names b1..b5 or more
            await wait_until(lambda: "names everything" in a.texts(), 5)
            sent = next(d.message_id for d in a.delivered() if d.text == "names everything")
            named = set((await c.node.store.get_messages("general", [sent]))[sent]
                        .causal_history)  # fmt: skip
            # its adaptive history names the newest 5 at least (b1..b5), and b0 unless a
            # sync of c's named it first: each evicted one it names is vouched by storage
            assert len(named & evicted) >= 2
            assert a.node.counters["dependencies_from_storage"] >= len(named & evicted)
            assert len({d.message_id for d in a.delivered()}) == 7
        finally:
            for h in (a, b, c):
                await h.node.close()

    run(main())


def test_history_can_be_read_while_the_node_runs(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        try:
            await a.node.send("general", "live")
            lines: list = []  # type: ignore[type-arg]
            for _ in range(200):  # the round that logs the line commits soon after send
                lines = await asyncio.to_thread(read_history, tmp_path / "a", "general")
                if lines:
                    break
                await asyncio.sleep(0.05)
            assert [(x.text, x.name, x.position) for x in lines] == [("live", "alice", 0)]
            page = await a.node.page("general")
            assert [x.text for x in page] == ["live"]
        finally:
            await a.node.close()

    run(main())
    with pytest.raises(LookupError):
        read_history(tmp_path / "a", "other")


def test_history_reads_without_the_lock_and_changes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``sdschat history`` is a reader: it must not take the data-dir lock (a node
    started at the same moment would be refused with exit 3) nor write the file."""
    import hashlib

    from storage.lock import DataDirLock

    async def main() -> None:
        a = await start_node(tmp_path / "a", MemoryHub(), name="alice")
        try:
            await a.node.send("general", "kept")
        finally:
            await a.node.close()

    run(main())
    db = tmp_path / "a" / "sdschat.db"
    before = hashlib.sha256(db.read_bytes()).digest()

    def refuse(_cls: object, _data_dir: Path) -> None:
        raise AssertionError("history took the data-dir lock")

    monkeypatch.setattr(DataDirLock, "acquire", classmethod(refuse))
    assert [x.text for x in read_history(tmp_path / "a", "general")] == ["kept"]
    with pytest.raises(LookupError, match="never joined"):
        read_history(tmp_path / "a", "other")
    assert hashlib.sha256(db.read_bytes()).digest() == before
    monkeypatch.undo()
    # an empty file is no database (and is left as it is); a file at an older
    # schema (here: a SQLite file with no tables yet) is migrated through Store.open
    empty = tmp_path / "empty"
    empty.mkdir()
    (empty / "sdschat.db").write_bytes(b"")
    with pytest.raises(LookupError, match="no sdschat database"):
        read_history(empty, "general")
    assert (empty / "sdschat.db").stat().st_size == 0
    old = tmp_path / "old"
    old.mkdir()
    conn = sqlite3.connect(old / "sdschat.db")
    conn.execute("CREATE TABLE t (x)")
    conn.execute("DROP TABLE t")
    conn.close()
    with pytest.raises(LookupError, match="never joined"):
        read_history(old, "general")
    with sqlite3.connect(old / "sdschat.db") as conn:
        assert conn.execute("PRAGMA user_version").fetchone()[0] >= 1


def test_open_refuses_a_lost_history_or_key_and_changes_nothing(tmp_path: Path) -> None:
    """An emptied database beside the key file, or a missing key file beside a database
    with an identity: refused with a message that says what to do, and neither file is
    created, rewritten or replaced (a new key would be a different participant; a new
    schema would hide that the history was lost)."""
    from net.identity import IdentityFileError
    from storage import CorruptDatabaseError

    d = tmp_path / "a"

    async def main() -> None:
        a = await start_node(d, MemoryHub(), name="alice")
        await a.node.send("general", "x")
        await a.node.close()
        key_file, db = d / "identity.pem", d / "sdschat.db"
        saved = db.read_bytes()
        db.write_bytes(b"")
        with pytest.raises(CorruptDatabaseError, match="history was lost"):
            await Node.open(d, MemoryHub().transport())
        assert db.stat().st_size == 0
        db.write_bytes(saved)
        for side in ("sdschat.db-wal", "sdschat.db-shm"):
            (d / side).unlink(missing_ok=True)
        key = key_file.read_bytes()
        key_file.unlink()
        with pytest.raises(IdentityFileError, match=r"identity\.pem is missing"):
            await Node.open(d, MemoryHub().transport())
        assert not key_file.exists()
        key_file.write_bytes(key)
        key_file.chmod(0o600)
        node = await Node.open(d, MemoryHub().transport())  # both back: opens as before
        assert node.name == "alice"
        await node.close()

    run(main())


def test_history_shows_control_characters_escaped(tmp_path: Path) -> None:
    """A peer's text must not drive the terminal that prints ``sdschat history``:
    escape sequences, carriage returns and bidi overrides come out escaped, one line
    per message; ``--json`` keeps the exact text."""
    import io
    import json

    from app.chat.history import print_history

    evil = "\x1b[2J\x1b[31mred \r\n\x00 nul \u202eevil\ttab é \x9b31m"

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        try:
            await a.node.send("general", evil)
        finally:
            await a.node.close()

    run(main())
    plain, as_json = io.StringIO(), io.StringIO()
    assert print_history(tmp_path / "a", "general", as_json=False, out=plain) == 0
    assert print_history(tmp_path / "a", "general", as_json=True, out=as_json) == 0
    line = plain.getvalue()
    # a line break stays one (issue 27: a readable export), under the text's column
    assert line.count("\n") == 2 and "\x1b" not in line and "\r" not in line
    assert "\\x1b[2J\\x1b[31mred \\x0d\n" in line
    assert line.split("\n")[1].lstrip().startswith("\\x00 nul \\u202eevil\ttab é \\x9b31m")
    raw = as_json.getvalue()  # the same text, and nothing in it a terminal acts on
    assert json.loads(raw)["content"] == evil
    assert not any(c in raw for c in "\x1b\r\x00\u202e\x9b") and "é" in raw


def test_join_and_leave_commit_their_rounds(tmp_path: Path) -> None:
    """Joining or leaving a channel runs a round of its own (the core's pending events,
    carried own states). It used to be worked out and then dropped without its commit:
    lines marked "sent" just before a /join stayed "queued" in SQLite, and were
    republished at the next start."""

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        try:
            for text in ("l1", "l2", "l3"):
                await a.node.send("general", text)
            await wait_until(lambda: len(a.own("sent")) == 3, what="sent")
            await a.node.join("other", "secret", key=key("other", "secret"))
            lines = await asyncio.to_thread(read_history, tmp_path / "a", "general")
            assert {x.text: x.state for x in lines} == {"l1": "sent", "l2": "sent", "l3": "sent"}
            await a.node.send("general", "l4")
            await wait_until(lambda: len(a.own("sent")) == 4, what="sent")
            assert await a.node.leave("other")
            lines = await asyncio.to_thread(read_history, tmp_path / "a", "general")
            assert {x.text: x.state for x in lines}["l4"] == "sent"
        finally:
            await a.node.close()

    run(main())


def test_join_refuses_names_a_person_may_not_use(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        try:
            for bad, why in (("", "empty"), ("x" * 101, "at most 100"), ("a\nb", "control")):
                with pytest.raises(ValueError, match=why):
                    await a.node.join(bad, "secret")
            assert sorted(a.node.channels) == ["general"]
        finally:
            await a.node.close()

    run(main())


def test_failed_messages_can_be_retried(tmp_path: Path) -> None:
    """A member is heard but never acknowledges: the line fails; a retry publishes the
    same envelope (same id), which a member who comes later delivers once."""

    async def main() -> None:
        quick_fail = FAST.with_changes(
            max_resend_attempts=1, resend_unacknowledged_ms=100, resend_possibly_acknowledged_ms=200
        )
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=quick_fail)
        deaf = await start_deaf_listener(tmp_path / "deaf", hub, config=quick_fail)
        try:
            await wait_until(lambda: "I am here but hear nothing" in a.texts(), 5, "heard")
            await a.node.send("general", "nobody hears this")
            await wait_until(lambda: len(a.own("failed")) == 1, 5, "failure")
            assert a.own("failed")[0].detail["reason"] == "resends_exhausted"
            failed_id = a.own("failed")[0].message_id
            b = await start_node(tmp_path / "b", hub, name="bob", config=quick_fail)
            assert await a.node.retry() == 1
            await wait_until(lambda: "nobody hears this" in b.texts(), 5)
            assert [e.message_id for e in b.delivered() if e.text == "nobody hears this"] == [
                failed_id
            ]  # the same message, not a new one
            await b.node.close()
        finally:
            await a.node.close()
            await deaf.node.close()
        async with await Store.open(tmp_path / "a") as store:
            states = [e.state async for e in store.iter_log("general")]
        own = [st for st in states if st is not None]  # one line: failed, or acked since
        assert len(own) == 1 and own[0] in (OwnState.FAILED, OwnState.ACKNOWLEDGED)

    run(main())


def test_a_line_nobody_heard_waits_for_the_next_member(tmp_path: Path) -> None:
    """Issue 27 item 7: alone in the channel, a line is not failed after its resends:
    it waits, and the next member heard gets the identical envelope."""

    async def main() -> None:
        quick = FAST.with_changes(max_resend_attempts=1, resend_unacknowledged_ms=100)
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=quick)
        try:
            await a.node.send("general", "nobody hears this yet")
            await wait_until(lambda: a.own("waiting"), 5, "given up, waiting")
            assert not a.own("failed") and await a.node.retry() == 0
            b = await start_node(tmp_path / "b", hub, name="bob", config=quick)
            await b.node.send("general", "hello")
            await wait_until(lambda: "nobody hears this yet" in b.texts(), 5, "delivered")
            await b.node.send("general", "got it")
            await wait_until(lambda: a.own("acknowledged"), 5, "acknowledged")
            await b.node.close()
        finally:
            await a.node.close()

    run(main())


def test_a_late_sent_state_never_overwrites_a_later_one(tmp_path: Path) -> None:
    """An own message's stored state only moves forward.

    "sent" is carried into a later round's transaction; if the message was
    acknowledged in between, the carried "sent" must not be written over it.
    """

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        try:
            await a.node.send("general", "first")
            await b.node.send("general", "reply")
            await wait_until(lambda: len(a.own("acknowledged")) == 1, what="ack at a")
            mid = a.own("acknowledged")[0].message_id
            assert mid is not None
            # As if publishing "first" had finished only now: a stale "sent".
            a.node._carry_states.append(("general", mid, OwnState.SENT))
            await a.node.send("general", "second")  # a round that commits carried states
            await wait_until(lambda: len(a.own("sent")) == 2, what="second sent")
        finally:
            await a.node.close()
            await b.node.close()

    run(main())
    states = {x.text: x.state for x in read_history(tmp_path / "a", "general")}
    assert states["first"] == "acknowledged"


def test_failed_lines_survive_a_restart_and_an_ack_after_all_clears_them(
    tmp_path: Path,
) -> None:
    """A line nobody acknowledged fails. After a restart /retry can still send it (it
    answered "no failed messages" while the screen offered Ctrl+R). When a peer later
    shows it has the line after all, it is acknowledged and nothing is left to retry
    (a retry used to send a second copy)."""
    config = sds.Config.fast(100, max_resend_attempts=1)

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=config)
        deaf = await start_deaf_listener(tmp_path / "deaf", hub, config=config)
        await wait_until(lambda: "I am here but hear nothing" in a.texts(), 10, "heard")
        await a.node.send("general", "nobody hears this")
        await wait_until(lambda: a.own("failed"), 10, "the line failed")
        failed_id = a.own("failed")[0].message_id
        envelope = a.node._envelopes[("general", failed_id)]  # type: ignore[index]
        heard = list(deaf.node.transport.inner.sent)  # type: ignore[attr-defined]
        await a.node.close()
        await deaf.node.close()

        a2 = await start_node(tmp_path / "a", hub, name="alice", config=config)
        b = await start_node(tmp_path / "b", hub, name="bob", config=config)
        try:
            assert [f[1] for f in a2.node._failed] == [a.own("failed")[0].message_id]
            for env in [*heard, envelope]:  # b has the line (and what it follows) after all
                await b.node._on_envelope(env)
            await wait_until(lambda: "nobody hears this" in b.texts())
            await b.node.send("general", "got it")  # its causal history names the line
            await wait_until(lambda: a2.own("acknowledged"), 10, "the late ack")
            assert await a2.node.retry() == 0
            stored = await a2.node.page("general")
            assert [(x.text, x.state) for x in stored if x.text == "nobody hears this"] == [
                ("nobody hears this", "acknowledged")
            ]
        finally:
            await a2.node.close()
            await b.node.close()

    run(main())
