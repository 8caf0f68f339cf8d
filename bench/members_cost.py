"""What members channels cost: per received message, and a removal in a large channel.

Usage::

    .venv/bin/python bench/members_cost.py [--members 100] [--messages 2000] [--repeat 5]
        [--large 10000]

1. **Per message** (side by side, interleaved, same machine moment): opening a
   received envelope of a passphrase channel (``open_for_topic``: AEAD + Ed25519
   verify + SDS decode) against a members channel's receive path (the same, plus
   the gate and the Megolm decryption of the content, ``MembersChannel.incoming_content``),
   on realistic envelopes (a one-line chat message in the default profile's sizes:
   an SDS message with a 10-id history and a 250-entry filter). Prints microseconds
   per message, median of ``--repeat`` rounds, and the ratio.
2. **A removal in a channel of ``--members``** members (real roster, real sealed
   boxes, real Megolm sessions, real envelopes; delivery in process, no network,
   one process doing every member's work): the admin's ``remove`` event (the next
   epoch key sealed to every remaining member) and every remaining member applying
   it; then the next line (its sender's new session shared with every member
   first, as the node does lazily) read by all; then the worst case, every
   remaining member speaking once. Prints bytes on the wire (every envelope once,
   as a relay carries it), times, and how many of those envelopes the removed
   member opens with everything it holds (0 expected).
3. **A removal in a channel of ``--large``** (10,000) members: the admin and two
   members are real, the rest are real member-list entries (identity and share
   keys) whose own work is not simulated. The sealed epoch keys go in EpochKeys
   parts of at most 300 keys and then the remove (SDS content is at most 64 KiB);
   prints their number and bytes, the admin's sealing time, and each real
   member's time to apply them (one takes the parts first, the other the remove
   first) and whether both end on the new key.

Figures and their date are in docs/benchmarks.md ("Members channels").
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from machine import describe

from app.members.channel import MembersChannel
from app.members.events import MemberInfo, encode_add, is_control
from app.members.group_keys import GroupKeys, RotationPolicy
from net.channel_key import TEST_KDF, derive_channel_key
from net.envelope import EnvelopeError, open_for_topic, seal
from net.identity import Identity
from sds import sds_pb2


class Member:
    """One member: identity, members-channel state, Lamport clock."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = Identity.generate()
        self.id = self.identity.sender_id
        self.mc: MembersChannel | None = None
        self.lamport = 0
        self.cpu = 0.0

    def info(self) -> MemberInfo:
        assert self.mc is not None
        return MemberInfo(self.identity.public_key, self.mc.group_keys.share_key, self.name)

    def envelope(self, content: bytes, *, history: int = 10) -> bytes:
        mc = self.mc
        assert mc is not None
        self.lamport += 1
        mid = os.urandom(32).hex()
        if is_control(content):  # a membership event is signed as it goes out
            content = mc.outgoing(content, 0)[0]
        msg = sds_pb2.SdsMessage(
            sender_id=self.id, message_id=mid, channel_id="team",
            lamport_timestamp=self.lamport, content=content,
            causal_history=[sds_pb2.HistoryEntry(message_id=os.urandom(32).hex(),
                                                 retrieval_hint=os.urandom(32))
                            for _ in range(history)],
            bloom_filter=os.urandom(456),
        )  # fmt: skip
        env = seal(msg.SerializeToString(), self.identity, mc.sending_key())
        if is_control(content):
            mc.on_control(self.id, self.lamport, mid, content, env, 0)
        return env

    def receive(self, env: bytes) -> bytes | None:
        """Open and take one envelope; the plaintext of an ordinary message, else None
        (the time it took is added to ``cpu``: ``perf_counter``, as one process runs
        every member in turn; ``process_time`` costs more than the work here)."""
        mc = self.mc
        assert mc is not None
        t0 = time.perf_counter()
        try:
            opened = open_for_topic(env, lambda _t: mc.opening_keys())
            msg = opened.sds_message
            assert msg is not None
            if opened.sender_id == self.id or mc.admit(opened.sender_id):
                return None
            self.lamport = max(self.lamport, msg.lamport_timestamp)
            got = mc.incoming_content(msg.sender_id, msg.lamport_timestamp, msg.message_id,
                                      msg.content)  # fmt: skip
            if got.content is not None and is_control(got.content):
                mc.on_control(msg.sender_id, msg.lamport_timestamp, msg.message_id,
                              got.content, env, 0)  # fmt: skip
                return None
            return got.content
        except EnvelopeError:
            return None
        finally:
            self.cpu += time.perf_counter() - t0


def channel_of(n: int) -> list[Member]:
    """A members channel of ``n`` members, every Megolm session shared."""
    people = [Member(f"m{i:04d}") for i in range(n)]
    admin = people[0]
    mc, create = MembersChannel.create("team", admin.name, admin.identity)
    admin.mc = mc
    first = admin.envelope(create)
    for p in people[1:]:
        p.mc = MembersChannel("team", mc.channel_id, p.id, mc.epoch_keys,
                              GroupKeys(mc.channel_id, p.id), signer=p.identity)  # fmt: skip
        p.receive(first)
    adds = [admin.envelope(encode_add(p.info())) for p in people[1:]]
    for env in adds:
        for p in people[1:]:
            p.receive(env)
    shares = [p.envelope(c) for p in people for c in p.mc.due_controls(0)]  # type: ignore[union-attr]
    for env in shares:
        for p in people:
            p.receive(env)
    for p in people:
        p.cpu = 0.0
    return people


def per_message(messages: int, repeat: int) -> None:
    people = channel_of(2)
    alice, bob = people
    # one session for the whole run (a rotation every 100 messages costs one key
    # share, measured with the removal below, not a per-message cost)
    alice.mc.group_keys.policy = RotationPolicy(max_messages=10**9)  # type: ignore[union-attr]
    members_envs = []
    for i in range(messages):
        content = alice.mc.outgoing_content(f'{{"v":1,"text":"line {i}"}}'.encode(), 0)  # type: ignore[union-attr]
        members_envs.append(alice.envelope(content))
    key = derive_channel_key("team", "a passphrase", params=TEST_KDF)
    passphrase_envs = []
    for i in range(messages):
        msg = sds_pb2.SdsMessage(
            sender_id=alice.id, message_id=os.urandom(32).hex(), channel_id="team",
            lamport_timestamp=i + 1, content=f'{{"v":1,"text":"line {i}"}}'.encode(),
            causal_history=[sds_pb2.HistoryEntry(message_id=os.urandom(32).hex(),
                                                 retrieval_hint=os.urandom(32))
                            for _ in range(10)],
            bloom_filter=os.urandom(456))  # fmt: skip
        passphrase_envs.append(seal(msg.SerializeToString(), alice.identity, key))
    size_m = statistics.mean(len(e) for e in members_envs)
    size_p = statistics.mean(len(e) for e in passphrase_envs)
    t_pass, t_memb = [], []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for env in passphrase_envs:
            open_for_topic(env, lambda _t: key)
        t_pass.append((time.perf_counter() - t0) / messages * 1e6)
        # a fresh receiver each round: every message is read for the first time
        receiver = GroupKeys.restore(bob.mc.group_keys.export(bytes(32)), bytes(32))  # type: ignore[union-attr]
        saved, bob.mc.group_keys = bob.mc.group_keys, receiver  # type: ignore[union-attr]
        t0 = time.perf_counter()
        for env in members_envs:
            assert bob.receive(env) is not None
        t_memb.append((time.perf_counter() - t0) / messages * 1e6)
        bob.mc.group_keys = saved  # type: ignore[union-attr]
    p, m = statistics.median(t_pass), statistics.median(t_memb)
    print(f"per message ({messages} envelopes, median of {repeat}):")
    print(f"  passphrase channel: {p:7.1f} us  ({size_p:.0f} B envelope)")
    print(f"  members channel:    {m:7.1f} us  ({size_m:.0f} B envelope)  = {m / p:.2f}x")


def _send(who: Member, text: bytes) -> list[bytes]:
    """``who`` types a line: the key shares due first, then the line (as the node does)."""
    c0 = time.perf_counter()
    envs = [who.envelope(c) for c in who.mc.outgoing(text, 0)]  # type: ignore[union-attr]
    who.cpu += time.perf_counter() - c0
    return envs


def removal(n: int) -> None:
    t0 = time.perf_counter()
    people = channel_of(n)
    setup = time.perf_counter() - t0
    admin, victim = people[0], people[-1]
    rest = people[:-1]
    # 1. the removal: the next outer key sealed to each remaining member
    t0 = time.perf_counter()
    c0 = time.perf_counter()
    [remove] = [admin.envelope(c) for c in admin.mc.remove(victim.id)]  # type: ignore[union-attr]
    admin.cpu += time.perf_counter() - c0
    for p in rest[1:]:
        p.receive(remove)
    t_remove = time.perf_counter() - t0
    cpu_remove = sorted(p.cpu for p in rest)
    # 2. the next line: its sender's new Megolm session shared with every other member first
    t0 = time.perf_counter()
    first = _send(rest[1], b'{"v":1,"text":"first after the removal"}')
    readers = sum(1 for p in rest for env in first if p.receive(env) is not None)
    t_first = time.perf_counter() - t0
    assert readers == len(rest) - 1, f"{readers} of {len(rest) - 1} read the first line"
    # 3. worst case: every remaining member speaks once
    t0 = time.perf_counter()
    rounds: list[bytes] = []
    for who in rest:
        rounds += _send(who, b'{"v":1,"text":"me too"}')
    for env in rounds:
        for p in rest:
            p.receive(env)
    t_all = time.perf_counter() - t0
    wire = [remove, *first, *rounds]
    leaked = 0
    for env in wire[1:]:
        try:
            open_for_topic(env, lambda _t: victim.mc.opening_keys())  # type: ignore[union-attr]
            leaked += 1
        except EnvelopeError:
            pass
    print(f"removal in a channel of {n} members (set-up {setup:.1f} s), one process:")
    print(f"  the removal: {len(remove):,} B on the wire; {t_remove * 1e3:.0f} ms for all "
          f"{len(rest)} to apply it (admin {cpu_remove[-1] * 1e3:.1f} ms, median member "
          f"{statistics.median(cpu_remove) * 1e3:.2f} ms)")
    print(f"  the next line (a new session shared with {len(rest) - 1} members, then the "
          f"line; all read it): {sum(map(len, first)):,} B in {len(first)} envelopes, "
          f"{t_first * 1e3:.0f} ms")
    print(f"  every remaining member speaks once: {sum(map(len, rounds)):,} B in "
          f"{len(rounds)} envelopes, {t_all:.2f} s")
    print(f"  envelopes sent after the removal that the removed member opens: {leaked} "
          f"of {len(wire) - 1}")


def large_removal(n: int) -> None:
    """A removal in a channel of ``n`` members: the admin and two members are real
    (state, keys, envelopes); the others are real entries of the member list (their
    identity and share keys) whose own work is not simulated."""
    from nacl.public import PrivateKey


    t0 = time.perf_counter()
    admin, bob, carol = channel_of(3)
    paper = [MemberInfo(Identity.generate().public_key, bytes(PrivateKey.generate().public_key),
                        f"p{i:05d}") for i in range(n - 3)]  # fmt: skip
    adds = [admin.envelope(encode_add(info)) for info in paper]
    for env in adds:
        bob.receive(env)
        carol.receive(env)
    setup = time.perf_counter() - t0
    gone = next(mid for mid in admin.mc.roster.members if mid not in (admin.id, bob.id, carol.id))  # type: ignore[union-attr]
    c0 = time.perf_counter()
    envs = [admin.envelope(c) for c in admin.mc.remove(gone)]  # type: ignore[union-attr]
    t_admin = time.perf_counter() - c0
    bob.cpu = carol.cpu = 0.0
    for env in envs:
        bob.receive(env)
    for env in envs[-1:] + envs[:-1]:  # carol: the remove first, its parts after
        carol.receive(env)
    key = admin.mc.sending_key().key  # type: ignore[union-attr]
    ok = sum(p.mc.sending_key().key == key for p in (bob, carol))  # type: ignore[union-attr]
    parts = len(envs) - 1
    biggest = max(len(e) for e in envs)
    print(f"removal in a channel of {n:,} members (set-up {setup:.1f} s; 3 real members):")
    print(f"  {len(envs)} envelopes ({parts} EpochKeys parts, then the remove), "
          f"{sum(map(len, envs)):,} B in all, the largest {biggest:,} B; the admin seals "
          f"them in {t_admin * 1e3:.0f} ms; a member applies them in "
          f"{bob.cpu * 1e3:.0f} ms (parts first) / {carol.cpu * 1e3:.0f} ms (remove first); "
          f"{ok} of 2 real members on the new key")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--members", type=int, default=100)
    ap.add_argument("--messages", type=int, default=2000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--large", type=int, default=10_000,
                    help="members of the large channel of the removal (0: skip)")  # fmt: skip
    args = ap.parse_args()
    print(describe())
    per_message(args.messages, args.repeat)
    removal(args.members)
    if args.large:
        large_removal(args.large)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
