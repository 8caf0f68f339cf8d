"""A typed line leaves ahead of the envelopes queued before it (app/node.py ``_Inbox``)."""

from __future__ import annotations

from pathlib import Path

from app_helpers import run, start_node, wait_until

from app.node import _Envelope
from app.transport import MemoryHub, MemoryTransport


def test_a_typed_line_is_sent_before_the_envelopes_queued_ahead_of_it(tmp_path: Path) -> None:
    """A member receiving a flood still gets its own line out at once: the line is
    recorded, fsynced and published in a round of its own before the 60 envelopes
    that were already waiting are opened; they are all delivered after it."""

    async def main() -> None:
        alice = await start_node(tmp_path / "a", MemoryHub(), name="alice")
        bob = await start_node(tmp_path / "b", MemoryHub(), name="bob")
        try:
            for i in range(60):
                await alice.node.send("general", f"flood {i}")
            transport = alice.node.transport
            assert isinstance(transport, MemoryTransport)
            envelopes = list(transport.sent)
            assert len(envelopes) >= 60
            inbox = bob.node._inbox
            assert inbox is not None
            for env in envelopes:  # as the transport would, all before bob's next round
                inbox.put_envelope_now(_Envelope(env))
            line = bob.node.post("general", "mine first")
            local_id = await line
            # the line's round committed (its future) before any waiting envelope
            assert bob.delivered() == []
            assert [e.local_id for e in bob.own("queued")] == [local_id]
            await wait_until(lambda: len(bob.delivered()) == 60, what="the flood delivered")
            assert [e.text for e in bob.delivered()] == [f"flood {i}" for i in range(60)]
            logged = next(i for i, e in enumerate(bob.events) if e in bob.own("logged"))
            first = bob.events.index(bob.delivered()[0])
            assert logged < first
        finally:
            await alice.node.close()
            await bob.node.close()

    run(main())
