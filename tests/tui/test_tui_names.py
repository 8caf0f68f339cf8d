"""Names on the screen (issue 41 item 5, issue 39 §4): authors by their roster names,
look-alikes told apart, never an id where a name is known, and a direct conversation
titled by whom it is with; peers' text and names shown visibly (bidi controls,
zero-width characters, terminal escapes), through the real TUI (Textual's pilot).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from tui_helpers import Peer, T, screen_text, start_peer, texts, tui, type_line, wait_until

from app.node.events import InviteMade
from app.node.transport import MemoryHub

pytestmark = pytest.mark.timeout(180)


def _told(app: object, name: str, sender_id: str, text: str) -> bool:
    """A line of ``text`` by ``name`` with its author's fingerprint, whole: in the author
    column (``alice (3f9a2b1c) │``) or, when that is too narrow, at the start of the
    text (``alice │ (3f9a2b1c) ...``)."""
    fp = re.escape(sender_id[:8])
    who, body = re.escape(name), re.escape(text)
    return re.search(rf"{who} \({fp}\) │ {body}|{who} │ \({fp}\) {body}",
                     screen_text(app)) is not None  # type: ignore[arg-type]  # fmt: skip


async def _invite(peer: object, channel: str) -> str:
    node = peer.node  # type: ignore[attr-defined]
    made: list[InviteMade] = []
    node.subscribe(lambda e: made.append(e) if isinstance(e, InviteMade) else None)
    await node.make_invite(channel, ())
    await wait_until(lambda: bool(made), what="an invite code")
    return made[0].code


@asynccontextmanager
async def _bob_in_team(tmp_path: Path, hub: MemoryHub, alice: Peer, *, seed: int,
                       size: tuple[int, int] = (110, 32)) -> AsyncIterator[tuple[Any, Any]]:
    """bob's TUI joined to alice's #team by an invite code, #team on screen."""
    code = await _invite(alice, "team")
    app = tui(tmp_path / "bob", hub.transport(), name="bob", seed=seed, channels=(),
              invite=code)  # fmt: skip
    async with app.run_test(size=size) as pilot:
        await asyncio.wait_for(app.ready.wait(), T(30))
        await wait_until(lambda: "team" in app.model.channels, what="#team joined")
        app.switch_to("team")
        yield app, pilot


async def test_membership_lines_who_and_a_direct_conversation_show_names_not_ids(
    tmp_path: Path,
) -> None:
    hub = MemoryHub()
    alice = await start_peer(tmp_path / "alice", hub, "alice", seed=11, channels=())
    dave = await start_peer(tmp_path / "dave", hub, "dave", seed=12, channels=())
    try:
        await alice.node.create_channel("team")
        async with _bob_in_team(tmp_path, hub, alice, seed=13, size=(110, 32)) as (app, pilot):
            node = app.node
            assert node is not None
            # alice's membership lines, before her first chat line
            await dave.node.join_by_invite(await _invite(alice, "team"), timeout_s=T(20))
            await wait_until(lambda: "added dave (invite)" in texts(app), what="dave's add")
            await wait_until(lambda: any(p.sender_id == alice.node.sender_id
                                         for p in node.peers("team")), what="alice heard")
            await wait_until(lambda: not any(r.waiting for r in app.model.channels["team"].rows),
                             what="every line delivered")  # fmt: skip
            await pilot.pause()
            shown = screen_text(app)
            assert re.search(r"alice │ added dave \(invite\)", shown), shown
            assert alice.node.sender_id[:8] not in shown, shown  # no id where a name is known
            assert "↺ recovered" not in shown, shown  # housekeeping is never "late"

            await type_line(pilot, "/who")
            await wait_until(lambda: "Who is in #team" in screen_text(app), what="/who")
            who = screen_text(app)
            assert re.search(r"^.*alice  " + alice.node.sender_id, who, re.M), who
            await pilot.press("escape")

            # a direct conversation alice opens with bob: titled @alice, no housekeeping
            bob_id = app.node.sender_id  # type: ignore[union-attr]
            dm = await alice.node.open_direct("team", bob_id)
            await wait_until(lambda: dm.name in app.model.channels, what="bob in the DM")
            await alice.node.send(dm.name, "just us")
            app.switch_to(dm.name)
            await wait_until(lambda: "just us" in texts(app), what="the DM's line")
            await pilot.pause()
            shown = screen_text(app)
            bar = next(line for line in shown.splitlines() if "direct conversation" in line)
            assert "@alice" in bar and f"#{dm.name}" not in bar, bar
            assert "↺ recovered" not in shown, shown
            assert "(2, you: admin)" not in shown, shown
    finally:
        await alice.close()
        await dave.close()


async def test_a_look_alike_member_and_the_real_one_both_carry_fingerprints(
    tmp_path: Path,
) -> None:
    """An admin (here a node whose admin skips the admission check) admits "аlice" with
    a Cyrillic а beside alice: on bob's screen both names carry their fingerprints, on
    every line and in completion, and no line of hers shows as alice's do."""
    from nacl.public import PrivateKey

    from app.members.events import MemberInfo, encode_add
    from net.identity import Identity

    hub = MemoryHub()
    alice = await start_peer(tmp_path / "alice", hub, "alice", seed=21, channels=())
    try:
        await alice.node.create_channel("team")
        async with _bob_in_team(tmp_path, hub, alice, seed=22, size=(110, 32)) as (app, pilot):
            await alice.node.send("team", "the real alice")
            await wait_until(lambda: "the real alice" in texts(app), what="alice's line")
            await pilot.pause()
            assert re.search(r" alice │ the real alice", screen_text(app))  # bare: no look-alike
            impostor = Identity.generate()
            share = bytes(PrivateKey.generate().public_key)
            info = MemberInfo(impostor.public_key, share, "\u0430lice")
            await alice.node.post_content("team", encode_add(info))  # an admin's own choice
            mc = app.node.members_channel("team")  # type: ignore[union-attr]
            assert mc is not None
            await wait_until(lambda: mc.roster.is_member(impostor.sender_id), what="added")
            await pilot.pause()
            real = f"alice ({alice.node.sender_id[:8]})"
            fake = f"\u0430lice ({impostor.sender_id[:8]})"
            await wait_until(lambda: _told(app, "alice", alice.node.sender_id, "the real alice"),
                             what="alice's earlier line retagged")  # fmt: skip
            assert _told(app, "alice", alice.node.sender_id, "added \u0430lice")
            assert app.model.label(impostor.sender_id, None, "team") == fake
            names, _joined, _known = app._completion_source()
            assert real in names and fake in names and "alice" not in names
    finally:
        await alice.close()


async def test_bidi_controls_zero_width_and_escapes_show_visibly_and_never_restyle(
    tmp_path: Path,
) -> None:
    hub = MemoryHub()
    bob = await start_peer(tmp_path / "bob", hub, "b\u200bob\u202e", seed=32, channels=("x",))
    app = tui(tmp_path / "alice", hub.transport(), seed=31, channels=("x",))
    try:
        async with app.run_test(size=(140, 30)) as pilot:
            await asyncio.wait_for(app.ready.wait(), T(20))
            nasty = "evil \u202egnp.exe\u202c zero\u200bwidth \x1b[31mred\x1b[0m \u2066iso\u2069"
            await bob.node.send("x", nasty)
            await wait_until(lambda: nasty in texts(app), what="the line")
            await pilot.pause()
            shown = screen_text(app)
            line = next(x for x in shown.splitlines() if "evil" in x)
            for escape in ("\\u202e", "\\u202c", "\\u200b", "\\x1b[31m", "\\u2066", "\\u2069"):
                assert escape in line, (escape, line)
            for raw in ("\u202e", "\u202c", "\u200b", "\x1b", "\u2066", "\u2069"):
                assert raw not in shown, repr(raw)
            assert "b\\u200bob\\u202e" in line, line  # the name too, never "bob"
            # the segments that draw the line carry no style from the text (no red)
            strips = app.screen._compositor.render_strips()
            for strip in strips:
                text = "".join(seg.text for seg in strip)
                if "evil" in text:
                    styles = {seg.style.color.name if seg.style and seg.style.color else None
                              for seg in strip if "red" in seg.text}  # fmt: skip
                    assert "red" not in styles and "#ff0000" not in styles, styles
    finally:
        await bob.close()


async def test_verify_opens_a_dialog_that_stays_until_confirmed_with_digits_emoji_and_qr(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    import segno

    from app.members.safety import safety_emoji, safety_number
    from app.tui.screens.verify import VerifyScreen, qr_lines

    hub = MemoryHub()
    alice = await start_peer(tmp_path / "alice", hub, "alice", seed=41, channels=())
    try:
        await alice.node.create_channel("team")
        copied: list[str] = []
        async with _bob_in_team(tmp_path, hub, alice, seed=42, size=(120, 60)) as (app, pilot):
            node = app.node
            assert node is not None
            monkeypatch.setattr(app, "copy_to_clipboard_osc52", copied.append)
            a = alice.node.identity
            number = safety_number(node.identity.public_key, node.sender_id, a.public_key,
                                   a.sender_id)  # fmt: skip
            pairs = safety_emoji(node.identity.public_key, node.sender_id, a.public_key,
                                 a.sender_id)  # fmt: skip

            await type_line(pilot, "/verify alice")
            await wait_until(lambda: isinstance(app.screen, VerifyScreen), what="the dialog")
            await pilot.pause()
            shown = screen_text(app)
            groups = number.split()
            for i in range(0, 12, 4):  # the digits, 4 groups to a line
                assert "  ".join(groups[i : i + 4]) in shown, shown
            for emoji, name in pairs:  # Matrix's SAS emoji, with their names
                assert emoji in shown and name in shown, (emoji, name)
            qr = qr_lines(number.replace(" ", ""))
            for line in qr[:3]:
                assert line in shown
            # the code drawn is the number's: the drawn half blocks read back, module for
            # module, as segno's QR code of the digits (with its quiet zone)
            top = {"█": (1, 1), "▀": (1, 0), "▄": (0, 1), " ": (0, 0)}
            drawn = [[top[ch][half] for ch in line] for line in qr for half in (0, 1)]
            expected = [list(row) for row in segno.make(
                number.replace(" ", ""), error="m", micro=False).matrix_iter(border=2)]
            assert drawn[: len(expected)] == expected
            assert not any(m for row in drawn[len(expected) :] for m in row)  # padding row

            for key in ("x", "tab", "enter", "q", "f1"):  # nothing else closes it
                await pilot.press(key)
                await pilot.pause()
                assert isinstance(app.screen, VerifyScreen), key
            await pilot.press("c")
            await pilot.pause()
            assert copied == [number]
            assert "copied (the terminal's clipboard (OSC 52)" in screen_text(app)
            assert alice.node.sender_id not in node.verified
            await pilot.press("y")
            await wait_until(lambda: not isinstance(app.screen, VerifyScreen), what="closed")
            assert alice.node.sender_id in node.verified

            await type_line(pilot, "/verify alice")  # cancelled: nothing changes
            await wait_until(lambda: isinstance(app.screen, VerifyScreen), what="again")
            await pilot.press("escape")
            await wait_until(lambda: not isinstance(app.screen, VerifyScreen), what="cancel")
            assert alice.node.sender_id in node.verified  # still, from before
    finally:
        await alice.close()
