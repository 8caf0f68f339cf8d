"""Writes ``schema2.sqlite.gz``'s database with sdschat's schema-2 code (main at 0ffcbb9).

Run with that version's ``storage`` and ``sds`` importable, outside this tree::

    PYTHONPATH=/path/to/sdschat-0ffcbb9 python make_schema2.py OUT_DIR
    gzip -9 -c OUT_DIR/sdschat.db > schema2.sqlite.gz

30 messages on "general" (own ones in several states), a pending outbox line, a core
state, and the node's event log as schema-2 nodes wrote it: one ``MessageDelivered``
row per message of the others, ``was_lost`` true in the detail of messages 7 and 21
(delivered after the core had declared them lost), and a ``MessageLost`` row for
each of them.
"""

import asyncio
import hashlib
import sys
from pathlib import Path

from sds.events import MessageDelivered, MessageLost
from storage import Identity, OwnState, Store, StoredMessage
from storage.events import event_row

LATE = (7, 21)


def mid(n: int) -> str:
    return hashlib.sha256(str(n).encode()).hexdigest()


def content(i: int, own: bool) -> bytes:
    name = "alice" if own else "bob"
    return f'{{"v":1,"name":"{name}","kind":"msg","text":"line {i}"}}'.encode()


async def main(d: Path) -> None:
    store = await Store.open(d)
    await store.save_identity(Identity("alice", "a" * 64, b"k" * 32, "identity.pem"))
    await store.join_channel("general", b"topic-general", is_public=True, now_ms=1)
    msgs = []
    events = []
    for i in range(30):
        own = i % 4 == 0
        m = StoredMessage(
            channel="general",
            message_id=mid(i),
            sender_id="a" * 64 if own else "b" * 64,
            lamport=1000 + i,
            content=content(i, own),
            causal_history=tuple(mid(j) for j in range(max(0, i - 2), i)),
            retrieval_hint=hashlib.sha256(b"env%d" % i).digest(),
            envelope=(b"ENVELOPE-%03d-" % i) * 20,
            state=(OwnState.ACKNOWLEDGED if i % 8 else OwnState.SENT) if own else None,
            delivered_at=2000 + i,
            received_at=2000 + i,
        )
        msgs.append(m)
        if own:
            continue
        if i in LATE:
            events.append(event_row(MessageLost("general", mid(i), (mid(i + 1),)), 2500 + i))
        delivered = MessageDelivered(
            "general", m.message_id, m.sender_id, m.lamport, m.content, i,
            m.causal_history, m.retrieval_hint, m.envelope or b"", 0, i in LATE,
        )
        events.append(event_row(delivered, 3000 + i))
    await store.insert_messages(msgs)
    await store.append_events(events)
    pending = b'{"v":1,"name":"alice","kind":"msg","text":"pending"}'
    await store.enqueue_outgoing("general", pending, now_ms=5)
    await store.save_core_state("general", b'{"version":1}')
    await store.close()


if __name__ == "__main__":
    asyncio.run(main(Path(sys.argv[1])))
