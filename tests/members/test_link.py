"""Linking a device with one short code (app/members/link.py), tested as an attacker on
the relay would test it: it records every frame, changes, replays and injects frames,
and answers the code first with a guess of its own."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from app.members.devices import PersonLog, decode_entry, make_genesis, new_recovery
from app.members.link import (
    LINK_TTL_MS,
    LinkCode,
    LinkError,
    LinkJoin,
    LinkOffer,
    LinkState,
    link_topic,
    new_link_code,
    parse_link_code,
)
from net.identity import Identity

NOW = 1_000_000


def _bob() -> tuple[Identity, PersonLog]:
    root = Identity.generate()
    recovery, _words = new_recovery()
    log = PersonLog(root.public_key)
    e = decode_entry(make_genesis(root, recovery.public_key, "desktop"))
    assert not isinstance(e, str)
    log.take(e)
    return root, log


Tamper = Callable[[int, bytes], bytes | None]
"""(sender role, frame) -> the frame the relay delivers (None: dropped)."""


def _run(offer: LinkOffer, join: LinkJoin, tamper: Tamper | None = None,
         now: int = NOW) -> list[bytes]:  # fmt: skip
    """Every frame goes to the topic, and the topic to both sides (echoes included),
    as a relay does; returns what the relay recorded."""
    recorded: list[bytes] = []
    queue = [(1, f) for f in offer.start()] + [(2, f) for f in join.start()]
    for _ in range(100):  # bounded: a link is a few frames
        if not queue:
            break
        role, frame = queue.pop(0)
        delivered = tamper(role, frame) if tamper is not None else frame
        if delivered is None:
            continue
        recorded.append(delivered)
        queue += [(1, f) for f in offer.receive(delivered, now)]
        queue += [(2, f) for f in join.receive(delivered, now)]
    return recorded


def test_a_code_links_a_device_that_every_copy_of_the_log_then_holds() -> None:
    root, log = _bob()
    laptop = Identity.generate()
    code = new_link_code()
    offer = LinkOffer(code, root, log, b"channels and sessions", NOW)
    join = LinkJoin(parse_link_code(str(code)), laptop, "laptop", NOW)
    recorded = _run(offer, join)
    assert offer.state is LinkState.DONE and join.state is LinkState.DONE
    assert offer.sas is not None and offer.sas == join.sas
    assert join.payload == b"channels and sessions"
    assert join.add is not None and offer.add == join.add
    assert offer.new_device == laptop.public_key and offer.new_name == "laptop"
    assert join.log is not None and join.log.is_device(laptop.public_key)
    added = decode_entry(join.add)
    assert not isinstance(added, str)
    log.take(added)  # the old device keeps it too
    assert {d.name for d in log.devices()} == {"desktop", "laptop"}
    # what the relay recorded never holds the password, nor the payload in clear
    blob = b"".join(recorded)
    for word in code.password.split("-"):
        assert word.encode() not in blob
    assert b"channels and sessions" not in blob


def test_a_wrong_code_gets_one_try_and_spends_the_code() -> None:
    root, log = _bob()
    code = new_link_code()
    offer = LinkOffer(code, root, log, b"secret", NOW)
    other = new_link_code()
    wrong = LinkCode(code.nameplate, other.password if other.password != code.password
                     else "abandon-ability")  # fmt: skip
    guess = LinkJoin(wrong, Identity.generate(), "laptop", NOW)
    _run(offer, guess)
    assert offer.state is LinkState.FAILED and offer.error == "wrong_code"
    assert guess.state is LinkState.FAILED
    assert offer.add is None and guess.add is None and guess.payload == b""
    # the right code now: the offer answers nothing more (one try per code)
    right = LinkJoin(code, Identity.generate(), "laptop", NOW)
    _run(offer, right)
    assert right.state is not LinkState.DONE and offer.add is None


def test_a_relay_that_changes_a_spake2_message_is_found_before_anything_is_sent() -> None:
    root, log = _bob()
    code = new_link_code()
    offer = LinkOffer(code, root, log, b"secret", NOW)
    join = LinkJoin(code, Identity.generate(), "laptop", NOW)

    def flip_pake(role: int, frame: bytes) -> bytes:
        from app.members import link_pb2 as pb

        f = pb.LinkFrame.FromString(frame)
        if f.WhichOneof("body") == "pake" and role == 2:
            raw = bytearray(f.pake)
            raw[-1] ^= 1
            f.pake = bytes(raw)
        return f.SerializeToString()

    recorded = _run(offer, join, flip_pake)
    assert offer.state is LinkState.FAILED and join.state is LinkState.FAILED
    assert offer.error in ("wrong_code", "protocol")  # a point off the curve: protocol
    assert join.error in ("wrong_code", "protocol", f"aborted: {offer.error}")
    assert offer.add is None and join.add is None
    assert b"secret" not in b"".join(recorded)


@pytest.mark.parametrize("attack", ["flip_box", "replay", "drop_offer"])
def test_sealed_steps_changed_replayed_or_dropped_end_the_link_with_nothing_kept(
        attack: str) -> None:  # fmt: skip
    from app.members import link_pb2 as pb

    root, log = _bob()
    code = new_link_code()
    offer = LinkOffer(code, root, log, b"secret", NOW)
    join = LinkJoin(code, Identity.generate(), "laptop", NOW)
    seen: list[bytes] = []

    def relay(role: int, frame: bytes) -> bytes | None:
        f = pb.LinkFrame.FromString(frame)
        if f.WhichOneof("body") != "sealed":
            return frame
        if attack == "flip_box" and role == 2:
            box = bytearray(f.sealed.box)
            box[0] ^= 1
            f.sealed.box = bytes(box)
            return f.SerializeToString()
        if attack == "replay" and role == 1 and seen:
            return seen[0]  # the offer again in place of the handover
        if attack == "drop_offer" and role == 1 and not seen:
            seen.append(frame)
            return None
        seen.append(frame)
        return frame

    _run(offer, join, relay)
    assert offer.add is None
    assert join.state is not LinkState.DONE and join.add is None


def test_a_second_party_answering_the_code_stops_the_link_for_both() -> None:
    root, log = _bob()
    code = new_link_code()
    offer = LinkOffer(code, root, log, b"secret", NOW)
    mallory = LinkJoin(LinkCode(code.nameplate, "abandon-ability"), Identity.generate(), "m",
                       NOW)  # fmt: skip
    join = LinkJoin(code, Identity.generate(), "laptop", NOW)
    # both answers reach the offer before it confirms either
    (first,) = mallory.start()
    (second,) = join.start()
    offer.start()
    offer.receive(first, NOW)
    offer.receive(second, NOW)
    assert offer.state is LinkState.FAILED and offer.error == "two_answers"
    assert offer.add is None


def test_an_expired_code_links_nothing() -> None:
    root, log = _bob()
    code = new_link_code()
    offer = LinkOffer(code, root, log, b"secret", NOW)
    join = LinkJoin(code, Identity.generate(), "laptop", NOW + LINK_TTL_MS)
    _run(offer, join, now=NOW + LINK_TTL_MS + 1)
    assert offer.state is LinkState.FAILED and offer.error == "expired"
    assert offer.add is None and join.add is None


def test_an_interrupted_link_leaves_the_old_device_as_it_was() -> None:
    """The new device's ``done`` never arrives: the old device keeps no add (the new
    device holds it, signed, and publishes it itself)."""
    from app.members import link_pb2 as pb

    root, log = _bob()
    code = new_link_code()
    offer = LinkOffer(code, root, log, b"secret", NOW)
    join = LinkJoin(code, Identity.generate(), "laptop", NOW)

    def drop_done(role: int, frame: bytes) -> bytes | None:
        f = pb.LinkFrame.FromString(frame)
        return None if role == 2 and f.WhichOneof("body") == "sealed" and f.sealed.counter == 1 \
            else frame

    _run(offer, join, drop_done)
    assert join.state is LinkState.DONE and join.add is not None
    assert offer.state is LinkState.SEALED and offer.add is None
    assert [d.name for d in log.devices()] == ["desktop"]


def test_only_a_current_device_offers_a_link() -> None:
    _root, log = _bob()
    with pytest.raises(LinkError, match="not one of the person's current devices"):
        LinkOffer(new_link_code(), Identity.generate(), log, b"", NOW)


def test_link_codes_are_typed_forgivingly_and_refused_clearly() -> None:
    code = new_link_code()
    assert len(str(code).split("-")) == 3 and code.nameplate.isdigit()
    assert parse_link_code(f"  {str(code).upper().replace('-', ' ')} ") == code
    with pytest.raises(LinkError, match="4 digits and two words, like 4821-tiger-river"):
        parse_link_code("hello")
    with pytest.raises(LinkError, match="not a link code word: 'zzzz'"):
        parse_link_code("1234-abandon-zzzz")
    assert link_topic("1234") != link_topic("1235") and len(link_topic("1234")) == 16
    assert len({str(new_link_code()) for _ in range(50)}) == 50
