"""Issue 39, breaks 1 and 2, with real processes, a real relay and a tap recording every
envelope: a removed member and a removed admin, as an attacker would play them.

* Break 1: carol's data directory copied before her removal, run after it under
  libfaketime 90 s back, sends a line; and the crafted variant: a fresh Megolm key
  share and a line, dated 2 s before the removal, sealed with the pre-removal key,
  built from the project's own modules. Refused at every member.
* Break 2: bob, an admin, is removed; then he signs ``add(puppet, role=admin)`` on the
  heads he knew (dated 3 s before his removal), and the puppet signs a current
  ``rekey`` with a key the attacker chose. No member lists the puppet, no envelope
  opens with the attacker's key, the admins are shown the attempt, and the channel
  does not split (every line everywhere, the same membership state at every member).

The attacks are built with the same modules a member's node uses (its members file,
``MembersChannel.outgoing``), so they take whatever form that code makes: the checks
hold against the strongest message a removed member's own software can sign.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from e2e_helpers import Cluster, Proc, T, cluster
from nacl.public import PublicKey, SealedBox
from test_e2e_members import _invite, _join_by_invite, _joined, _sees, _texts, carol_id, tap
from websockets.sync.client import connect

from app.chat.lines import encode_content
from app.members import members_pb2 as pb
from app.members import secrets_file
from app.members.channel import MembersChannel
from app.members.events import MemberInfo, encode_add, encode_rekey
from net.channel_key import ChannelKey
from net.envelope import EnvelopeError, open_for_topic, seal
from net.identity import Identity
from net.relay_frames import encode_publish
from sds import sds_pb2
from sds.ids import message_id_for

LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def _team(c: Cluster, url: str, *names: str) -> dict[str, Proc]:
    alice = c.node("alice", url, channel="team", extra=["--create"])
    _joined(alice, "created")
    people = {"alice": alice}
    for name in names:
        people[name] = _join_by_invite(c, name, _invite(alice), url)
    return people


def _removed(procs: list[Proc], member_id: str) -> None:
    for p in procs:
        p.wait_for(lambda p=p: any(member_id in e["data"].get("removed", ())
                                   for e in p.select("members", what="changed")),
                   60, f"{member_id[:8]} removed")  # fmt: skip


def _rejected(p: Proc, message_id: str) -> list[str]:
    return [e["reason"] for e in p.select("rejected") if e.get("detail") == message_id]


def _publish(url: str, *envelopes: bytes) -> None:
    with connect(url, max_size=None, proxy=None) as ws:
        for env in envelopes:
            ws.send(encode_publish(env))


def _crafted(stolen: MembersChannel, ident: Identity, lamport: int,
             content: bytes) -> tuple[str, bytes]:  # fmt: skip
    """An SDS content message of ``ident`` at ``lamport`` (the attacker's choice), sealed
    with the outer key the stolen state sends with; its id and envelope."""
    mid = message_id_for("team", ident.sender_id, lamport, content, os.urandom(8))
    msg = sds_pb2.SdsMessage(sender_id=ident.sender_id, message_id=mid, channel_id="team",
                             lamport_timestamp=lamport, content=content)  # fmt: skip
    return mid, seal(msg.SerializeToString(), ident, stolen.sending_key())


def _roles(p: Proc) -> list[tuple[str, str]]:
    before = len(p.select("members", what="members"))
    p.send("/members")
    p.wait_for(lambda: len(p.select("members", what="members")) > before, 20, "/members")
    rows = p.select("members", what="members")[-1]["data"]["members"]
    return sorted((r["name"], r["role"]) for r in rows)


def _delivered(p: Proc, message_id: str) -> bool:
    return any(e.get("message_id") == message_id for e in p.select("delivered"))


def _decided(p: Proc, message_id: str) -> bool:
    """The message was delivered, or refused before the core (a ``rejected`` event)."""
    return _delivered(p, message_id) or bool(_rejected(p, message_id))


def _carol_removed(c: Cluster, tmp_path: Path, url: str) -> tuple[
        dict[str, Proc], Path, str, int]:  # fmt: skip
    """alice's #team with bob, carol and dave; carol's data directory copied whole (her
    node stopped first), then carol removed and every other member told. Returns the
    members, the copy, carol's id and the removal's wall-clock ms."""
    people = _team(c, url, "bob", "carol", "dave")
    alice, bob, carol, dave = (people[n] for n in ("alice", "bob", "carol", "dave"))
    carol.send("carol says hi")
    for p in (alice, bob, dave):
        _sees(p, "carol says hi")
    cid = carol_id(carol)
    carol.close_stdin()
    assert carol.wait(T(30)) == 0, carol.tail()
    copy = tmp_path / "carol-copy"
    shutil.copytree(tmp_path / "carol", copy)
    removal_ms = int(time.time() * 1000)
    alice.send("/remove carol")
    _removed([alice, bob, dave], cid)
    return people, copy, cid, removal_ms


def _finish(tmp_path: Path, honest: list[Proc], *texts: str) -> None:
    """A line after the attempt reaches everyone; nobody keeps the attacker's lines."""
    honest[0].send("after the attempts")
    for p in honest[1:]:
        _sees(p, "after the attempts")
    for p in honest:
        p.close_stdin()
    for p in honest:
        assert p.wait(T(60)) == 0, p.tail()
    for p in honest:
        kept = {h["content"] for h in _history(tmp_path / p.name)}
        assert not kept & set(texts), p.name


@pytest.mark.skipif(not LIBFAKETIME.exists(), reason="libfaketime is not installed (make tools)")
def test_a_removed_members_data_dir_copied_before_and_run_90_s_back_posts_nothing(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        people, copy, _cid, removal_ms = _carol_removed(c, tmp_path, url)
        honest = [people[n] for n in ("alice", "bob", "dave")]
        topic = bytes.fromhex(people["alice"].select("channel")[0]["topic"])
        with tap(url, [topic]) as relay_tap:
            mark = relay_tap.count()
            # the copy, run 90 s in the past: its node knows nothing of the removal
            argv = ["env", f"LD_PRELOAD={LIBFAKETIME}", "FAKETIME=-90s", sys.executable, "-m",
                    "app.cli", "join", "team", "--data-dir", str(copy), "--name", "carol",
                    "--headless", "--fast", "--relay", url,
                    "--moved"]  # the thief passes the copy check, which is local  # fmt: skip
            ghost = c.start(argv, "carol-copy")
            ghost.wait_for(lambda: bool(ghost.select("connection", state="connected")), 60,
                           "the copy connected")  # fmt: skip
            line = "back-dated line from carol's copy"
            ghost.send(line)
            ghost.wait_for(lambda: any(e.get("text") == line for e in ghost.select(
                "own", state="logged")), 30, "the copy sent its line")  # fmt: skip
            logged = next(e for e in ghost.select("own", state="logged") if e.get("text") == line)
            assert logged["lamport"] < removal_ms  # it really is dated before the removal
            mid = logged["message_id"]
            for p in honest:
                p.wait_for(lambda p=p: _decided(p, mid), 90,
                           "the copy's line delivered or refused")  # fmt: skip
            assert relay_tap.count() > mark  # the relay carried what the copy sent
            for p in honest:
                assert line not in _texts(p), f"{p.name} delivered the copy's line"
                assert _rejected(p, mid) == ["outside_cut"], p.name
        ghost.close_stdin()
        _finish(tmp_path, honest, line)


def test_a_crafted_back_dated_key_share_and_line_of_a_removed_member_are_refused(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        people, copy, cid, removal_ms = _carol_removed(c, tmp_path, url)
        honest = [people[n] for n in ("alice", "bob", "dave")]
        topic = bytes.fromhex(people["alice"].select("channel")[0]["topic"])
        stolen = secrets_file.load(copy, "team")
        assert stolen is not None
        ident = Identity.load(copy / "identity.pem")
        # from the copy's own modules: a fresh Megolm session shared with the others (a
        # key share) and a line in it, dated 2 s before the removal, pre-removal key
        stolen.group_keys.on_members_removed()
        others = {mid: m.info.share_key for mid, m in stolen.roster.members.items()
                  if mid != cid}  # fmt: skip
        share = stolen.group_keys.key_share(others, removal_ms)
        assert share is not None
        [share] = stolen.outgoing(share, removal_ms)
        crafted = "crafted back-dated line"
        body = stolen.outgoing_content(encode_content(crafted, "carol"), removal_ms)
        share_id, share_env = _crafted(stolen, ident, removal_ms - 2_000, share)
        line_id, line_env = _crafted(stolen, ident, removal_ms - 1_999, body)
        with tap(url, [topic]) as relay_tap:
            mark = relay_tap.count()
            _publish(url, share_env, line_env)
            relay_tap_wait(relay_tap, mark, 2)
            for p in honest:
                p.wait_for(lambda p=p: _decided(p, line_id) and _decided(p, share_id), 60,
                           "the crafted share and line decided")  # fmt: skip
        for p in honest:
            assert crafted not in _texts(p), f"{p.name} delivered the crafted line"
            assert not _delivered(p, share_id), f"{p.name} took the crafted key share"
            assert _rejected(p, share_id) == ["outside_cut"], p.name
            assert _rejected(p, line_id) == ["outside_cut"], p.name
        _finish(tmp_path, honest, crafted)


def _add_decided(p: Proc, add_id: str, puppet_id: str) -> bool:
    """The forged add was refused (at the gate or by the roster) or applied."""
    refused = any(e["data"].get("id") == add_id or e["data"].get("target") == puppet_id
                  for e in p.select("members", what="rejected"))  # fmt: skip
    return refused or bool(_rejected(p, add_id)) or any(
        puppet_id in e["data"].get("added", ()) for e in p.select("members", what="changed"))


def _no_admin_command(p: Proc) -> bool:
    return any("admin" in e.get("message", "") for e in p.select("error"))


def _promote_as(data_dir: Path, member_id: str, url: str) -> None:
    """A set_role(admin) signed with the identity of ``data_dir`` (for a node that has
    no /admin command: the code before issue 39, where the test must fail)."""
    from app.members.events import encode_set_role

    mc = secrets_file.load(data_dir, "team")
    assert mc is not None
    ident = Identity.load(data_dir / "identity.pem")
    [content] = mc.outgoing(encode_set_role(member_id, "admin"), 0)
    _, env = _crafted(mc, ident, int(time.time() * 1000), content)
    _publish(url, env)


def relay_tap_wait(relay_tap: Any, mark: int, n: int) -> None:
    """The relay carried the crafted envelopes (the tap saw them): the attack happened."""
    deadline = time.monotonic() + T(20)
    while relay_tap.count() < mark + n and time.monotonic() < deadline:  # bounded
        time.sleep(0.05)
    assert relay_tap.count() >= mark + n


def _history(data_dir: Path) -> list[dict[str, Any]]:
    from e2e_helpers import history

    return history(data_dir, "team")


def test_a_removed_admin_cannot_add_a_back_dated_puppet_admin_nor_rekey_the_channel(
    tmp_path: Path,
) -> None:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        people = _team(c, url, "bob", "carol", "dave")
        alice, bob, carol, dave = (people[n] for n in ("alice", "bob", "carol", "dave"))
        topic = bytes.fromhex(alice.select("channel")[0]["topic"])
        promoted_ms = int(time.time() * 1000)
        alice.send("/admin bob")
        alice.wait_for(lambda: ("bob", "admin") in _roles(alice) or _no_admin_command(alice), 30,
                       "bob an admin")  # fmt: skip
        if _no_admin_command(alice):  # before /admin: alice's key signs it, as her node would
            _promote_as(tmp_path / "alice", str(bob.select("ready")[0]["sender"]), url)
        for p in (carol, dave):
            p.wait_for(lambda p=p: ("bob", "admin") in _roles(p), 30, "bob an admin")
        # the attack dates its add 3 s before the removal: after bob became an admin
        while time.time() * 1000 < promoted_ms + 4_000:  # bounded: 4 s of wall clock
            time.sleep(0.1)
        bob_id = str(bob.select("ready")[0]["sender"])
        bob.close_stdin()  # bob keeps his whole data directory
        assert bob.wait(T(30)) == 0, bob.tail()
        removal_ms = int(time.time() * 1000)
        alice.send("/remove bob")
        honest = [alice, carol, dave]
        _removed(honest, bob_id)
        stolen = secrets_file.load(tmp_path / "bob", "team")
        assert stolen is not None
        bob_ident = Identity.load(tmp_path / "bob" / "identity.pem")
        stolen.signer = bob_ident  # what bob's own node signs with
        puppet = Identity.generate()
        puppet_share = os.urandom(32)
        puppet_info = MemberInfo(puppet.public_key, bytes(PublicKey(puppet_share)), "puppet")
        with tap(url, [topic]) as relay_tap:
            # bob signs add(puppet, admin) on what he knew, dated 3 s before his removal
            [forged] = stolen.outgoing(encode_add(puppet_info, role="admin"), removal_ms)
            add_id, add_env = _crafted(stolen, bob_ident, removal_ms - 3_000, forged)
            stolen.on_control(bob_ident.sender_id, removal_ms - 3_000, add_id, forged, add_env, 0)
            assert stolen.roster.is_admin(puppet.sender_id)  # in bob's own view it worked
            # the puppet rekeys now, with a key the attacker chose, sealed to everyone
            attacker_key = os.urandom(32)
            plain = pb.EpochKey(channel_id=stolen.channel_id, key=attacker_key).SerializeToString()
            boxes = {mid: SealedBox(PublicKey(m.info.share_key)).encrypt(plain)
                     for mid, m in stolen.roster.members.items()}  # fmt: skip
            stolen.signer, stolen.own_id = puppet, puppet.sender_id
            [rekey] = stolen.outgoing(encode_rekey(boxes), removal_ms + 5_000)
            now = int(time.time() * 1000)
            _, rekey_env = _crafted(stolen, puppet, now, rekey)
            mark = relay_tap.count()
            _publish(url, add_env, rekey_env)
            relay_tap_wait(relay_tap, mark, 2)
            for p in honest:
                p.wait_for(lambda p=p: _add_decided(p, add_id, puppet.sender_id), 60,
                           "the forged add decided")  # fmt: skip
            for p in honest:  # no member lists the puppet
                assert "puppet" not in {name for name, _ in _roles(p)}, f"{p.name} lists it"
            lines = {p.name: [f"{p.name} after the attack {i}" for i in range(5)] for p in honest}
            for p in honest:
                for text in lines[p.name]:
                    p.send(text)
            for p in honest:
                _sees(p, *(t for q, ts in lines.items() if q != p.name for t in ts))
            after = relay_tap.since(mark)
        for p in honest:  # nor after the lines
            assert "puppet" not in {name for name, _ in _roles(p)}, f"{p.name} lists it"
        attacker = ChannelKey("team", attacker_key, topic, is_public=False)
        opened = 0
        for env in after:
            try:
                open_for_topic(env, lambda _t: attacker)
                opened += 1
            except EnvelopeError:
                pass
        assert len(after) >= 15 and opened == 0, f"{opened} of {len(after)} open with its key"
        # the admins are shown the attempt, with its reason
        shown = [e for e in alice.select("members", what="rejected")
                 if e["data"].get("target") == puppet.sender_id]  # fmt: skip
        assert shown and shown[0]["data"]["reason"] == "outside_cut", alice.tail()
        assert "puppet" in shown[0]["text"] or puppet.sender_id[:8] in shown[0]["text"]
        for p in honest:
            assert not p.select("members", what="diverged"), p.name
        for p in honest:
            p.close_stdin()
        for p in honest:
            assert p.wait(T(60)) == 0, p.tail()
        states = set()
        for name in ("alice", "carol", "dave"):
            mc = secrets_file.load(tmp_path / name, "team")
            assert mc is not None
            states.add((tuple(mc.roster.listing()), mc.sending_key().key))
            assert mc.sending_key().key != attacker_key
        assert len(states) == 1, "the channel split"
