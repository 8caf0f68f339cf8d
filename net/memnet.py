"""An in-memory broadcast network with virtual time, for tests, demos and simulation.

Every node is an :class:`sds.Participant` driven exactly as a real node drives
it (aioquic-style): after each call into the core, its datagrams are broadcast,
its events handed to the observer and its single timer re-armed. Time is virtual:
:meth:`MemNetwork.run_until` jumps from one scheduled thing to the next, so a
simulated hour takes as long as the work in it, not an hour.

Faults: a loss rate per delivery, a latency range (uniform), partitions (groups
that cannot hear each other until healed) and nodes going offline (they hear
nothing and their timers pause until they come back). Everything random comes
from one seeded ``random.Random``: a run is reproducible from its seed.
"""

from __future__ import annotations

import heapq
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import sds

__all__ = ["MemNetwork", "SimNode"]

#: Observer callback: (node id, event, virtual time in ms).
EventObserver = Callable[[str, sds.Event, int], None]


@dataclass(slots=True)
class SimNode:
    """One participant on the network."""

    node_id: str
    participant: sds.Participant
    online: bool = True
    group: int = 0
    armed_ms: int | None = None
    sent: int = 0
    received: int = 0
    delivered: dict[str, list[str]] = field(default_factory=dict)


# Heap item kinds.
_DELIVER = 0
_TIMER = 1


class MemNetwork:
    """Broadcast between :class:`SimNode`\\ s in virtual time."""

    def __init__(
        self,
        *,
        seed: int = 0,
        loss: float = 0.0,
        latency_ms: tuple[int, int] = (5, 50),
        start_ms: int = 1_700_000_000_000,
        observer: EventObserver | None = None,
    ) -> None:
        if not 0.0 <= loss < 1.0:
            raise ValueError("loss must be in [0, 1)")
        lo, hi = latency_ms
        if not 0 <= lo <= hi:
            raise ValueError("latency range must satisfy 0 <= low <= high")
        self.rng = random.Random(seed)
        self.loss = loss
        self.latency_ms = latency_ms
        self.now_ms = start_ms
        self.observer = observer
        self.nodes: dict[str, SimNode] = {}
        self._heap: list[tuple[int, int, int, str, object]] = []
        self._seq = 0
        #: Counters of what happened on the wire.
        self.counters: dict[str, int] = {
            "broadcasts": 0,
            "deliveries": 0,
            "lost": 0,
            "partitioned": 0,
            "offline": 0,
            "bytes": 0,
        }

    # ----------------------------------------------------------------- topology

    def add_node(
        self,
        node_id: str,
        channels: Iterable[str],
        config: sds.Config | None = None,
    ) -> SimNode:
        """Create a participant ``node_id`` that joins ``channels`` now."""
        if node_id in self.nodes:
            raise ValueError(f"node {node_id!r} already exists")
        p = sds.Participant(node_id, config, random.Random(self.rng.getrandbits(64)))
        node = SimNode(node_id, p)
        for cid in channels:
            p.join(cid, self.now_ms)
            node.delivered[cid] = []
        self.nodes[node_id] = node
        self._after_call(node)
        return node

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        """Split the nodes: only nodes of the same group hear each other."""
        for gi, members in enumerate(groups, start=1):
            for nid in members:
                self.nodes[nid].group = gi

    def heal(self) -> None:
        """Remove every partition."""
        for node in self.nodes.values():
            node.group = 0

    def set_online(self, node_id: str, online: bool) -> None:
        """Take a node off the network (it hears nothing, its timers pause) or back."""
        node = self.nodes[node_id]
        node.online = online
        if online:
            self._after_call(node)

    # --------------------------------------------------------------------- use

    def send(self, node_id: str, channel_id: str, content: bytes) -> str:
        """``node_id`` types ``content`` in ``channel_id``; returns the message id."""
        node = self.nodes[node_id]
        ch = node.participant.channel(channel_id)
        data = ch.send(content, self.now_ms)
        node.sent += 1
        self._broadcast(node, data)
        message_id = ""
        for ev in ch.events():
            if isinstance(ev, sds.MessageSent):
                message_id = ev.message_id
                node.delivered[channel_id].append(ev.message_id)
            self._observe(node, ev)
        self._after_call(node)
        return message_id

    def run_until(self, t_ms: int, max_steps: int = 50_000_000) -> None:
        """Process every delivery and timer up to virtual time ``t_ms``."""
        heap = self._heap
        steps = 0
        while heap and heap[0][0] <= t_ms and steps < max_steps:
            steps += 1
            at, _, kind, nid, payload = heapq.heappop(heap)
            self.now_ms = max(self.now_ms, at)
            node = self.nodes[nid]
            if kind == _TIMER:
                if not node.online or node.armed_ms != at:
                    continue
                node.armed_ms = None
                node.participant.handle_timer(self.now_ms)
                self._after_call(node)
            else:
                if not node.online:
                    self.counters["offline"] += 1
                    continue
                node.received += 1
                assert isinstance(payload, bytes)
                node.participant.receive(payload, self.now_ms)
                self._after_call(node)
        self.now_ms = max(self.now_ms, t_ms)

    def run_for(self, ms: int) -> None:
        """Advance virtual time by ``ms``."""
        self.run_until(self.now_ms + ms)

    def pending(self) -> int:
        """Items (deliveries and timers) scheduled."""
        return len(self._heap)

    # ---------------------------------------------------------------- internals

    def _observe(self, node: SimNode, ev: sds.Event) -> None:
        if isinstance(ev, sds.MessageDelivered):
            node.delivered[ev.channel_id].append(ev.message_id)
        if self.observer is not None:
            self.observer(node.node_id, ev, self.now_ms)

    def _broadcast(self, src: SimNode, data: bytes) -> None:
        self.counters["broadcasts"] += 1
        lo, hi = self.latency_ms
        rng = self.rng
        for dst in self.nodes.values():
            if dst is src:
                continue
            if src.group and dst.group and src.group != dst.group:
                self.counters["partitioned"] += 1
                continue
            if self.loss and rng.random() < self.loss:
                self.counters["lost"] += 1
                continue
            self.counters["deliveries"] += 1
            self.counters["bytes"] += len(data)
            at = self.now_ms + (rng.randint(lo, hi) if hi > lo else lo)
            self._push(at, _DELIVER, dst.node_id, data)

    def _after_call(self, node: SimNode) -> None:
        for _cid, dgram in node.participant.datagrams_to_send():
            self._broadcast(node, dgram.data)
        for ev in node.participant.events():
            self._observe(node, ev)
        if not node.online:
            return
        t = node.participant.get_timer()
        if t is not None and t != node.armed_ms:
            t = max(t, self.now_ms)
            node.armed_ms = t
            self._push(t, _TIMER, node.node_id, None)

    def _push(self, at: int, kind: int, nid: str, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, nid, payload))
