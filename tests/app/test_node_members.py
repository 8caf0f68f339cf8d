"""Members channels at the node level (in-memory transport): invites, roles, verification."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from app_helpers import MemoryHub, run, start_node, wait_until
from nacl.public import PrivateKey

from app.commands.members import run_members_command
from app.members.events import MemberInfo, encode_add
from app.node.events import Delivered, InviteMade, MembersEvent, NodeEvent


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

            # a second identity calling itself bob: alice's node does not admit it...
            with pytest.raises(ValueError, match="looks like one"):
                await fake.node.join_by_invite(await alice.node.make_invite("team"),
                                               timeout_s=20)  # fmt: skip
            assert _members(alice.events, "rejected")[-1].data["reason"] == "name_taken"
            # ...and an admin who adds it anyway (its own choice) sets off a loud warning
            fake_share = bytes(PrivateKey.generate().public_key)
            await alice.node.post_content("team", encode_add(MemberInfo(
                fake.node.identity.public_key, fake_share, "bob")))  # fmt: skip
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
    """The membership history of a channel of 700 members is larger than one join
    answer may be (MAX_BOX_BYTES, 200 KiB; ~340 bytes a chained add, no envelope): the
    admin answers in parts of ~150 KiB and the newcomer asks for the rest, then folds
    the whole member list, the same state as the admin's."""
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
                f"m{i}"))) for i in range(700)]  # fmt: skip
            await asyncio.gather(*adds)
            await wait_until(lambda: len(mc.roster) == 701, 60)
            history = mc.membership_records()
            assert sum(map(len, history)) > MAX_BOX_BYTES  # one answer could not hold it
            sent_before = len(alice.node.transport.sent)  # type: ignore[attr-defined]
            code = await alice.node.make_invite("team")
            await bob.node.join_by_invite(code, timeout_s=30)
            bob_mc = bob.node.members_channel("team")
            assert bob_mc is not None and len(bob_mc.roster) == 702
            assert bob_mc.roster.listing() == mc.roster.listing()
            await wait_until(lambda: bob_mc.roster.state_hash() == mc.roster.state_hash())
            topic = decode_invite(code).topic
            answers = [e for e in alice.node.transport.sent[sent_before:]  # type: ignore[attr-defined]
                       if peek_topic(e) == topic]  # fmt: skip
            assert len(answers) >= 2 and all(len(e) <= MAX_BOX_BYTES + 1024 for e in answers)
            assert max(map(len, answers)) > HISTORY_PAGE_BYTES // 2
        finally:
            for h in (alice, bob):
                await h.node.close()

    run(main(), 90)


def test_a_line_shown_before_its_senders_removal_is_marked_refused_in_history(
    tmp_path: Path,
) -> None:
    """carol's line (a key share and a line from her data directory) reaches bob only;
    alice, who never held it, removes carol: her removal's cut leaves it out, and bob,
    who showed it, marks it refused (a members event, and the mark ``sdschat history``
    prints, read from his database)."""
    from app.chat.history import read_history
    from app.chat.lines import encode_content
    from app.members import secrets_file
    from net.envelope import seal
    from net.identity import Identity
    from sds import sds_pb2
    from sds.ids import message_id_for

    async def main() -> None:
        hub = MemoryHub()
        alice = await start_node(tmp_path / "alice", hub, name="alice", channels=())
        bob = await start_node(tmp_path / "bob", hub, name="bob", channels=())
        carol = await start_node(tmp_path / "carol", hub, name="carol", channels=())
        try:
            await alice.node.create_channel("team")
            for h in (bob, carol):
                await h.node.join_by_invite(await alice.node.make_invite("team"), timeout_s=20)
            mc_a = alice.node.members_channel("team")
            assert mc_a is not None
            mc_b = bob.node.members_channel("team")
            assert mc_b is not None
            await wait_until(lambda: len(mc_a.roster) == 3 and len(mc_b.roster) == 3
                             and mc_b.roster.state_hash() == mc_a.roster.state_hash())
            carol_id = carol.node.sender_id
            await carol.node.close()
            stolen = secrets_file.load(tmp_path / "carol", "team")
            assert stolen is not None
            ident = Identity.load(tmp_path / "carol" / "identity.pem")
            now = alice.node.now_ms()
            contents = stolen.outgoing(encode_content("only bob sees this", "carol"), now)
            envs, line_id, crafted = [], "", set()
            for i, content in enumerate(contents):
                line_id = message_id_for("team", carol_id, now + i, content, bytes(8))
                crafted.add(line_id)
                msg = sds_pb2.SdsMessage(sender_id=carol_id, message_id=line_id,
                                         channel_id="team", lamport_timestamp=now + i,
                                         content=content)  # fmt: skip
                envs.append(seal(msg.SerializeToString(), ident, stolen.sending_key()))
            await alice.node.transport.unsubscribe([mc_a.topic])  # alice hears none of it
            ghost = hub.transport()

            async def ignore(_env: bytes) -> None:
                return None

            ghost.start(ignore, lambda _status: None)
            for env in envs:
                assert await ghost.publish(env)
            await wait_until(lambda: any(isinstance(e, Delivered) and e.message_id == line_id
                                         for e in bob.events))  # fmt: skip
            await alice.node.transport.subscribe([mc_a.topic])
            await alice.node.remove_member("team", carol_id)
            await wait_until(lambda: any(line_id in e.data.get("ids", ())  # type: ignore[operator]
                                         for e in _members(bob.events, "refused")))  # fmt: skip
            lines = await asyncio.to_thread(read_history, tmp_path / "bob", "team")
            marked = [ln for ln in lines if ln.message_id == line_id]
            assert marked and marked[0].refused and marked[0].to_json()["refused"] is True
            # her key share too (alice never held it), and nothing else
            assert {ln.message_id for ln in lines if ln.refused} == crafted
        finally:
            for h in (alice, bob):
                await h.node.close()

    run(main(), 90)


def _roles(node: object, channel: str = "team") -> dict[str, str]:
    mc = node.members_channel(channel)  # type: ignore[attr-defined]
    return {m.name: m.role for m in mc.roster.members.values()}


def test_admin_and_unadmin_by_command_checked_by_the_chains_rules(tmp_path: Path) -> None:
    """``/admin NAME`` and ``/unadmin NAME`` (issue 39 §4): only an admin, never the last
    admin demoted, a name that several members' names look like is refused (say which),
    and every member ends with the same roles."""

    async def main() -> None:
        hub = MemoryHub()
        alice = await start_node(tmp_path / "alice", hub, name="alice", channels=())
        bob = await start_node(tmp_path / "bob", hub, name="bob", channels=())
        carol = await start_node(tmp_path / "carol", hub, name="carol", channels=())
        nodes = (alice, bob, carol)
        said: list[NodeEvent] = []
        try:
            await alice.node.create_channel("team")
            for h in (bob, carol):
                await h.node.join_by_invite(await alice.node.make_invite("team"), timeout_s=20)
            await wait_until(lambda: all(len(_roles(h.node)) == 3 for h in nodes))

            with pytest.raises(ValueError, match="only an admin"):
                await run_members_command(bob.node, "admin", "carol", "team", said.append)
            with pytest.raises(ValueError, match="last admin"):
                await run_members_command(alice.node, "unadmin", "alice", "team", said.append)
            await run_members_command(alice.node, "admin", "bob", "team", said.append)
            await wait_until(lambda: all(_roles(h.node)["bob"] == "admin" for h in nodes))
            with pytest.raises(ValueError, match="an admin already"):
                await run_members_command(alice.node, "admin", "@bob", "team", said.append)
            with pytest.raises(ValueError, match="not an admin already"):
                await run_members_command(bob.node, "unadmin", "carol", "team", said.append)

            # bob, an admin now, demotes alice: she can no longer change roles
            await run_members_command(bob.node, "unadmin", "alice", "team", said.append)
            await wait_until(lambda: all(_roles(h.node)["alice"] == "member" for h in nodes))
            with pytest.raises(ValueError, match="only an admin"):
                await run_members_command(alice.node, "admin", "carol", "team", said.append)

            # a look-alike of carol, added by bob (an admin's own choice): "carol" now
            # names two members, and /admin refuses to guess
            twin = bytes(PrivateKey.generate().public_key)
            from net.identity import Identity

            await bob.node.post_content("team", encode_add(MemberInfo(
                Identity.generate().public_key, twin, "Carol")))  # fmt: skip
            await wait_until(lambda: all(len(_roles(h.node)) == 4 for h in nodes))
            with pytest.raises(ValueError, match="names several members"):
                await run_members_command(bob.node, "admin", "carol", "team", said.append)
            cid = carol.node.sender_id
            await run_members_command(bob.node, "admin", f"carol ({cid[:8]})", "team", said.append)
            await wait_until(lambda: all(_roles(h.node)["carol"] == "admin" for h in nodes))
            states = {h.node.members_channel("team").roster.state_hash() for h in nodes}  # type: ignore[union-attr]
            assert len(states) == 1  # one membership state everywhere
        finally:
            for h in nodes:
                await h.node.close()

    run(main())
