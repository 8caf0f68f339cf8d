"""``sdschat sim``: a deterministic, seeded simulation of many SDS participants.

It runs the REAL protocol core (:class:`sds.Participant`, one per participant)
over the in-memory network :class:`net.memnet.MemNetwork` in virtual time, and
writes every event of every participant as Parquet in the schema real nodes'
exports use (:mod:`storage.events_schema`), so ``sdschat report`` reads both::

    sdschat sim --participants 1000 --messages 200 --loss 0.05 --seed 7 --out runs/a
    sdschat report runs/a --out runs/a/report

What is simulated (all times in virtual seconds unless said otherwise):

* ``--participants N`` in ``--channels K`` channels (all in every channel, or
  with ``--split-channels`` participant i only in channel i mod K);
* ``--messages M`` content messages in total, one every ``1/--rate`` seconds
  from a participant drawn at random (``--senders S`` limits who may send) among
  those online, in a channel drawn at random among the sender's;
* ``--loss P`` per delivery, ``--send-loss P`` per broadcast at the sender
  (every receiver misses it; both at P is ``sdschat join --drop-rate P``);
  ``--latency LO:HI`` ms (``--latency-dist``
  uniform or exponential within the range);
* ``--partition START:HEAL:GROUPS`` (repeatable): at START the participants
  split into GROUPS (a count of contiguous index blocks, or index ranges like
  ``0-4/5-9``; unnamed participants hear everyone), healed at HEAL (or
  ``never``);
* ``--churn F``: a fraction F of participants goes offline once, at a random
  time of the message phase, for ``--churn-offline LO:HI`` seconds (offline:
  they hear nothing and their timers pause, as a closed laptop);
* ``--offline I:START:END`` (repeatable): participant I goes offline at START
  seconds and comes back at END (``never``: it leaves for good), on top of any churn;
* ``--store``: a store peer archives every content message and answers a
  participant's ``MessagesMissing`` after ``--store-rtt`` ms;
* then ``--drain`` seconds with no new messages for resends, syncs and repairs.

Protocol configuration (``sim_config``): ``--profile`` (``default``: the sizes of
:class:`sds.Config`, the ones ``sdschat join`` uses; ``waku``: js-waku's,
:meth:`sds.Config.waku`), with ``--timings fast`` (default: the periods of
:meth:`sds.Config.fast`, a few ``--time-scale`` ms) or ``default`` (the profile's
periods). ``--history``, ``--history-floor``, ``--bloom-capacity``,
``--bloom-error`` and ``--repair-cache`` override single sizes. What the sim
sets itself:

=========================== ============ ===========================================
setting                     sim value    why
=========================== ============ ===========================================
log_window                  max(profile, no storage beyond the window: the core
                            messages+1)  must never forget a delivered id
repair_response_groups      N/128 + 1    PROTOCOL.md's recommendation
repair_t_min_ms,            profile x    requests crossing in flight, see below;
repair_t_max_ms,            max(1, 1.5   T_max counted as the core stretches it
lost_timeout_ms             ms x N /     (Config.repair_window_participants);
                            (T_max -     the lost timeout at least 2.5 stretched
                            T_min))      T_max
sync_interval_ms            the preset's the core stretches it by the participants it
                            (x max(1,    hears (sds.Config.sync_interval_participants);
                            N²/64) for a the N²/64 rule only for a profile with a
                            fixed        fixed interval (waku), see below
                            interval)
=========================== ============ ===========================================

Links: ``--bandwidth 1,20`` gives participant i a link of the i-th value (mod
the list) in Mbit/s, each direction; transmission time then follows the bytes
sent and messages queue per link (:class:`net.memnet.MemNetwork`). Without it
links are unlimited (only ``--latency`` counts).

SDS-R at scale: every repair request and every answer is a broadcast to all N.
A message lost by a fraction L of the participants is missed by L x N of them;
each asks at a time spread over ``T_max - T_min`` after noticing, and a request
suppresses the others only once it has reached them (one latency d later), so
about ``L x N x d / (T_max - T_min)`` requests cross in flight, each answered by
a broadcast. With the fast preset (T 0.5-2 s) at N = 10,000, L = 5%, d = 20-120
ms that is ~30 requests and as many answers per lost message, 10,000 deliveries
each, and a holder in the response group (~127 of them) answering within d of
another holder's answer adds more. Widening the spread with N keeps that number
where it is at 1,000 participants (js-waku's 30-120 s are wide enough for
60,000). Holders also stay quiet for ``T_min / 2`` after a copy of the message
was on the wire (``sds`` core).

Sync messages with a fixed interval (the waku profile, js-waku's rule) cost N²
deliveries: every participant's sync reaches every
other, and a receiver shortens its sync delay after each content message, so
under a steady message rate r each participant syncs about every
``sqrt(pi * I / (4 r))`` seconds (I the sync interval). Network-wide sync
deliveries are then ``N / sqrt(pi I r / 4)`` times the content deliveries: for
a fixed interval, that ratio grows with N (250x at N = 10,000, I = 2,000 s,
r = 1/s). Scaling I with N² keeps it constant (about 6x at r = 1/s with the
fast preset), which is what ``--sync-interval auto`` does for such a profile.
The default profile needs no sim-only rule: its core stretches the interval by
the participants it hears and skips a sync that syncs heard already cover
(``sds.Config.sync_interval_participants``, ``sync_suppression``; docs/sim.md).
Pass ``--sync-interval MS`` to study a fixed base interval.

At the end, besides ``run.json``, the command prints a traffic summary:
broadcasts, bytes sent, deliveries and bytes received by kind (content, sync,
resend, repair; a broadcast's bytes include the lines it carries,
``sds.Config.carry_copies``: a content message's, and the same again on its resends
and repair answers), the carried copies (sent, and their arrivals new to a
member or of a line it held), deliveries per content delivery, bytes uploaded per content
message, and what one member uploads and downloads per second while the
messages are sent (busy), in the first half of the drain (settling) and in its
second half (idle); ``run.json`` has the same under ``traffic``.

Memory per participant is dominated by the per-message bookkeeping of its log
window (about 0.8 KB per message held: log entry and its sort key, repair cache
slot, copies and requests heard, ...) plus its bloom filter; message bytes, ids, the
bit positions of an id and each broadcast's parsed form are shared by every
receiver (:class:`sds.message.SharedMessage`, :func:`sds.bloom.positions_in`).
Event rows are written as Parquet every :data:`FLUSH_ROWS` rows (~0.9 KB per
buffered row at the peak). docs/sim.md, "What a delivery and a member cost",
has the profile; ``bench/sim_cost.py`` measures a revision beside another and
checks that the same seed gives the same events.

Measured (``bench/sim_scale.py``, 2-core machine, 100 messages at 2/s, no loss,
fast timings, Parquet written, with the sizes of the time: history 50, filter
2,000): N = 100: 60,489 deliveries in 2.4 s (25k/s), peak 240 MB; N = 1,000:
525,474 deliveries in 23 s (23k/s), peak 0.7 GB; N = 10,000: 1,539,846
deliveries in 123 s (12.5k/s), peak 1.8 GB. With loss, SDS-R dominates: every
request and every answer reaches all N; at N = 10,000 and 5% loss 200 messages
cost 17.7 million deliveries (~88,000 each), 1,064 CPU s and 2.8 GB
(docs/sim.md has the figures and why; those are from before the sync suppression
and the stretched sync interval of issue 28).

Output: ``DIR/events/part-*.parquet`` and ``DIR/run.json`` (parameters, the
protocol configuration, network counters, wall time, peak memory). Both
appear only when the run completed.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import itertools
import json
import math
import random
import resource
import shutil
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

import orjson

import sds
from app import AppError

if TYPE_CHECKING:  # pyarrow loads only when a simulation runs
    from storage.events_schema import EventWriter

__all__ = [
    "TRAFFIC_KINDS",
    "OfflineSpec",
    "PartitionSpec",
    "SimError",
    "SimResult",
    "SimSpec",
    "add_sim_arguments",
    "run_sim",
    "run_sim_command",
    "sim_config",
    "summary_lines",
]

START_MS = 1_700_000_000_000
#: Largest ``--participants``: 10,000 with 200 messages at 5% loss peaked at 3.1 GB
#: before the memory work of docs/sim.md ("What a delivery and a member cost"); far
#: past this a run ends in MemoryError after minutes instead of a usage error.
MAX_PARTICIPANTS = 50_000
#: Largest ``--content-bytes``: what the core accepts (``sds.Config.max_content_bytes``).
MAX_CONTENT_BYTES = 64 * 1024
#: Smallest spread of SDS-R request times (T_max - T_min) per participant: the fast
#: preset's 1.5 s at 1,000 participants (js-waku's 90 s covers 60,000).
REPAIR_SPREAD_MS_PER_PARTICIPANT = 1.5
#: Event rows buffered before they are written as a Parquet row group (and causal-history
#: ids held by the buffer's interned histories). A buffered row and its conversion cost
#: ~0.9 KB at the peak: 1,000 members x 100 msgs peaked at 454 MB with 250,000 rows,
#: 273 MB with 50,000, the same CPU.
FLUSH_ROWS = 50_000
FLUSH_HISTORY_ENTRIES = 4_000_000
#: The third collection threshold while a simulation runs: no full collection.
NO_FULL_COLLECTIONS = 1 << 30


class SimError(AppError, ValueError):
    """Invalid simulation parameters (the message says which)."""


@dataclass(frozen=True, slots=True)
class PartitionSpec:
    """Participants split into ``groups`` (index lists) from ``start_ms`` until ``heal_ms``."""

    start_ms: int
    heal_ms: int | None
    groups: tuple[tuple[int, ...], ...]


@dataclass(frozen=True, slots=True)
class OfflineSpec:
    """Participant ``index`` offline from ``start_ms`` until ``end_ms`` (``None``: it
    never comes back: it left)."""

    index: int
    start_ms: int
    end_ms: int | None


@dataclass(slots=True)
class SimSpec:
    """Everything that defines a run (with the seed, it determines every event)."""

    participants: int
    messages: int
    loss: float = 0.0
    #: Fraction of broadcasts lost at the sender (nobody receives them): with
    #: ``loss`` the same value, the loss of ``sdschat join --drop-rate``.
    send_loss: float = 0.0
    seed: int = 0
    rate: float = 2.0
    channels: int = 1
    split_channels: bool = False
    senders: int | None = None
    latency_ms: tuple[int, int] = (20, 120)
    latency_dist: str = "uniform"
    partitions: list[PartitionSpec] = field(default_factory=list)
    churn: float = 0.0
    churn_offline_ms: tuple[int, int] = (10_000, 60_000)
    #: Planned offline periods (``--offline``), beside the random churn.
    offline: list[OfflineSpec] = field(default_factory=list)
    store: bool = False
    store_rtt_ms: int = 100
    timings: str = "fast"
    time_scale_ms: int = 1_000
    drain_ms: int | None = None
    profile: str = "default"
    history: int | None = None
    history_floor: int | None = None
    bloom_capacity: int | None = None
    bloom_error: float | None = None
    repair_cache: int | None = None
    bandwidth_mbps: tuple[float, ...] = ()
    #: Any other sds.Config fields (applied last; for studies, e.g. timings).
    protocol: dict[str, Any] = field(default_factory=dict)
    sync_interval_ms: int | None = None
    content_bytes: int = 64
    start_ms: int = START_MS
    #: Participant (sender) ids padded to this many characters, as real nodes' are
    #: (32 hex characters: every message and every history entry naming a sender
    #: carries one). 0: the short ``p000`` ids.
    sender_id_chars: int = 0
    #: Model a real node's replay guard (net.memnet.MemNetwork.replay_guard): a copy of a
    #: message the receiver holds goes to ``note_copy``, not to ``receive``.
    #: bench/real_vs_sim.py sets it; ``False`` by default (the figures in docs/).
    replay_guard: bool = False

    def validate(self) -> None:
        """Raise :class:`SimError` naming every bad parameter."""
        problems = []
        if self.participants < 2:
            problems.append("--participants must be >= 2")
        if self.sender_id_chars and not (
            len(_node_ids(max(2, self.participants))[-1]) <= self.sender_id_chars <= 64
        ):
            problems.append("--sender-id-chars must be 0 or between the short id's length "
                            "and 64")
        if self.messages < 0:
            problems.append("--messages must be >= 0")
        if not 0.0 <= self.loss < 1.0:
            problems.append("--loss must be in [0, 1)")
        if not 0.0 <= self.send_loss < 1.0:
            problems.append("--send-loss must be in [0, 1)")
        if not (math.isfinite(self.rate) and self.rate > 0):
            problems.append("--rate must be a number > 0")
        if self.participants > MAX_PARTICIPANTS:
            problems.append(f"--participants must be <= {MAX_PARTICIPANTS:,}")
        if self.profile not in sds.PROFILES:
            problems.append(f"--profile must be one of {', '.join(sds.PROFILES)}")
        if self.history is not None and self.history < 1:
            problems.append("--history must be >= 1")
        if self.bloom_capacity is not None and self.bloom_capacity < 1:
            problems.append("--bloom-capacity must be >= 1")
        if self.bloom_error is not None and not 0.0 < self.bloom_error < 1.0:
            problems.append("--bloom-error must be in (0, 1)")
        if self.repair_cache is not None and self.repair_cache < 0:
            problems.append("--repair-cache must be >= 0")
        if any(not (math.isfinite(b) and b > 0) for b in self.bandwidth_mbps):
            problems.append("--bandwidth values must be Mbit/s > 0")
        if self.channels < 1:
            problems.append("--channels must be >= 1")
        if self.split_channels and self.participants < 2 * self.channels:
            problems.append("--split-channels needs at least 2 participants per channel")
        if self.senders is not None and not 1 <= self.senders <= self.participants:
            problems.append("--senders must be in 1..participants")
        lo, hi = self.latency_ms
        if not 0 <= lo <= hi:
            problems.append("--latency must be LO:HI with 0 <= LO <= HI")
        if self.latency_dist not in ("uniform", "exponential"):
            problems.append("--latency-dist must be uniform or exponential")
        if not 0.0 <= self.churn <= 1.0:
            problems.append("--churn must be in [0, 1]")
        clo, chi = self.churn_offline_ms
        if not 0 <= clo <= chi:
            problems.append("--churn-offline must be LO:HI with 0 <= LO <= HI")
        if self.timings not in ("fast", "default"):
            problems.append("--timings must be fast or default")
        if self.time_scale_ms < 10:
            problems.append("--time-scale must be >= 10 ms")
        if self.drain_ms is not None and self.drain_ms < 0:
            problems.append("--drain must be >= 0")
        if not 1 <= self.content_bytes <= MAX_CONTENT_BYTES:
            problems.append(f"--content-bytes must be in 1..{MAX_CONTENT_BYTES}")
        if self.store_rtt_ms < 0:
            problems.append("--store-rtt must be >= 0")
        for o in self.offline:
            if not 0 <= o.index < self.participants:
                problems.append(f"--offline names participant index {o.index} (out of range)")
            if o.start_ms < 0 or (o.end_ms is not None and o.end_ms <= o.start_ms):
                problems.append("--offline needs 0 <= START < END")
        for p in self.partitions:
            for g in p.groups:
                for i in g:
                    if not 0 <= i < self.participants:
                        problems.append(f"partition names participant index {i} (out of range)")
                        break
        if problems:
            raise SimError("; ".join(problems))

    @property
    def message_phase_ms(self) -> int:
        """Virtual time over which the messages are sent."""
        return math.ceil(self.messages * 1000 / self.rate)

    @property
    def effective_drain_ms(self) -> int:
        if self.drain_ms is not None:
            return self.drain_ms
        return 60 * self.time_scale_ms if self.timings == "fast" else 600_000


def sim_config(spec: SimSpec) -> sds.Config:
    """The protocol configuration of a run (see the module docstring)."""
    profile = sds.Config.profile(spec.profile)
    base = profile.with_fast_timings(spec.time_scale_ms) if spec.timings == "fast" else profile
    if spec.protocol:
        base = base.with_changes(**spec.protocol)
    n = spec.participants
    if spec.sync_interval_ms is not None:
        sync = spec.sync_interval_ms
    elif base.sync_interval_participants is not None:
        sync = base.sync_interval_ms  # the core stretches it with the participants heard
    else:
        sync = int(base.sync_interval_ms * max(1.0, n * n / 64))
    changes: dict[str, Any] = {}
    if spec.history is not None:
        changes["causal_history_size"] = spec.history
    if spec.history_floor is not None:  # negative: a fixed (newest-N) history
        changes["causal_history_floor"] = spec.history_floor if spec.history_floor >= 0 else None
    if spec.bloom_capacity is not None:
        changes["bloom_capacity"] = spec.bloom_capacity
    if spec.bloom_error is not None:
        changes["bloom_error_rate"] = spec.bloom_error
    if spec.repair_cache is not None:
        changes["repair_cache_size"] = spec.repair_cache
    history = changes.get("causal_history_size", base.causal_history_size)
    # SDS-R windows wide enough for the channel (see the module docstring): at least
    # REPAIR_SPREAD_MS_PER_PARTICIPANT x N between T_min and T_max, the lost timeout
    # scaled alike. The fast preset's 0.5-2 s suits up to 1,000 participants.
    # The core stretches T_max itself with the participants it hears
    # (sds.Config.repair_window_participants), from the start at least as far as the
    # response groups set below stand for (128 per group beyond the first): count
    # that stretch first.
    t_min, t_max = base.repair_t_min_ms, base.repair_t_max_ms
    per = base.repair_window_participants
    core_t_max = t_max
    if per is not None and n > per:
        core_t_max = max(t_max, min(base.repair_t_max_limit_ms, t_max * n // per))
    stretch = max(1.0, REPAIR_SPREAD_MS_PER_PARTICIPANT * n / max(1, core_t_max - t_min))
    if "repair_t_max_ms" not in spec.protocol:
        if stretch > 1.0:
            changes.setdefault("repair_t_min_ms", int(t_min * stretch))
            changes.setdefault("repair_t_max_ms", int(t_max * stretch))
            changes.setdefault("lost_timeout_ms", int(base.lost_timeout_ms * stretch))
        lost = changes.get("lost_timeout_ms", base.lost_timeout_ms)
        if lost and core_t_max > t_max and lost < 5 * core_t_max // 2:
            # requests spread over the stretched window: declare lost only after
            # two and a half such windows (the fast preset's 20 s would come first)
            changes["lost_timeout_ms"] = 5 * core_t_max // 2
    return base.with_changes(
        **changes,
        log_window=max(base.log_window, spec.messages + 1, history),
        repair_response_groups=n // 128 + 1,
        sync_interval_ms=sync,
    )


def link_bandwidth_bps(spec: SimSpec, index: int) -> int | None:
    """Participant ``index``'s link speed in bit/s (``None``: unlimited)."""
    if not spec.bandwidth_mbps:
        return None
    return max(1, int(spec.bandwidth_mbps[index % len(spec.bandwidth_mbps)] * 1_000_000))


@dataclass(slots=True)
class SimResult:
    """What a run produced."""

    out: Path
    rows: int
    files: list[Path]
    meta: dict[str, Any]


def _event_row(ev: Any, now: int) -> Any:
    from storage.events import event_row

    return event_row(ev, now)


def _json_str(s: str) -> str:
    return json.dumps(s) if s else '""'


def _drop_detail(detail: str, reason: str, hint: str) -> str:
    return (f'{{"detail":{_json_str(detail)},"reason":{_json_str(reason)},'
            f'"retrieval_hint":{hint}}}')


def _json_list(items: tuple[str, ...]) -> str:
    return json.dumps(list(items), separators=(",", ":"))


def run_label(spec: SimSpec) -> str:
    """``sim-<seed>-<8 hex>``: the seed and a digest of every parameter."""
    import hashlib

    fields = asdict(spec)
    if not fields["offline"]:  # added later: runs without it keep their labels
        del fields["offline"]
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return f"sim-{spec.seed}-{digest[:8]}"


class _Recorder:
    """The observer: every event of every participant becomes a Parquet row."""

    __slots__ = ("_dg_sizes", "_drop_json", "_request_json", "_seq", "flushes", "net",
                 "records", "rows", "writer")

    def __init__(self, run: str, writer: EventWriter) -> None:
        from storage.events_schema import EventRecords

        self.records = EventRecords(run, "sim")
        self.writer = writer
        self._seq: dict[str, int] = {}
        self._dg_sizes: dict[tuple[str, str, str], int] = {}
        self._request_json: dict[tuple[tuple[str, ...], tuple[str, ...]], str] = {}
        self._drop_json: dict[tuple[str, str], str] = {}
        self.rows = 0
        self.flushes = 0

    def datagram(self, node: str, cid: str, kind: str, mid: str, size: int, now: int) -> None:
        if kind != "message":
            self._dg_sizes[(node, kind, mid)] = size

    def event(self, node: str, ev: Any, now: int) -> None:
        seq = self._seq.get(node, 0) + 1
        self._seq[node] = seq
        t = type(ev)
        rec = self.records
        if t is sds.MessageDelivered:
            rec.add_delivered(
                node, seq, now, ev.channel_id, ev.message_id, ev.sender_id, ev.lamport,
                len(ev.data), len(ev.content), ev.causal_history, ev.position,
                ev.missing_before, ev.retrieval_hint, ev.was_lost,
            )
        elif t is sds.SyncReceived:
            rec.add_plain(
                node, seq, now, ev.channel_id, "SyncReceived", ev.message_id, ev.sender_id,
                ev.lamport, None, "{}",
            )
        elif t is sds.MessageDropped:
            reason = ev.reason.value
            if ev.retrieval_hint is None:
                # a third of all rows (copies of repair answers): the same few details
                key = (ev.detail, reason)
                detail = self._drop_json.get(key)
                if detail is None:
                    if len(self._drop_json) >= 4_096:
                        self._drop_json.clear()
                    detail = self._drop_json[key] = _drop_detail(ev.detail, reason, "null")
            else:
                detail = _drop_detail(ev.detail, reason, f'"{ev.retrieval_hint.hex()}"')
            rec.add_plain(
                node, seq, now, ev.channel_id, "MessageDropped", ev.message_id, ev.sender_id,
                None, reason, detail,
            )
        elif t is sds.MessagesMissing:
            # one per receiver of a message naming ids it lacks, and per sweep: the
            # generic conversion (dataclass reflection) cost ~10x this
            missing = [
                {"message_id": e.message_id, "retrieval_hint":
                 None if e.retrieval_hint is None else e.retrieval_hint.hex(),
                 "sender_id": e.sender_id}
                for e in ev.missing
            ]
            rec.add_plain(
                node, seq, now, ev.channel_id, "MessagesMissing", ev.message_id, ev.sender_id,
                None, None,
                orjson.dumps({"first": ev.first, "missing": missing},
                             option=orjson.OPT_SORT_KEYS).decode(),
            )
        elif t is sds.RepairRequestReceived:
            # every receiver of a request logs the same ids: their JSON is made once
            key = (ev.message_ids, ev.scheduled)
            detail = self._request_json.get(key)
            if detail is None:
                if len(self._request_json) >= 4_096:
                    self._request_json.clear()
                detail = self._request_json[key] = (
                    f'{{"message_ids":{_json_list(ev.message_ids)},'
                    f'"scheduled":{_json_list(ev.scheduled)}}}'
                )
            rec.add_plain(
                node, seq, now, ev.channel_id, "RepairRequestReceived", None, ev.sender_id,
                None, None, detail,
            )
        else:
            size = None
            if t is sds.SyncSent:
                size = self._dg_sizes.pop((node, "sync", ev.message_id), None)
            elif t is sds.MessageResent:
                size = self._dg_sizes.pop((node, "resend", ev.message_id), None)
            elif t is sds.RepairSent:
                size = self._dg_sizes.pop((node, "repair", ev.message_id), None)
            history = ev.causal_history if t is sds.MessageSent else None
            rec.add_row(node, seq, _event_row(ev, now), history, size_bytes=size)
        self.rows += 1
        if len(rec) >= FLUSH_ROWS or rec.history_entries >= FLUSH_HISTORY_ENTRIES:
            self.flush()

    def flush(self) -> None:
        if len(self.records):
            self.writer.write(self.records)
            self.flushes += 1


#: Datagram kinds as the summary names them (``message`` is a first send).
TRAFFIC_KINDS = {"message": "content", "sync": "sync", "resend": "resend",
                 "repair": "repair"}


class _Traffic:
    """Broadcasts, deliveries and bytes by kind of message (content, sync, resend,
    repair), with snapshots at phase boundaries: the end-of-run summary.

    The network calls the datagram observer right before it broadcasts each datagram
    (:class:`net.memnet.MemNetwork`), so the kind is known when the broadcast's
    counters move; the broadcast itself is wrapped to attribute them."""

    __slots__ = ("kind", "net", "snapshots", "totals")

    def __init__(self, net: Any) -> None:
        self.net = net
        self.kind = "content"
        self.totals: dict[str, list[int]] = {
            k: [0, 0, 0, 0] for k in TRAFFIC_KINDS.values()
        }  # broadcasts, bytes sent, deliveries, bytes received
        self.snapshots: dict[str, tuple[int, dict[str, list[int]]]] = {}
        original = net._broadcast
        counters = net.counters

        def broadcast(src: Any, channel_id: str, data: bytes,
                      carried: tuple[bytes, ...] = ()) -> None:
            d0, b0 = counters["deliveries"], counters["bytes"]
            original(src, channel_id, data, carried)
            row = self.totals[self.kind]
            row[0] += 1
            row[1] += len(data) + sum(map(len, carried))
            row[2] += counters["deliveries"] - d0
            row[3] += counters["bytes"] - b0
            self.kind = "content"  # a first send has no datagram observer call before it

        net._broadcast = broadcast

    def datagram(self, kind: str) -> None:
        self.kind = TRAFFIC_KINDS.get(kind, kind)

    def snapshot(self, name: str, now_ms: int) -> None:
        self.snapshots[name] = (now_ms, {k: list(v) for k, v in self.totals.items()})

    def summary(self, participants: int) -> dict[str, Any]:
        """``by_kind`` (broadcasts, bytes sent, deliveries, bytes received) and, per
        phase, what one member uploads and downloads per second on average."""
        out: dict[str, Any] = {
            "by_kind": {
                k: dict(zip(("broadcasts", "bytes_sent", "deliveries", "bytes_received"),
                            v, strict=True))
                for k, v in self.totals.items()
            }
        }
        phases: dict[str, Any] = {}
        marks = sorted(self.snapshots.items(), key=lambda kv: kv[1][0])
        for (_, (t0, a)), (name, (t1, b)) in itertools.pairwise(marks):
            secs = max(1e-3, (t1 - t0) / 1000)
            up = sum(b[k][1] - a[k][1] for k in b)
            down = sum(b[k][3] - a[k][3] for k in b)
            phases[name] = {
                "seconds": round(secs, 1),
                "member_up_bytes_per_s": round(up / participants / secs, 1),
                "member_down_bytes_per_s": round(down / participants / secs, 1),
                "broadcasts": sum(b[k][0] - a[k][0] for k in b),
            }
        out["phases"] = phases
        return out


class _Progress:
    """A one-line progress bar on stderr (only if asked, or stderr is a terminal)."""

    def __init__(self, total_ms: int, enabled: bool, stream: TextIO) -> None:
        self.total = max(1, total_ms)
        self.enabled = enabled
        self.stream = stream
        self.last = 0.0
        self.started = time.monotonic()

    def update(self, done_ms: int, deliveries: int, force: bool = False) -> None:
        if not self.enabled:
            return
        now = time.monotonic()
        if not force and now - self.last < 0.5:
            return
        self.last = now
        frac = min(1.0, max(0.0, done_ms / self.total))
        width = 30
        bar = "#" * int(frac * width)
        elapsed = now - self.started
        rate = deliveries / elapsed if elapsed > 0 else 0.0
        # remaining virtual time at the pace so far (the drain is usually quieter)
        eta = f"{elapsed * (1 - frac) / frac:7.0f}s" if frac > 0 else "      ?"
        self.stream.write(
            f"\r[{bar:<{width}}] {frac:6.1%}  virtual {done_ms / 1000:8.1f}s  "
            f"{deliveries:>12,} deliveries  {rate:>10,.0f}/s  wall {elapsed:6.1f}s  eta {eta}"
        )
        self.stream.flush()

    def done(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()


def _node_ids(n: int, chars: int = 0) -> list[str]:
    width = max(3, len(str(n - 1)))
    short = [f"p{i:0{width}d}" for i in range(n)]
    if not chars:
        return short
    # the short id, then hex of its sha256 up to the length of a real one
    return [s + hashlib.sha256(s.encode()).hexdigest()[: chars - len(s)] for s in short]


def _content(i: int, node: str, size: int) -> bytes:
    text = f"message {i} from {node} "
    return (text * (size // len(text) + 1))[:size].encode()


def run_sim(
    spec: SimSpec,
    out: str | Path,
    *,
    force: bool = False,
    progress: bool = False,
    stream: TextIO | None = None,
) -> SimResult:
    """Run the simulation and write ``out/events/*.parquet`` and ``out/run.json``."""
    from net.memnet import MemNetwork, StorePeer
    from storage.events_schema import SCHEMA_VERSION, EventWriter

    spec.validate()
    stream = stream or sys.stderr
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise SimError(f"--out {out} is a file, not a directory")
    if (out / "events").exists() and not force:
        raise SimError(f"{out} already holds a run (use --force to replace it)")
    cfg = sim_config(spec)
    rng = random.Random(spec.seed ^ 0x5D5C4A7)
    ids = _node_ids(spec.participants, spec.sender_id_chars)
    channels = [f"sim-{k}" for k in range(spec.channels)] if spec.channels > 1 else ["sim"]
    run = run_label(spec)

    staging = out.parent / f".{out.name}.partial-{time.time_ns()}"
    staging.mkdir(parents=True)
    writer = EventWriter(staging / "events")
    recorder = _Recorder(run, writer)
    traffic: _Traffic | None = None

    def _observe_datagram(node: str, cid: str, kind: str, mid: str, size: int, now: int) -> None:
        recorder.datagram(node, cid, kind, mid, size, now)
        if traffic is not None:
            traffic.datagram(kind)

    store = StorePeer(rtt_ms=spec.store_rtt_ms) if spec.store else None
    net = MemNetwork(
        seed=spec.seed,
        loss=spec.loss,
        send_loss=spec.send_loss,
        latency_ms=spec.latency_ms,
        latency_dist=spec.latency_dist,
        start_ms=spec.start_ms,
        observer=recorder.event,
        datagram_observer=_observe_datagram,
        store=store,
        net_events=True,
        track_delivered=False,
        replay_guard=spec.replay_guard,
    )
    traffic = _Traffic(net)
    traffic.snapshot("start", net.now_ms)
    wall0 = time.monotonic()
    thresholds = gc.get_threshold()
    # No full (generation 2) collections while it runs: each walks every live object,
    # millions of them per 1,000 members, and a run makes next to no cyclic garbage
    # (mid-run at 2,000 members: 474 objects, all from imports). 2,000 members x 40
    # messages: 14.1 s CPU with them, 11.1 s without; the young generations still run.
    gc.set_threshold(thresholds[0], thresholds[1], NO_FULL_COLLECTIONS)
    try:
        membership: list[list[str]] = []
        for i, nid in enumerate(ids):
            mine = [channels[i % len(channels)]] if spec.split_channels else list(channels)
            membership.append(mine)
            net.add_node(nid, mine, cfg, bandwidth_bps=link_bandwidth_bps(spec, i))

        # The schedule: (time, order, action, args). Order breaks ties deterministically.
        actions: list[tuple[int, int, str, tuple[Any, ...]]] = []
        phase = spec.message_phase_ms
        senders = list(range(spec.participants))
        if spec.senders is not None:
            senders = sorted(rng.sample(senders, spec.senders))
        for i in range(spec.messages):
            actions.append((spec.start_ms + int(i * 1000 / spec.rate), 3, "send", (i,)))
        for p in spec.partitions:
            groups = [[ids[j] for j in g] for g in p.groups]
            actions.append((spec.start_ms + p.start_ms, 0, "partition", (groups,)))
            if p.heal_ms is not None:
                actions.append((spec.start_ms + p.heal_ms, 1, "heal", ()))
        if spec.churn > 0:
            k = round(spec.churn * spec.participants)
            lo, hi = spec.churn_offline_ms
            for j in sorted(rng.sample(range(spec.participants), k)):
                at = spec.start_ms + rng.randint(0, max(0, phase))
                back = at + rng.randint(lo, hi)
                actions.append((at, 2, "offline", (ids[j],)))
                actions.append((back, 2, "online", (ids[j],)))
        for o in spec.offline:
            actions.append((spec.start_ms + o.start_ms, 2, "offline", (ids[o.index],)))
            if o.end_ms is not None:
                actions.append((spec.start_ms + o.end_ms, 2, "online", (ids[o.index],)))
        actions.sort(key=lambda a: (a[0], a[1]))
        end_ms = spec.start_ms + max(
            phase + spec.effective_drain_ms,
            max((a[0] - spec.start_ms for a in actions), default=0) + 1,
        )
        bar = _Progress(end_ms - spec.start_ms, progress, stream)
        sent = 0
        skipped = 0
        per_channel: dict[str, int] = dict.fromkeys(channels, 0)
        for at, _, what, args in actions:
            net.run_until(at)
            bar.update(net.now_ms - spec.start_ms, net.counters["deliveries"])
            if what == "send":
                # Pick a sender among the online ones (bounded tries, deterministic).
                for _ in range(64):
                    j = senders[rng.randrange(len(senders))]
                    if net.nodes[ids[j]].online:
                        break
                else:
                    skipped += 1
                    continue
                mine = membership[j]
                cid = mine[rng.randrange(len(mine))]
                net.send(ids[j], cid, _content(args[0], ids[j], spec.content_bytes))
                sent += 1
                per_channel[cid] += 1
            elif what == "partition":
                net.heal()
                net.partition(args[0])
            elif what == "heal":
                net.heal()
            elif what == "offline":
                net.set_online(args[0], False)
            elif what == "online":
                net.set_online(args[0], True)
        # Drain, in slices so that the progress bar moves; the traffic summary's
        # phases: busy (the messages), settling (the first half of the drain), idle.
        step = max(1_000, (end_ms - net.now_ms) // 200)
        busy_end = spec.start_ms + phase
        idle_from = max(busy_end, end_ms - spec.effective_drain_ms // 2)
        marks = [(busy_end, "busy"), (idle_from, "settling"), (end_ms, "idle")]
        while net.now_ms < end_ms:
            nxt = min(end_ms, net.now_ms + step)
            while marks and marks[0][0] <= net.now_ms:
                traffic.snapshot(marks.pop(0)[1], net.now_ms)
            if marks:
                nxt = min(nxt, marks[0][0])
            net.run_until(nxt)
            bar.update(net.now_ms - spec.start_ms, net.counters["deliveries"])
        for _, name in marks:
            traffic.snapshot(name, net.now_ms)
        bar.update(end_ms - spec.start_ms, net.counters["deliveries"], force=True)
        bar.done()
        recorder.flush()
        files = writer.close()
    except BaseException:
        writer.abort()
        shutil.rmtree(staging, ignore_errors=True)
        raise
    finally:
        gc.set_threshold(*thresholds)
    wall = time.monotonic() - wall0

    held_all = 0
    carried_new = carried_held = 0
    for nid, mine in zip(ids, membership, strict=True):
        node = net.nodes[nid]
        if all(node.participant.channel(c).log_size == per_channel[c] for c in mine):
            held_all += 1
        for c in mine:
            st = node.participant.channel(c).stats()
            carried_new += st["carried_received_new"]
            carried_held += st["carried_received_duplicate"]
    usage = resource.getrusage(resource.RUSAGE_SELF)
    peak_kb = usage.ru_maxrss
    spec_dict = asdict(spec)
    meta: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "run": run,
        "source": "sim",
        "spec": spec_dict,
        "config": cfg.to_dict(),
        "channels": {c: {"messages": per_channel[c]} for c in channels},
        "participants": ids[:3] + (["..."] if len(ids) > 3 else []),
        # the partitions with the participants' ids (the spec names them by index)
        "partitions": [{"start_ms": p.start_ms, "heal_ms": p.heal_ms,
                        "groups": [[ids[j] for j in g] for g in p.groups]}
                       for p in spec.partitions],
        "messages_sent": sent,
        "messages_skipped_no_sender_online": skipped,
        "start_ms": spec.start_ms,
        "end_ms": end_ms,
        "virtual_seconds": (end_ms - spec.start_ms) / 1000,
        "network": dict(net.counters),
        "participants_holding_every_message": held_all,
        "traffic": {
            **traffic.summary(spec.participants),
            # sds.Config.carry_copies: copies attached to content broadcasts, and
            # their arrivals: the first of a line at a member (it had missed the
            # line) or one it held
            "carried": {
                "copies_sent": net.counters["carried_sent"],
                # of which riding again on resends and repair answers (the stored
                # envelope of a line that carried others carries them again)
                "copies_again": net.counters["carried_again"],
                "bytes_sent": net.counters["carried_bytes"],
                "arrivals_new": carried_new,
                "arrivals_held": carried_held,
            },
        },
        "rows": recorder.rows,
        "wall_seconds": round(wall, 3),
        # the process's CPU time (on a loaded machine, wall time counts the waiting)
        "cpu_seconds": round(usage.ru_utime + usage.ru_stime, 1),
        "deliveries_per_second": round(net.counters["deliveries"] / wall, 1) if wall else None,
        "peak_rss_mb": round(peak_kb / 1024, 1),
    }
    try:
        (staging / "run.json").write_text(json.dumps(meta, indent=2) + "\n")
        out.mkdir(parents=True, exist_ok=True)
        for name in ("events", "run.json"):
            target = out / name
            if target.is_dir():
                shutil.rmtree(target)
            elif target.exists():
                target.unlink()
            (staging / name).replace(target)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    return SimResult(out, recorder.rows, [out / "events" / f.name for f in files], meta)


# ------------------------------------------------------------------ command line


def _finite(value: str | float, what: str) -> float:
    """``value`` as a finite float (NaN and infinities are refused)."""
    try:
        number = float(value)
    except ValueError:
        raise SimError(f"{what} must be a number, got {value!r}") from None
    if not math.isfinite(number):
        raise SimError(f"{what} must be a finite number, got {value!r}")
    return number


def _range(text: str, what: str, scale: float = 1.0) -> tuple[int, int]:
    lo_s, _, hi_s = text.partition(":")
    try:
        lo = float(lo_s)
        hi = float(hi_s) if hi_s else lo
    except ValueError:
        raise SimError(f"{what} must be LO:HI (numbers), got {text!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi)):
        raise SimError(f"{what} must be LO:HI (finite numbers), got {text!r}")
    return int(lo * scale), int(hi * scale)


def _history_floor(text: str | None) -> int | None:
    """``--history-floor``: None (the profile's), ``off`` (-1: fixed) or N >= 0."""
    if text is None:
        return None
    if text.strip().lower() == "off":
        return -1
    try:
        n = int(text)
    except ValueError:
        raise SimError(f"--history-floor must be a number or 'off', got {text!r}") from None
    if n < 0:
        raise SimError("--history-floor must be >= 0 (or 'off')")
    return n


def _bandwidths(text: str) -> tuple[float, ...]:
    """``--bandwidth 1,20`` -> (1.0, 20.0); empty -> () (unlimited)."""
    if not text.strip():
        return ()
    return tuple(_finite(x, "--bandwidth") for x in text.split(","))


def parse_partition(text: str, participants: int) -> PartitionSpec:
    """``START:HEAL:GROUPS`` in seconds; HEAL may be ``never``; GROUPS a count or ranges."""
    parts = text.split(":")
    if len(parts) != 3:
        raise SimError(f"--partition must be START:HEAL:GROUPS, got {text!r}")
    start_s, heal_s, groups_s = parts
    try:
        start = int(_finite(start_s, "--partition START") * 1000)
        heal = (
            None if heal_s.lower() in ("never", "-", "")
            else int(_finite(heal_s, "--partition HEAL") * 1000)
        )
    except SimError:
        raise SimError(f"--partition times must be seconds, got {text!r}") from None
    if start < 0 or (heal is not None and heal <= start):
        raise SimError(f"--partition needs 0 <= START < HEAL, got {text!r}")
    groups: list[tuple[int, ...]] = []
    if groups_s.isdigit():
        k = int(groups_s)
        if not 2 <= k <= participants:
            raise SimError(f"--partition group count must be in 2..participants, got {k}")
        bounds = [round(g * participants / k) for g in range(k + 1)]
        groups = [tuple(range(bounds[g], bounds[g + 1])) for g in range(k)]
    else:
        for chunk in groups_s.split("/"):
            members: list[int] = []
            for piece in chunk.split(","):
                a, _, b = piece.partition("-")
                try:
                    lo = int(a)
                    hi = int(b) if b else lo
                except ValueError:
                    raise SimError(f"--partition groups must be like 0-4/5-9, got {text!r}") \
                        from None
                members.extend(range(lo, hi + 1))
            groups.append(tuple(members))
        if len(groups) < 2:
            raise SimError("--partition needs at least two groups")
        flat = [i for g in groups for i in g]
        if len(flat) != len(set(flat)):
            raise SimError("--partition groups overlap")
    return PartitionSpec(start, heal, tuple(groups))


def parse_offline(text: str, participants: int) -> OfflineSpec:
    """``I:START:END`` in seconds; END may be ``never`` (the participant leaves)."""
    parts = text.split(":")
    if len(parts) != 3 or not parts[0].isdigit():
        raise SimError(f"--offline must be INDEX:START:END, got {text!r}")
    start = int(_finite(parts[1], "--offline START") * 1000)
    end = (None if parts[2].lower() in ("never", "-", "")
           else int(_finite(parts[2], "--offline END") * 1000))
    spec = OfflineSpec(int(parts[0]), start, end)
    if not 0 <= spec.index < participants:
        raise SimError(f"--offline names participant index {spec.index} (out of range)")
    if start < 0 or (end is not None and end <= start):
        raise SimError(f"--offline needs 0 <= START < END, got {text!r}")
    return spec


def add_sim_arguments(p: argparse.ArgumentParser) -> None:
    """The ``sdschat sim`` options."""
    a = p.add_argument
    a("--participants", "-n", type=int, required=True, help="number of participants (N)")
    a("--messages", "-m", type=int, required=True, help="content messages in total (M)")
    a("--loss", type=float, default=0.0, help="fraction of deliveries dropped (0..1)")
    a("--send-loss", type=float, default=0.0,
      help="fraction of broadcasts lost at the sender, for every receiver (0..1); "
      "--loss P --send-loss P is the loss of 'sdschat join --drop-rate P'")
    a("--seed", type=int, default=0, help="random seed: same seed, same run")
    a("--sender-id-chars", type=int, default=0,
      help="pad participant ids to this many characters (real nodes: 32; default 0: "
      "p000-style ids)")
    a("--out", required=True, help="output directory (events/*.parquet, run.json)")
    a("--rate", type=float, default=2.0, help="messages per virtual second (default 2)")
    a("--channels", type=int, default=1, help="number of channels (default 1)")
    a("--split-channels", action="store_true",
      help="participant i joins channel i mod K only (default: every channel)")
    a("--senders", type=int, default=None, help="only this many (random) participants send")
    a("--latency", default="20:120", help="delivery latency range LO:HI in ms (default 20:120)")
    a("--latency-dist", choices=("uniform", "exponential"), default="uniform")
    a("--partition", action="append", default=[], metavar="START:HEAL:GROUPS",
      help="split at START s, heal at HEAL s (or 'never'); GROUPS a count or 0-4/5-9 "
      "(repeatable)")
    a("--churn", type=float, default=0.0,
      help="fraction of participants that go offline once during the message phase")
    a("--churn-offline", default="10:60", help="how long they stay away, LO:HI seconds")
    a("--offline", action="append", default=[], metavar="INDEX:START:END",
      help="participant INDEX offline from START to END seconds ('never': it leaves); "
      "repeatable")
    a("--store", action="store_true", help="add a store peer that serves missing messages")
    a("--store-rtt", type=int, default=100, help="store peer round trip in ms (default 100)")
    a("--timings", choices=("fast", "default"), default="fast",
      help="protocol periods: fast (sds.Config.fast) or default (js-waku's)")
    a("--time-scale", type=int, default=1000, help="ms unit of the fast timings (default 1000)")
    a("--drain", type=float, default=None,
      help="seconds simulated after the last message (default 60 x time-scale, 600 s with "
      "default timings)")
    a("--profile", choices=sds.PROFILES, default="default",
      help="protocol sizes: default (sds.Config, as sdschat join) or waku (js-waku's)")
    a("--history", type=int, default=None, help="causal history entries (default: profile's)")
    a("--history-floor", default=None, metavar="N|off",
      help="adaptive causal history: the newest N plus every delivered id once, up to "
      "--history; 'off': the newest --history entries (default: the profile's)")
    a("--bloom-capacity", type=int, default=None,
      help="bloom filter capacity (default: profile's)")
    a("--bloom-error", type=float, default=None,
      help="bloom filter error rate (default: profile's)")
    a("--repair-cache", type=int, default=None,
      help="repair cache messages (default: profile's)")
    a("--bandwidth", default="", metavar="MBITS,...",
      help="link speeds in Mbit/s, participant i gets the i-th (mod the list), e.g. 1,20; "
      "default: unlimited")
    a("--sync-interval", default="auto",
      help="sync interval in ms, or 'auto': the timing preset's (the default profile's core "
      "stretches it by the participants it hears; x max(1, N^2/64) for a fixed-interval "
      "profile such as waku)")
    a("--content-bytes", type=int, default=64, help="size of each message's content")
    a("--progress", action="store_true", help="show the progress bar even if not a terminal")
    a("--force", action="store_true", help="replace an existing run in --out")


def spec_from_args(args: argparse.Namespace) -> SimSpec:
    """Build a :class:`SimSpec` from parsed arguments (:class:`SimError` if invalid)."""
    sync: int | None = None
    if str(args.sync_interval).lower() != "auto":
        try:
            sync = int(args.sync_interval)
        except ValueError:
            raise SimError("--sync-interval must be milliseconds or 'auto'") from None
        if sync <= 0:
            raise SimError("--sync-interval must be > 0")
    if args.participants < 2:
        raise SimError("--participants must be >= 2")
    spec = SimSpec(
        participants=args.participants,
        messages=args.messages,
        loss=args.loss,
        send_loss=args.send_loss,
        sender_id_chars=args.sender_id_chars,
        seed=args.seed,
        rate=args.rate,
        channels=args.channels,
        split_channels=args.split_channels,
        senders=args.senders,
        latency_ms=_range(args.latency, "--latency"),
        latency_dist=args.latency_dist,
        partitions=[parse_partition(t, args.participants) for t in args.partition],
        churn=args.churn,
        churn_offline_ms=_range(args.churn_offline, "--churn-offline", 1000.0),
        offline=[parse_offline(t, args.participants) for t in getattr(args, "offline", [])],
        store=args.store,
        store_rtt_ms=args.store_rtt,
        timings=args.timings,
        time_scale_ms=args.time_scale,
        drain_ms=None if args.drain is None else int(_finite(args.drain, "--drain") * 1000),
        profile=args.profile,
        history=args.history,
        history_floor=_history_floor(args.history_floor),
        bloom_capacity=args.bloom_capacity,
        bloom_error=args.bloom_error,
        repair_cache=args.repair_cache,
        bandwidth_mbps=_bandwidths(args.bandwidth),
        sync_interval_ms=sync,
        content_bytes=args.content_bytes,
    )
    spec.validate()
    try:
        sim_config(spec)
    except ValueError as exc:
        raise SimError(str(exc)) from None
    return spec


def run_sim_command(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """``sdschat sim``: returns the exit status (0 ok, 2 bad parameters or output)."""
    out = out or sys.stdout
    try:
        spec = spec_from_args(args)
        show = bool(args.progress) or sys.stderr.isatty()
        result = run_sim(spec, args.out, force=args.force, progress=show)
    except (SimError, OSError) as exc:
        print(f"sdschat sim: {exc}", file=sys.stderr)
        return 2
    m = result.meta
    net = m["network"]
    print(
        f"simulated {spec.participants} participants, {m['messages_sent']} messages, "
        f"{m['virtual_seconds']:.0f} virtual s in {m['wall_seconds']:.1f} s "
        f"({m['cpu_seconds']:.1f} s CPU, {net['deliveries']:,} deliveries, "
        f"{m['deliveries_per_second']:,.0f}/s, "
        f"peak {m['peak_rss_mb']:.0f} MB)",
        file=out,
    )
    print(
        f"  broadcasts {net['broadcasts']:,} ({net['bytes_sent']:,} bytes sent, "
        f"{net['bytes']:,} received)  per recipient: delivered "
        f"{net['deliveries'] - net['offline']:,}, dropped {net['lost']:,}, "
        f"partitioned {net['partitioned']:,}, recipient offline {net['offline']:,}  "
        f"store retrievals {net['store_retrievals']:,}",
        file=out,
    )
    print(
        f"  participants holding every message: {m['participants_holding_every_message']}"
        f"/{spec.participants}",
        file=out,
    )
    print(f"  {result.rows:,} event rows in {result.out / 'events'}", file=out)
    for line in summary_lines(m["traffic"], m["messages_sent"], spec.participants):
        print(line, file=out)
    return 0


def summary_lines(traffic: dict[str, Any], messages: int, participants: int) -> list[str]:
    """The end-of-run summary: deliveries and bytes by kind, what one member pays."""
    kinds = traffic["by_kind"]
    content = kinds["content"]["deliveries"] or 1
    all_deliveries = sum(v["deliveries"] for v in kinds.values())
    all_sent = sum(v["bytes_sent"] for v in kinds.values())
    lines = [
        f"  traffic: {all_deliveries / content:.2f} deliveries per content delivery, "
        f"{all_sent / max(1, messages):,.0f} bytes uploaded per content message"
    ]
    for k, v in kinds.items():
        lines.append(
            f"    {k:8} {v['broadcasts']:>9,} broadcasts {v['bytes_sent']:>14,} B sent "
            f"{v['deliveries']:>12,} deliveries {v['bytes_received']:>16,} B received"
        )
    carried = traffic.get("carried")
    if carried and carried["copies_sent"]:
        lines.append(
            f"    carried  {carried['copies_sent']:>9,} copies     "
            f"{carried['bytes_sent']:>14,} B sent ({carried.get('copies_again', 0):,} again "
            "on resends and answers): "
            f"{carried['arrivals_new']:,} arrivals new to the member, "
            f"{carried['arrivals_held']:,} of lines it held"
        )
    for name, ph in traffic["phases"].items():
        lines.append(
            f"    per member, {name:8} ({ph['seconds']:>7,.0f} s): "
            f"{ph['member_up_bytes_per_s']:>10,.1f} B/s up "
            f"{ph['member_down_bytes_per_s']:>12,.1f} B/s down"
        )
    return lines
