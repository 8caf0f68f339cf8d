"""Wire codec: the proto3 schema of PROTOCOL.md, decoding garbage, message kinds."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import sds
from sds import sds_pb2
from sds.message import MessageKind, classify

U64_MAX = 2**64 - 1


def full_message(lamport: int = 12345) -> sds.Message:
    return sds.Message(
        sender_id="alice",
        message_id="ab" * 32,
        channel_id="room-1",
        lamport_timestamp=lamport,
        causal_history=(
            sds.HistoryEntry("m1", b"\x00hint1", "bob"),
            sds.HistoryEntry("m2", None, None),
            sds.HistoryEntry("m3", b"", "carol"),
        ),
        bloom_filter=b"\x01\x02\x03" * 7,
        content=b"hello \xff world",
        repair_request=(sds.HistoryEntry("m9", b"h9", "dave"),),
    )


def test_round_trip_every_field() -> None:
    """PROTOCOL.md "Message schema": every field (history entries with hints and SDS-R
    sender_id, filter, repair_request, content) survives encode/decode."""
    m = full_message()
    assert sds.decode(sds.encode(m)) == m


@pytest.mark.parametrize("lamport", [0, 1, 2**31 - 1, 2**31, 2**32, 2**63, U64_MAX - 1, U64_MAX])
def test_lamport_is_uint64(lamport: int) -> None:
    """PROTOCOL.md "Message schema": lamport_timestamp is uint64, NOT int32: values past
    2**31 up to 2**64-1 (millisecond clocks) round-trip."""
    m = full_message(lamport)
    assert sds.decode(sds.encode(m)).lamport_timestamp == lamport


@pytest.mark.parametrize("lamport", [-1, 2**64])
def test_lamport_out_of_uint64_range_refused(lamport: int) -> None:
    """PROTOCOL.md "Message schema": a Lamport value that does not fit uint64 cannot be
    encoded."""
    with pytest.raises(ValueError):
        sds.encode(full_message(lamport))


def test_field_numbers_match_schema() -> None:
    """PROTOCOL.md "Message schema": field numbers 1,2,3,10,11,12,13,20 (HistoryEntry
    1,2,3), checked against a hand-encoded protobuf."""

    def key(field: int, wire: int) -> bytes:
        return bytes([field << 3 | wire]) if field < 16 else bytes([(field << 3 | wire) | 0x80, 1])

    def ld(field: int, payload: bytes) -> bytes:
        return key(field, 2) + bytes([len(payload)]) + payload

    entry = ld(1, b"m1") + ld(2, b"h") + ld(3, b"bob")
    raw = (
        ld(1, b"s")
        + ld(2, b"id")
        + ld(3, b"c")
        + key(10, 0)
        + bytes([7])
        + ld(11, entry)
        + ld(12, b"\xaa")
        + ld(13, ld(1, b"r"))
        + key(20, 2)
        + b"\x02hi"
    )
    m = sds.decode(raw)
    assert m == sds.Message(
        "s",
        "id",
        "c",
        7,
        (sds.HistoryEntry("m1", b"h", "bob"),),
        b"\xaa",
        b"hi",
        (sds.HistoryEntry("r"),),
    )
    assert sds.encode(m) == raw


def test_unset_optionals_are_none() -> None:
    """Issue 2 "Keep these public names": unset optional fields decode as None (not
    0 / b""), empty repeated fields as ()."""
    m = sds.decode(sds.encode(sds.Message("s", "id", "c")))
    assert m.lamport_timestamp is None
    assert m.bloom_filter is None
    assert m.content is None
    assert m.causal_history == ()
    assert m.repair_request == ()
    e = sds.decode(sds.encode(sds.Message("s", "id", "c", 1, (sds.HistoryEntry("x"),))))
    assert e.causal_history[0].retrieval_hint is None
    assert e.causal_history[0].sender_id is None


def test_set_but_zero_optionals_are_kept() -> None:
    """PROTOCOL.md "Message schema": optional fields have presence: lamport 0 and empty
    content/filter are set, distinct from unset."""
    m = sds.decode(sds.encode(sds.Message("s", "id", "c", 0, (), b"", b"")))
    assert m.lamport_timestamp == 0
    assert m.bloom_filter == b""
    assert m.content == b""


GARBAGE = [
    b"\xff",
    b"\x0a\x05ab",  # truncated length-delimited field
    b"\x0a\x01\xff",  # invalid UTF-8 in sender_id
    b"\x08",  # field 1 as varint: wrong wire type for a string
    b"\x50\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff",  # overlong varint
    b"\x5a\x03\x0a\x01",  # truncated nested HistoryEntry
]


@pytest.mark.parametrize("data", GARBAGE)
def test_decode_garbage_raises_decode_error(data: bytes) -> None:
    """Issue 2: sds.decode raises sds.DecodeError on garbage, never anything else."""
    with pytest.raises(sds.DecodeError) as info:
        sds.decode(data)
    assert info.value.reason == "malformed"
    assert isinstance(info.value, ValueError)


def test_decode_non_bytes_raises_decode_error() -> None:
    """Issue 2: decode raises only DecodeError, even for a non-bytes argument."""
    with pytest.raises(sds.DecodeError):
        sds.decode("not bytes")  # type: ignore[arg-type]


@settings(max_examples=1_500, deadline=None)
@given(st.binary(max_size=300))
def test_decode_arbitrary_bytes_only_raises_decode_error(data: bytes) -> None:
    """Issue 2: for arbitrary bytes, decode returns a Message or raises sds.DecodeError;
    whatever decodes re-encodes to something that decodes to the same Message."""
    try:
        m = sds.decode(data)
    except sds.DecodeError:
        return
    assert isinstance(m, sds.Message)
    assert sds.decode(sds.encode(m)) == m


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.binary(max_size=40), min_size=1, max_size=8),
)
def test_decode_mutated_messages_only_raises_decode_error(chunks: list[bytes]) -> None:
    """Issue 2: splicing random bytes into a valid message never makes decode raise
    anything but DecodeError."""
    base = sds.encode(full_message())
    data = base
    for i, chunk in enumerate(chunks):
        cut = (i * 37) % (len(data) + 1)
        data = data[:cut] + chunk + data[cut + len(chunk) :]
    try:
        m = sds.decode(data)
    except sds.DecodeError:
        return
    assert sds.decode(sds.encode(m)) == m


@pytest.mark.parametrize(
    ("lamport", "content", "kind"),
    [
        (5, b"hi", MessageKind.CONTENT),
        (0, b"x", MessageKind.CONTENT),
        (None, b"hi", MessageKind.EPHEMERAL),
        (5, None, MessageKind.SYNC),
        (5, b"", MessageKind.SYNC),
    ],
)
def test_classification_table(
    lamport: int | None, content: bytes | None, kind: MessageKind
) -> None:
    """PROTOCOL.md "How a receiver classifies": lamport set + content -> content;
    unset + content -> ephemeral; set + unset/empty content -> sync (after a wire
    round trip too)."""
    assert classify(lamport, content) is kind
    m = sds.decode(sds.encode(sds.Message("s", "id", "c", lamport, content=content)))
    assert m.kind is kind


@pytest.mark.parametrize("content", [None, b""])
def test_classification_invalid(content: bytes | None) -> None:
    """PROTOCOL.md "How a receiver classifies": lamport unset and no content is invalid:
    DecodeError with reason invalid_kind."""
    m = sds.decode(sds.encode(sds.Message("s", "id", "c", None, content=content)))
    with pytest.raises(sds.DecodeError) as info:
        _ = m.kind
    assert info.value.reason == "invalid_kind"


def test_generated_schema_uses_uint64_and_repair_field() -> None:
    """PROTOCOL.md "Message schema": the committed generated code has lamport as uint64
    (field 10) and repair_request as field 13, HistoryEntry.sender_id as field 3."""
    fields = sds_pb2.SdsMessage.DESCRIPTOR.fields_by_name
    assert fields["lamport_timestamp"].number == 10
    assert fields["lamport_timestamp"].type == fields["lamport_timestamp"].TYPE_UINT64
    assert fields["repair_request"].number == 13
    assert fields["content"].number == 20
    assert sds_pb2.HistoryEntry.DESCRIPTOR.fields_by_name["sender_id"].number == 3
