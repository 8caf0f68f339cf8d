"""Hostile envelopes at a node: each is rejected with its reason and changes nothing."""

from __future__ import annotations

import asyncio
import hashlib
import os
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
from app_helpers import FAST, Harness, T, key, run, start_node, wait_until
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from app.chat.lines import encode_content
from app.node.transport import MemoryHub
from net import envelope_pb2
from net.channel_key import ChannelKey
from net.envelope import AAD_DOMAIN, ENVELOPE_VERSION, MAX_ENVELOPE_BYTES, open_envelope, seal
from net.identity import Identity
from sds import sds_pb2
from sds.ids import message_id_for


def sds_bytes(sender_id: str, channel: str = "general", text: str = "x", n: int = 1) -> bytes:
    return sds_pb2.SdsMessage(
        sender_id=sender_id,
        message_id=sds_id(channel, sender_id, 1_000 + n, encode_content(text, "mallory"), n),
        channel_id=channel,
        lamport_timestamp=1_000 + n,
        content=encode_content(text, "mallory"),
    ).SerializeToString()


def raw_envelope(
    k: ChannelKey,
    payload: bytes,
    *,
    version: int = ENVELOPE_VERSION,
    nonce: bytes | None = None,
    key_bytes: bytes | None = None,
) -> bytes:
    """Encrypt any SealedPayload bytes exactly as net.envelope does."""
    nonce = os.urandom(12) if nonce is None else nonce
    aad = AAD_DOMAIN + version.to_bytes(4, "big") + k.topic
    ct = ChaCha20Poly1305(key_bytes or k.key).encrypt(nonce, payload, aad)
    return envelope_pb2.Envelope(
        version=version, topic=k.topic, nonce=nonce, ciphertext=ct
    ).SerializeToString()


def test_each_hostile_envelope_is_rejected_with_its_reason(tmp_path: Path) -> None:
    async def main() -> None:
        hub = MemoryHub()
        a = await start_node(tmp_path / "a", hub, name="alice")
        b = await start_node(tmp_path / "b", hub, name="bob")
        await b.node.join("pub", None, key=key("pub", None))
        pub = await start_node(
            tmp_path / "p", hub, name="pubby", channels=("pub",), passphrase=None
        )
        try:
            await a.node.send("general", "genuine")
            await wait_until(lambda: b.texts() == ["genuine"])
            right = key("general")
            # the envelope of the line (a sync the join asked for may have gone out first)
            genuine = next(e for e in a.node.transport.sent  # type: ignore[attr-defined]
                           if sds_pb2.SdsMessage.FromString(open_envelope(e, right).sds_bytes)
                           .content)  # fmt: skip
            mallory = Identity.generate()
            inject = b.node._on_envelope

            tampered = bytearray(genuine)
            tampered[-5] ^= 0x01
            await inject(bytes(tampered))
            wrong = ChannelKey("general", key("general", "guess").key, right.topic, False)
            await inject(seal(sds_bytes(mallory.sender_id), mallory, wrong))
            forged = seal(sds_bytes(a.node.sender_id, text="I am alice"), mallory, right)
            await inject(forged)
            payload = envelope_pb2.SealedPayload(
                sds=sds_bytes(mallory.sender_id),
                sender_public_key=mallory.public_key,
                signature=b"\x00" * 64,
            ).SerializeToString()
            await inject(raw_envelope(right, payload))
            await inject(b"\x0a" * (MAX_ENVELOPE_BYTES + 1))
            await inject(b"not an envelope at all")
            await inject(raw_envelope(right, payload, version=1))  # the retired format
            await inject(seal(sds_bytes(mallory.sender_id, "elsewhere"), mallory, key("elsewhere")))
            await inject(genuine)  # replay
            # a member of the public channel tries to write into the private one
            cross = seal(
                sds_bytes(pub.node.sender_id, channel="general", text="sneaky"),
                pub.node.identity,
                key("pub", None),
            )
            await inject(cross)

            want = {
                "wrong_key_or_tampered": 2,
                "sender_mismatch": 1,
                "bad_signature": 1,
                "oversized": 1,
                "malformed": 1,
                "unsupported_version": 1,
                "wrong_topic": 1,
            }
            await b.node._call_in_worker(b.node._noop)
            got = {k[9:]: v for k, v in b.node.counters.items() if k.startswith("rejected_")}
            assert got == want
            for reason, n in want.items():
                assert b.node.counters[f"rejected_{reason}"] == n
            # the genuine envelope again is a counted duplicate, not a rejection
            assert b.node.counters["duplicate_envelopes"] == 1
            # a refusal after the topic matched a joined channel names that channel
            for reason in want:
                channels = {e.channel for e in b.rejected(reason)}
                named = reason not in ("oversized", "malformed", "wrong_topic")
                assert channels == ({"general"} if named else {None}), reason
            await wait_until(lambda: b.node.counters["dropped_wrong_channel"] == 1)
            await a.node.send("general", "still works")
            await wait_until(lambda: b.texts() == ["genuine", "still works"])
            assert b.texts("pub") == []
            assert b.node.counters["internal_errors"] == 0
            assert len(b.node.core("general").log_ids()) == 2
        finally:
            for h in (a, b, pub):
                await h.node.close()

    run(main())


# ------------------------------------------------------------------ hypothesis garbage


class LiveNodes:
    """Two nodes on a loop in a background thread, shared by the hypothesis examples."""

    def __init__(self, tmp: Path) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.hub = MemoryHub()
        self.a: Harness = self.call(start_node(tmp / "a", self.hub, name="alice"))
        self.b: Harness = self.call(start_node(tmp / "b", self.hub, name="bob"))

    def call(self, coro: Any, timeout: float = 10.0) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(T(timeout))

    def close(self) -> None:
        self.call(self.a.node.close())
        self.call(self.b.node.close())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(T(5))
        self.loop.close()


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveNodes]:
    nodes = LiveNodes(tmp_path_factory.mktemp("live"))
    try:
        yield nodes
    finally:
        nodes.close()


RIGHT = key("general")

garbage = st.one_of(
    st.binary(max_size=4096),
    st.builds(
        lambda v, nonce, ct: envelope_pb2.Envelope(
            version=v, topic=RIGHT.topic, nonce=nonce, ciphertext=ct
        ).SerializeToString(),
        st.integers(0, 2**32 - 1),
        st.binary(max_size=16),
        st.binary(max_size=512),
    ),
    st.builds(lambda p: raw_envelope(RIGHT, p), st.binary(max_size=512)),
    st.builds(
        lambda sds, pk, sig: raw_envelope(
            RIGHT,
            envelope_pb2.SealedPayload(
                sds=sds, sender_public_key=pk, signature=sig
            ).SerializeToString(),
        ),
        st.binary(max_size=256),
        st.binary(min_size=32, max_size=32),
        st.binary(min_size=64, max_size=64),
    ),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(frames=st.lists(garbage, min_size=1, max_size=8))
def test_garbage_never_crashes_or_reaches_the_log(live: LiveNodes, frames: list[bytes]) -> None:
    before = len(live.b.node.core("general").log_ids())

    async def feed() -> None:
        for f in frames:
            await live.b.node._on_envelope(f)
        await live.b.node._call_in_worker(live.b.node._noop)  # processed

    live.call(feed())
    assert len(live.b.node.core("general").log_ids()) == before
    assert live.b.node.counters["internal_errors"] == 0


def test_node_still_delivers_after_the_garbage(live: LiveNodes) -> None:
    async def check() -> None:
        n = len(live.b.texts())
        await live.a.node.send("general", "after garbage")
        await wait_until(lambda: len(live.b.texts()) == n + 1)

    live.call(check())
    assert live.b.texts()[-1] == "after garbage"


def test_an_envelope_that_fails_inside_the_round_costs_only_itself(tmp_path: Path) -> None:
    """Envelopes are worked out in rounds and committed together; an unexpected error
    while receiving one of them (a bug, not a refusal) is reported as an internal
    error and the round's other messages are still delivered and stored."""

    async def main() -> None:
        a = await start_node(tmp_path / "a", MemoryHub(), name="alice")
        b = await start_node(tmp_path / "b", MemoryHub(), name="bob")  # hears nothing
        try:
            for text in ("one", "two", "three"):
                await a.node.send("general", text)
            await wait_until(lambda: len(a.own("sent")) == 3)
            envelopes = list(a.node.transport.sent)  # type: ignore[attr-defined]
            core = b.node.core("general")
            real = core.receive_parsed

            def receive_parsed(message: Any, *args: Any, **kwargs: Any) -> Any:
                if b"three" in message.content:
                    raise RuntimeError("a bug met by this message only")
                return real(message, *args, **kwargs)

            core.receive_parsed = receive_parsed  # type: ignore[method-assign]
            # queued together, so the worker takes them in one round
            await asyncio.gather(*(b.node._on_envelope(e) for e in envelopes))
            await wait_until(lambda: b.texts() == ["one", "two"])
            assert b.node.counters["internal_errors"] == 1
            assert b.node.counters["receive_errors"] == 1
            stored = await b.node.page("general")
            assert [x.text for x in stored] == ["one", "two"]
        finally:
            await a.node.close()
            await b.node.close()

    run(main())


def signed_envelope(
    who: Identity, text: str, history: tuple[str, ...], lamport: int
) -> tuple[bytes, str]:
    """A content envelope of ``general`` signed by ``who`` (a js-waku id: verifiable)
    naming ``history``; and its message id."""
    content = encode_content(text, "mallory")
    mid = hashlib.sha256(content).hexdigest()
    pb = sds_pb2.SdsMessage(
        sender_id=who.sender_id, message_id=mid, channel_id="general",
        lamport_timestamp=lamport, content=content,
    )
    for h in history:
        pb.causal_history.add(message_id=h)
    return seal(pb.SerializeToString(), who, key("general")), mid


def sds_id(channel: str, sender_id: str, lamport: int, content: bytes, n: int) -> str:
    """The verifiable sdschat id of a hand-made message (nonce ``n``): nodes check ids."""
    return message_id_for(channel, sender_id, lamport, content, n.to_bytes(8, "big"))
def test_a_history_of_unknown_ids_is_one_lost_report(tmp_path: Path) -> None:
    """Issue 14 section 3: a member's message naming 300 ids nobody has makes the
    node give them up after the lost timeout in ONE ``lost`` event listing them
    all (not 300 events), and the message is delivered with ``missing_before``."""
    from app.node.runtime import wall_ms

    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        try:
            mallory = Identity.generate()
            ghosts = [f"{i:064x}" for i in range(1, 301)]
            content = encode_content("look at all these", "mallory")
            mid = hashlib.sha256(content).hexdigest()  # a js-waku id: verifiable
            pb = sds_pb2.SdsMessage(
                sender_id=mallory.sender_id,
                message_id=mid,
                channel_id="general",
                lamport_timestamp=wall_ms(),
                content=content,
            )
            for g in ghosts:
                pb.causal_history.add(message_id=g)
            await b.node._on_envelope(seal(pb.SerializeToString(), mallory, key("general")))
            await wait_until(lambda: b.texts() == ["look at all these"], 15, "delivered")
            lost = [e for e in b.events if type(e).__name__ == "Lost"]
            assert len(lost) == 1
            assert sorted(lost[0].message_ids) == ghosts  # type: ignore[attr-defined]
            assert lost[0].waiting == (mid,)  # type: ignore[attr-defined]
            assert b.delivered()[0].missing_before == 300
            assert b.node.counters["lost"] == 300
        finally:
            await b.node.close()

    run(main())


def test_a_message_arriving_after_it_was_reported_lost_is_flagged(tmp_path: Path) -> None:
    """Issue 15 defect 4: the node passes the core's flag on (``Delivered.was_lost``,
    headless JSON ``"was_lost": true``) so the UI can mark the message recovered; and
    stores it with the message (``LogEntry.was_lost``), so it survives a restart."""
    from app.chat.content import decode_content
    from app.node.events import event_to_json
    from app.node.runtime import wall_ms
    from storage import Store

    async def main() -> None:
        hub = MemoryHub()
        b = await start_node(tmp_path / "b", hub, name="bob")
        try:
            mallory = Identity.generate()
            now = wall_ms()

            late_env, late_id = signed_envelope(mallory, "late", (), now)
            waiting_env, _ = signed_envelope(mallory, "waits for it", (late_id,), now + 1)
            await b.node._on_envelope(waiting_env)
            await wait_until(lambda: b.texts() == ["waits for it"], 15, "given up")
            assert [e for e in b.events if type(e).__name__ == "Lost"]
            await b.node._on_envelope(late_env)
            await wait_until(lambda: b.texts() == ["waits for it", "late"], 10, "late one")
            flags = [(d.text, d.was_lost, d.recovered, d.missing_before) for d in b.delivered()]
            assert flags == [("waits for it", False, False, 1), ("late", True, True, 0)]
            assert event_to_json(b.delivered()[1])["was_lost"] is True
            assert event_to_json(b.delivered()[1])["recovered"] is True
        finally:
            await b.node.close()
        # stored with the message: a restarted node's log reads it back
        async with await Store.open(tmp_path / "b") as store:
            page = await store.page("general")
            assert [
                (decode_content(e.content).text, e.was_lost, e.recovered, e.missing_before)
                for e in page
            ] == [("late", True, True, 0), ("waits for it", False, False, 1)]

    run(main())


def test_a_message_pushed_out_of_the_incoming_buffer_is_taken_again(tmp_path: Path) -> None:
    """A message waiting for its dependencies is dropped when the incoming buffer is
    full (``INCOMING_BUFFER_FULL``, the oldest goes); it is missing again and its
    repair answer is the identical envelope. The node's replay guard forgets it, so
    those bytes are taken (before, they were refused as a replay and the message
    never came, however often it was asked for)."""
    from app.node.runtime import wall_ms

    async def main() -> None:
        cfg = FAST.with_changes(incoming_buffer_cap=3)
        b = await start_node(tmp_path / "b", MemoryHub(), name="bob", config=cfg)
        try:
            mallory = Identity.generate()
            now = wall_ms()

            root_env, root = signed_envelope(mallory, "root", (), now)
            first_env, first = signed_envelope(mallory, "first", (root,), now + 1)
            await b.node._on_envelope(first_env)
            for i in range(3):  # three more waiting messages: "first" is pushed out
                env, _ = signed_envelope(mallory, f"later {i}", (root, first), now + 2 + i)
                await b.node._on_envelope(env)
            await wait_until(lambda: b.node.counters["dropped_incoming_buffer_full"] >= 1,
                             15, "pushed out")
            await b.node._on_envelope(root_env)
            await b.node._on_envelope(first_env)  # the repair answer: the same bytes
            await wait_until(lambda: len(b.texts()) == 5, 15, "all delivered")
            assert b.texts()[:2] == ["root", "first"]
        finally:
            await b.node.close()

    run(main())
