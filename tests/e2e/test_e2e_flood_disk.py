"""A member naming many invented ids must not fill the others' disks (issue 26, the
soak's hostile phase): a real relay and a headless node over loopback, and a raw relay
client (built from the project's modules) that signs one message naming 1,000 ids
nobody has. The node's core repeats the ids still missing in a reminder every sweep
(1 s with ``--fast``); logged with their ids, each reminder was another ~110 KB of event
log until the ids were declared lost (the soak: 59 MB of reminders in a 75 MB database
after two minutes, and ``n0``'s disk full again after its ballast was removed), and
headless wrote each as a ~70 KB JSON line here (~700 KB in the soak)."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from pathlib import Path

from e2e_helpers import cluster
from test_e2e_hostile_ids import _stats
from test_e2e_security import _up, spy

from app.chat.lines import encode_content
from app.headless.run import REMINDER_IDS
from net.channel_key import derive_channel_key
from net.envelope import seal
from net.identity import Identity
from net.relay_frames import encode_publish
from sds import sds_pb2
from sds.ids import message_id_for

INVENTED = 1_000


def _flood_once(url: str, text: str, count: int = INVENTED) -> list[str]:
    """One content message of a fresh identity naming ``count`` invented ids."""
    invented = [os.urandom(32).hex() for _ in range(count)]
    key = derive_channel_key("room", None)
    ident = Identity.generate()
    lamport = time.time_ns() // 1_000_000
    content = encode_content(text, "mallory")
    msg = sds_pb2.SdsMessage(
        sender_id=ident.sender_id,
        message_id=message_id_for("room", ident.sender_id, lamport, content, os.urandom(8)),
        channel_id="room",
        lamport_timestamp=lamport,
        content=content,
        causal_history=[sds_pb2.HistoryEntry(message_id=m) for m in invented],
    )
    with spy(url, [key.topic]) as s:
        s.ws.send(encode_publish(seal(msg.SerializeToString(), ident, key)))
    return invented


def test_reminders_of_invented_ids_are_logged_by_count_not_every_id(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url)
        _up(alice)
        invented = _flood_once(url, "names a thousand invented ids")
        # the invented ids are declared lost after 20 s (--fast), the line then delivered;
        # meanwhile the core reminded the node of them about once a second
        alice.wait_for(
            lambda: any(e["text"] == "names a thousand invented ids"
                        for e in alice.select("delivered")),
            60, "the flood's line, delivered once its invented ids are declared lost",
        )  # fmt: skip
        reminders = [e for e in alice.select("missing") if not e["first"] and not e["waiting"]]
        assert len(reminders) >= 5  # the node was reminded (it asks its store peer for them)
        # headless writes the first REMINDER_IDS of them and their number
        assert max(e.get("ids_total", len(e["ids"])) for e in reminders) == INVENTED
        assert max(len(e["ids"]) for e in reminders) == REMINDER_IDS
        alice.stop()
        db = sqlite3.connect(tmp_path / "alice" / "sdschat.db")
        try:
            rows = [
                json.loads(d)
                for (d,) in db.execute("SELECT detail FROM events WHERE kind = 'MessagesMissing'")
            ]
            logged = db.execute(
                "SELECT SUM(LENGTH(detail)) FROM events WHERE kind = 'MessagesMissing'"
            ).fetchone()[0]
        finally:
            db.close()
    firsts = [r for r in rows if r["first"]]
    # the first notice names every id, with its time (the report's "noticed missing")
    assert {m["message_id"] for r in firsts for m in r["missing"]} >= set(invented)
    repeats = [r for r in rows if not r["first"]]
    assert len(repeats) >= 5
    assert all("missing" not in r and r["missing_len"] > 0 for r in repeats), repeats[:2]
    # one ~110 KB list (the first notice), not one per reminder (before: 2.4 MB here)
    assert logged < 200_000, logged


def test_a_history_beyond_the_receive_cap_is_refused_and_leaves_nothing(tmp_path: Path) -> None:
    """The receive cap (``sds.Config.max_history_received``, 1,000: five times js-waku's
    200, 33 times ours): one entry more and the message is refused whole, counted as
    ``dropped_history_too_long`` (as ``bad_filter`` is), and nothing of it is tracked,
    logged or stored; the same message at the cap is taken."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url)
        _up(alice)
        over = _flood_once(url, "one id too many", INVENTED + 1)
        at = _flood_once(url, "at the cap", INVENTED)
        alice.wait_for(lambda: any(set(at) & set(e["ids"]) for e in alice.select("missing")),
                       30, "the message at the cap, taken (its ids missing)")  # fmt: skip
        counters = _stats(alice)
        assert counters.get("dropped_history_too_long") == 1, counters
        assert not any(set(over) & set(e["ids"]) for e in alice.select("missing"))
        alice.stop()
        db = sqlite3.connect(tmp_path / "alice" / "sdschat.db")
        try:
            logged = "".join(d for (d,) in db.execute("SELECT detail FROM events"))
            texts = [bytes(b) for (b,) in db.execute("SELECT content FROM messages")]
        finally:
            db.close()
    assert over[0] not in logged and at[0] in logged
    assert not any(b"one id too many" in t for t in texts)
