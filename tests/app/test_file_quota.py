"""Files on receipt (issue 26 §5): a file declared above the 16 MiB limit is refused where
it arrives, and a sender's segments beyond the per-sender quota are not kept."""

from __future__ import annotations

import hashlib
import os
import secrets
from pathlib import Path

from app_helpers import run, start_node, wait_until

from app.chat import content_pb2 as pb
from app.chat.content import MAGIC, SCHEMA_VERSION
from app.chat.file_quota import PLACEHOLDER_INDEX
from app.chat.files import MAX_FILE_BYTES, SEGMENT_BYTES, split_file
from app.commands.content import channel_view
from app.node.transport import MemoryHub


def _oversized_file(segments: int) -> list[bytes]:
    """A manifest declaring 40 MiB (the sender's own check bypassed) and some segments."""
    file_id = secrets.token_hex(16)
    size = 40 * 1024 * 1024
    manifest = pb.Content(
        version=SCHEMA_VERSION, type=pb.TYPE_FILE_MANIFEST, name="mallory",
        file_manifest=pb.FileManifest(
            file_id=file_id, name="big.bin", size=size, sha256=hashlib.sha256(b"x").digest(),
            segment_count=-(-size // SEGMENT_BYTES), segment_size=SEGMENT_BYTES,
        ),
    )
    out = [MAGIC + manifest.SerializeToString()]
    for i in range(segments):
        seg = pb.Content(version=SCHEMA_VERSION, type=pb.TYPE_FILE_SEGMENT, name="mallory",
                         file_segment=pb.FileSegment(file_id=file_id, index=i,
                                                     data=os.urandom(SEGMENT_BYTES)))
        out.append(MAGIC + seg.SerializeToString())
    return out


def test_files_above_the_limit_or_the_quota_are_not_kept(tmp_path: Path) -> None:
    async def body() -> None:
        hub = MemoryHub()
        victim = await start_node(tmp_path / "v", hub, name="victim",
                                  file_quota_bytes=3 * SEGMENT_BYTES)
        mallory = await start_node(tmp_path / "m", hub, name="mallory")
        try:
            parts = _oversized_file(4)
            small = split_file("ok.txt", os.urandom(2 * SEGMENT_BYTES), "mallory")  # 2 segs
            second = split_file("two.txt", os.urandom(2 * SEGMENT_BYTES), "mallory")
            await mallory.node.post_contents("general", parts + small + second)
            total = len(parts) + len(small) + len(second)
            await wait_until(lambda: len(victim.delivered()) == total, 30, "every part")
            c = victim.node.counters
            assert c["file_refused_too_large"] == 1
            # 4 segments of the 40 MiB file; of the two 2-segment files, the quota of 3
            # segments keeps the first file and one segment of the second
            assert c["file_segments_refused"] == 4 + 1
            texts = victim.texts()
            size = 40 * 1024 * 1024
            assert f"[file big.bin refused: {size} bytes is above the 16 MiB limit]" in texts
            view = await channel_view(victim.node, "general")
            files = {i.file.info.name: i.file for i in view.items() if i.file is not None}
            assert "big.bin" not in files  # shown as the notice, no file to save
            assert files["ok.txt"].complete and files["ok.txt"].intact
            assert not files["two.txt"].complete  # over the quota: cannot be saved
            stored = await victim.node.page("general", limit=100)
            kept = sum(len(line.content) for line in stored)
            assert kept < 4 * SEGMENT_BYTES + MAX_FILE_BYTES // 1000
            assert any(pb.Content.FromString(line.content[1:]).file_segment.index
                       == PLACEHOLDER_INDEX for line in stored
                       if line.content[:1] == MAGIC and line.content[1:2] != b"S")
        finally:
            for h in (victim, mallory):
                await h.node.close()

    run(body(), 60)


def test_the_quota_survives_a_restart(tmp_path: Path) -> None:
    """The count of a sender's segment bytes is kept in DATA_DIR/file_quota.json: a
    restart does not give a flooding member a fresh quota (it did: the count was per run)."""

    async def body() -> None:
        hub = MemoryHub()
        quota = 3 * SEGMENT_BYTES
        victim = await start_node(tmp_path / "v", hub, name="victim", file_quota_bytes=quota)
        mallory = await start_node(tmp_path / "m", hub, name="mallory")
        try:
            first = split_file("one.bin", os.urandom(2 * SEGMENT_BYTES), "mallory")
            await mallory.node.post_contents("general", first)
            await wait_until(lambda: len(victim.delivered()) == 3, 30, "the first file")
            assert victim.node.counters.get("file_segments_refused", 0) == 0
            await victim.node.close()
            victim = await start_node(tmp_path / "v", hub, name="victim",
                                      file_quota_bytes=quota)  # the restart
            second = split_file("two.bin", os.urandom(2 * SEGMENT_BYTES), "mallory")
            await mallory.node.post_contents("general", second)
            await wait_until(lambda: len([d for d in victim.delivered() if d.kind in (
                "file", "segment")]) >= 3, 30, "the second file")
            # 2 segments held before the restart, quota 3: one more kept, one refused
            assert victim.node.counters["file_segments_refused"] == 1
            view = await channel_view(victim.node, "general")
            files = {i.file.info.name: i.file for i in view.items() if i.file is not None}
            assert files["one.bin"].intact and not files["two.bin"].complete
            ledger = tmp_path / "v" / "file_quota.json"
            assert ledger.stat().st_mode & 0o777 == 0o600
        finally:
            for h in (victim, mallory):
                await h.node.close()

    run(body(), 60)


def test_a_damaged_quota_ledger_is_set_aside(tmp_path: Path) -> None:
    from app.chat.file_quota import FileQuota

    ledger = tmp_path / "file_quota.json"
    ledger.write_text('{"version": 1, "held": [["general", "x", "lots"]]}')
    quota = FileQuota(1000, ledger)
    assert quota.held("general", "x") == 0
    assert not ledger.exists() and (tmp_path / "file_quota.json.bad").exists()


def test_many_identities_cannot_grow_a_channel_past_its_cap(tmp_path: Path) -> None:
    """Three identities each send a file within their own quota; together they pass the
    channel's cap (6 segments). The node empties the biggest holders' oldest files: the
    segment bytes held stay under the cap, and alice's small file, sent last, is kept
    intact (it grew by every identity's quota before: nothing bounded the channel)."""

    async def body() -> None:
        hub = MemoryHub()
        cap = 6 * SEGMENT_BYTES + 1000
        victim = await start_node(tmp_path / "v", hub, name="victim", file_channel_bytes=cap)
        flooders = [await start_node(tmp_path / f"m{i}", hub, name=f"m{i}") for i in range(3)]
        alice = await start_node(tmp_path / "a", hub, name="alice")
        try:
            sent = 0
            for i, m in enumerate(flooders):
                parts = split_file(f"f{i}.bin", os.urandom(3 * SEGMENT_BYTES), f"m{i}")
                await m.node.post_contents("general", parts)
                sent += len(parts)
                await wait_until(lambda n=sent: len(victim.delivered()) == n, 30, f"file {i}")
            small = os.urandom(5000)
            await alice.node.post_contents("general", split_file("notes.txt", small, "alice"))
            await wait_until(lambda: len(victim.delivered()) == sent + 2, 30, "alice's file")

            async def held() -> int:
                rows = await victim.node.page("general", limit=1000)
                return sum(len(r.content) for r in rows if r.content[:2] == b"\xff\x08")

            quota = victim.node._files
            # eviction runs beside the deliveries: wait for its state
            await wait_until(lambda: victim.node.counters["file_files_evicted"] >= 1
                             and quota.channel_total("general") <= cap
                             and not quota.evicting("general"), 30, "the eviction")  # fmt: skip
            assert await held() <= cap, (await held(), cap, victim.node.counters)
            view = await channel_view(victim.node, "general")
            files = {i.file.info.name: i.file for i in view.items() if i.file is not None}
            assert files["notes.txt"].complete and files["notes.txt"].intact
            assert files["f2.bin"].complete  # the newest identity's file was not emptied
            assert not files["f0.bin"].complete or not files["f1.bin"].complete
            # the total survives a restart (the ledger keeps what was emptied)
            await victim.node.close()
            victim = await start_node(tmp_path / "v", hub, name="victim",
                                      file_channel_bytes=cap)  # fmt: skip
            assert victim.node._files.channel_total("general") <= cap
        finally:
            for h in (victim, alice, *flooders):
                await h.node.close()

    run(body(), 90)


def test_the_channel_cap_spares_members_channels() -> None:
    """Only admitted members send in a members channel (each with its quota): the cap is
    for channels where anyone can make identities. Without a store to evict from, a
    capped channel refuses past its cap."""
    from app.chat.file_quota import FileQuota

    quota = FileQuota(10 * SEGMENT_BYTES, None, channel_bytes=2 * SEGMENT_BYTES,
                      capped=lambda ch: ch != "team")  # fmt: skip
    parts = split_file("a.bin", os.urandom(3 * SEGMENT_BYTES), "bob")
    assert [quota.check("team", "bob", p)[1] for p in parts[1:]] == [None, None, None]
    assert [quota.check("general", "bob", p)[1] for p in parts[1:]] == [None, None,
                                                                        "channel_full"]


def test_headless_says_a_file_was_not_kept(tmp_path: Path) -> None:
    """A file whose segments were stored empty (over the quota here; the channel cap
    empties files the same way) can never complete: the ``file`` event says so, where it
    said "incomplete · waiting for mallory" for ever."""
    from typing import Any

    from app.headless.file_watch import FileWatch

    async def body() -> None:
        hub = MemoryHub()
        victim = await start_node(tmp_path / "v", hub, name="victim",
                                  file_quota_bytes=2 * SEGMENT_BYTES)  # fmt: skip
        mallory = await start_node(tmp_path / "m", hub, name="mallory")
        said: list[dict[str, Any]] = []
        watch = FileWatch(victim.node.store, said.append)
        victim.node.subscribe(watch.on_event)
        try:
            parts = split_file("big.bin", os.urandom(3 * SEGMENT_BYTES), "mallory")
            await mallory.node.post_contents("general", parts)
            await wait_until(lambda: len(victim.delivered()) == 4, 30, "every part")
            await wait_until(lambda: any(e["state"] == "not_kept" for e in said), 30,
                             "a not_kept event")  # fmt: skip
            last = said[-1]
            assert last["present"] == 2 and last["total"] == 3
            assert "not kept here" in last["text"]
        finally:
            await watch.close()
            for h in (victim, mallory):
                await h.node.close()

    run(body(), 60)


def test_the_quota_and_the_cap_are_set_in_the_config_file(tmp_path: Path) -> None:
    """``file_quota_mib`` and ``file_channel_mib`` in config.toml reach the node's options
    (headless and TUI); defaults 64 and 256 MiB; a bad value is refused by name."""
    import argparse

    import pytest

    from app.launch.settings import add_join_arguments, settings_from_args

    def settings(*lines: str) -> object:
        cfg = tmp_path / "config.toml"
        cfg.write_text("\n".join(lines) + "\n")
        p = argparse.ArgumentParser()
        add_join_arguments(p)
        return settings_from_args(p.parse_args(["room", "--config", str(cfg)]))

    s = settings()
    assert (s.file_quota_bytes, s.file_channel_bytes) == (64 * 2**20, 256 * 2**20)
    s = settings("file_quota_mib = 8", "file_channel_mib = 32")
    assert (s.file_quota_bytes, s.file_channel_bytes) == (8 * 2**20, 32 * 2**20)
    with pytest.raises(ValueError, match="file_channel_mib"):
        settings("file_channel_mib = -1")
    with pytest.raises(ValueError, match="file_quota_mib"):
        settings('file_quota_mib = "lots"')


def test_a_headless_process_takes_its_quota_from_the_config_file(tmp_path: Path) -> None:
    """Real processes over a real relay on 127.0.0.1: bob's config file sets a quota of
    0 MiB, so alice's file is stored empty there and bob's ``file`` event says so."""
    from tests import procs

    (tmp_path / "notes.bin").write_bytes(os.urandom(60_000))  # 2 segments
    cfg = tmp_path / "bob.toml"
    cfg.write_text("file_quota_mib = 0\n")
    with procs.running(procs.Cluster(tmp_path)) as c:
        _relay, url = c.relay()
        alice = c.headless("alice", tmp_path / "alice", relay=url)
        bob = c.headless("bob", tmp_path / "bob", relay=url, extra=["--config", str(cfg)])
        for p in (alice, bob):
            p.wait_for(lambda p=p: any(e.get("state") == "connected"
                                       for e in p.select("connection")), 30, "connected")
        alice.send(f"/send {tmp_path / 'notes.bin'}")
        bob.wait_for(lambda: bool(bob.select("file", state="not_kept")), 30, "not_kept")
