"""Headless mode at its edges (issue 41 item 14), real processes over a real relay:

* a stdin line that is not UTF-8 is refused with an error naming it, never sent with
  U+FFFD in it, and counts as not sent (exit 6);
* an outsider's garbage envelopes do not each print a JSON line: a few, then one
  summary line per window with how many were held back (the counts are all kept);
* a member's typing flood is never stored: no event-log row per ephemeral message,
  and the database does not grow with it.
"""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

from e2e_helpers import Proc, T, cluster, history
from websockets.sync.client import connect

from app.headless.rejected import SHOWN_PER_WINDOW
from app.node.runtime import Node, NodeOptions
from app.node.transport import RelayTransport
from net import envelope_pb2
from net.channel_key import derive_channel_key
from net.envelope import ENVELOPE_VERSION, seal
from net.relay_frames import decode_frame, encode_ping, encode_publish
from storage import open_read_only
from storage.database import DB_FILENAME


def _up(p: Proc) -> None:
    p.wait_for(lambda: bool(p.select("connection", state="connected")), 30, "connected")
    p.wait_for(lambda: bool(p.select("channel")), 30, "joined")


def _counters(p: Proc) -> dict[str, int]:
    before = len(p.select("info", text="stats"))
    p.send("/stats")
    p.wait_for(lambda: len(p.select("info", text="stats")) > before, 30, "/stats")
    return dict(p.select("info", text="stats")[-1]["data"]["counters"])


def test_a_stdin_line_that_is_not_utf8_is_refused_and_named(tmp_path: Path) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice, bob = c.node("alice", url), c.node("bob", url)
        _up(alice)
        _up(bob)
        stdin = alice.popen.stdin
        assert stdin is not None
        stdin.write(b"first line\nsecond \xff\xfe line\nthird line\n")
        stdin.flush()
        bob.wait_for(lambda: len(bob.select("delivered")) >= 2, 30, "the good lines")
        alice.close_stdin()
        assert alice.wait(60) == 6, alice.tail()
        [err] = [e for e in alice.select("error") if "stdin line 2" in e["message"]]
        assert "byte 0xff at offset 7 is not UTF-8" in err["message"]
        fatal = alice.select("error")[-1]
        assert fatal["exit"] == 6 and [u["line"] for u in fatal["unsent"]] == [2]
        assert [e["text"] for e in bob.select("delivered")] == ["first line", "third line"]
        bob.close_stdin()
        assert bob.wait(60) == 0
        texts = [h["content"] for h in history(tmp_path / "alice")]
        assert texts == ["first line", "third line"]
        assert not any("\ufffd" in t for t in texts)


def test_garbage_envelopes_print_a_few_lines_and_one_summary_per_window(
    tmp_path: Path,
) -> None:
    room = derive_channel_key("room", None)
    n = 300
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        victim = c.node("victim", url)
        _up(victim)
        with connect(url, max_size=None, proxy=None) as ws:
            for _ in range(n):  # the right topic, no key: each fails its AEAD check
                ws.send(encode_publish(envelope_pb2.Envelope(
                    version=ENVELOPE_VERSION, topic=room.topic, nonce=os.urandom(12),
                    ciphertext=os.urandom(200)).SerializeToString()))  # fmt: skip
            ws.send(encode_ping(1))
            for _ in range(10 * n):  # bounded: until the relay has taken them all
                if decode_frame(ws.recv(timeout=T(30))).WhichOneof("body") == "pong":
                    break
        victim.wait_for(lambda: _counters(victim).get("rejected_wrong_key_or_tampered") == n,
                        60, "every garbage envelope counted")  # fmt: skip
        written = victim.select("rejected")
        assert len(written) < 3 * SHOWN_PER_WINDOW, len(written)
        victim.close_stdin()
        assert victim.wait(60) == 0, victim.tail()
        lines = victim.select("rejected", reason="wrong_key_or_tampered")
        # a line written as it came counts one; a summary, the ones it stands for
        assert sum(e.get("suppressed", 1) for e in lines) == n
        assert lines[-1]["count"] == n and lines[-1]["suppressed"] > 0


def _ephemeral_rows(data_dir: Path) -> int:
    db = open_read_only(data_dir / DB_FILENAME)
    assert db is not None
    try:
        return int(db.execute(
            "SELECT count(*) FROM events WHERE kind = 'EphemeralReceived'").fetchone()[0])
    finally:
        db.close()


def _db_rows(data_dir: Path) -> int:
    """Rows of every table of the node's database (what a flood stored would add to)."""
    db = open_read_only(data_dir / DB_FILENAME)
    assert db is not None
    try:
        tables = [r[0] for r in db.execute(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'")]
        return sum(int(db.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]) for t in tables)
    finally:
        db.close()


def test_a_typing_flood_is_never_stored(tmp_path: Path) -> None:
    """A member (mallory's node, in this process) sends 600 typing notices, far over
    the rate the victim passes on; none is an event-log row, and the database does not
    grow by them in rows (before: a row each, +5 MB per 15 s of a flood at the relay's rate)."""
    n = 600
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        victim = c.node("victim", url)
        _up(victim)
        victim.send("hello")
        victim.wait_for(lambda: bool(victim.select("own", state="sent")), 30, "a line")
        before = _db_rows(tmp_path / "victim")

        async def flood() -> None:
            m = await Node.open(tmp_path / "mallory", RelayTransport(url), name="mallory",
                                options=NodeOptions())  # fmt: skip
            try:
                await m.start()
                await m.join("room", None)
                core, info = m.core("room"), m.channels["room"]
                for _ in range(n):
                    data = core.send_ephemeral(b'{"v":1,"kind":"typing","name":"mallory"}',
                                               m.now_ms())  # fmt: skip
                    await m.transport.publish(seal(data, m.identity, info.key))
                    await asyncio.sleep(0.002)
            finally:
                await m.close()

        asyncio.run(asyncio.wait_for(flood(), T(120)))

        def handled() -> bool:
            got = _counters(victim)
            return got.get("ephemeral_dropped_rate", 0) + len(victim.select("ephemeral")) >= n

        victim.wait_for(handled, 60, "every typing notice handled")
        assert _ephemeral_rows(tmp_path / "victim") == 0
        # mallory's join (a peer, her syncs) adds a few rows; 600 notices would add 600.
        # (Bytes are no measure: the WAL grows with the state saves of a slower run.)
        assert _db_rows(tmp_path / "victim") - before < n // 10
        victim.close_stdin()
        assert victim.wait(60) == 0
        assert _ephemeral_rows(tmp_path / "victim") == 0

