"""A hostile member over a real relay (issue 14 section 1): one message from the
future must not scramble the order of every later message.

Real processes (relay + headless nodes) on 127.0.0.1, fast protocol timings; the
attacker builds and signs its envelopes with the project's own ``net`` modules.
"""

from __future__ import annotations

import hashlib
import os
import time
from pathlib import Path
from typing import Any

from store_helpers import T, cluster, history, run, wait_connected

import sds
from app.chat.lines import encode_content
from net.channel_key import derive_channel_key
from net.envelope import seal
from net.identity import Identity
from net.relay_client import RelayClient
from sds import sds_pb2


def _from_the_future(lamport: int) -> bytes:
    key = derive_channel_key("room", None)  # the public channel the nodes joined
    ident = Identity.generate()
    content = encode_content(f"I am the future {os.urandom(4).hex()}", "mallory")
    msg = sds_pb2.SdsMessage(
        sender_id=ident.sender_id,
        message_id=hashlib.sha256(content).hexdigest(),  # a js-waku id: verifiable
        channel_id="room",
        lamport_timestamp=lamport,
        content=content,
    )
    return seal(msg.SerializeToString(), ident, key)


def _stats(p: Any) -> dict[str, Any]:
    before = len(p.select("info"))
    p.send("/stats")
    p.wait_for(
        lambda: any("counters" in (e.get("data") or {}) for e in p.select("info")[before:]),
        10, "stats",
    )
    info = [e for e in p.select("info")[before:] if "counters" in (e.get("data") or {})]
    counters: dict[str, Any] = info[-1]["data"]["counters"]
    return counters


def test_one_message_from_the_future_does_not_scramble_later_order(tmp_path: Path) -> None:
    """The audit: a message at MAX_LAMPORT was adopted by every node, later lines
    shared one timestamp and were shown in hash order (typed 0..5, shown 3,0,5,2,1,4).
    Now it is refused (as is one merely beyond the skew bound), and lines typed
    afterwards are in every log in the order they were typed."""
    with cluster(tmp_path) as c:
        _relay, url = c.relay()
        alice = c.node("alice", tmp_path / "alice", relay=url)
        bob = c.node("bob", tmp_path / "bob", relay=url)
        wait_connected(alice, bob)
        now = time.time_ns() // 1_000_000
        skew = sds.Config().max_clock_skew_ms
        envs = [_from_the_future(sds.MAX_LAMPORT), _from_the_future(now + 2 * skew)]

        async def publish() -> None:
            client = RelayClient(url, [], lambda _e: None)
            client.start()
            try:
                assert await client.wait_connected(T(10))
                for env in envs:
                    assert await client.publish(env)
            finally:
                await client.close()

        run(publish())
        for p in (alice, bob):
            p.wait_for(lambda p=p: _stats(p).get("dropped_clock_ahead", 0) >= 2, 20,
                       "both refused")
        lines = [f"typed {i}" for i in range(6)]
        alice.send(*lines)
        bob.wait_for(
            lambda: {str(e.get("text")) for e in bob.select("delivered")} >= set(lines),
            30, "alice's lines",
        )
        for p in (alice, bob):
            p.close_stdin()
            assert p.wait(30) == 0
    for who in ("alice", "bob"):
        hist = history(tmp_path / who)
        texts = [h["content"] for h in hist]
        assert [t for t in texts if t in lines] == lines, f"{who}: {texts}"
        assert not [t for t in texts if t.startswith("I am the future")]
        assert max(h["lamport"] for h in hist) < now + skew
