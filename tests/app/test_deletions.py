"""A deletion that comes before what it deletes still overwrites it as it is stored.

A target declared lost and recovered after its deletion, a store catch-up in another
order, the author's edit of it arriving late: the node remembers the deletions of its
run (``app.chat.redaction.Deletions``) and overwrites the late message as soon as it
is stored. Real SQLite; every file of the data directory is read for the text.
"""

from __future__ import annotations

import asyncio
import hashlib
from pathlib import Path

from app.chat.lines import encode_content, typed_text
from app.chat.redaction import TOMBSTONE_TEXT, Deletions
from storage import Store, StoredMessage

SECRET = "oops secret password hunter2"


def _id(n: str) -> str:
    return hashlib.sha256(n.encode()).hexdigest()


def _row(n: str, sender: str, lamport: int, content: bytes) -> StoredMessage:
    return StoredMessage(channel="general", message_id=_id(n), sender_id=sender,
                         lamport=lamport, content=content, delivered_at=lamport)  # fmt: skip


def _holders(data_dir: Path, text: str) -> list[str]:
    return sorted(p.name for p in data_dir.rglob("*")
                  if p.is_file() and text.encode() in p.read_bytes())  # fmt: skip


def test_a_target_and_an_edit_stored_after_their_deletion_are_overwritten(
    tmp_path: Path,
) -> None:
    async def body() -> None:
        store = await Store.open(tmp_path / "d")
        try:
            await store.join_channel("general", b"t", is_public=True, now_ms=1)
            deletions = Deletions()
            target = _id("secret")
            assert await deletions.deleted(store, "general", "bob", target) == 0  # not here
            # another member "deleting" it changes nothing, and does not displace bob's
            assert await deletions.deleted(store, "general", "mallory", target) == 0
            line = _row("secret", "bob", 10, encode_content(SECRET, "bob"))
            edit = _row("edit", "bob", 12, encode_content(
                typed_text(target, SECRET + " (fixed)"), "bob", "edit"))
            other = _row("other", "carol", 11, encode_content(SECRET + " quoted", "carol"))
            await store.insert_messages([line])
            assert deletions.pending("general", target, "bob", "msg", SECRET) == target
            assert deletions.pending("general", _id("other"), "carol", "msg", SECRET) is None
            assert await deletions.stored(store, "general", "bob", target) == 1
            await store.insert_messages([other, edit])
            assert deletions.pending("general", _id("edit"), "bob", "edit",
                                     typed_text(target, SECRET)) == target  # fmt: skip
            assert await deletions.stored(store, "general", "bob", target) == 1
            kept = await store.get_messages("general", [target, _id("edit"), _id("other")])
            assert TOMBSTONE_TEXT.encode() in kept[target].content
            assert TOMBSTONE_TEXT.encode() in kept[_id("edit")].content
            assert SECRET.encode() in kept[_id("other")].content  # carol's own line stays
            assert _holders(tmp_path / "d", SECRET + " (fixed)") == []
            assert _holders(tmp_path / "d", f'"text":"{SECRET}"') == []
        finally:
            await store.close()

    asyncio.run(body())


def test_the_deletions_remembered_are_bounded(tmp_path: Path) -> None:
    deletions = Deletions(kept=3)

    async def body() -> None:
        async with await Store.open(tmp_path / "d") as store:
            await store.join_channel("general", b"t", is_public=True, now_ms=1)
            for i in range(5):
                await deletions.deleted(store, "general", "bob", _id(f"t{i}"))

    asyncio.run(body())
    assert len(deletions) == 3
    assert deletions.pending("general", _id("t1"), "bob", "msg", "") is None
    assert deletions.pending("general", _id("t4"), "bob", "msg", "") == _id("t4")
