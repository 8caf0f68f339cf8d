"""Copies of messages older than the core's window: duplicates counted, conflicts reported."""

from __future__ import annotations

import hashlib
from pathlib import Path

from app_helpers import FAST, key, run, start_node, wait_until

from app.chat.history import read_history
from app.chat.lines import encode_content
from app.node.events import Conflict
from app.node.transport import MemoryHub
from net.envelope import seal
from net.identity import Identity
from sds import sds_pb2

SMALL_WINDOW = FAST.with_changes(log_window=4, causal_history_size=2)


def _waku_form(ident: Identity, content: bytes, lamport: int) -> bytes:
    """A content message with a js-waku id (sha256 of the content), sealed by ``ident``."""
    sds = sds_pb2.SdsMessage(
        sender_id=ident.sender_id,
        message_id=hashlib.sha256(content).hexdigest(),
        channel_id="general",
        lamport_timestamp=lamport,
        content=content,
    ).SerializeToString()
    return seal(sds, ident, key("general"))


def test_copies_beyond_the_window_are_duplicates_or_conflicts(tmp_path: Path) -> None:
    """The core no longer holds the id; the node compares with the stored message. The
    same author and text: ``duplicate_messages``, no event. Another author under the same
    (js-waku) id: a ``Conflict`` event, a counter, and ``"conflict": true`` in history."""

    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob", config=SMALL_WINDOW)
        m1, m2 = Identity.generate(), Identity.generate()
        ok = encode_content("ok", "someone")
        wid = hashlib.sha256(ok).hexdigest()
        inject = b.node._on_envelope
        try:
            await inject(_waku_form(m1, ok, 10_000))
            for i in range(6):  # later messages push `ok` out of the 4-message window
                await inject(_waku_form(m1, encode_content(f"later {i}", "someone"), 10_001 + i))
            await wait_until(lambda: len(b.delivered()) == 7, what="seven deliveries")
            assert wid not in b.node.core("general").log_ids()

            await inject(_waku_form(m1, ok, 10_000))  # new envelope bytes, same message
            await b.node._call_in_worker(b.node._noop)
            assert b.node.counters["duplicate_messages"] == 1
            await inject(_waku_form(m2, ok, 10_000))  # another author, one id
            # the counter moves in the round, the event reaches b.events after it
            await wait_until(lambda: b.node.counters["conflicts"] == 1
                             and any(isinstance(e, Conflict) for e in b.events),
                             what="the conflict, counted and told")  # fmt: skip
            conflicts = [e for e in b.events if isinstance(e, Conflict)]
            assert [(c.message_id, c.sender_id, c.other_sender, c.reason) for c in conflicts] == [
                (wid, m1.sender_id, m2.sender_id, "author")
            ]
            assert len(b.delivered()) == 7  # neither copy shown again
            assert b.rejected("replayed") == []
            assert b.node.counters["internal_errors"] == 0
        finally:
            await b.node.close()
        lines = read_history(tmp_path / "b", "general")
        assert [(x.message_id, x.sender_id, x.conflict) for x in lines if x.conflict] == [
            (wid, m1.sender_id, True)
        ]
        assert len(lines) == 7 and sum(x.conflict for x in lines) == 1

    run(main())
