"""The membership chain: signed events naming their parents, one resolution everywhere.

Events are made as an attacker would make them: every author signs whatever parents it
likes (an old head set is a back-dated event), a removed admin keeps its key and signs
on, and Lamport times are the author's choice (they order nothing here: each event is
delivered with a random one).
"""

from __future__ import annotations

import hashlib
import itertools
import random

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    initialize,
    invariant,
    precondition,
    rule,
)
from nacl.public import PrivateKey

from app.members import members_pb2 as pb
from app.members.chain import sign_chained
from app.members.events import CONTROL_MAGIC, channel_id_for, encode_add
from app.members.roster import Roster
from net.identity import Identity

NONCE = bytes(range(32))


class Who:
    def __init__(self, name: str) -> None:
        self.name = name
        self.identity = Identity.generate()
        self.id = self.identity.sender_id
        self.share = bytes(PrivateKey.generate().public_key)

    def member(self) -> pb.Member:
        return pb.Member(identity_key=self.identity.public_key, share_key=self.share,
                         name=self.name)  # fmt: skip


ALICE, BOB, CAROL, DAVE, EVE, PUPPET = (Who(n) for n in
                                        ("alice", "bob", "carol", "dave", "eve", "puppet"))
CHANNEL_ID = channel_id_for(ALICE.identity.public_key, NONCE)
_lamports = itertools.count(1)


def sign(who: Who, parents: list[bytes], body: pb.Chained) -> bytes:
    return sign_chained(who.identity, CHANNEL_ID, parents, body)


def create() -> bytes:
    c = pb.Create(channel="team", channel_id=CHANNEL_ID, creator=ALICE.member(), nonce=NONCE)
    return sign(ALICE, [], pb.Chained(create=c))


def add(by: Who, parents: list[bytes], who: Who, role: int = pb.ROLE_MEMBER) -> bytes:
    return sign(by, parents, pb.Chained(add=pb.Add(member=who.member(), role=role)))


def remove(by: Who, parents: list[bytes], who: Who) -> bytes:
    return sign(by, parents, pb.Chained(remove=pb.Remove(member_id=who.id)))


def set_role(by: Who, parents: list[bytes], who: Who, role: int) -> bytes:
    return sign(by, parents, pb.Chained(set_role=pb.SetRole(member_id=who.id, role=role)))


def rekey(by: Who, parents: list[bytes]) -> bytes:
    return sign(by, parents, pb.Chained(rekey=pb.Rekey()))


def leave(by: Who, parents: list[bytes]) -> bytes:
    return sign(by, parents, pb.Chained(leave=pb.Leave()))


def take(r: Roster, by: Who, content: bytes) -> str:
    """Deliver ``content`` (signed by ``by``) at a random Lamport time; its message id."""
    mid = hashlib.sha256(content).hexdigest()
    r.add_event(by.id, random.randint(0, 10**13), mid, content)
    return mid


def reason(r: Roster, mid: str) -> str:
    out = r.outcome(mid)
    assert out is not None
    return out.reason


def founded() -> tuple[Roster, list[bytes]]:
    """alice's channel with bob as an admin, carol and dave as members."""
    r = Roster(CHANNEL_ID)
    take(r, ALICE, create())
    take(r, ALICE, add(ALICE, r.heads, BOB, pb.ROLE_ADMIN))
    take(r, ALICE, add(ALICE, r.heads, CAROL))
    take(r, ALICE, add(ALICE, r.heads, DAVE))
    return r, r.heads


def rename(by: Who, parents: list[bytes], name: str) -> bytes:
    return sign(by, parents, pb.Chained(rename=pb.Rename(name=name)))


def test_a_rename_to_a_members_name_is_refused_a_look_alike_is_told_apart() -> None:
    """Issue 39 break 5: carol signs a rename to bob's name (refused by every member's
    fold: ``name_taken``), then to a look-alike of it (applied: names that only look
    alike are told apart where they show, by their authors' fingerprints)."""
    r, _ = founded()
    assert r.label_of(CAROL.id) == "carol" and r.label_of(BOB.id) == "bob"
    taken = take(r, CAROL, rename(CAROL, r.heads, "bob"))
    assert reason(r, taken) == "name_taken" and r.name_of(CAROL.id) == "carol"
    own = take(r, BOB, rename(BOB, r.heads, "bob"))  # one's own name again: fine
    assert reason(r, own) == ""
    alike = take(r, CAROL, rename(CAROL, r.heads, "B\u03bfb"))  # a Greek omicron, a capital
    assert reason(r, alike) == "" and r.name_of(CAROL.id) == "B\u03bfb"
    assert r.label_of(CAROL.id) == f"B\u03bfb ({CAROL.id[:8]})"
    assert r.label_of(BOB.id) == f"bob ({BOB.id[:8]})"
    assert [m.member_id for m in r.confusable_with("bob", BOB.id)] == [CAROL.id]
    # bob leaves: his lines keep his name, and the look-alike stays told apart from it
    take(r, BOB, leave(BOB, r.heads))
    assert not r.is_member(BOB.id) and r.name_of(BOB.id) == "bob"
    assert r.label_of(BOB.id) == f"bob ({BOB.id[:8]})"
    assert r.name_of(PUPPET.id) is None and r.label_of(PUPPET.id) == PUPPET.id[:8]


def test_a_rename_is_a_name_a_person_could_type() -> None:
    r, _ = founded()
    for bad in ("two words", "al\u200bice", "\u3164", "x" * 65):
        mid = take(r, CAROL, rename(CAROL, r.heads, bad))
        assert reason(r, mid) == "malformed", bad
        assert r.name_of(CAROL.id) == "carol", bad


def test_membership_lines_name_members_by_the_roster() -> None:
    from app.members.display import describe

    r, _ = founded()
    heads = r.heads
    assert describe(add(ALICE, heads, EVE)) == ("member", "added eve")
    assert describe(remove(ALICE, heads, CAROL), r.name_of) == (
        "member", "removed carol (new channel keys)")
    assert describe(remove(ALICE, heads, CAROL))[1] == f"removed {CAROL.id[:8]} (new channel keys)"
    assert describe(set_role(ALICE, heads, DAVE, pb.ROLE_ADMIN), r.name_of) == (
        "member", "made dave admin")
    assert describe(rename(DAVE, heads, "david")) == ("member", "is now called david")
    assert describe(create())[1] == "created #team (members channel)"
    assert describe(leave(DAVE, heads)) == ("member", "left (new channel keys)")


def test_events_name_their_parents_and_build_one_state() -> None:
    r, heads = founded()
    assert r.chained and r.channel == "team"
    assert [(n, role) for _, n, role in r.listing()] == [
        ("alice", "admin"), ("bob", "admin"), ("carol", "member"), ("dave", "member")]
    assert len(heads) == 1 and r.chain.resolutions == 0  # a line: no re-resolution
    assert not r.rejections


def test_a_removed_admin_signing_a_back_dated_puppet_admin_changes_no_roster() -> None:
    """Break 2 of issue 39: bob, removed, signs add(puppet, admin) naming the heads from
    before his removal (and a Lamport time before it); the puppet then signs a rekey
    naming every head. Wherever the events come in, no roster lists the puppet and the
    rekey starts no epoch."""
    r, before = founded()
    removal = remove(ALICE, before, BOB)
    take(r, ALICE, removal)
    forged = add(BOB, before, PUPPET, pb.ROLE_ADMIN)
    # the forged add is concurrent with the removal: cut
    mid = take(r, BOB, forged)
    assert reason(r, mid) == "outside_cut"
    # the puppet's rekey names both heads (the removal and its own add)
    rk = sign(PUPPET, r.heads, pb.Chained(rekey=pb.Rekey()))
    rk_mid = take(r, PUPPET, rk)
    assert reason(r, rk_mid) == "not_a_member"
    assert not r.is_member(PUPPET.id) and not r.is_member(BOB.id)
    epochs = r.epoch_positions()
    assert len(epochs) == 1  # the removal's epoch only


def test_the_back_dated_puppet_loses_in_every_delivery_order() -> None:
    _, before = founded()
    events = [(ALICE, remove(ALICE, before, BOB)), (BOB, add(BOB, before, PUPPET, pb.ROLE_ADMIN))]
    # the puppet rekeys on top of its own add only (as if it never saw the removal)
    probe = founded()[0]
    take(probe, BOB, events[1][1])
    events.append((PUPPET, rekey(PUPPET, probe.heads)))
    hashes = set()
    for order in itertools.permutations(range(3)):
        r = founded()[0]
        for i in order:
            take(r, *events[i])
        assert not r.is_member(PUPPET.id) and not r.is_member(BOB.id)
        hashes.add(r.state_hash())
    assert len(hashes) == 1


def test_two_admins_removing_each_other_resolve_by_the_fixed_order() -> None:
    """bob and dave (admins, not the creator) remove each other concurrently: the one
    of lower event hash wins everywhere; the creator's removal beats any admin's."""
    r, before = founded()
    take(r, ALICE, set_role(ALICE, r.heads, DAVE, pb.ROLE_ADMIN))
    base = r.heads
    b_removes_d = remove(BOB, base, DAVE)
    d_removes_b = remove(DAVE, base, BOB)
    results = set()
    for order in ([b_removes_d, d_removes_b], [d_removes_b, b_removes_d]):
        rr, _ = founded()
        take(rr, ALICE, set_role(ALICE, rr.heads, DAVE, pb.ROLE_ADMIN))
        for content in order:
            take(rr, BOB if content == b_removes_d else DAVE, content)
        results.add(tuple(rr.listing()))
        assert len(rr) == 3  # exactly one of them went
    assert len(results) == 1
    # alice (the creator) and bob remove each other: alice stays
    a_removes_b = remove(ALICE, before, BOB)
    b_removes_a = remove(BOB, before, ALICE)
    for order in ([a_removes_b, b_removes_a], [b_removes_a, a_removes_b]):
        rr, _ = founded()
        for content in order:
            take(rr, ALICE if content == a_removes_b else BOB, content)
        assert rr.is_admin(ALICE.id) and not rr.is_member(BOB.id)
        assert reason(rr, hashlib.sha256(b_removes_a).hexdigest()) == "outside_cut"


def test_a_demotion_cuts_the_admin_acts_signed_beside_it_but_not_the_rest() -> None:
    r, before = founded()
    demote = set_role(ALICE, before, BOB, pb.ROLE_MEMBER)
    bob_adds = add(BOB, before, EVE)
    bob_rekeys = sign(BOB, before, pb.Chained(share_key=pb.ShareKey(share_key=bytes(32))))
    take(r, BOB, bob_adds)
    take(r, BOB, bob_rekeys)
    assert r.is_member(EVE.id)
    take(r, ALICE, demote)
    assert not r.is_member(EVE.id) and not r.is_admin(BOB.id)
    assert reason(r, hashlib.sha256(bob_adds).hexdigest()) == "outside_cut"
    assert reason(r, hashlib.sha256(bob_rekeys).hexdigest()) == ""  # needs no admin


def test_an_event_is_valid_only_if_its_author_held_the_role_in_its_parents_state() -> None:
    """carol (a member) signs an add naming the heads from before she was made admin:
    refused, even though she is an admin in the resolved state."""
    r, before = founded()
    take(r, ALICE, set_role(ALICE, before, CAROL, pb.ROLE_ADMIN))
    early = add(CAROL, before, EVE)
    assert reason(r, take(r, CAROL, early)) == "not_admin"
    assert not r.is_member(EVE.id)
    late = add(CAROL, r.heads, EVE)
    assert reason(r, take(r, CAROL, late)) == ""


def test_an_event_waits_for_its_parents_and_is_taken_when_they_come() -> None:
    r = Roster(CHANNEL_ID)
    take(r, ALICE, create())
    first = add(ALICE, r.heads, BOB)
    probe = Roster(CHANNEL_ID)
    take(probe, ALICE, create())
    take(probe, ALICE, first)
    second = add(ALICE, probe.heads, CAROL)
    take(r, ALICE, second)  # its parent has not come: held
    assert not r.is_member(CAROL.id) and len(r.chain.pending) == 1
    take(r, ALICE, first)
    assert r.is_member(BOB.id) and r.is_member(CAROL.id) and not r.chain.pending
    take(probe, ALICE, second)
    assert r.state_hash() == probe.state_hash()


def test_unchained_events_bad_signatures_and_foreign_authors_are_refused() -> None:
    r, _ = founded()
    assert r.add_event(ALICE.id, 5, "old", encode_add(EVE_INFO)).refused[0].reason == "unchained"
    forged = bytearray(add(ALICE, r.heads, EVE))
    forged[-3] ^= 1  # inside the signature
    out = r.add_event(ALICE.id, 6, "bad", bytes(forged))
    assert out.refused[0].reason in ("bad_signature", "malformed")
    relayed = add(ALICE, r.heads, EVE)
    assert r.add_event(BOB.id, 7, "relay", relayed).refused[0].reason == "wrong_author"
    assert not r.is_member(EVE.id)
    other = sign(ALICE, [], pb.Chained(create=pb.Create(
        channel="other", channel_id=CHANNEL_ID, creator=ALICE.member(), nonce=NONCE)))
    take(r, ALICE, other)
    assert r.channel == "team" or r.channel == "other"  # the lower hash is the root
    assert sorted(r.rejections.elements()).count("second_root") == 1
    junk = CONTROL_MAGIC + b"\xff\xff"
    assert r.add_event(ALICE.id, 8, "junk", junk).refused[0].reason == "malformed"


EVE_INFO = __import__("app.members.events", fromlist=["MemberInfo"]).MemberInfo(
    EVE.identity.public_key, EVE.share, "eve")


# -- replicas in random orders, with partitions, duplicates, late repairs --------------

PEOPLE = [ALICE, BOB, CAROL, DAVE, EVE]


class Replicas(RuleBasedStateMachine):
    """3-6 replicas; authors (any of five, admins or not, removed or not) sign events on
    the heads of their own replica or on an older head set (back-dating); deliveries go
    to random replicas in random order, repeated, held back by partitions and healed
    late. Every replica holding the same events holds the same state; after healing,
    every replica holds the same roster and epochs."""

    @initialize(n=st.integers(min_value=3, max_value=6))
    def start(self, n: int) -> None:
        self.replicas = [Roster(CHANNEL_ID) for _ in range(n)]
        self.sent: list[tuple[Who, bytes]] = []
        self.cut_off: set[int] = set()
        self.rng = random.Random(n)
        root = create()
        self.sent.append((ALICE, root))
        for r in self.replicas:
            take(r, ALICE, root)
        # everyone starts as a member; bob and carol admins
        r0 = self.replicas[0]
        for who, role in ((BOB, pb.ROLE_ADMIN), (CAROL, pb.ROLE_ADMIN), (DAVE, pb.ROLE_MEMBER),
                          (EVE, pb.ROLE_MEMBER)):  # fmt: skip
            content = add(ALICE, r0.heads, who, role)
            self.sent.append((ALICE, content))
            for r in self.replicas:
                take(r, ALICE, content)
        self.snapshots: list[list[bytes]] = [r0.heads]

    @rule(author=st.sampled_from(PEOPLE), about=st.sampled_from([*PEOPLE, PUPPET]),
          kind=st.sampled_from(["add", "add_admin", "remove", "promote", "demote", "rekey",
                                "share_key", "rename", "rename_taken", "leave"]),
          at=st.integers(min_value=0, max_value=5), stale=st.booleans())  # fmt: skip
    def sign_event(self, author: Who, about: Who, kind: str, at: int, stale: bool) -> None:
        view = self.replicas[at % len(self.replicas)]
        parents = (self.rng.choice(self.snapshots) if stale else view.heads)
        body = {
            "add": lambda: pb.Chained(add=pb.Add(member=about.member())),
            "add_admin": lambda: pb.Chained(add=pb.Add(member=about.member(),
                                                       role=pb.ROLE_ADMIN)),
            "remove": lambda: pb.Chained(remove=pb.Remove(member_id=about.id)),
            "promote": lambda: pb.Chained(set_role=pb.SetRole(member_id=about.id,
                                                              role=pb.ROLE_ADMIN)),
            "demote": lambda: pb.Chained(set_role=pb.SetRole(member_id=about.id,
                                                             role=pb.ROLE_MEMBER)),
            "rekey": lambda: pb.Chained(rekey=pb.Rekey()),
            "share_key": lambda: pb.Chained(share_key=pb.ShareKey(
                share_key=hashlib.sha256(str(len(self.sent)).encode()).digest())),
            "rename": lambda: pb.Chained(rename=pb.Rename(name=f"{author.name}{len(self.sent)}")),
            # another's name exactly: refused (name_taken) or not, by the state it meets
            "rename_taken": lambda: pb.Chained(rename=pb.Rename(name=about.name)),
            "leave": lambda: pb.Chained(leave=pb.Leave()),
        }[kind]()
        content = sign(author, parents, body)
        self.sent.append((author, content))
        take(view, author, content)  # its author's replica has it first
        self.snapshots.append(view.heads)

    @rule(i=st.integers(min_value=0, max_value=10**6), j=st.integers(min_value=0, max_value=5))
    def deliver(self, i: int, j: int) -> None:
        """One event (maybe again) to one replica, unless it is cut off."""
        if j % len(self.replicas) in self.cut_off:
            return
        who, content = self.sent[i % len(self.sent)]
        take(self.replicas[j % len(self.replicas)], who, content)

    @rule(j=st.integers(min_value=0, max_value=5))
    def partition(self, j: int) -> None:
        self.cut_off.add(j % len(self.replicas))

    @precondition(lambda self: bool(self.cut_off))
    @rule()
    def heal(self) -> None:
        self.cut_off.clear()

    @rule()
    def repair_everything_late(self) -> None:
        """Everything to everyone, each in its own random order (late repairs, the store)."""
        self.cut_off.clear()
        for r in self.replicas:
            order = list(self.sent)
            self.rng.shuffle(order)
            for who, content in order:
                take(r, who, content)
        states = {(r.state_hash(), tuple(r.listing()), tuple(map(repr, r.epoch_positions())))
                  for r in self.replicas}  # fmt: skip
        assert len(states) == 1, states

    @invariant()
    def same_events_same_state(self) -> None:
        by_events: dict[frozenset[bytes], bytes] = {}
        for r in self.replicas:
            known = frozenset(r.chain.nodes)
            state = r.state_hash()
            assert by_events.setdefault(known, state) == state

    @invariant()
    def labels_follow_the_state(self) -> None:
        """The look-alike labels a replica keeps as events come are those of its state
        (current and former members' names) made afresh."""
        from app.names import NameBook

        for r in self.replicas:
            st = r.chain.state
            fresh = NameBook([*st.former.items(), *((m, x.name) for m, x in st.members.items())])
            for mid in [*st.members, *st.former]:
                assert r.label_of(mid) == fresh.label(r.name_of(mid), mid)

    def teardown(self) -> None:
        if hasattr(self, "replicas"):
            self.repair_everything_late()


Replicas.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestReplicas = Replicas.TestCase


def test_two_members_that_do_not_converge_both_say_so_and_name_the_event() -> None:
    """Their digests differ (one holds an event the other never gets): within the window
    nothing is said (it may be on its way), after it both sides name the event; once
    they agree again the next difference is reported afresh."""
    from app.members.digest import CONVERGE_MS, DigestWatch

    a, _ = founded()
    b, _ = founded()
    withheld = add(ALICE, a.heads, EVE)
    take(a, ALICE, withheld)
    event = a.outcome(hashlib.sha256(withheld).hexdigest()).event  # type: ignore[union-attr]
    wa, wb = DigestWatch(), DigestWatch()
    da = pb.Control()
    db = pb.Control()
    da.ParseFromString(wa.due(a, 0)[len(CONTROL_MAGIC):])  # type: ignore[index]
    db.ParseFromString(wb.due(b, 0)[len(CONTROL_MAGIC):])  # type: ignore[index]
    assert wa.observe(a, "b", db.digest, 1_000) is None  # not yet: it may be on its way
    assert wb.observe(b, "a", da.digest, 1_000) is None
    seen_by_a = wa.observe(a, "b", db.digest, 1_000 + CONVERGE_MS)
    seen_by_b = wb.observe(b, "a", da.digest, 1_000 + CONVERGE_MS)
    assert seen_by_a is not None and seen_by_a.side == "peer_lacks"
    assert seen_by_b is not None and seen_by_b.side == "we_lack"
    assert seen_by_a.events == seen_by_b.events == (event,)
    assert wa.observe(a, "b", db.digest, 2 * CONVERGE_MS) is None  # said once
    take(b, ALICE, withheld)  # it arrives: the same state, nothing to say
    db.ParseFromString(wb.due(b, 10**7)[len(CONTROL_MAGIC):])  # type: ignore[index]
    assert db.digest.state == da.digest.state
    assert wa.observe(a, "b", db.digest, 10**7) is None


def test_the_same_events_resolved_to_another_state_is_said_at_once() -> None:
    from app.members.digest import DigestWatch

    a, _ = founded()
    watch = DigestWatch()
    forged = pb.StateDigest(heads=a.heads, state=bytes(32))
    found = watch.observe(a, "peer", forged, 0)
    assert found is not None and found.side == "other_state" and found.events == tuple(a.heads)
