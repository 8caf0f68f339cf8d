"""bench/devices_bytes.py: the kinds its figures are counted by are what the nodes send."""

from __future__ import annotations

from app.chat.lines import encode_content
from app.members.devices import DEVICE_LOG_MAGIC
from net.channel_key import derive_channel_key
from net.envelope import seal
from net.identity import Identity
from sds.message import Message, encode
from tests.procs import load_bench


def test_envelopes_are_counted_by_what_they_carry() -> None:
    db = load_bench("devices_bytes")
    key = derive_channel_key("room", b"bench passphrase")
    me = Identity.generate()

    def envelope(content: bytes | None, lamport: int | None = 5) -> bytes:
        msg = Message(sender_id=me.sender_id, message_id="ab" * 32, channel_id="room",
                      lamport_timestamp=lamport, content=content)  # fmt: skip
        return seal(encode(msg), me, key)

    assert db.kind_of(envelope(encode_content("hi", "bob", "msg")), key) == "line"
    assert db.kind_of(envelope(DEVICE_LOG_MAGIC + b"\x00" * 40), key) == "device_log"
    assert db.kind_of(envelope(b"plain text of a js-waku peer"), key) == "content"
    assert db.kind_of(envelope(None), key) == "sync"
    assert db.kind_of(envelope(b"typing", lamport=None), key) == "ephemeral"
    other = derive_channel_key("room", b"another passphrase")
    assert db.kind_of(seal(encode(Message(sender_id=me.sender_id, message_id="cd" * 32,
                                          channel_id="room", content=b"x",
                                          lamport_timestamp=1)), me, other),
                      key) == "unopened"  # fmt: skip
