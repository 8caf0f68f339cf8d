"""Writes ``schema1.sqlite.gz``'s database with sdschat's schema-1 code (main at 7b7e47f).

Run with that version's ``storage`` importable, outside this tree::

    PYTHONPATH=/path/to/sdschat-7b7e47f python make_schema1.py OUT_DIR
    gzip -9 -c OUT_DIR/sdschat.db > schema1.sqlite.gz
"""

import asyncio
import hashlib
import sys
from pathlib import Path

from storage import EventRow, Identity, OwnState, Store, StoredMessage

STATES = [
    None,
    OwnState.ACKNOWLEDGED,
    OwnState.SENT,
    OwnState.FAILED,
    OwnState.POSSIBLY_ACKNOWLEDGED,
]


def mid(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def content(i: int, own: bool) -> bytes:
    name = "alice" if own else "bob"
    return f'{{"v":1,"name":"{name}","kind":"msg","text":"line {i} \u00e9"}}'.encode()


async def main(d: Path) -> None:
    store = await Store.open(d)
    await store.save_identity(Identity("alice", "a" * 64, b"k" * 32, "identity.pem"))
    for ch in ("general", "random"):
        await store.join_channel(ch, b"topic-" + ch.encode(), is_public=True, now_ms=1)
    msgs = []
    for i in range(60):
        own = i % 3 == 0
        msgs.append(
            StoredMessage(
                channel="general" if i % 6 else "random",
                message_id=mid(i),
                sender_id="a" * 64 if own else "b" * 64,
                lamport=1000 + i,
                content=content(i, own),
                causal_history=tuple(mid(j) for j in range(max(0, i - 3), i)),
                retrieval_hint=hashlib.sha256(b"env%d" % i).digest(),
                envelope=None if i % 7 == 5 else (b"ENVELOPE-%03d-" % i) * 40,
                state=(STATES[(i // 3) % 5] or OwnState.ACKNOWLEDGED) if own else None,
                delivered_at=2000 + i,
                received_at=2000 + i,
            )
        )
    await store.insert_messages(msgs)
    pending = b'{"v":1,"name":"alice","kind":"msg","text":"pending"}'
    await store.enqueue_outgoing("general", pending, now_ms=5)
    await store.save_core_state("general", b'{"version":1}')
    await store.append_events(
        [EventRow(3000, "MessageDelivered", "general", mid(1), "b" * 64, 1001, 10, "{}")]
    )
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
