"""Writes ``schema6.sqlite.gz``'s database with sdschat's schema-6 code (main at 6aab3b7).

Run with that version's ``storage`` and ``app`` importable, outside this tree::

    PYTHONPATH=/path/to/sdschat-6aab3b7 python make_schema6.py OUT_DIR
    gzip -9 -c OUT_DIR/sdschat.db > schema6.sqlite.gz

On "general": 10 lines of bob and alice; a 3-segment file of bob (``FILE_DATA``: a
manifest, then its segments, the second one sent twice: the first in SDS order
counts); a line of carol naming the file id; a manifest of mallory naming bob's file
id (a copy: none of bob's segments are hers); a placeholder segment of mallory
(``app/chat/file_quota.py``); a second file of bob on "other". Schema 6 indexed none of
it: a file's segments were found by searching the log.
"""

import asyncio
import hashlib
import sys
from pathlib import Path

from app.chat import content_pb2 as pb
from app.chat.content import MAGIC, decode
from app.chat.file_quota import placeholder
from app.chat.files import split_file
from app.chat.lines import encode_content
from storage import Identity, Store, StoredMessage

BOB, MALLORY, CAROL = "b" * 32, "m" * 32, "c" * 32
FILE_DATA = bytes(range(256)) * 500  # 128,000 bytes: 3 segments of 48 KiB
OTHER_DATA = b"other file" * 1000


def mid(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


async def main(d: Path) -> None:
    store = await Store.open(d)
    await store.save_identity(Identity("alice", "a" * 32, b"k" * 32, "identity.pem"))
    for ch in ("general", "other"):
        await store.join_channel(ch, b"topic-" + ch.encode(), is_public=True, now_ms=1)
    msgs = []
    n = 0

    def add(channel: str, sender: str, content: bytes) -> None:
        nonlocal n
        msgs.append(StoredMessage(channel, mid(n), sender, 1000 + n, content,
                                  delivered_at=2000 + n, received_at=2000 + n))
        n += 1

    for i in range(10):
        add("general", BOB if i % 2 else "a" * 32, encode_content(f"line {i}", "bob"))
    parts = split_file("notes.bin", FILE_DATA, "bob")
    file_id = decode(parts[0]).file.file_id
    for p in parts:
        add("general", BOB, p)
    add("general", BOB, parts[2])  # segment 1 again: the first in SDS order counts
    add("general", CAROL, encode_content(f"look at {file_id}", "carol"))
    fake = pb.Content.FromString(split_file("copy.bin", FILE_DATA, "mallory")[0][1:])
    fake.file_manifest.file_id = file_id  # bob's file id in mallory's manifest
    add("general", MALLORY, MAGIC + fake.SerializeToString())
    add("general", MALLORY, placeholder(file_id, "mallory"))
    for p in split_file("other.bin", OTHER_DATA, "bob"):
        add("other", BOB, p)
    await store.insert_messages(msgs)
    await store.close()
    print("file id", file_id)


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
