"""The parts the node owns (app/node/): each alone, and the rule that binds them.

The node (:mod:`app.node.runtime`) creates its parts and calls down into them; a part
never imports the runtime back. The parts with no I/O are tested here directly: the
own-message states (:mod:`app.node.own_messages`), the envelopes kept in memory
(:mod:`app.node.envelope_memory`), the worker's inbox (:mod:`app.node.inbox`) and a
round's lost reports (:mod:`app.node.round`). The rest (receiving, effects,
publishing, joining, the members glue) is driven through real nodes by
tests/app/test_node*.py and tests/members.
"""

from __future__ import annotations

import ast
import asyncio
from pathlib import Path

import pytest

from app.node.envelope_memory import EnvelopeMemory
from app.node.events import Lost, NodeEvent, OwnMessage
from app.node.inbox import Barrier, EnvelopeIn, Inbox, Tick, release_barriers
from app.node.own_messages import OwnMessages
from app.node.round import Round, coalesce_lost, reject
from storage import Batch, OwnState, StoredMessage

NODE = Path(__file__).resolve().parents[2] / "app" / "node"


def _imports(path: Path) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            out.add(node.module)
            out.update(f"{node.module}.{a.name}" for a in node.names)
    return out


@pytest.mark.parametrize(
    "module", sorted(p.name for p in NODE.glob("*.py") if p.name not in ("runtime.py",
                                                                        "__init__.py")),
)
def test_no_part_of_the_node_imports_the_runtime(module: str) -> None:
    imported = _imports(NODE / module)  # type-only and lazy imports count too
    assert not {"app.node.runtime", "app.node.Node"} & imported


def test_no_module_of_the_node_grows_into_a_hub() -> None:
    sizes = {p.name: len(p.read_text().splitlines()) for p in NODE.glob("*.py")}
    assert {name: n for name, n in sizes.items() if n > 1500} == {}, (
        "a new part of the node gets a module of its own (docs/contributing.md)")


# ---------------------------------------------------------------- own messages


def test_own_states_only_move_forward() -> None:
    own = OwnMessages()
    own.logged("c", "m1", 7, b"hello", "hello", "msg")
    batch = Batch()
    assert own.set("c", "m1", OwnState.POSSIBLY_ACKNOWLEDGED, batch)
    assert not own.set("c", "m1", OwnState.SENT, batch)  # backwards: refused
    assert not own.set("c", "m1", OwnState.POSSIBLY_ACKNOWLEDGED, batch)  # the same: no change
    assert own.state[("c", "m1")] is OwnState.POSSIBLY_ACKNOWLEDGED
    assert own.local_ids[("c", "m1")] == 7


def test_an_acknowledgement_after_a_failure_still_counts_and_ends_the_retry() -> None:
    own = OwnMessages()
    own.logged("c", "m1", 1, b"\xfftyped", "typed", "msg")
    assert own.set("c", "m1", OwnState.FAILED, Batch())
    own.failed.append(("c", "m1", b"\xfftyped"))
    assert ("c", "m1") not in own.state and ("c", "m1") not in own.text
    assert own.typed[("c", "m1")] == b"\xfftyped"  # kept for /retry until acknowledged
    own.acknowledged_after_failing("c", "m1")
    assert own.set("c", "m1", OwnState.ACKNOWLEDGED, Batch())  # a late ack still says so
    assert own.failed == [] and ("c", "m1") not in own.typed


def test_sent_is_carried_and_a_stale_carried_state_is_dropped() -> None:
    own = OwnMessages()
    own.logged("c", "m1", 1, b"a", "a", "msg")
    own.logged("c", "m2", 2, b"b", "b", "msg")
    events: list[NodeEvent] = []
    own.mark_sent("c", "m1", events)
    own.mark_sent("c", "m2", events)
    own.mark_sent("c", "m2", events)  # sent once only
    assert [(e.state, e.local_id) for e in events if isinstance(e, OwnMessage)] == [
        ("sent", 1), ("sent", 2)]
    assert own.set("c", "m2", OwnState.POSSIBLY_ACKNOWLEDGED, Batch())  # m2 moved on since
    batch = Batch()
    own.add_carried(batch)
    assert own.carried == []
    assert batch.own_states == [("c", "m1", OwnState.SENT)]


def test_retry_takes_the_failed_of_one_channel_only() -> None:
    own = OwnMessages()
    own.learn_failed("a", [("m1", b"x"), ("m2", b"y")])
    own.learn_failed("b", [("m3", b"z")])
    assert own.take_failed("a") == [("a", "m1", b"x"), ("a", "m2", b"y")]
    assert own.failed == [("b", "m3", b"z")]
    assert own.take_failed(None) == [("b", "m3", b"z")] and own.failed == []


def test_stored_states_are_learnt_at_a_join_and_forgotten_at_a_leave() -> None:
    own = OwnMessages()
    msg = StoredMessage(channel="c", message_id="m1", sender_id="me", lamport=1,
                        content=b"\xffbytes", state=OwnState.SENT)  # fmt: skip
    own.learn("c", {"m1": msg})
    assert own.state[("c", "m1")] is OwnState.SENT and own.typed[("c", "m1")] == b"\xffbytes"
    own.learn("d", {"m9": msg}, text=False)  # after a full disk: the state only
    assert own.state[("d", "m9")] is OwnState.SENT and ("d", "m9") not in own.text
    own.forget_states("c")
    assert set(own.state) == {("d", "m9")}


# ---------------------------------------------------------------- envelopes in memory


def test_envelope_memory_is_bounded_and_a_full_disk_clears_it_but_not_the_guard() -> None:
    memory = EnvelopeMemory(recent=3, waiting=2)
    for i in range(5):
        memory.remember("c", f"m{i}", bytes([i]))
        memory.wait("c", bytes([i]), b"env")
    memory.remember("c", "m2", b"again")  # refreshed: the newest now
    assert list(memory.recent) == [("c", "m3"), ("c", "m4"), ("c", "m2")]
    assert list(memory.waiting) == [("c", b"\x03"), ("c", b"\x04")]
    memory.seen.remember(b"h")
    memory.clear()
    assert not memory.recent and not memory.waiting and b"h" in memory.seen


# ---------------------------------------------------------------- the worker's inbox and rounds


def test_the_inbox_makes_a_fast_producer_wait_and_wakes_it() -> None:
    async def go() -> tuple[bool, int, int]:
        inbox = Inbox(max_envelopes=2)
        await inbox.put_envelope(EnvelopeIn(b"1"))
        await inbox.put_envelope(EnvelopeIn(b"2"))
        third = asyncio.ensure_future(inbox.put_envelope(EnvelopeIn(b"3")))
        await asyncio.sleep(0)
        waited = not third.done()  # bounded: the producer waits
        inbox.put(Tick())  # other inputs are never bounded
        taken = await inbox.take(limit=1)
        await asyncio.wait_for(third, 5)  # woken by the take
        rest = await inbox.take(limit=10)
        return waited, len(taken), len(rest)

    assert asyncio.run(go()) == (True, 1, 3)


def test_held_envelopes_go_first_and_barriers_resolve() -> None:
    async def go() -> tuple[list[bytes], bool]:
        inbox = Inbox(max_envelopes=1)
        await inbox.put_envelope(EnvelopeIn(b"new"))
        inbox.requeue_envelopes([b"held1", b"held2"])  # never waits, even when full
        items = await inbox.take(limit=10)
        barrier = Barrier(asyncio.get_running_loop().create_future())
        release_barriers([*items, barrier])
        return [i.data for i in items if isinstance(i, EnvelopeIn)], barrier.future.done()

    assert asyncio.run(go()) == ([b"held1", b"held2", b"new"], True)


def test_a_round_reports_one_lost_per_channel_with_every_id() -> None:
    events: list[NodeEvent] = [
        Lost("a", "m1", ("w1",), ("m1",)),
        OwnMessage("a", "sent", 1, "x"),
        Lost("b", "m2", (), ("m2",)),
        Lost("a", "m3", ("w1", "w2"), ("m3",)),
    ]
    out = coalesce_lost(events)
    assert [type(e).__name__ for e in out] == ["Lost", "OwnMessage", "Lost"]
    first = out[0]
    assert isinstance(first, Lost)
    assert first.message_ids == ("m1", "m3") and first.waiting == ("w1", "w2")


def test_a_rejection_is_counted_by_reason_and_reported() -> None:
    from collections import Counter

    counters: Counter[str] = Counter()
    out = Round()
    reject(counters, out, "bad_signature", "c", "from x")
    reject(counters, out, "bad_signature", None, "from y")
    assert counters["rejected_bad_signature"] == 2
    assert [getattr(e, "count", None) for e in out.events] == [1, 2]
