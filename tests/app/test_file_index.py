"""Files under abuse (issue 26 §5): what a member does stays cheap however many files
others flood a channel with. ``/save``, ``/react`` and ``/edit`` read the message they
name (and a file's own segments), not the log (they folded every row of it, a flood's
segments included); a fake manifest costs one index probe, not a search of the log."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path
from typing import Any

import pytest
from app_helpers import run, start_node, wait_until

import storage.store
from app.chat import content_pb2 as pb
from app.chat.content import MAGIC, SCHEMA_VERSION, decode
from app.chat.file_quota import placeholder
from app.chat.files import MAX_SEGMENTS, SEGMENT_BYTES, split_file, stored_file
from app.commands.content import run_content_command
from app.node.events import Info, NodeEvent
from app.node.transport import MemoryHub
from storage import Store, StoredMessage
from storage.records import segment_file_id


class ContentReads:
    """Counts the stored content bytes read: every read of a message's content is
    checked against its digest through ``storage.store.row_intact`` (a spy on the real
    function, which still runs)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sizes: list[int] = []
        self._monkeypatch = monkeypatch
        self._real = storage.store.row_intact

    def _counting(self, channel: str, message_id: str, sender_id: str, lamport: int,
                  content: bytes, digest: bytes | None) -> bool:  # fmt: skip
        self.sizes.append(len(content))
        return self._real(channel, message_id, sender_id, lamport, content, digest)

    def start(self) -> None:
        self._monkeypatch.setattr(storage.store, "row_intact", self._counting)

    def stop(self) -> None:
        self._monkeypatch.setattr(storage.store, "row_intact", self._real)

    @property
    def total(self) -> int:
        return sum(self.sizes)


def test_storage_finds_the_file_id_the_app_writes() -> None:
    parts = split_file("a.bin", os.urandom(2 * SEGMENT_BYTES + 5), "bob")
    info = decode(parts[0]).file
    assert info is not None
    assert segment_file_id(parts[0]) is None  # a manifest is not a segment
    assert [segment_file_id(p) for p in parts[1:]] == [info.file_id] * 3
    assert segment_file_id(placeholder(info.file_id, "bob")) == info.file_id
    assert segment_file_id(b'{"v":1,"name":"bob","kind":"msg","text":"hi"}') is None
    assert segment_file_id(MAGIC + b"\x08\x01\xa2\x01\x09broken") is None


def _manifest(sender_name: str, segments: int, size: int = 1000) -> bytes:
    """A manifest naming a file id no segment carries (a hostile member's fake)."""
    m = pb.Content(
        version=SCHEMA_VERSION, type=pb.TYPE_FILE_MANIFEST, name=sender_name,
        file_manifest=pb.FileManifest(
            file_id=secrets.token_hex(16), name="fake.bin", size=size,
            sha256=hashlib.sha256(b"x").digest(), segment_count=segments,
            segment_size=SEGMENT_BYTES,
        ),
    )
    return MAGIC + m.SerializeToString()


def test_a_fake_manifest_costs_the_same_whatever_the_log_holds(tmp_path: Path) -> None:
    """Reading a manifest's file (headless ``file`` events and the TUI do it for every
    manifest that arrives) searched the log page after page for its file id: one scan
    of every row per fake manifest. Now one index probe: the work SQLite does for it
    (counted in virtual machine steps, not time) does not grow with the log."""

    async def steps_per_manifest(data_dir: Path, filler: int) -> int:
        async with await Store.open(data_dir) as store:
            await store.join_channel("general", b"t", is_public=True)
            rows = [StoredMessage("general", hashlib.sha256(b"%d" % i).hexdigest(), "bob",
                                  1000 + i, b'{"v":1,"name":"bob","kind":"msg","text":"%d"}' % i)
                    for i in range(filler)]  # fmt: skip
            fakes = [StoredMessage("general", hashlib.sha256(b"f%d" % i).hexdigest(), "mallory",
                                   100_000 + i, _manifest("mallory", MAX_SEGMENTS))
                     for i in range(5)]  # fmt: skip
            await store.insert_messages(rows + fakes)
            counted = [0]

            def count() -> int:
                counted[0] += 1
                return 0

            await store._call(lambda db: db.set_progress_handler(count, 100))
            for f in fakes:
                found = await stored_file(store, "general", f.message_id)
                assert found is not None and not found.segments
            await store._call(lambda db: db.set_progress_handler(None, 100))
            return counted[0] // len(fakes)

    async def body() -> None:
        small = await steps_per_manifest(tmp_path / "small", 200)
        big = await steps_per_manifest(tmp_path / "big", 4000)
        # a scan of 20x the rows took about 20x the steps; a probe takes the same
        assert big <= small + 5, (small, big)

    run(body(), 60)


def test_a_manifest_declaring_more_segments_than_the_limit_is_refused(tmp_path: Path) -> None:
    async def body() -> None:
        hub = MemoryHub()
        victim = await start_node(tmp_path / "v", hub, name="victim")
        mallory = await start_node(tmp_path / "m", hub, name="mallory")
        try:
            await mallory.node.post_contents("general", [_manifest("mallory", MAX_SEGMENTS + 1)])
            await wait_until(lambda: len(victim.delivered()) == 1, 30, "the manifest")
            assert victim.node.counters["file_refused_too_large"] == 1
            assert victim.texts() == [
                f"[file fake.bin refused: {MAX_SEGMENTS + 1} segments is above the limit "
                f"of {MAX_SEGMENTS}]"
            ]
        finally:
            for h in (victim, mallory):
                await h.node.close()

    run(body(), 60)


def test_commands_read_the_message_they_name_not_the_flood(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mallory floods 3 MB of file segments; the victim's /save of alice's small file,
    /react on alice's line and /edit of its own line read a few KB of stored content
    (every content read is digest-checked through ``row_intact``: counted there). They
    read the whole log, 3 MB and more, folding it into a view for every command."""
    small = os.urandom(1600)
    reads = ContentReads(monkeypatch)

    async def body() -> None:
        hub = MemoryHub()
        victim = await start_node(tmp_path / "v", hub, name="victim")
        alice = await start_node(tmp_path / "a", hub, name="alice")
        mallory = await start_node(tmp_path / "m", hub, name="mallory")
        try:
            await alice.node.send("general", "hello from alice")
            await alice.node.post_contents("general", split_file("notes.txt", small, "alice"))
            flood = [p for n in range(3)
                     for p in split_file(f"f{n}.bin", os.urandom(20 * SEGMENT_BYTES), "mallory")]
            await mallory.node.post_contents("general", flood)
            await victim.node.send("general", "mine")
            total = 1 + 2 + len(flood)
            await wait_until(lambda: len(victim.delivered()) == total, 60, "everything")
            line = next(d.message_id for d in victim.delivered() if d.text == "hello from alice")
            manifest = next(d.message_id for d in victim.delivered()
                            if d.kind == "file" and d.name == "alice")  # fmt: skip
            mine = next(mid for mid in [e.message_id for e in await victim.node.page(
                "general", limit=200) if e.content.endswith(b'"mine"}')])
            events: list[NodeEvent] = []
            reads.start()
            out = tmp_path / "saved"
            out.mkdir()
            await run_content_command(victim.node, "save", f"{manifest[:10]} {out}", "general",
                                      events.append)  # fmt: skip
            await run_content_command(victim.node, "react", f"{line[:8]} 👍", "general",
                                      events.append)  # fmt: skip
            await run_content_command(victim.node, "edit", f"{mine} mine, edited", "general",
                                      events.append)  # fmt: skip
            reads.stop()
            saved: Any = next(e for e in events if isinstance(e, Info)).data["saved"]
            assert Path(saved).read_bytes() == small
            assert reads.total < 50_000, reads.sizes
            await wait_until(lambda: any(d.kind == "react" for d in alice.delivered())
                             and any(d.kind == "edit" for d in alice.delivered()), 30,
                             "the reaction and the edit at alice")  # fmt: skip
        finally:
            for h in (victim, alice, mallory):
                await h.node.close()

    run(body(), 90)


def test_many_manifests_naming_one_file_read_it_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """mallory sends one real file, then 30 more manifests naming its file id: each
    manifest made headless read and hash the whole file again (30 x its bytes). The
    ``file`` events still come, one per manifest, answered from what the first read
    found."""
    from app.headless.file_watch import FileWatch

    reads = ContentReads(monkeypatch)

    async def body() -> None:
        hub = MemoryHub()
        victim = await start_node(tmp_path / "v", hub, name="victim")
        mallory = await start_node(tmp_path / "m", hub, name="mallory")
        said: list[dict[str, Any]] = []
        watch = FileWatch(victim.node.store, said.append)
        victim.node.subscribe(watch.on_event)
        try:
            parts = split_file("big.bin", os.urandom(10 * SEGMENT_BYTES), "mallory")
            await mallory.node.post_contents("general", parts)
            await wait_until(lambda: any(e["state"] == "complete" for e in said), 30, "file")
            reads.start()
            await mallory.node.post_contents("general", [parts[0]] * 30)  # the same manifest
            await wait_until(lambda: len(said) == 31, 30, "31 file events")
            reads.stop()
            assert {e["state"] for e in said} == {"complete"}
            assert {e["present"] for e in said} == {10}
            assert reads.total < 2 * SEGMENT_BYTES, reads.sizes
        finally:
            await watch.close()
            for h in (victim, mallory):
                await h.node.close()

    run(body(), 90)


def test_the_topic_shown_is_the_folded_views(tmp_path: Path) -> None:
    """``/topic`` without text reads the lines that mention "topic", not the whole log,
    and answers what the folded view answers: the newest topic its author did not
    delete, "" once cleared, None before any."""
    from app.commands.content import channel_view, current_topic

    async def body() -> None:
        hub = MemoryHub()
        alice = await start_node(tmp_path / "a", hub, name="alice")
        bob = await start_node(tmp_path / "b", hub, name="bob")
        events: list[NodeEvent] = []

        async def both_agree(expected: str | None) -> None:  # the search and the fold
            assert await current_topic(alice.node, "general") == expected
            assert (await channel_view(alice.node, "general")).topic == expected

        async def settle(n: int) -> None:
            await wait_until(lambda: len(alice.delivered()) + len(alice.own("logged"))
                             >= n, 30, f"{n} messages at alice")  # fmt: skip

        try:
            assert await current_topic(alice.node, "general") is None
            await alice.node.send("general", "a line about the topic of the day")
            await run_content_command(alice.node, "topic", "one", "general", events.append)
            await run_content_command(bob.node, "topic", "two", "general", events.append)
            await settle(3)
            assert await current_topic(alice.node, "general") == "two"
            mine = next(o.message_id for o in bob.own("logged") if o.text and "two" in o.text)
            await run_content_command(bob.node, "delete", mine, "general", events.append)
            await settle(4)
            await both_agree("one")
            await run_content_command(alice.node, "topic", "--clear", "general", events.append)
            await settle(5)
            await both_agree("")
        finally:
            for h in (alice, bob):
                await h.node.close()

    run(body(), 60)
