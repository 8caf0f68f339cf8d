"""An in-memory broadcast network with virtual time, for tests, demos and simulation.

Every node is an :class:`sds.Participant` driven exactly as a real node drives
it (aioquic-style): after each call into the core, its datagrams are broadcast,
its events handed to the observer and its single timer re-armed. Time is virtual:
:meth:`MemNetwork.run_until` jumps from one scheduled thing to the next, so a
simulated hour takes as long as the work in it, not an hour.

Links: each node may have a bandwidth (bits per second, ``add_node(...,
bandwidth_bps=)``; ``None`` is unlimited). A broadcast is uploaded once over the
sender's link (as to a relay, which fans it out) and downloaded over each
receiver's link; each direction of a link is a FIFO queue, so a message's
transmission time is ``8 * bytes / bandwidth`` and a message waits for those
queued before it on the same link (reserved in the order they were sent).
Arrival = upload done + propagation latency + download queueing and
transmission. A 46 KB message then reaches a 1 Mbit/s participant about 0.37 s
after a 3 KB one sent at the same time would have.

Faults: a loss rate per delivery, a loss rate per broadcast at the sender
(``send_loss``: every receiver misses it, as ``sdschat join --drop-rate`` drops
an outgoing envelope before the relay sees it), a latency range (uniform, or exponential
within the range), partitions (groups that cannot hear each other until
healed) and nodes going offline (they hear nothing and their timers pause until
they come back). Everything random comes from one seeded ``random.Random``: a
run is reproducible from its seed.

Channels are topics: a broadcast reaches the other members of its channel only
(as a relay forwards by topic). An optional *store peer* keeps every content
message it hears and answers a participant's :class:`sds.MessagesMissing` with
the ids it holds, after one round trip.

Scale (``sdschat sim`` runs 10,000 participants): the cost of the network is
per delivery, so deliveries are batched. A broadcast draws, per receiver, the
loss and the arrival delay, and groups receivers by arrival time: one heap
entry per distinct arrival time (a few dozen for a latency range in ms), not
one per receiver. The bytes are parsed once per broadcast, read once into an
:class:`sds.message.SharedMessage` (ids interned, the history's ids listed) and
handed to each receiver's channel with :meth:`sds.Channel.receive_parsed` (what
``Participant.receive`` does after parsing). Timers are re-armed lazily: a
node's heap entry is replaced only when its deadline moves *earlier*; a later
deadline is noticed when the old entry fires.

Carrying (``sds.Config.carry_copies``): after a node sends a content message, the
messages its channel names in :meth:`sds.Channel.to_carry` ride on the same
broadcast, as a real node's envelope carries them: one loss draw per envelope, one
delivery counted per receiver, the bytes of all of them uploaded and received. A
receiver gives the carried messages to its channel first (``carried=True``: they
are older, and the new message names them), then the message itself. The counters
``carried_sent`` and ``carried_bytes`` count the copies attached (per broadcast);
each channel's ``stats()`` counts those new to it and those it held.
"""

from __future__ import annotations

import hashlib
import heapq
import math
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

import sds
from sds.message import DecodeError, SharedMessage, parse_pb

__all__ = [
    "DatagramObserver",
    "EventObserver",
    "MemNetwork",
    "NetEvent",
    "NodeJoined",
    "NodeOffline",
    "NodeOnline",
    "SimNode",
    "StorePeer",
    "StoreRetrieval",
]


@dataclass(frozen=True, slots=True)
class NodeJoined:
    """(network event) The node joined ``channel_id``."""

    channel_id: str


@dataclass(frozen=True, slots=True)
class NodeOffline:
    """(network event) The node went offline (reported per joined channel)."""

    channel_id: str


@dataclass(frozen=True, slots=True)
class NodeOnline:
    """(network event) The node came back online (reported per joined channel)."""

    channel_id: str


@dataclass(frozen=True, slots=True)
class StoreRetrieval:
    """(network event) The store peer handed the node a message it reported missing.

    ``data`` is the message's wire bytes (logged by size only).
    """

    channel_id: str
    message_id: str
    sender_id: str
    data: bytes


#: What the network itself reports beside the core's events (only with
#: ``net_events=True``).
NetEvent = NodeJoined | NodeOffline | NodeOnline | StoreRetrieval

#: Observer callback: (node id, event, virtual time in ms). With
#: ``net_events=True`` it also receives :data:`NetEvent` objects.
EventObserver = Callable[[str, sds.Event, int], None]

#: Datagram observer: (node id, channel id, kind, message id, size in bytes,
#: virtual time in ms), called for every broadcast before the events of the
#: same core call. ``kind`` is ``"message"`` for a new content message, else the
#: :class:`sds.Datagram` kind (``"resend"``, ``"sync"``, ``"repair"``).
DatagramObserver = Callable[[str, str, str, str, int, int], None]


@dataclass(slots=True, eq=False)
class SimNode:
    """One participant on the network."""

    node_id: str
    participant: sds.Participant
    online: bool = True
    group: int = 0
    armed_ms: int | None = None
    sent: int = 0
    received: int = 0
    #: Link bandwidth in bits per second (``None``: unlimited), both directions.
    bandwidth_bps: int | None = None
    #: Virtual time (ms, fractional) at which the upload / download queue is free.
    up_free_ms: float = 0.0
    down_free_ms: float = 0.0
    delivered: dict[str, list[str]] = field(default_factory=dict)


@dataclass(slots=True)
class StorePeer:
    """An archive of every content message broadcast, by (channel, message id).

    It hears every broadcast (it is a server, not partitioned, never offline)
    and answers :class:`sds.MessagesMissing` after ``rtt_ms``.
    """

    rtt_ms: int = 100
    messages: dict[tuple[str, str], tuple[str, bytes]] = field(default_factory=dict)
    retrievals: int = 0
    queries: int = 0


# Heap item kinds.
_DELIVER = 0  # payload: (data, [nodes]) - one broadcast's receivers arriving at one time
_TIMER = 1  # payload: node
_STORE = 2  # payload: (node, channel, message_id, sender_id, data)


def retrieval_hint(data: bytes) -> bytes:
    """The retrieval hint of a message on the simulated wire: sha256 of its bytes, the
    size of a real node's (the sha256 of its envelope), so that causal histories
    weigh what they weigh between real nodes (bench/real_vs_sim.py)."""
    return hashlib.sha256(data).digest()


class _Parsed:
    """A broadcast's bytes, parsed at first delivery and shared by every receiver."""

    __slots__ = ("carried", "data", "hint", "pb", "state")

    def __init__(self, data: bytes, carried: tuple[bytes, ...] = ()) -> None:
        self.data = data
        self.pb: object = None
        self.state = 0  # 0 not parsed, 1 parsed, 2 malformed
        #: the retrieval hint receivers record (a real node's is the envelope's
        #: sha256: 32 bytes in every causal-history entry naming the message)
        self.hint = b""
        #: the messages riding on it (sds.Config.carry_copies), parsed the same way
        self.carried: tuple[_Parsed, ...] = tuple(_Parsed(c) for c in carried)

    def parse(self) -> None:
        if self.state == 0:
            try:
                self.pb = SharedMessage(parse_pb(self.data))
                self.state = 1
            except DecodeError:
                self.state = 2
            self.hint = retrieval_hint(self.data)


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
        latency_dist: str = "uniform",
        store: StorePeer | None = None,
        net_events: bool = False,
        datagram_observer: DatagramObserver | None = None,
        track_delivered: bool = True,
        send_loss: float = 0.0,
        replay_guard: bool = False,
    ) -> None:
        if not 0.0 <= loss < 1.0:
            raise ValueError("loss must be in [0, 1)")
        if not 0.0 <= send_loss < 1.0:
            raise ValueError("send_loss must be in [0, 1)")
        lo, hi = latency_ms
        if not 0 <= lo <= hi:
            raise ValueError("latency range must satisfy 0 <= low <= high")
        if latency_dist not in ("uniform", "exponential"):
            raise ValueError("latency_dist must be 'uniform' or 'exponential'")
        self.rng = random.Random(seed)
        self.loss = loss
        self.send_loss = send_loss
        self.latency_ms = latency_ms
        self.latency_dist = latency_dist
        self.now_ms = start_ms
        self.observer = observer
        self.datagram_observer = datagram_observer
        self.net_events = net_events
        self.track_delivered = track_delivered
        #: A real node's replay guard: a content message a receiver holds arrives as
        #: the same bytes again (a resend, a repair answer), and the node drops the
        #: envelope before opening it (what it carried included) and tells the core
        #: ``note_copy``; without it the copy reaches ``receive_parsed`` as a duplicate
        #: (whose history may now count its author as heard: sds.census).
        self.replay_guard = replay_guard
        self.store = store
        self.nodes: dict[str, SimNode] = {}
        #: Members of each channel (the broadcast audience), in join order.
        self.members: dict[str, list[SimNode]] = {}
        self._heap: list[tuple[int, int, int, object]] = []
        self._seq = 0
        #: Wire bytes of every content message sent, by (channel, id): what each
        #: node's storage would hold (one shared reference per message).
        self._wire: dict[tuple[str, str], bytes] = {}
        #: what each content message carried: a real node's stored envelope holds the
        #: carried envelopes, so its resends and every repair answer carry them again
        self._wire_carried: dict[tuple[str, str], tuple[bytes, ...]] = {}
        #: Counters of what happened on the wire.
        self.counters: dict[str, int] = {
            "broadcasts": 0,
            "deliveries": 0,
            "lost": 0,
            "partitioned": 0,
            "offline": 0,
            "bytes": 0,
            "bytes_sent": 0,
            "store_retrievals": 0,
            "queue_wait_ms": 0,
            "send_lost": 0,
            "send_lost_bytes": 0,
            "carried_sent": 0,
            "carried_bytes": 0,
            "carried_again": 0,
        }
        # "bytes": received (deliveries x size); "bytes_sent": uploaded (one per
        # broadcast, those lost at the sender included); "queue_wait_ms": waiting
        # behind earlier messages on links; "send_lost"/"send_lost_bytes":
        # broadcasts lost at the sender (``send_loss``: nobody, not even the
        # store, receives them).

    # ----------------------------------------------------------------- topology

    def add_node(
        self,
        node_id: str,
        channels: Iterable[str],
        config: sds.Config | None = None,
        bandwidth_bps: int | None = None,
    ) -> SimNode:
        """Create a participant ``node_id`` that joins ``channels`` now.

        ``bandwidth_bps`` is its link's speed (bits per second, each direction;
        ``None``: unlimited).
        """
        if node_id in self.nodes:
            raise ValueError(f"node {node_id!r} already exists")
        if bandwidth_bps is not None and bandwidth_bps <= 0:
            raise ValueError("bandwidth_bps must be > 0 (or None: unlimited)")
        p = sds.Participant(node_id, config, random.Random(self.rng.getrandbits(64)))
        node = SimNode(node_id, p, bandwidth_bps=bandwidth_bps)
        self.nodes[node_id] = node
        for cid in channels:
            p.join(cid, self.now_ms)
            if self.track_delivered:
                node.delivered[cid] = []
            self.members.setdefault(cid, []).append(node)
            if self.net_events:
                self._observe(node, NodeJoined(cid))  # type: ignore[arg-type]
        self._after_call(node)
        return node

    def partition(self, groups: Iterable[Iterable[str]]) -> None:
        """Split the nodes: only nodes of the same group hear each other.

        Nodes named in no group keep group 0 and hear everyone not partitioned
        away from them (group 0 is "everywhere").
        """
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
        if node.online == online:
            return
        node.online = online
        if self.net_events:
            kind = NodeOnline if online else NodeOffline
            for cid in node.participant.channels:
                self._observe(node, kind(cid))  # type: ignore[arg-type]
        if online:
            node.armed_ms = None  # entries pushed before are stale or will re-check
            self._after_call(node)

    # --------------------------------------------------------------------- use

    def send(self, node_id: str, channel_id: str, content: bytes) -> str:
        """``node_id`` types ``content`` in ``channel_id``; returns the message id."""
        node = self.nodes[node_id]
        ch = node.participant.channel(channel_id)
        data = ch.send(content, self.now_ms)
        node.sent += 1
        events = ch.events()
        message_id = ""
        for ev in events:
            if isinstance(ev, sds.MessageSent):
                message_id = ev.message_id
                self._wire[(channel_id, message_id)] = data
                ch.set_retrieval_hint(message_id, retrieval_hint(data))
        carried = tuple(d for _, d in ch.to_carry(self.now_ms))
        if carried and message_id:
            self._wire_carried[(channel_id, message_id)] = carried
        if self.datagram_observer is not None:
            self.datagram_observer(
                node_id, channel_id, "message", message_id, len(data), self.now_ms
            )
        self._broadcast(node, channel_id, data, carried)
        for ev in events:
            if isinstance(ev, sds.MessageSent) and self.track_delivered:
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
            at, _, kind, payload = heapq.heappop(heap)
            if at > self.now_ms:
                self.now_ms = at
            if kind == _DELIVER:
                parsed: _Parsed
                receivers: list[SimNode]
                parsed, receivers = payload  # type: ignore[misc]
                self._deliver_batch(parsed, receivers)
            elif kind == _TIMER:
                self._timer(payload, at)  # type: ignore[arg-type]
            else:
                self._store_deliver(payload)  # type: ignore[arg-type]
        self.now_ms = max(self.now_ms, t_ms)

    def run_for(self, ms: int) -> None:
        """Advance virtual time by ``ms``."""
        self.run_until(self.now_ms + ms)

    def pending(self) -> int:
        """Items (delivery batches and timers) scheduled."""
        return len(self._heap)

    def next_time(self) -> int | None:
        """Virtual time of the next scheduled item, if any."""
        return self._heap[0][0] if self._heap else None

    # ---------------------------------------------------------------- internals

    def _observe(self, node: SimNode, ev: sds.Event) -> None:
        if self.track_delivered and type(ev) is sds.MessageDelivered:
            node.delivered[ev.channel_id].append(ev.message_id)
        if self.observer is not None:
            self.observer(node.node_id, ev, self.now_ms)
        if self.store is not None and type(ev) is sds.MessagesMissing and node.online:
            self._store_query(node, ev)

    def _latency(self) -> int:
        lo, hi = self.latency_ms
        if hi <= lo:
            return lo
        if self.latency_dist == "uniform":
            return lo + int(self.rng.random() * (hi - lo + 1))
        # Exponential with mean a third of the range, cut at the top of the range.
        d = -math.log(1.0 - self.rng.random()) * (hi - lo) / 3.0
        return lo + min(hi - lo, int(d))

    def _broadcast(
        self, src: SimNode, channel_id: str, data: bytes, carried: tuple[bytes, ...] = ()
    ) -> None:
        counters = self.counters
        size = len(data)
        if carried:
            extra = sum(map(len, carried))
            size += extra
            counters["carried_sent"] += len(carried)
            counters["carried_bytes"] += extra
        counters["broadcasts"] += 1
        counters["bytes_sent"] += size
        if self.send_loss and self.rng.random() < self.send_loss:
            counters["send_lost"] += 1
            counters["send_lost_bytes"] += size
            return
        if self.store is not None:
            for c in carried:
                self._archive(channel_id, c)
            self._archive(channel_id, data)
        members = self.members.get(channel_id, ())
        lo, hi = self.latency_ms
        rng = self.rng
        rnd = rng.random
        loss = self.loss
        span = hi - lo + 1
        uniform = self.latency_dist == "uniform"
        sgroup = src.group
        now = self.now_ms
        bits = 8_000.0 * size  # bits x 1000: divided by bit/s gives ms
        depart: float = now
        waited = 0.0  # time spent waiting in link queues (not transmitting)
        if src.bandwidth_bps is not None:
            start = max(float(now), src.up_free_ms)
            waited = start - now
            src.up_free_ms = depart = start + bits / src.bandwidth_bps
        base = math.ceil(depart) - now
        batches: dict[int, list[SimNode]] = {}
        lost = partitioned = delivered = 0
        for dst in members:
            if dst is src:
                continue
            if sgroup and dst.group and sgroup != dst.group:
                partitioned += 1
                continue
            if loss and rnd() < loss:
                lost += 1
                continue
            delivered += 1
            if hi <= lo:
                delay = lo
            elif uniform:
                delay = lo + int(rnd() * span)
            else:
                delay = self._latency()
            bps = dst.bandwidth_bps
            if bps is None:
                delay += base
            else:
                reach = depart + delay
                start = reach if reach > dst.down_free_ms else dst.down_free_ms
                waited += start - reach
                done = start + bits / bps
                dst.down_free_ms = done
                delay = math.ceil(done) - now
            b = batches.get(delay)
            if b is None:
                batches[delay] = [dst]
            else:
                b.append(dst)
        counters["lost"] += lost
        counters["partitioned"] += partitioned
        counters["deliveries"] += delivered
        counters["bytes"] += delivered * size
        counters["queue_wait_ms"] += int(waited)
        if batches:
            parsed = _Parsed(data, carried)
            for delay in sorted(batches):
                self._push(now + delay, _DELIVER, (parsed, batches[delay]))

    def _deliver_batch(self, parsed: _Parsed, receivers: list[SimNode]) -> None:
        if parsed.state == 0:
            parsed.parse()
            for c in parsed.carried:
                c.parse()
        if self.replay_guard and parsed.state == 1:
            receivers = self._replayed(parsed, receivers)
            if not receivers:
                return
        if parsed.carried:
            self._deliver_carried(parsed.carried, receivers)
        now = self.now_ms
        data = parsed.data
        pb = parsed.pb
        hint = parsed.hint
        cid = pb.channel_id if parsed.state == 1 else ""  # type: ignore[attr-defined]
        well_formed = parsed.state == 1
        after = self._after_channel_call
        for node in receivers:
            if not node.online:
                self.counters["offline"] += 1
                continue
            node.received += 1
            ch = node.participant.channels.get(cid) if well_formed else None
            if ch is None:  # malformed or not joined: let the Participant report it
                node.participant.receive(data, now)
                self._after_call(node)
            else:
                ch.receive_parsed(pb, data, now, hint)  # type: ignore[arg-type]
                after(node, ch)

    def _replayed(self, parsed: _Parsed, receivers: list[SimNode]) -> list[SimNode]:
        """``replay_guard``: the receivers that hold the content message are told of a
        copy (``note_copy``, as a node's replay guard does); the others are returned."""
        pb = parsed.pb
        if not pb.content:  # type: ignore[attr-defined]
            return receivers
        cid = pb.channel_id  # type: ignore[attr-defined]
        mid = pb.message_id  # type: ignore[attr-defined]
        sender = pb.sender_id  # type: ignore[attr-defined]
        now = self.now_ms
        rest = []
        for node in receivers:
            ch = node.participant.channels.get(cid) if node.online else None
            if ch is None or not ch.holds(mid):  # (its own lines too: remembered when sent)
                rest.append(node)
                continue
            node.received += 1
            ch.note_copy(mid, sender, now)
            self._after_channel_call(node, ch)
        return rest

    def _deliver_carried(self, carried: tuple[_Parsed, ...], receivers: list[SimNode]) -> None:
        """The messages riding on a broadcast, to each receiver before the broadcast's
        own message (its output is handled after that message's)."""
        now = self.now_ms
        for c in carried:
            data = c.data
            if c.state != 1:
                for node in receivers:
                    if node.online:
                        node.participant.receive(data, now, carried=True)
                continue
            pb = c.pb
            cid = pb.channel_id  # type: ignore[attr-defined]
            hint = c.hint
            for node in receivers:
                if not node.online:
                    continue
                ch = node.participant.channels.get(cid)
                if ch is None:
                    node.participant.receive(data, now, carried=True)
                else:
                    ch.receive_parsed(pb, data, now, hint, carried=True)  # type: ignore[arg-type]

    def _timer(self, node: SimNode, at: int) -> None:
        if not node.online or node.armed_ms != at:
            return  # stale: a newer entry exists, or the node is away
        node.armed_ms = None
        p = node.participant
        t = p.get_timer()
        if t is None:
            return
        if t <= self.now_ms:
            p.handle_timer(self.now_ms)
        self._after_call(node)

    def _after_call(self, node: SimNode) -> None:
        p = node.participant
        for _ in range(64):  # answering RepairDataNeeded produces more output
            dgrams = p.datagrams_to_send()
            if dgrams:
                obs = self.datagram_observer
                for cid, dgram in dgrams:
                    if obs is not None:
                        obs(node.node_id, cid, dgram.kind, dgram.message_id, len(dgram.data),
                            self.now_ms)
                    self._broadcast(node, cid, dgram.data, self._again_carried(cid, dgram))
            events = p.events()
            more = False
            for ev in events:
                self._observe(node, ev)
                if type(ev) is sds.RepairDataNeeded:
                    more = self._supply_repair_data(node, ev) or more
            if not more:
                break
        if not node.online:
            return
        t = p.get_timer()
        if t is None:
            return
        if t < self.now_ms:
            t = self.now_ms
        armed = node.armed_ms
        if armed is None or t < armed:
            node.armed_ms = t
            self._push(t, _TIMER, node)

    def _after_channel_call(self, node: SimNode, ch: sds.Channel) -> None:
        """:meth:`_after_call` when only ``ch`` was called (the hot path of a delivery)."""
        dgrams = ch.datagrams_to_send()
        if dgrams:
            cid = ch.channel_id
            obs = self.datagram_observer
            for dgram in dgrams:
                if obs is not None:
                    obs(node.node_id, cid, dgram.kind, dgram.message_id, len(dgram.data),
                        self.now_ms)
                self._broadcast(node, cid, dgram.data, self._again_carried(cid, dgram))
        more = False
        events = ch.events()
        if events:
            # _observe, inlined (one to three events after each delivery)
            track = self.track_delivered
            observer = self.observer
            store = self.store
            now = self.now_ms
            for ev in events:
                t_ev = type(ev)
                if track and type(ev) is sds.MessageDelivered:
                    node.delivered[ev.channel_id].append(ev.message_id)
                if observer is not None:
                    observer(node.node_id, ev, now)
                if store is not None and type(ev) is sds.MessagesMissing and node.online:
                    self._store_query(node, ev)
                if t_ev is sds.RepairDataNeeded:
                    more = self._supply_repair_data(node, ev) or more  # type: ignore[arg-type]
        if more:
            self._after_call(node)
            return
        t = ch.get_timer()
        if t is None:
            return
        if t < self.now_ms:
            t = self.now_ms
        armed = node.armed_ms
        if armed is None or t < armed:
            node.armed_ms = t
            self._push(t, _TIMER, node)

    def _again_carried(self, channel_id: str, dgram: sds.Datagram) -> tuple[bytes, ...]:
        """What a resend or repair answer of a content message carries: the same
        envelopes as its first broadcast (the node sends the stored envelope)."""
        if dgram.kind == "sync" or not self._wire_carried:
            return ()
        again = self._wire_carried.get((channel_id, dgram.message_id), ())
        self.counters["carried_again"] += len(again)
        return again

    def _supply_repair_data(self, node: SimNode, ev: sds.RepairDataNeeded) -> bool:
        """What a node's storage does: hand the core the stored bytes of a logged message."""
        ch = node.participant.channels.get(ev.channel_id)
        data = self._wire.get((ev.channel_id, ev.message_id))
        if ch is None or data is None or not ch.has_message(ev.message_id):
            return False
        ch.supply_repair_data(ev.message_id, data, self.now_ms)
        return True

    # --------------------------------------------------------------- store peer

    def _archive(self, channel_id: str, data: bytes) -> None:
        assert self.store is not None
        try:
            pb = parse_pb(data)
        except DecodeError:
            return
        if pb.HasField("lamport_timestamp") and pb.content:
            key = (channel_id, pb.message_id)
            if key not in self.store.messages:
                self.store.messages[key] = (pb.sender_id, data)

    def _store_query(self, node: SimNode, ev: sds.MessagesMissing) -> None:
        store = self.store
        assert store is not None
        store.queries += 1
        for entry in ev.missing:
            found = store.messages.get((ev.channel_id, entry.message_id))
            if found is not None:
                sender, data = found
                self._push(
                    self.now_ms + store.rtt_ms,
                    _STORE,
                    (node, ev.channel_id, entry.message_id, sender, data),
                )

    def _store_deliver(self, item: tuple[SimNode, str, str, str, bytes]) -> None:
        node, cid, mid, sender, data = item
        ch = node.participant.channels.get(cid)
        if not node.online or ch is None or ch.has_message(mid):
            return
        assert self.store is not None
        self.store.retrievals += 1
        self.counters["store_retrievals"] += 1
        if self.net_events:
            self._observe(node, StoreRetrieval(cid, mid, sender, data))  # type: ignore[arg-type]
        node.participant.receive(data, self.now_ms)
        self._after_call(node)

    def _push(self, at: int, kind: int, payload: object) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (at, self._seq, kind, payload))
