"""Typed content through real nodes (in-memory hub, real SQLite): the content
commands' refusals, /retry of a failed typed message, and the folded history after
a restart."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
from app_helpers import FAST, Harness, run, start_deaf_listener, start_node, wait_until

from app.chat.content import ConversationView, decode, encode_reaction
from app.chat.files import MAX_FILE_BYTES
from app.chat.history import print_history, read_history
from app.chat.history_fold import fold
from app.commands.content import add_delivered, channel_view, run_content_command
from app.node.events import Delivered, Info, NodeEvent
from app.node.transport import MemoryHub


def _logged(h: Harness) -> int:
    return len(h.own("logged")) + len(h.delivered())


def test_content_commands_refuse_bad_input_and_send_nothing(tmp_path: Path) -> None:
    big = tmp_path / "big.bin"
    with big.open("wb") as f:
        f.truncate(MAX_FILE_BYTES + 1)  # sparse
    (tmp_path / "empty.bin").write_bytes(b"")

    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        infos: list[NodeEvent] = []
        try:
            await a.node.send("general", "alice's line")
            await wait_until(lambda: len(b.delivered()) == 1, what="delivered at b")
            mid = b.delivered()[0].message_id
            await run_content_command(b.node, "react", f"{mid[:6]} 👍", "general", infos.append)
            await wait_until(lambda: len(a.delivered()) == 1, what="reaction at a")
            reaction = a.delivered()[0].message_id
            before = _logged(b)
            bad = [
                ("reply", "zzzz hi", "not a message id"),
                ("reply", "abc hi", "4\\+ hex"),
                ("reply", f"{'0' * 8} hi", "no message"),
                ("reply", mid, "usage: /reply ID TEXT"),
                ("react", f"{mid} two words", "one emoji"),
                ("edit", f"{mid} mine now", "only its author"),
                ("delete", mid, "only its author"),
                ("delete", f"{mid} extra", "usage: /delete ID"),
                ("save", mid, "not a received file"),
                ("send", str(tmp_path / "missing.bin"), "not a file"),
                ("send", str(tmp_path / "empty.bin"), "is empty"),
                ("send", str(big), "the limit is 16777216"),
                ("send", "", "usage: /send PATH"),
            ]
            for name, arg, why in bad:
                with pytest.raises(ValueError, match=why):
                    await run_content_command(b.node, name, arg, "general", infos.append)
            # alice may not edit bob's reaction (it is not hers), nor a reaction of hers as text
            with pytest.raises(ValueError, match="only its author"):
                await run_content_command(a.node, "edit", f"{reaction} x", "general", infos.append)
            await run_content_command(b.node, "topic", "", "general", infos.append)
            assert [e for e in infos if isinstance(e, Info)][-1].data == {"topic": None}
            assert _logged(b) == before
            await run_content_command(b.node, "topic", "--clear", "general", infos.append)
            await wait_until(lambda: _logged(b) == before + 1, what="cleared topic logged")
            assert (await channel_view(b.node, "general")).topic == ""
            view = await channel_view(b.node, "general")
            item = view.items()[0]
            assert item.reactions == {"👍": (b.node.sender_id,)}
        finally:
            await a.node.close()
            await b.node.close()

    run(main())


def test_failed_typed_content_is_retried_as_is(tmp_path: Path) -> None:
    reaction = encode_reaction("ab" * 32, "👍", "alice")

    async def main() -> None:
        quick_fail = FAST.with_changes(
            max_resend_attempts=1, resend_unacknowledged_ms=100, resend_possibly_acknowledged_ms=200
        )
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice", config=quick_fail)
        deaf = await start_deaf_listener(tmp_path / "deaf", hub, config=quick_fail)
        try:
            await wait_until(lambda: "I am here but hear nothing" in a.texts(), 5, "heard")
            await a.node.post_content("general", reaction)
            await wait_until(lambda: len(a.own("failed")) == 1, 5, "failure")
            b = await start_node(tmp_path / "b", hub, name="bob", config=quick_fail)
            assert await a.node.retry() == 1
            def reactions() -> list[Delivered]:
                return [e for e in b.delivered() if e.kind in ("reaction", "react")]

            await wait_until(lambda: len(reactions()) >= 1, 5, "retried reaction at b")
            await b.node.close()
        finally:
            await a.node.close()
            await deaf.node.close()

    run(main())
    lines = read_history(tmp_path / "b", "general")
    # the same bytes, not a line re-encoded from a summary (beside the deaf member's line)
    assert [x.content for x in lines].count(reaction) == 1
    assert all(x.content == reaction or "hear nothing" in x.text for x in lines)


def test_folded_history_survives_a_restart(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        try:
            await a.node.send("general", "first")
            await wait_until(lambda: len(b.delivered()) == 1, what="first at b")
            mid = b.delivered()[0].message_id
            emit = lambda e: None  # noqa: E731
            await run_content_command(b.node, "reply", f"{mid} agreed", "general", emit)
            await run_content_command(a.node, "edit", f"{mid} first!", "general", emit)
            await run_content_command(b.node, "topic", "q3 plans", "general", emit)
            await wait_until(lambda: len(a.delivered()) == 2 and len(b.delivered()) == 2)
            # a front end's live view, fed the ids of delivered messages, matches the log
            live = ConversationView()
            ids = [e.message_id for e in b.delivered()] + [
                e.message_id for e in b.own("logged") if e.message_id
            ]
            assert await add_delivered(b.node, live, "general", ids) == 4
            assert await add_delivered(b.node, live, "general", ids) == 0
            assert live.items() == (await channel_view(b.node, "general")).items()
        finally:
            await a.node.close()
            await b.node.close()
        # a restarted node recomputes the same view from its log
        a2 = await start_node(tmp_path / "a", hub, name="alice")
        try:
            view = await channel_view(a2.node, "general")
            assert [(i.kind, i.text, i.edited) for i in view.items()] == [
                ("msg", "first!", True),
                ("reply", "agreed", False),
                ("topic", "q3 plans", False),
            ]
        finally:
            await a2.node.close()

    run(main())
    lines = read_history(tmp_path / "b", "general")
    kinds = [decode(x.content).kind for x in lines]
    assert sorted(kinds) == ["edit", "msg", "reply", "topic"]
    _view, items = fold(lines)
    assert [line.position for line, _item in items] == [
        i for i, k in enumerate(kinds) if k != "edit"
    ]
    out = io.StringIO()
    assert print_history(tmp_path / "b", "general", as_json=False, out=out) == 0
    human = out.getvalue().splitlines()
    assert len(human) == 3  # the edit is folded into its target
    assert human[0].endswith("first! (edited)")
    assert "(re alice: first!) agreed" in human[1]
    assert "q3 plans" in human[2]
    out = io.StringIO()
    print_history(tmp_path / "b", "general", as_json=True, out=out)
    objs = [json.loads(x) for x in out.getvalue().splitlines()]
    assert [o["kind"] for o in objs] == ["msg", "reply", "topic"]
    assert objs[1]["reply_to"]["quote"] == "first!" and objs[0]["edited"] is True
    assert [o["position"] for o in objs] == [line.position for line, _item in items]
