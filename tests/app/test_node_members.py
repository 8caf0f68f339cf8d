"""Members channels at the node level (in-memory transport): invites, roles, verification."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from app_helpers import MemoryHub, run, start_node, wait_until

from app.commands.members import run_members_command
from app.node.events import InviteMade, MembersEvent, NodeEvent


def _members(events: list[NodeEvent], what: str) -> list[MembersEvent]:
    return [e for e in events if isinstance(e, MembersEvent) and e.what == what]


def test_invite_verify_and_a_second_key_under_a_verified_name_is_a_loud_warning(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        hub = MemoryHub()
        alice = await start_node(tmp_path / "alice", hub, name="alice", channels=())
        bob = await start_node(tmp_path / "bob", hub, name="bob", channels=())
        fake = await start_node(tmp_path / "fake", hub, name="bob", channels=())
        said: list[NodeEvent] = []
        try:
            await alice.node.create_channel("team")
            code = await alice.node.make_invite("team")
            assert [e.code for e in alice.events if isinstance(e, InviteMade)] == [code]
            await bob.node.join_by_invite(code, timeout_s=20)
            await wait_until(lambda: bob.node.members_channel("team") is not None
                             and alice.node.members_channel("team").roster.is_member(  # type: ignore[union-attr]
                                 bob.node.sender_id))  # fmt: skip

            # /verify shows the same number on both sides; "yes" marks the member
            await run_members_command(alice.node, "verify", "bob", "team", said.append)
            await run_members_command(bob.node, "verify", "alice", "team", said.append)
            numbers = {e.data["number"] for e in _members(said, "verify")}
            assert len(numbers) == 1 and len(next(iter(numbers)).split()) == 12
            await run_members_command(alice.node, "verify", "bob yes", "team", said.append)
            assert bob.node.sender_id in alice.node.verified
            await run_members_command(alice.node, "members", "", "team", said.append)
            rows = _members(said, "members")[-1].data["members"]
            assert [r["verified"] for r in rows if r["name"] == "bob"] == [True]

            # a second identity calling itself bob joins: a loud warning at alice
            await fake.node.join_by_invite(await alice.node.make_invite("team"), timeout_s=20)
            await wait_until(lambda: bool(_members(alice.events, "key_changed")))
            warning = _members(alice.events, "key_changed")[0]
            assert "WARNING" in warning.text and warning.data["verified"] == bob.node.sender_id
            await run_members_command(alice.node, "members", "", "team", said.append)
            labels = sorted(r["label"] for r in _members(said, "members")[-1].data["members"])
            assert labels[0] == "alice" and labels[1].startswith("bob (") and labels[2].startswith(
                "bob (")  # two bobs told apart by their fingerprints

            # a member who is not an admin cannot invite or remove; nobody removes a stranger
            with pytest.raises(ValueError, match="only an admin"):
                await bob.node.make_invite("team")
            with pytest.raises(ValueError, match="only an admin"):
                await bob.node.remove_member("team", fake.node.sender_id)
            with pytest.raises(ValueError, match="not a member"):
                await alice.node.remove_member("team", "0" * 32)
        finally:
            for h in (alice, bob, fake):
                await h.node.close()

    run(main())


def test_ambiguous_and_unknown_names_are_refused_with_a_specific_error(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        alice = await start_node(tmp_path / "alice", hub, name="alice", channels=())
        try:
            await alice.node.create_channel("team")
            with pytest.raises(ValueError, match="no member called 'zed'"):
                await run_members_command(alice.node, "verify", "zed", "team", lambda e: None)
            with pytest.raises(ValueError, match="exists in this data directory already"):
                await alice.node.create_channel("team")
            with pytest.raises(KeyError, match="not a members channel"):
                await alice.node.make_invite("general")
        finally:
            await alice.node.close()

    run(main())


def test_an_approve_invite_waits_for_an_admin_who_lets_in_or_refuses(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        alice = await start_node(tmp_path / "alice", hub, name="alice", channels=())
        bob = await start_node(tmp_path / "bob", hub, name="bob", channels=())
        eve = await start_node(tmp_path / "eve", hub, name="eve", channels=())
        said: list[NodeEvent] = []
        try:
            await alice.node.create_channel("team")
            await run_members_command(alice.node, "invite", "1h approve", "team", said.append)
            code = [e.code for e in alice.events if isinstance(e, InviteMade)][-1]
            joining = asyncio.ensure_future(bob.node.join_by_invite(code, timeout_s=30))
            await wait_until(lambda: bool(_members(alice.events, "join_request")))
            assert not alice.node.members_channel("team").roster.is_member(bob.node.sender_id)  # type: ignore[union-attr]
            with pytest.raises(ValueError, match="no request from 'carol'"):
                await run_members_command(alice.node, "approve", "carol", "team", said.append)
            await run_members_command(alice.node, "approve", "bob", "team", said.append)
            await joining
            assert alice.node.members_channel("team").roster.is_member(bob.node.sender_id)  # type: ignore[union-attr]

            await run_members_command(alice.node, "invite", "approve", "team", said.append)
            code = [e.code for e in alice.events if isinstance(e, InviteMade)][-1]
            joining = asyncio.ensure_future(eve.node.join_by_invite(code, timeout_s=30))
            await wait_until(lambda: len(_members(alice.events, "join_request")) == 2)
            await run_members_command(alice.node, "deny", "eve", "team", said.append)
            with pytest.raises(ValueError, match="refused"):
                await joining
            assert not alice.node.members_channel("team").roster.is_member(eve.node.sender_id)  # type: ignore[union-attr]
        finally:
            for h in (alice, bob, eve):
                await h.node.close()

    run(main())


def test_a_newcomer_gets_a_long_member_history_in_parts_each_under_the_box_limit(
    tmp_path: Path,
) -> None:
    """The membership history of a channel of 150 members is larger than one join
    answer may be (MAX_BOX_BYTES, 200 KiB): the admin answers in parts of ~150 KiB
    and the newcomer asks for the rest, then folds the whole member list."""
    from nacl.public import PrivateKey

    from app.members.events import MemberInfo, encode_add
    from app.members.invite import HISTORY_PAGE_BYTES, MAX_BOX_BYTES, decode_invite
    from net.envelope import peek_topic
    from net.identity import Identity

    async def main() -> None:
        hub = MemoryHub()
        alice = await start_node(tmp_path / "alice", hub, name="alice", channels=())
        bob = await start_node(tmp_path / "bob", hub, name="bob", channels=())
        try:
            await alice.node.create_channel("team")
            mc = alice.node.members_channel("team")
            assert mc is not None
            adds = [alice.node.post_content("team", encode_add(MemberInfo(
                Identity.generate().public_key, bytes(PrivateKey.generate().public_key),
                f"m{i}"))) for i in range(150)]  # fmt: skip
            await asyncio.gather(*adds)
            await wait_until(lambda: len(mc.roster) == 151, 30)
            history = mc.membership_envelopes()
            assert sum(map(len, history)) > MAX_BOX_BYTES  # one answer could not hold it
            sent_before = len(alice.node.transport.sent)  # type: ignore[attr-defined]
            code = await alice.node.make_invite("team")
            await bob.node.join_by_invite(code, timeout_s=30)
            bob_mc = bob.node.members_channel("team")
            assert bob_mc is not None and len(bob_mc.roster) == 152
            assert bob_mc.roster.listing() == mc.roster.listing()
            topic = decode_invite(code).topic
            answers = [e for e in alice.node.transport.sent[sent_before:]  # type: ignore[attr-defined]
                       if peek_topic(e) == topic]  # fmt: skip
            assert len(answers) >= 2 and all(len(e) <= MAX_BOX_BYTES + 1024 for e in answers)
            assert max(map(len, answers)) > HISTORY_PAGE_BYTES // 2
        finally:
            for h in (alice, bob):
                await h.node.close()

    run(main(), 90)
