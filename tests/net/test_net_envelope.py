"""Envelopes: round trip, every rejection reason, and no exception but EnvelopeError."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Callable

import pytest
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from net_helpers import channel, sds_message

from net import envelope_pb2
from net.channel_key import ChannelKey
from net.envelope import (
    AAD_DOMAIN,
    ENVELOPE_VERSION,
    MAX_CARRIED,
    MAX_ENVELOPE_BYTES,
    REJECTION_REASONS,
    SIGNATURE_DOMAIN,
    BadSignature,
    EnvelopeError,
    MalformedEnvelope,
    OversizedEnvelope,
    ReplayedEnvelope,
    ReplayGuard,
    SenderMismatch,
    UnsupportedVersion,
    WrongKeyOrTampered,
    WrongTopic,
    envelope_hash,
    open_envelope,
    open_for_topic,
    peek_topic,
    seal,
    without_carried,
)
from net.envelope import open as open_alias
from net.identity import Identity
from sds import sds_pb2

ALICE = Identity.generate()
MALLORY = Identity.generate()
KEY = channel("general", "secret")
OTHER_KEY = channel("general", "wrong")


def forge(
    payload: envelope_pb2.SealedPayload | bytes,
    key: ChannelKey = KEY,
    *,
    version: int = ENVELOPE_VERSION,
    topic: bytes | None = None,
) -> bytes:
    """Encrypt an arbitrary payload exactly as seal() would (what a key holder can do)."""
    topic = key.topic if topic is None else topic
    plaintext = payload if isinstance(payload, bytes) else payload.SerializeToString()
    nonce = os.urandom(12)
    aad = AAD_DOMAIN + version.to_bytes(4, "big") + topic
    ciphertext = ChaCha20Poly1305(key.key).encrypt(nonce, plaintext, aad)
    return envelope_pb2.Envelope(
        version=version, topic=topic, nonce=nonce, ciphertext=ciphertext
    ).SerializeToString()


def v2_signed(topic: bytes, sds: bytes) -> bytes:
    """The version 2 signed message, written out here to pin the format."""
    return b"sdschat-v2" + topic + hashlib.sha256(sds).digest()


def v1_signed(topic: bytes, sds: bytes) -> bytes:
    """What version 1 signed: the whole SDS bytes."""
    return b"sdschat-v1" + topic + sds


def signed_payload(
    sds: bytes,
    signer: Identity,
    claimed: Identity | None = None,
    topic: bytes = KEY.topic,
    *,
    scheme: Callable[[bytes, bytes], bytes] = v2_signed,
) -> envelope_pb2.SealedPayload:
    return envelope_pb2.SealedPayload(
        sds=sds,
        sender_public_key=(claimed or signer).public_key,
        signature=signer.sign(scheme(topic, sds)),
    )


def test_format_is_version_2_signing_a_digest() -> None:
    assert ENVELOPE_VERSION == 2
    assert SIGNATURE_DOMAIN == b"sdschat-v2"
    sds = sds_message(ALICE, b"pinned")
    env = envelope_pb2.Envelope.FromString(seal(sds, ALICE, KEY))
    assert env.version == 2
    aad = AAD_DOMAIN + (2).to_bytes(4, "big") + KEY.topic
    payload = envelope_pb2.SealedPayload.FromString(
        ChaCha20Poly1305(KEY.key).decrypt(env.nonce, env.ciphertext, aad)
    )
    assert payload.sds == sds
    assert payload.sender_public_key == ALICE.public_key
    public = Ed25519PublicKey.from_public_bytes(ALICE.public_key)
    public.verify(payload.signature, v2_signed(KEY.topic, sds))  # raises if not
    with pytest.raises(InvalidSignature):
        public.verify(payload.signature, v1_signed(KEY.topic, sds))
    # an envelope built by hand to the documented format opens
    assert open_envelope(forge(signed_payload(sds, ALICE)), KEY).sds_bytes == sds


def test_round_trip() -> None:
    sds = sds_message(ALICE, b"hi there")
    env = seal(sds, ALICE, KEY)
    opened = open_envelope(env, KEY, KEY.topic)
    assert opened.sds_bytes == sds
    # the SDS message decoded to check its sender_id, for the caller to reuse
    assert opened.sds_message == sds_pb2.SdsMessage.FromString(sds)
    # nothing decoded when the caller passes the sender_id it decoded itself
    assert open_envelope(env, KEY, sds_sender_id=ALICE.sender_id).sds_message is None
    assert opened.sender_public_key == ALICE.public_key
    assert opened.sender_id == ALICE.sender_id
    assert opened.envelope_hash == hashlib.sha256(env).digest() == envelope_hash(env)
    assert opened.topic == KEY.topic == peek_topic(env)
    # the alias with the design's name, and raw-key input, behave the same
    assert open_alias(env, KEY.key).sds_bytes == sds
    # fresh nonce each time: sealing twice gives different envelopes (and hashes)
    assert seal(sds, ALICE, KEY) != env


def test_carried_envelopes_travel_unopened_and_open_on_their_own() -> None:
    bob = Identity.generate()
    first = seal(sds_message(bob, b"first"), bob, KEY)
    second = seal(sds_message(MALLORY, b"second"), MALLORY, KEY)
    env = seal(sds_message(ALICE, b"third"), ALICE, KEY, carried=[first, second])
    opened = open_envelope(env, KEY)
    # byte for byte as their authors sealed them: the same hashes (retrieval hints)
    assert opened.carried == (first, second)
    assert [open_envelope(c, KEY).sender_id for c in opened.carried] == [
        bob.sender_id,
        MALLORY.sender_id,
    ]
    # the carrier's own message and signature are unchanged by what it carries
    assert opened.sds_bytes == sds_message(ALICE, b"third")
    assert open_envelope(seal(sds_message(ALICE), ALICE, KEY), KEY).carried == ()
    # an older reader's SealedPayload (fields 1-3) reads the carrier's message alone
    aad = AAD_DOMAIN + (2).to_bytes(4, "big") + KEY.topic
    raw = envelope_pb2.Envelope.FromString(env)
    plain = ChaCha20Poly1305(KEY.key).decrypt(raw.nonce, raw.ciphertext, aad)
    assert envelope_pb2.SealedPayload.FromString(plain).sds == opened.sds_bytes


def test_more_carried_envelopes_than_allowed_are_refused() -> None:
    one = seal(sds_message(MALLORY), MALLORY, KEY)
    with pytest.raises(ValueError, match="at most 8"):
        seal(sds_message(ALICE), ALICE, KEY, carried=[one] * (MAX_CARRIED + 1))
    payload = signed_payload(sds_message(ALICE), ALICE)
    payload.carried.extend([one] * (MAX_CARRIED + 1))
    with pytest.raises(MalformedEnvelope, match="carries 9 envelopes, at most 8"):
        open_envelope(forge(payload), KEY)
    del payload.carried[MAX_CARRIED:]
    assert len(open_envelope(forge(payload), KEY).carried) == MAX_CARRIED


def test_without_carried_strips_what_an_envelope_carries_and_keeps_the_author() -> None:
    inner = seal(sds_message(MALLORY, b"inner"), MALLORY, KEY)
    sds = sds_message(ALICE, b"carrier")
    carrying = seal(sds, ALICE, KEY, carried=[inner])
    bare = without_carried(carrying, [OTHER_KEY, KEY])  # the key that opens it
    opened = open_envelope(bare, KEY)
    assert opened.carried == ()
    assert (opened.sds_bytes, opened.sender_id) == (sds, ALICE.sender_id)
    assert envelope_hash(bare) != envelope_hash(carrying)  # a new envelope
    plain = seal(sds, ALICE, KEY)
    assert without_carried(plain, [KEY]) is plain  # nothing to strip: the same bytes
    with pytest.raises(WrongKeyOrTampered):
        without_carried(carrying, [OTHER_KEY])
    with pytest.raises(MalformedEnvelope):
        without_carried(b"\x00garbage", [KEY])


def test_default_size_message_fits_and_is_small_overhead() -> None:
    sds = sds_message(ALICE, os.urandom(40_000))
    env = seal(sds, ALICE, KEY)
    assert len(env) - len(sds) < 200
    assert open_envelope(env, KEY).sds_bytes == sds


def test_wrong_key() -> None:
    env = seal(sds_message(ALICE), ALICE, KEY)
    with pytest.raises(WrongKeyOrTampered) as info:
        open_envelope(env, OTHER_KEY, KEY.topic)
    assert info.value.reason == "wrong_key_or_tampered"


def test_wrong_topic() -> None:
    env = seal(sds_message(ALICE), ALICE, KEY)
    with pytest.raises(WrongTopic) as info:
        open_envelope(env, OTHER_KEY)  # OTHER_KEY's own topic differs
    assert info.value.reason == "wrong_topic"
    with pytest.raises(WrongTopic):
        open_envelope(env, KEY, bytes(16))


def test_every_single_byte_change_is_rejected() -> None:
    env = seal(sds_message(ALICE, b"short"), ALICE, KEY)
    reasons: set[str] = set()
    for i in range(len(env)):
        for mask in (0x01, 0x80, 0xFF):
            tampered = bytearray(env)
            tampered[i] ^= mask
            with pytest.raises(EnvelopeError) as info:
                open_envelope(bytes(tampered), KEY)
            reasons.add(info.value.reason)
    assert "wrong_key_or_tampered" in reasons
    assert reasons <= {"malformed", "unsupported_version", "wrong_topic", "wrong_key_or_tampered"}


@pytest.mark.parametrize("where", ["nonce", "ciphertext_start", "ciphertext_mid", "tag"])
def test_tampered_fields(where: str) -> None:
    env = envelope_pb2.Envelope.FromString(seal(sds_message(ALICE, b"x" * 100), ALICE, KEY))
    if where == "nonce":
        env.nonce = bytes([env.nonce[0] ^ 1]) + env.nonce[1:]
    else:
        ct = bytearray(env.ciphertext)
        pos = {"ciphertext_start": 0, "ciphertext_mid": len(ct) // 2, "tag": len(ct) - 1}[where]
        ct[pos] ^= 0x10
        env.ciphertext = bytes(ct)
    with pytest.raises(WrongKeyOrTampered):
        open_envelope(env.SerializeToString(), KEY)


def test_truncated_and_extended() -> None:
    env = seal(sds_message(ALICE), ALICE, KEY)
    for cut in (1, 5, 16, len(env) // 2, len(env) - 1):
        with pytest.raises(EnvelopeError):
            open_envelope(env[:cut], KEY)
    with pytest.raises(EnvelopeError):
        open_envelope(env + b"\x00", KEY)


@pytest.mark.parametrize(
    "suffix",
    [b"\x28\x01", b"\x08\x01", b"\x12\x00", b"\x3a\x02hi"],
    ids=["unknown_varint", "repeated_version", "repeated_topic", "unknown_bytes"],
)
def test_non_canonical_encodings_are_malformed(suffix: bytes) -> None:
    env = seal(sds_message(ALICE), ALICE, KEY)
    with pytest.raises(MalformedEnvelope):
        open_envelope(env + suffix, KEY)
    # fields out of order
    parsed = envelope_pb2.Envelope.FromString(env)
    reordered = (
        envelope_pb2.Envelope(topic=parsed.topic).SerializeToString()
        + envelope_pb2.Envelope(version=parsed.version).SerializeToString()
        + envelope_pb2.Envelope(nonce=parsed.nonce).SerializeToString()
        + envelope_pb2.Envelope(ciphertext=parsed.ciphertext).SerializeToString()
    )
    assert envelope_pb2.Envelope.FromString(reordered) == parsed
    with pytest.raises(MalformedEnvelope):
        open_envelope(reordered, KEY)


def test_bad_signature() -> None:
    sds = sds_message(ALICE)
    # signed by Mallory but claiming Alice's key
    with pytest.raises(BadSignature) as info:
        open_envelope(forge(signed_payload(sds, MALLORY, claimed=ALICE)), KEY)
    assert info.value.reason == "bad_signature"
    # Alice's real signature, over another channel's topic (cross-channel replay)
    with pytest.raises(BadSignature):
        open_envelope(forge(signed_payload(sds, ALICE, topic=OTHER_KEY.topic)), KEY)
    # a signature over different SDS bytes
    payload = signed_payload(sds, ALICE)
    payload.sds = sds_message(ALICE, b"changed")
    with pytest.raises(BadSignature):
        open_envelope(forge(payload), KEY)
    # a truncated signature
    payload = signed_payload(sds, ALICE)
    payload.signature = payload.signature[:63]
    with pytest.raises(BadSignature):
        open_envelope(forge(payload), KEY)


def test_sender_id_forged() -> None:
    # Mallory signs correctly with her own key but claims Alice's SDS sender_id
    forged = sds_message(MALLORY, sender_id=ALICE.sender_id)
    env = seal(forged, MALLORY, KEY)
    with pytest.raises(SenderMismatch) as info:
        open_envelope(env, KEY)
    assert info.value.reason == "sender_mismatch"
    # the caller may pass the SDS sender_id it decoded itself
    honest = seal(sds_message(MALLORY), MALLORY, KEY)
    with pytest.raises(SenderMismatch):
        open_envelope(honest, KEY, sds_sender_id=ALICE.sender_id)
    assert open_envelope(honest, KEY, sds_sender_id=MALLORY.sender_id).sender_id == (
        MALLORY.sender_id
    )


def test_oversized() -> None:
    with pytest.raises(OversizedEnvelope) as info:
        open_envelope(b"\x00" * (MAX_ENVELOPE_BYTES + 1), KEY)
    assert info.value.reason == "oversized"
    with pytest.raises(OversizedEnvelope):
        peek_topic(b"\x00" * (MAX_ENVELOPE_BYTES + 1))
    with pytest.raises(OversizedEnvelope):
        seal(sds_message(ALICE, bytes(MAX_ENVELOPE_BYTES)), ALICE, KEY)


@pytest.mark.parametrize(
    # random bytes, the same at every collection (pytest-xdist workers compare their lists)
    "garbage",
    [b"", b"\xff", b"\xff\xff\xff\xff", b"\x0a\xff\xff\xff\x0f", random.Random(64).randbytes(64)],
)
def test_malformed_garbage(garbage: bytes) -> None:
    with pytest.raises(EnvelopeError) as info:
        open_envelope(garbage, KEY)
    assert info.value.reason in {"malformed", "unsupported_version", "wrong_topic"}


def test_malformed_inside_valid_encryption() -> None:
    # decryptable but not a SealedPayload
    with pytest.raises(MalformedEnvelope):
        open_envelope(forge(b"\xff\xff\xff"), KEY)
    # public key of the wrong length
    payload = signed_payload(sds_message(ALICE), ALICE)
    payload.sender_public_key = payload.sender_public_key[:31]
    with pytest.raises(MalformedEnvelope):
        open_envelope(forge(payload), KEY)
    # properly signed bytes that are not an SDS message
    with pytest.raises(MalformedEnvelope):
        open_envelope(forge(signed_payload(b"\xff\xff\xff", ALICE)), KEY)
    # bad nonce length
    env = envelope_pb2.Envelope.FromString(seal(sds_message(ALICE), ALICE, KEY))
    env.nonce = env.nonce[:8]
    with pytest.raises(MalformedEnvelope):
        open_envelope(env.SerializeToString(), KEY)


def test_unsupported_version() -> None:
    env = forge(signed_payload(sds_message(ALICE), ALICE), version=3)
    with pytest.raises(UnsupportedVersion) as info:
        open_envelope(env, KEY)
    assert info.value.reason == "unsupported_version"


@pytest.mark.parametrize("scheme", [v1_signed, v2_signed], ids=["v1_signature", "v2_signature"])
def test_version_1_envelopes_are_unsupported(scheme: Callable[[bytes, bytes], bytes]) -> None:
    # a well-formed version 1 envelope (as the retired code sealed it), and one
    # with version 1 but the new signature: both refused before decryption
    env = forge(signed_payload(sds_message(ALICE), ALICE, scheme=scheme), version=1)
    with pytest.raises(UnsupportedVersion) as info:
        open_envelope(env, KEY)
    assert info.value.reason == "unsupported_version"
    # relabelling a version 2 envelope as version 1 is caught too (version is in the AAD)
    parsed = envelope_pb2.Envelope.FromString(seal(sds_message(ALICE), ALICE, KEY))
    parsed.version = 1
    with pytest.raises(UnsupportedVersion):
        open_envelope(parsed.SerializeToString(), KEY)


def test_version_is_authenticated() -> None:
    # a version 2 envelope whose AAD said another version does not authenticate
    payload = signed_payload(sds_message(ALICE), ALICE)
    nonce = os.urandom(12)
    aad = AAD_DOMAIN + (1).to_bytes(4, "big") + KEY.topic
    ct = ChaCha20Poly1305(KEY.key).encrypt(nonce, payload.SerializeToString(), aad)
    env = envelope_pb2.Envelope(version=2, topic=KEY.topic, nonce=nonce, ciphertext=ct)
    with pytest.raises(WrongKeyOrTampered):
        open_envelope(env.SerializeToString(), KEY)


def test_old_scheme_signature_is_bad() -> None:
    sds = sds_message(ALICE)
    # signed over the full bytes (version 1's scheme) inside a version 2 envelope
    with pytest.raises(BadSignature) as info:
        open_envelope(forge(signed_payload(sds, ALICE, scheme=v1_signed)), KEY)
    assert info.value.reason == "bad_signature"
    # the digest under version 1's domain
    old_domain = envelope_pb2.SealedPayload(
        sds=sds,
        sender_public_key=ALICE.public_key,
        signature=ALICE.sign(b"sdschat-v1" + KEY.topic + hashlib.sha256(sds).digest()),
    )
    with pytest.raises(BadSignature):
        open_envelope(forge(old_domain), KEY)
    # the digest alone, without domain and topic
    bare = envelope_pb2.SealedPayload(
        sds=sds,
        sender_public_key=ALICE.public_key,
        signature=ALICE.sign(hashlib.sha256(sds).digest()),
    )
    with pytest.raises(BadSignature):
        open_envelope(forge(bare), KEY)


def test_sds_tampered_after_signing() -> None:
    sds = sds_message(ALICE, b"pay bob 10")
    env = seal(sds, ALICE, KEY)
    parsed = envelope_pb2.Envelope.FromString(env)
    aad = AAD_DOMAIN + ENVELOPE_VERSION.to_bytes(4, "big") + KEY.topic
    plaintext = ChaCha20Poly1305(KEY.key).decrypt(parsed.nonce, parsed.ciphertext, aad)
    payload = envelope_pb2.SealedPayload.FromString(plaintext)
    at = payload.sds.index(b"pay bob 10") + len(b"pay bob ")
    # flipping SDS bytes inside the ciphertext: the AEAD catches it first
    offset = plaintext.index(payload.sds) + at
    ct = bytearray(parsed.ciphertext)
    ct[offset] ^= ord("1") ^ ord("9")
    parsed.ciphertext = bytes(ct)
    with pytest.raises(WrongKeyOrTampered):
        open_envelope(parsed.SerializeToString(), KEY)
    # a key holder re-encrypting the modified SDS bytes with the original
    # signature: the signature check catches it
    changed = bytearray(payload.sds)
    changed[at] = ord("9")
    assert len(changed) == len(sds) and bytes(changed) != sds
    payload.sds = bytes(changed)
    with pytest.raises(BadSignature) as info:
        open_envelope(forge(payload), KEY)
    assert info.value.reason == "bad_signature"
    # ... and the untouched payload re-encrypted still opens (only the SDS changed)
    payload.sds = sds
    assert open_envelope(forge(payload), KEY).sds_bytes == sds


def test_a_bad_raw_key_is_a_caller_error() -> None:
    env = seal(sds_message(ALICE), ALICE, KEY)
    with pytest.raises(ValueError):
        open_envelope(env, b"short")
    with pytest.raises(ValueError):
        seal(sds_message(ALICE), ALICE, b"short")


def test_reasons_are_stable() -> None:
    assert set(REJECTION_REASONS) == {
        "oversized",
        "malformed",
        "unsupported_version",
        "wrong_topic",
        "wrong_key_or_tampered",
        "bad_signature",
        "sender_mismatch",
        "replayed",
    }


def test_replay_guard_detects_and_is_bounded() -> None:
    guard = ReplayGuard(capacity=3)
    env = seal(sds_message(ALICE), ALICE, KEY)
    digest = open_envelope(env, KEY).envelope_hash
    guard.check(digest)
    with pytest.raises(ReplayedEnvelope) as info:
        guard.check(digest)
    assert info.value.reason == "replayed"
    for i in range(10):
        assert guard.check_and_remember(bytes([i]) * 32)
        assert len(guard) <= 3
    assert digest not in guard  # evicted: least recently seen first
    # a hit refreshes recency
    guard = ReplayGuard(capacity=2)
    guard.remember(b"a")
    guard.remember(b"b")
    assert not guard.check_and_remember(b"a")
    guard.remember(b"c")
    assert b"a" in guard and b"b" not in guard
    assert ReplayGuard.DEFAULT_CAPACITY == 16_384
    with pytest.raises(ValueError):
        ReplayGuard(0)


VALID = seal(sds_message(ALICE, b"fuzz me"), ALICE, KEY)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.binary(max_size=2048))
def test_arbitrary_bytes_raise_only_envelope_error(data: bytes) -> None:
    try:
        open_envelope(data, KEY)
    except EnvelopeError as exc:
        assert exc.reason in REJECTION_REASONS
    else:
        raise AssertionError("random bytes opened as a valid envelope")


@settings(max_examples=300, deadline=None)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 255)), min_size=1, max_size=8
    ),
    cut=st.integers(0, 16),
    extra=st.binary(max_size=16),
)
def test_mutated_envelopes_raise_only_envelope_error(
    edits: list[tuple[int, int]], cut: int, extra: bytes
) -> None:
    data = bytearray(VALID)
    for pos, xor in edits:
        data[pos] ^= xor
    mutated = bytes(data[: len(data) - cut]) + extra
    if mutated == VALID:
        return
    with pytest.raises(EnvelopeError):
        open_envelope(mutated, KEY)


def peek_then_open(data: bytes, keys: dict[bytes, ChannelKey]) -> object:
    """What a node did before open_for_topic: peek the topic, pick the key, open."""
    try:
        topic = peek_topic(data)
        if topic not in keys:
            raise WrongTopic("not joined")
        return open_envelope(data, keys[topic], topic)
    except EnvelopeError as exc:
        return exc.reason


def open_by_topic(data: bytes, keys: dict[bytes, ChannelKey]) -> object:
    try:
        return open_for_topic(data, keys.get)
    except EnvelopeError as exc:
        return exc.reason


def same_outcome(data: bytes, keys: dict[bytes, ChannelKey]) -> object:
    a, b = peek_then_open(data, keys), open_by_topic(data, keys)
    if isinstance(a, str) or isinstance(b, str):
        assert a == b
    else:
        assert (a.sds_bytes, a.sender_id, a.envelope_hash, a.topic) == (  # type: ignore[attr-defined]
            b.sds_bytes,  # type: ignore[attr-defined]
            b.sender_id,  # type: ignore[attr-defined]
            b.envelope_hash,  # type: ignore[attr-defined]
            b.topic,  # type: ignore[attr-defined]
        )
        assert b.sds_message is not None  # type: ignore[attr-defined]
    return b


def test_open_for_topic_picks_the_key_by_topic_and_refuses_like_open_envelope() -> None:
    other = channel("random", "secret")
    keys = {KEY.topic: KEY, other.topic: other}
    in_other = seal(sds_message(ALICE, b"in random"), ALICE, other)
    opened = same_outcome(in_other, keys)
    assert not isinstance(opened, str) and opened.topic == other.topic  # type: ignore[attr-defined]
    assert same_outcome(VALID, {other.topic: other}) == "wrong_topic"
    # a key for the right topic that is not the channel's key: refused, not opened
    wrong = ChannelKey(channel="general", key=OTHER_KEY.key, topic=KEY.topic, is_public=False)
    assert same_outcome(VALID, {KEY.topic: wrong}) == "wrong_key_or_tampered"
    assert same_outcome(b"\x00" * 40, keys) == "malformed"
    assert same_outcome(b"\x00" * (MAX_ENVELOPE_BYTES + 1), keys) == "oversized"
    assert same_outcome(VALID + b"\x28\x01", keys) == "malformed"  # non-canonical


@settings(max_examples=200, deadline=None)
@given(
    edits=st.lists(
        st.tuples(st.integers(0, len(VALID) - 1), st.integers(1, 255)), min_size=0, max_size=6
    ),
    cut=st.integers(0, 8),
)
# an unknown varint field (the version's tag turned into field 3) and another topic:
# peek then open says wrong_topic; open_for_topic said malformed (canonical check first)
@example(edits=[(0, 16), (4, 1)], cut=0)
def test_open_for_topic_is_peek_then_open(edits: list[tuple[int, int]], cut: int) -> None:
    data = bytearray(VALID)
    for pos, xor in edits:
        data[pos] ^= xor
    same_outcome(bytes(data[: len(data) - cut]), {KEY.topic: KEY})
