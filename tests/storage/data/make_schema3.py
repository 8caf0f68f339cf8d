"""Writes ``schema3.sqlite.gz``'s database with sdschat's schema-3 code (main at b42f88d).

Run with that version's ``storage`` and ``sds`` importable, outside this tree::

    PYTHONPATH=/path/to/sdschat-b42f88d python make_schema3.py OUT_DIR
    gzip -9 -c OUT_DIR/sdschat.db > schema3.sqlite.gz

30 messages on "general" (own ones in several states), a pending outbox line, a core
state, and the node's event log as schema-3 nodes wrote it: one ``MessageDelivered``
row per message of the others; messages 7 and 21 arrived after the core had declared
them lost (``MessageLost`` rows, ``was_lost`` in the stored message and in the
delivery's detail), and messages 9 and 22, which had waited for them, were delivered
with ``missing_before`` 1; a ``MessagesMissing`` row (message 13 waiting) names
messages 10 and 11 before their delivery (they arrived late), and one written after
message 3's delivery names it (the node had it in storage: not late).
"""

import asyncio
import hashlib
import sys
from pathlib import Path

from sds.events import MessageDelivered, MessageLost, MessagesMissing
from sds.message import HistoryEntry
from storage import Identity, OwnState, Store, StoredMessage
from storage.events import event_row

LATE = (7, 21)
WAITED = {7: 9, 21: 22}  # lost -> the message delivered without it
NAMED = (10, 11)
NAMED_AFTER = 3


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
    missing = MessagesMissing(
        "general", mid(13), "b" * 64, tuple(HistoryEntry(mid(n)) for n in NAMED), True
    )
    events.append(event_row(missing, 2900))
    again = MessagesMissing("general", mid(29), "b" * 64, (HistoryEntry(mid(NAMED_AFTER)),), True)
    events.append(event_row(again, 4000))
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
            was_lost=i in LATE,
        )
        msgs.append(m)
        if own:
            continue
        if i in LATE:
            events.append(event_row(MessageLost("general", mid(i), (mid(WAITED[i]),)), 2500 + i))
        delivered = MessageDelivered(
            "general", m.message_id, m.sender_id, m.lamport, m.content, i,
            m.causal_history, m.retrieval_hint, m.envelope or b"", int(i in WAITED.values()),
            i in LATE,
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
