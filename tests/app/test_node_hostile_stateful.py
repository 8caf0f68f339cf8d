"""A hostile member among honest nodes: a hypothesis state machine at the node level.

Three real :class:`~app.node.Node` objects (SQLite files, the real envelope code)
each publish into a private in-memory endpoint; the test is the network: it
forwards, drops, reorders and duplicates their envelopes. Mallory, a member
holding the channel key and a key of her own, copies the ids, timestamps and
histories of genuine messages under other text or her own authorship, replays
envelopes, claims honest authors' sender ids, and talks herself (js-waku-form
ids). Invariants: no honest node ever shows a genuine id with another author or
text; after healing, the honest nodes' logs are identical in ids, authors,
timestamps, content digests and order, and hold every genuine message.
"""

from __future__ import annotations

import asyncio
import hashlib
import os
import random
import shutil
import tempfile
from collections import deque
from pathlib import Path
from typing import Any

from app_helpers import FAST, key
from hypothesis import HealthCheck, Phase, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from app.chat.history import read_history
from app.chat.lines import encode_content
from app.node.events import Delivered, NodeEvent, OwnMessage
from app.node.runtime import Node, NodeOptions
from app.node.transport import MemoryHub
from net.channel_key import TEST_KDF
from net.envelope import open_envelope, seal
from net.identity import Identity
from sds import sds_pb2
from tests.procs import T

EXAMPLES = int(os.environ.get("SDSCHAT_NODE_STATEFUL_EXAMPLES", "8"))
STEPS = int(os.environ.get("SDSCHAT_NODE_STATEFUL_STEPS", "25"))
KEY = key("general")
NAMES = ("alice", "bob", "carol")


class HostileNetwork(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.tmp = Path(tempfile.mkdtemp(prefix="sdschat-hostile-"))
        self.nodes: list[Node] = []
        self.events: list[list[NodeEvent]] = []
        self.cursor: list[int] = []
        self.pending: list[deque[bytes]] = []
        self.genuine: dict[str, tuple[str, str]] = {}  # id -> (author, text)
        self.captured: list[bytes] = []  # every envelope anyone published
        self.mallory = Identity.generate()
        self.n = 0
        self.loop.run_until_complete(self._start())

    def _run(self, coro: Any) -> Any:
        return self.loop.run_until_complete(asyncio.wait_for(coro, T(30)))

    async def _start(self) -> None:
        for i, name in enumerate(NAMES):
            options = NodeOptions(config=FAST, kdf=TEST_KDF, rng=random.Random(i))
            node = await Node.open(self.tmp / name, MemoryHub().transport(), name=name,
                                   options=options)  # fmt: skip
            events: list[NodeEvent] = []
            node.subscribe(events.append)
            await node.start()
            await node.join("general", "secret", key=KEY)
            self.nodes.append(node)
            self.events.append(events)
            self.cursor.append(0)
            self.pending.append(deque())

    # ------------------------------------------------------------------ network

    def _collect(self) -> None:
        """Everything the nodes published since the last look, queued for the others."""
        for i, node in enumerate(self.nodes):
            sent = node.transport.sent  # type: ignore[attr-defined]
            new = sent[self.cursor[i] :]
            self.cursor[i] = len(sent)
            self.captured.extend(new)
            for j in range(len(self.nodes)):
                if j != i:
                    self.pending[j].extend(new)

    async def _settle(self) -> None:
        for node in self.nodes:
            await node._call_in_worker(node._noop)

    def _inject(self, j: int, envelope: bytes) -> None:
        async def go() -> None:
            await self.nodes[j]._on_envelope(envelope)
            await self._settle()

        self._run(go())

    def _genuine_messages(self) -> list[sds_pb2.SdsMessage]:
        out = []
        for env in self.captured:
            msg = open_envelope(env, KEY).sds_message
            if msg is not None and msg.content and msg.message_id in self.genuine:
                out.append(msg)
        return out

    # -------------------------------------------------------------------- rules

    @rule(who=st.integers(0, 2), text=st.sampled_from(["ok", "hi", "pay bob 10", "same"]))
    def honest_send(self, who: int, text: str) -> None:
        self.n += 1
        node = self.nodes[who]
        before = len(self.events[who])
        self._run(node.send("general", text))
        self._run(self._settle())
        for ev in self.events[who][before:]:
            if isinstance(ev, OwnMessage) and ev.state == "logged" and ev.message_id:
                self.genuine[ev.message_id] = (node.sender_id, text)
        self._collect()

    @rule(to=st.integers(0, 2), pick=st.integers(0, 10_000), count=st.integers(1, 4))
    def deliver(self, to: int, pick: int, count: int) -> None:
        """Deliver ``count`` queued envelopes to one node, starting at a chosen one."""
        self._collect()
        queue = self.pending[to]
        for _ in range(min(count, len(queue))):
            queue.rotate(-(pick % len(queue)))
            self._inject(to, queue.popleft())
        self._collect()

    @rule(to=st.integers(0, 2), pick=st.integers(0, 10_000))
    def drop(self, to: int, pick: int) -> None:
        queue = self.pending[to]
        if queue:
            queue.rotate(-(pick % len(queue)))
            queue.popleft()

    @rule(to=st.integers(0, 2), pick=st.integers(0, 10_000))
    def duplicate(self, to: int, pick: int) -> None:
        if self.captured:
            self._inject(to, self.captured[pick % len(self.captured)])

    @precondition(lambda self: bool(self.genuine))
    @rule(to=st.integers(0, 2), pick=st.integers(0, 10_000), keep_text=st.booleans())
    def copy_id(self, to: int, pick: int, keep_text: bool) -> None:
        """Mallory copies a genuine message's id, timestamp, history and filter, signs as
        herself, with other text (or the same text: authorship theft), same display name."""
        msgs = self._genuine_messages()
        if not msgs:
            return
        original = msgs[pick % len(msgs)]
        author, text = self.genuine[original.message_id]
        forged = sds_pb2.SdsMessage()
        forged.CopyFrom(original)
        forged.sender_id = self.mallory.sender_id
        if not keep_text:
            name = NAMES[[n.sender_id for n in self.nodes].index(author)]
            forged.content = encode_content(f"forged {text}", name)
        self._inject(to, seal(forged.SerializeToString(), self.mallory, KEY))

    @precondition(lambda self: bool(self.genuine))
    @rule(to=st.integers(0, 2), pick=st.integers(0, 10_000))
    def claim_author(self, to: int, pick: int) -> None:
        """Mallory signs a genuine message's bytes as herself (sender_id stays the author's)."""
        msgs = self._genuine_messages()
        if msgs:
            original = msgs[pick % len(msgs)]
            self._inject(to, seal(original.SerializeToString(), self.mallory, KEY))

    @rule(text=st.sampled_from(["ok", "hello", "same"]))
    def mallory_talks(self, text: str) -> None:
        """Mallory's own messages, js-waku-form ids: legitimate, for everyone. (Each text
        once: one js-waku id at two timestamps is a reported conflict whose placement
        may differ between participants; tests/sds/test_message_ids.py.)"""
        self.n += 1
        content = encode_content(f"{text} {self.n}", "mallory")
        msg = sds_pb2.SdsMessage(
            sender_id=self.mallory.sender_id,
            message_id=hashlib.sha256(content).hexdigest(),
            channel_id="general",
            lamport_timestamp=self._clock() + self.n,
            content=content,
        )
        env = seal(msg.SerializeToString(), self.mallory, KEY)
        self.captured.append(env)
        for q in self.pending:
            q.append(env)

    def _clock(self) -> int:
        return max(n.core("general").lamport for n in self.nodes)

    # --------------------------------------------------------------- invariants

    @invariant()
    def genuine_messages_are_shown_as_written(self) -> None:
        for i, events in enumerate(self.events):
            for ev in events:
                if isinstance(ev, Delivered) and ev.message_id in self.genuine:
                    assert (ev.sender_id, ev.text) == self.genuine[ev.message_id], NAMES[i]

    @invariant()
    def nothing_failed_inside(self) -> None:
        for node in self.nodes:
            assert node.counters["internal_errors"] == 0

    # ---------------------------------------------------------------- teardown

    def teardown(self) -> None:
        try:
            self._heal_and_compare()
        finally:
            for node in self.nodes:
                self._run(node.close())
            self.loop.close()
            shutil.rmtree(self.tmp, ignore_errors=True)

    def _heal_and_compare(self) -> None:
        want = set(self.genuine)

        def logs() -> list[list[tuple[str, str, int, str]]]:
            out = []
            for name in NAMES:
                lines = read_history(self.tmp / name, "general")
                out.append([(x.message_id, x.sender_id, x.lamport, x.digest) for x in lines])
            return out

        async def heal() -> list[list[tuple[str, str, int, str]]]:
            # a perfect network from now on: resends, syncs and repairs close every gap
            deadline = self.loop.time() + T(20)
            while True:  # bounded by the deadline
                self._collect()
                for j, queue in enumerate(self.pending):
                    while queue:
                        await self.nodes[j]._on_envelope(queue.popleft())
                await self._settle()
                got = await asyncio.to_thread(logs)
                ids = [{h[0] for h in log} for log in got]
                if all(log == got[0] for log in got) and all(want <= s for s in ids):
                    return got
                if self.loop.time() > deadline:
                    return got
                await asyncio.sleep(0.05)

        got = self._run(heal())
        for i, log in enumerate(got):
            assert log == got[0], f"{NAMES[i]}'s log differs from alice's"
            assert want <= {h[0] for h in log}, f"{NAMES[i]} lacks a genuine message"
        senders = [n.sender_id for n in self.nodes]
        for mid, author, _, digest in got[0]:
            if mid in self.genuine:
                sender, text = self.genuine[mid]
                content = encode_content(text, NAMES[senders.index(sender)])
                assert (author, digest) == (sender, hashlib.sha256(content).hexdigest())
        for i, node in enumerate(self.nodes):
            assert node.counters.get("rejected_replayed", 0) == 0, NAMES[i]
            assert node.counters.get("conflicts", 0) == 0, NAMES[i]


HostileNetwork.TestCase.settings = settings(
    max_examples=EXAMPLES,
    stateful_step_count=STEPS,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    phases=[Phase.explicit, Phase.reuse, Phase.generate]
    + ([Phase.shrink] if os.environ.get("SDSCHAT_STATEFUL_SHRINK") else []),
)
TestHostileNetwork = HostileNetwork.TestCase
