"""Forward secrecy of a members channel, counted as a thief would: real relay, real
headless nodes, a tap at the relay recording every envelope of the channel's topic,
and copies of a member's whole data directory (one taken while it runs, the final
one after a clean exit).

The thief's tools are its own (PyNaCl, vodozemac, the project's protobufs), not the
node's checks: it tries every Megolm session the stolen members file holds on every
captured line, and every share key the file holds on every captured key share. What
opens is compared with what docs/security.md says a thief of a data directory with a
capture reads, exactly: nothing more.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import sys
import time
from base64 import b64decode
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import vodozemac
from e2e_helpers import Cluster, Proc, T, cluster
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, SealedBox
from test_e2e_members import Tap, _invite, _join_by_invite, _joined, _sees, tap
from websockets.sync.client import connect

from app.members import members_pb2 as pb
from app.members.channel import members_topic
from app.members.events import decode_control, decode_encrypted
from app.members.secrets_file import members_file
from net.channel_key import ChannelKey
from net.envelope import EnvelopeError, open_for_topic
from net.relay_frames import encode_publish


@dataclass
class Loot:
    """What the thief takes from a stolen data directory's members file."""

    own_id: str
    outer: list[ChannelKey]
    share_secrets: list[PrivateKey]
    sessions: list[vodozemac.InboundGroupSession]
    first_index: dict[tuple[str, str], int] = field(default_factory=dict)


def steal(data_dir: Path, channel: str = "team") -> Loot:
    doc = json.loads(members_file(data_dir, channel).read_bytes())
    keys = json.loads(doc["group_keys"])
    pickle_key = bytes.fromhex(doc["pickle_key"])
    topic = members_topic(bytes.fromhex(doc["channel_id"]))
    outer = [ChannelKey(channel, bytes.fromhex(k), topic, is_public=False)
             for k in doc["epoch_keys"]]  # fmt: skip
    loot = Loot(doc["own_id"], outer,
                [PrivateKey(b64decode(s)) for s, _ in keys["share_secrets"]],
                [])  # fmt: skip
    for e in keys["in"]:
        session = vodozemac.InboundGroupSession.from_pickle(e["pickle"], pickle_key)
        loot.sessions.append(session)
        loot.first_index[(e["sender"], str(session.session_id))] = int(
            session.first_known_index)
    return loot


@dataclass(frozen=True)
class Line:
    sender: str
    session_id: str
    index: int
    megolm: bytes


def captured(capture: list[bytes], loot: Loot) -> tuple[list[Line], dict[bytes, pb.KeyShare]]:
    """Every distinct line and key share (by envelope) of the capture that the stolen
    outer keys open (the outer keys of every epoch the member was in)."""
    lines: dict[str, Line] = {}
    shares: dict[bytes, pb.KeyShare] = {}
    for env in capture:
        try:
            msg = open_for_topic(env, lambda _t: loot.outer).sds_message
        except EnvelopeError:
            continue
        if msg is None or not msg.content:
            continue
        framed = decode_encrypted(msg.content)
        if framed is not None:
            session_id, megolm = framed
            index = int(vodozemac.MegolmMessage.from_bytes(megolm).message_index())
            lines[msg.message_id] = Line(msg.sender_id, session_id, index, megolm)
            continue
        control = decode_control(msg.content)
        if isinstance(control, pb.Control) and control.WhichOneof("body") == "key_share":
            shares[env] = control.key_share
    return list(lines.values()), shares


def _open(sessions: list[vodozemac.InboundGroupSession], line: Line) -> bytes | None:
    for session in sessions:
        with contextlib.suppress(Exception):
            return bytes(session.decrypt(vodozemac.MegolmMessage.from_bytes(line.megolm))
                         .plaintext)  # fmt: skip
    return None


def share_sessions(loot: Loot, shares: list[pb.KeyShare]) -> list[vodozemac.InboundGroupSession]:
    """The sessions of every captured key share that a stolen share key opens."""
    out = []
    for share in shares:
        for sealed in (k.sealed for k in share.keys if k.recipient_id == loot.own_id):
            for secret in loot.share_secrets:
                try:
                    data = bytes(SealedBox(secret).decrypt(bytes(sealed)))
                except CryptoError:
                    continue
                plain = pb.SessionKeyPlain.FromString(data)
                text = plain.session_key.decode()
                out.append(vodozemac.InboundGroupSession.import_session(
                    vodozemac.ExportedSessionKey(text)) if plain.exported else
                    vodozemac.InboundGroupSession(vodozemac.SessionKey(text)))  # fmt: skip
    return out


def read_by(texts: set[str], plaintexts: list[bytes | None]) -> set[str]:
    """Which of ``texts`` (unique lines) the opened plaintexts hold."""
    got = [p for p in plaintexts if p is not None]
    return {t for t in texts if any(t.encode() in p for p in got)}


@dataclass
class Opened:
    by_sessions: set[str]  # with the Megolm sessions of the members file
    by_shares: set[str]  # with the captured key shares its share keys open


def thief(data_dir: Path, capture: list[bytes], texts: set[str]) -> Opened:
    loot = steal(data_dir)
    lines, shares = captured(capture, loot)
    from_shares = share_sessions(loot, list(shares.values()))
    return Opened(read_by(texts, [_open(loot.sessions, ln) for ln in lines]),
                  read_by(texts, [_open(from_shares, ln) for ln in lines]))  # fmt: skip


def copy_dir(src: Path, dst: Path) -> Path:
    """A copy of a (running) node's whole data directory, as a thief or a backup takes it."""
    shutil.copytree(src, dst, ignore=shutil.ignore_patterns("*.lock"))
    return dst


def _stats(p: Proc) -> dict[str, int]:
    before = len(p.select("info"))
    p.send("/stats")
    p.wait_for(lambda: len(p.select("info")) > before, 20, "/stats")
    counters: dict[str, int] = p.select("info")[-1]["data"]["counters"]
    return counters


def _settled(data_dir: Path, senders: dict[str, int], timeout: float) -> dict[tuple[str, str], int]:
    """Wait (bounded) until the members file's sessions of ``senders`` (id -> lines
    read) start past what was read; returns the last starts seen."""
    deadline = time.monotonic() + T(timeout)
    mine: dict[tuple[str, str], int] = {}
    while True:
        with contextlib.suppress(OSError, ValueError, KeyError):
            starts = steal(data_dir).first_index
            mine = {k: v for k, v in starts.items() if k[0] in senders}
            if all(any(v >= n for k, v in mine.items() if k[0] == s) for s, n in senders.items()):
                return mine
        if time.monotonic() > deadline:
            return mine
        time.sleep(0.2)


def _sender(p: Proc) -> str:
    return str(p.select("ready")[0]["sender"])


@contextlib.contextmanager
def _team(tmp_path: Path) -> Iterator[tuple[Cluster, str, list[Proc], Tap]]:
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", url, channel="team", extra=["--create"])
        _joined(alice, "created")
        topic = bytes.fromhex(alice.select("channel")[0]["topic"])
        with tap(url, [topic]) as relay_tap:  # from before anyone joined: everything
            bob = _join_by_invite(c, "bob", _invite(alice), url)
            carol = _join_by_invite(c, "carol", _invite(alice), url)
            yield c, url, [alice, bob, carol], relay_tap


def test_a_stolen_data_dir_with_a_full_capture_opens_what_security_md_says_and_no_more(
    tmp_path: Path,
) -> None:
    tag = os.urandom(3).hex()
    with _team(tmp_path) as (c, url, (alice, bob, carol), relay_tap):
        said: dict[str, list[str]] = {"alice": [], "bob": [], "carol": []}

        def say(p: Proc, phase: str, n: int) -> list[str]:
            lines = [f"{p.name} {phase}{i} {tag}" for i in range(n)]
            for line in lines:
                p.send(line)
            said[p.name] += lines
            return lines

        # phase A: alice reads 8 lines each of bob and carol, says 2
        a_lines = say(bob, "A", 8) + say(carol, "A", 8) + say(alice, "A", 2)
        for p in (alice, bob, carol):
            _sees(p, *(t for t in a_lines if not t.startswith(p.name)))
        ids = {p.name: _sender(p) for p in (bob, carol)}
        starts = _settled(tmp_path / "alice", {ids["bob"]: 8, ids["carol"]: 8}, 30)
        at_t = copy_dir(tmp_path / "alice", tmp_path / "stolen-at-T")
        # phase B: 4 more each, read by alice after the copy
        b_lines = say(bob, "B", 4) + say(carol, "B", 4) + say(alice, "B", 1)
        for p in (alice, bob, carol):
            _sees(p, *(t for t in b_lines if not t.startswith(p.name)))
        for p in (alice, bob, carol):
            p.close_stdin()
        for p in (alice, bob, carol):
            assert p.wait(T(60)) == 0, p.tail()
        final = copy_dir(tmp_path / "alice", tmp_path / "stolen-final")
        capture = relay_tap.since(0)

        every = {t for ts in said.values() for t in ts}
        others_a = {t for t in a_lines if not t.startswith("alice")}
        others_b = {t for t in b_lines if not t.startswith("alice")}
        own = set(said["alice"])
        # What docs/security.md says, for alice's directory copied after she read the
        # A lines: her Megolm sessions open what she had not read yet (the B lines, sent
        # after the copy, in the same sessions), and her own lines (her own session's
        # copy; her log holds them anyway); her share key (the one she joined with: it
        # is replaced every 7 days) opens every captured key share sealed to it, so
        # every session shared with her, read or not, from its start.
        got = thief(at_t, capture, every)
        assert got.by_sessions == others_b | own, (
            f"sessions saved from {sorted(starts.values())}: opened "
            f"{len(got.by_sessions & others_a)}/{len(others_a)} of the lines read before the copy")
        assert got.by_shares == others_a | others_b
        assert len(steal(at_t).share_secrets) == 1
        # the final directory (clean exit, everything read): no line of the others
        got = thief(final, capture, every)
        assert got.by_sessions == own, f"{len(got.by_sessions - own)} lines of the others opened"
        assert got.by_shares == others_a | others_b
        assert {k[0] for k, v in steal(final).first_index.items() if v == 0} <= {
            steal(final).own_id}, steal(final).first_index

        # A relay replays every captured key share to alice, restarted from her final
        # directory: her node takes each again (on arrival and on delivery), and her
        # saved sessions still open no line she read.
        replayed = list(captured(capture, steal(final))[1])
        assert len(replayed) >= 2  # bob's and carol's shares to alice at least
        argv = [sys.executable, "-m", "app.cli", "join", "team", "--data-dir",
                str(tmp_path / "alice"), "--name", "alice", "--headless", "--fast",
                "--relay", url]  # fmt: skip
        alice = c.start(argv, "alice-again")
        alice.wait_for(lambda: bool(alice.select("connection", state="connected")), 30,
                       "connected")  # fmt: skip
        received = _stats(alice).get("received", 0)
        with connect(url, max_size=None, proxy=None) as ws:
            for env in replayed:
                ws.send(encode_publish(env))
        alice.wait_for(lambda: _stats(alice).get("received", 0) >= received + len(replayed),
                       60, "the replayed key shares taken in")  # fmt: skip
        # a line of hers makes the node save its state (and its members file) again
        saved = members_file(tmp_path / "alice", "team").stat().st_mtime_ns
        own.add(f"alice after the replay {tag}")
        alice.send(f"alice after the replay {tag}")
        alice.wait_for(lambda: members_file(tmp_path / "alice", "team").stat().st_mtime_ns
                       != saved, 30, "the members file saved after the replay")  # fmt: skip
        alice.close_stdin()
        assert alice.wait(T(60)) == 0, alice.tail()
        every |= own
        got = thief(tmp_path / "alice", relay_tap.since(0), every)
        assert got.by_sessions == own, (
            f"after the replay: {len(got.by_sessions - own)}/{len(others_a | others_b)} "
            "lines of the others opened")
        assert got.by_shares == others_a | others_b


LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


def _restart_all(c: Cluster, url: str, names: list[str], offset: str) -> list[Proc]:
    """The members' nodes again, from their data directories, under a wall clock
    ``offset`` ahead (libfaketime: the same for all, so they agree with each other)."""
    out = []
    for name in names:
        argv = ["env", f"LD_PRELOAD={LIBFAKETIME}", f"FAKETIME={offset}", sys.executable,
                "-m", "app.cli", "join", "team", "--data-dir", str(c.tmp / name),
                "--name", name, "--headless", "--fast", "--relay", url]  # fmt: skip
        out.append(c.start(argv, f"{name}{offset}"))
    for p in out:
        p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 30, "connected")
    return out


def _stop_all(procs: list[Proc]) -> None:
    for p in procs:
        p.close_stdin()
    for p in procs:
        assert p.wait(T(60)) == 0, p.tail()


def test_captured_key_shares_stop_opening_once_the_share_key_is_replaced_and_deleted(
    tmp_path: Path,
) -> None:
    """How long a stolen share key opens captured key shares: until the member's
    share key is replaced (7 days) and the old one deleted (once every other member
    sealed a share to the new one, 1 h at least). Days pass by libfaketime."""
    if not LIBFAKETIME.exists():
        pytest.skip("libfaketime is not installed (make tools)")
    tag = os.urandom(3).hex()
    with _team(tmp_path) as (c, url, (alice, bob, carol), relay_tap):
        a_lines = [f"{p.name} A{i} {tag}" for p in (bob, carol) for i in range(4)]
        for line in a_lines:
            (bob if line.startswith("bob") else carol).send(line)
        _sees(alice, *a_lines)
        alice_id = _sender(alice)
        _stop_all([alice, bob, carol])

        # 8 days later: alice's share key is due; her sessions of the A lines expired
        alice, bob, carol = _restart_all(c, url, ["alice", "bob", "carol"], "+8d")
        for p in (bob, carol):
            p.wait_for(lambda p=p: any(alice_id in e["data"].get("rekeyed", ())
                                       for e in p.select("members", what="changed")),
                       60, "alice's new share key")  # fmt: skip
        alice.wait_for(lambda: len(steal(tmp_path / "alice").share_secrets) == 2, 30,
                       "the old share key kept beside the new one")  # fmt: skip
        _stop_all([alice, bob, carol])
        rotated = copy_dir(tmp_path / "alice", tmp_path / "stolen-rotated")

        # 2 h more: bob and carol (new sessions after their restart) seal to the new key
        alice, bob, carol = _restart_all(c, url, ["alice", "bob", "carol"], "+194h")
        c_lines = [f"{n} C{i} {tag}" for n in ("bob", "carol") for i in range(4)]
        for line in c_lines:
            (bob if line.startswith("bob") else carol).send(line)
        _sees(alice, *c_lines)
        alice.wait_for(lambda: len(steal(tmp_path / "alice").share_secrets) == 1, 30,
                       "the old share key deleted")  # fmt: skip
        _stop_all([alice, bob, carol])
        capture = relay_tap.since(0)

        every = set(a_lines) | set(c_lines)
        # right after the replacement: the old key (kept) still opens the A lines' shares,
        # and the new one what is shared to it after the theft
        got = thief(rotated, capture, every)
        assert got.by_sessions == set(), got.by_sessions  # expired after 7 days
        assert got.by_shares == set(a_lines) | set(c_lines)
        # once the old key is deleted: only what was shared to the current one
        got = thief(tmp_path / "alice", capture, every)
        assert got.by_sessions == set(), got.by_sessions
        assert got.by_shares == set(c_lines)
