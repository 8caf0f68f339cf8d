"""Wrong passphrase, tampered/forged/replayed/oversized envelopes, through a real relay.

A replayed envelope (the same bytes again) is a counted duplicate, not a rejection.

A raw websockets client (the "spy") subscribes to topics, captures envelopes and
publishes crafted ones; the nodes are real ``sdschat join --headless`` processes.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path

from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from e2e_helpers import T, cluster, log_count
from websockets.sync.client import ClientConnection, connect

from app.chat.lines import encode_content
from net import envelope_pb2
from net.channel_key import ChannelKey, derive_channel_key
from net.envelope import AAD_DOMAIN, ENVELOPE_VERSION, MAX_ENVELOPE_BYTES, seal
from net.identity import Identity
from net.relay_frames import decode_frame, encode_ping, encode_publish, encode_subscribe
from sds import sds_pb2


class Spy:
    """A raw relay client: subscribe, capture deliveries, publish anything."""

    def __init__(self, ws: ClientConnection, topics: list[bytes]) -> None:
        self.ws = ws
        self.ws.send(encode_subscribe(topics))
        self.ws.send(encode_ping(1))
        self.errors: list[str] = []
        self.captured: list[bytes] = []
        self._until_pong()

    def _until_pong(self) -> None:
        for _ in range(1000):  # bounded
            frame = decode_frame(self.ws.recv(timeout=T(10)))
            if frame.WhichOneof("body") == "pong":
                return
            self._note(frame)
        raise AssertionError("no pong")

    def _note(self, frame: envelope_pb2.RelayFrame) -> None:
        kind = frame.WhichOneof("body")
        if kind == "deliver":
            self.captured.append(frame.deliver.envelope)
        elif kind == "error":
            self.errors.append(frame.error.code)

    def drain(self, seconds: float = 0.3) -> None:
        """Read whatever arrives for ``seconds``."""
        for _ in range(100_000):  # bounded
            try:
                raw = self.ws.recv(timeout=seconds)
            except TimeoutError:
                return
            self._note(decode_frame(raw))

    def publish(self, envelope: bytes) -> None:
        self.ws.send(encode_publish(envelope))
        self.ws.send(encode_ping(2))
        self._until_pong()


@contextlib.contextmanager
def spy(url: str, topics: list[bytes]) -> Iterator[Spy]:
    with connect(url, max_size=None, proxy=None) as ws:
        yield Spy(ws, topics)


def sds_message(sender_id: str, text: str, n: int, channel: str = "room") -> bytes:
    return sds_pb2.SdsMessage(
        sender_id=sender_id,
        message_id=os.urandom(32).hex(),
        channel_id=channel,
        lamport_timestamp=10_000 + n,
        content=encode_content(text, "mallory"),
    ).SerializeToString()


def retopic(envelope: bytes, topic: bytes) -> bytes:
    env = envelope_pb2.Envelope.FromString(envelope)
    env.topic = topic
    return env.SerializeToString()


def bad_signature_envelope(k: ChannelKey, ident: Identity) -> bytes:
    payload = envelope_pb2.SealedPayload(
        sds=sds_message(ident.sender_id, "unsigned", 1),
        sender_public_key=ident.public_key,
        signature=b"\x01" * 64,
    ).SerializeToString()
    nonce = os.urandom(12)
    ct = ChaCha20Poly1305(k.key).encrypt(
        nonce, payload, AAD_DOMAIN + ENVELOPE_VERSION.to_bytes(4, "big") + k.topic
    )
    return envelope_pb2.Envelope(
        version=ENVELOPE_VERSION, topic=k.topic, nonce=nonce, ciphertext=ct
    ).SerializeToString()


def _up(*procs: object) -> None:
    for p in procs:
        p.wait_for(lambda p=p: bool(p.select("connection", state="connected")), 20, "up")  # type: ignore[attr-defined]
        p.wait_for(lambda p=p: bool(p.select("channel")), 20, "joined")  # type: ignore[attr-defined]


def test_wrong_passphrase_neither_reads_nor_injects(tmp_path: Path) -> None:
    right_file, wrong_file = tmp_path / "right", tmp_path / "wrong"
    right_file.write_text("correct horse\n")
    wrong_file.write_text("battery staple\n")
    right = derive_channel_key("room", b"correct horse")
    wrong = derive_channel_key("room", b"battery staple")
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        a = c.node("alice", url, extra=["--passphrase-file", str(right_file)])
        b = c.node("bob", url, extra=["--passphrase-file", str(right_file)])
        m = c.node("mallory", url, extra=["--passphrase-file", str(wrong_file)])
        _up(a, b, m)
        for p in (a, b, m):
            assert p.select("channel")[0]["public"] is False
        with spy(url, [right.topic, wrong.topic]) as s:
            for p in (a, b, m):
                p.send(*[f"{p.name} {i}" for i in range(5)])
            for p in (a, b):
                p.wait_for(lambda p=p: log_count(p) >= 10, 30, "alice's and bob's messages")
            m.wait_for(lambda: len(m.select("own", state="logged")) == 5, 20, "mallory logged")
            s.drain()
            m_env = next(
                e for e in s.captured if envelope_pb2.Envelope.FromString(e).topic == wrong.topic
            )
            a_env = next(
                e for e in s.captured if envelope_pb2.Envelope.FromString(e).topic == right.topic
            )
            # mallory's real bytes, routed into the right topic: unreadable for alice and bob
            s.publish(retopic(m_env, right.topic))
            # and alice's real bytes routed to mallory: unreadable for mallory
            s.publish(retopic(a_env, wrong.topic))
        for p in (a, b, m):
            p.wait_for(
                lambda p=p: bool(p.select("rejected", reason="wrong_key_or_tampered")),
                10,
                "the rejection",
            )
        m_id = m.select("ready")[0]["sender"]
        for p in (a, b):
            assert all(e["sender"] != m_id for e in p.select("delivered"))
            assert log_count(p) == 10
        assert m.select("delivered") == []
        for p in (a, b, m):
            p.close_stdin()
            assert p.wait(30) == 0


def test_tampered_forged_replayed_oversized_envelopes_are_rejected(tmp_path: Path) -> None:
    room = derive_channel_key("room", None)
    mallory = Identity.generate()
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        a = c.node("alice", url)
        b = c.node("bob", url)
        _up(a, b)
        with spy(url, [room.topic]) as s:
            a.send("genuine")
            b.wait_for(lambda: len(b.select("delivered")) == 1, 20, "genuine message")
            s.drain()
            genuine = s.captured[0]
            a_id = a.select("ready")[0]["sender"]

            tampered = bytearray(genuine)
            tampered[-3] ^= 0x40
            s.publish(bytes(tampered))
            s.publish(seal(sds_message(a_id, "I am alice, honest", 2), mallory, room))
            s.publish(bad_signature_envelope(room, mallory))
            s.publish(genuine)  # replay
            s.publish(b"\x0a" * (MAX_ENVELOPE_BYTES + 16))  # oversized: the relay refuses it
            s.drain()
            assert "oversized" in s.errors
        want = ["wrong_key_or_tampered", "sender_mismatch", "bad_signature"]
        for reason in want:
            b.wait_for(lambda r=reason: bool(b.select("rejected", reason=r)), 10, reason)
        a.send("after the attack")
        b.wait_for(lambda: len(b.select("delivered")) == 2, 20, "the next genuine message")
        assert [e["text"] for e in b.select("delivered")] == ["genuine", "after the attack"]
        b.close_stdin()
        assert b.wait(30) == 0
        counters = b.select("closed")[0]["counters"]
        for reason in want:
            assert counters[f"rejected_{reason}"] >= 1
        # the genuine envelope again is harmless: a counted duplicate, not a rejection
        assert counters["duplicate_envelopes"] >= 1
        assert "rejected_replayed" not in counters
        assert counters.get("internal_errors", 0) == 0
