"""A channel's saved state: its format, and how the parts are written and read back.

:meth:`sds.channel.Channel.export_state` snapshots everything the core holds as one
JSON-able dict (:class:`ChannelState`), which storage persists;
:meth:`sds.channel.Channel.restore` rebuilds a channel from it, possibly after a
restart. This module owns the format (:data:`STATE_VERSION`): which part's state
is written under which key, in which order, and how each is read back. Keys added
after version 1 first shipped are optional: a state saved before them still loads
(``resend_backoff`` is written only with the backoff on, :mod:`sds.backoff`).

The rules a restore keeps:

* the repair cache (recent wire bytes) is not saved: after a restore the core asks
  for old bytes with :class:`~sds.events.RepairDataNeeded`;
* with ``now_ms`` (the time of the restart) the time the program was not running
  does not count towards lost timeouts, a clock more than ``max_clock_skew_ms``
  ahead of ``now_ms`` is brought back to it (buffered messages that far ahead are
  dropped, ``CLOCK_AHEAD``), a deadline further ahead than the longest wait of its
  kind runs at ``now_ms``, and a time something was seen that lies in the future
  becomes ``now_ms``;
* what became deliverable is delivered by the channel once the parts are read.

Nothing here imports the channel: it writes and reads the parts
(:class:`ChannelParts`) that the channel creates and hands over.
"""

from __future__ import annotations

import heapq
import json
from dataclasses import dataclass
from typing import Any

import orjson

from sds.answers import RepairAnswers
from sds.backoff import ResendBackoff
from sds.bloom import RollingBloomFilter
from sds.config import Config
from sds.estimates import ChannelEstimates
from sds.events import DropReason, Event, MessageDropped
from sds.log import ChannelLog, LogEntry
from sds.message import HistoryEntry, parse_pb
from sds.missing import Missing, MissingTracker, Waiting, usable_ids
from sds.naming import Naming
from sds.outgoing import Outgoing, OutgoingBuffer
from sds.requests import ASKED, RepairRequests
from sds.syncing import SyncSchedule

__all__ = ["STATE_VERSION", "ChannelParts", "ChannelState", "export", "load"]

#: Format version of :class:`ChannelState`.
STATE_VERSION = 1


class ChannelState:
    """A channel's exported state: a JSON-able dict, with a bytes form for storage."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_bytes(self) -> bytes:
        """Compact JSON (UTF-8).

        Encoded with orjson: a node saves its state every second or so and a
        full 10,000-entry window is ~2.5 MB of JSON, which the standard
        library encodes ~10x slower. Anything orjson refuses (an integer
        beyond 64 bits) falls back to the standard encoder; both read back
        the same with :meth:`from_bytes`.
        """
        try:
            return orjson.dumps(self.data)
        except (orjson.JSONEncodeError, TypeError):
            return json.dumps(self.data, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> ChannelState:
        """Parse :meth:`to_bytes`; ``ValueError`` if it is not such a state."""
        try:
            data = orjson.loads(raw)
        except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
            raise ValueError(f"corrupt channel state: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("corrupt channel state: not an object")
        return cls(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChannelState) and other.data == self.data

    __hash__ = None  # type: ignore[assignment]


@dataclass(frozen=True, slots=True)
class ChannelParts:
    """The parts of one channel whose state is saved (the channel creates them)."""

    channel_id: str
    sender_id: str
    log: ChannelLog
    filter: RollingBloomFilter
    outgoing: OutgoingBuffer
    missing: MissingTracker
    requests: RepairRequests
    answers: RepairAnswers
    estimates: ChannelEstimates
    naming: Naming
    sync: SyncSchedule
    events: list[Event]
    backoff: ResendBackoff


def _hx(b: bytes | None) -> str | None:
    return None if b is None else b.hex()


def _bx(s: str | None) -> bytes | None:
    return None if s is None else bytes.fromhex(s)


def _entry_row(e: HistoryEntry) -> list[str | None]:
    return [e.message_id, _hx(e.retrieval_hint), e.sender_id]


def _entry(e: list[Any]) -> HistoryEntry:
    return HistoryEntry(e[0], _bx(e[1]), e[2])


def export(p: ChannelParts, cfg: Config, lamport: int, last_now: int) -> ChannelState:
    """Snapshot the parts (``cfg``: the channel's configuration; ``lamport``: its clock;
    ``last_now``: the time of its last call, which says which hold-offs still run)."""
    log, trk, req, ans, est, nam = p.log, p.missing, p.requests, p.answers, p.estimates, p.naming
    entries = log.entries
    state = ChannelState(
        {
            "version": STATE_VERSION,
            "channel_id": p.channel_id,
            "sender_id": p.sender_id,
            "lamport": lamport,
            "evicted": log.evicted,
            "log": [
                [le.lamport, mid, le.sender_id, _hx(le.retrieval_hint)]
                + ([1] if le.withheld else [])
                for mid, le in ((mid, entries[mid]) for _, mid in log.keys)
            ],
            "bloom": p.filter.items(),
            "met_elsewhere": list(trk.met_elsewhere),
            "lost": list(trk.lost),
            "outgoing": [
                [o.message_id, o.data.hex(), o.lamport, o.state, sorted(o.hits), o.attempts,
                 o.next_resend_ms]
                for o in p.outgoing.messages.values()
            ],
            "incoming": [
                [w.data.hex(), _hx(w.retrieval_hint), w.received_ms, w.lost_before]
                for w in trk.incoming.values()
            ],
            "missing": [
                [_entry_row(i.entry), i.noticed_ms, i.by, i.named_ms]
                for i in trk.missing.values()
            ],
            "repair_out": [
                [_entry_row(e), due, asked, req.out_by.get(e.message_id, ASKED)]
                for e, due, asked in req.out.entries()
            ],
            "repair_in": [[_entry_row(e), due, asked] for e, due, asked in ans.due.entries()],
            "lost_wanted": [
                [_entry_row(e), due, req.lost_attempts.get(e.message_id, 0),
                 req.lost_by.get(e.message_id, "")]
                for e, due, _ in req.lost_wanted.entries()
            ],
            "failed": list(p.outgoing.failed),
            # copies seen on the wire whose quiet period still runs (optional key)
            "copy_seen": [
                [m, t] for m, t in ans.copy_seen.items()
                if last_now - t < cfg.repair_t_min_ms // 2
            ],
            # sync suppression (optional keys): heard since our last message, and
            # the ids named again whose hold-off still runs
            "heard_since_sent": p.sync.heard_since_sent,
            # participants heard (optional keys): the SDS-R windows and the sync
            # interval count them; a restored channel counts on from there
            "heard": [[s, t] for s, t in est.heard.items()],
            "census": est.census.export(),
            "unnamed": list(nam.unnamed),
            "rename": list(nam.rename),
            "renamed_at": [
                [m, t] for m, t in nam.renamed_at.items()
                if last_now - t < cfg.sync_interval_ms
            ],
            "next_sync_ms": p.sync.next_ms,
            "next_repair_sync_ms": req.next_sync_ms,
            "next_sweep_ms": trk.next_sweep_ms,
            # recovery time (lost timeouts) where it stood at the last call
            "recovery_ms": trk.recovery_ms(last_now),
            "paused_total_ms": trk.paused_total,
            "paused": trk.paused_at is not None,
        }
    )
    backoff = p.backoff.export()
    if backoff is not None:  # optional key, with the backoff on (sds.backoff)
        state.data["resend_backoff"] = backoff
    return state


def load(
    d: dict[str, Any],
    p: ChannelParts,
    cfg: Config,
    lamport: int,
    last_now: int,
    now_ms: int | None,
) -> tuple[int, int]:
    """Read saved state ``d`` into the fresh parts ``p`` of a channel made with
    configuration ``cfg`` and the saved clock ``lamport`` at ``last_now``; returns its
    clock and last call time as restored. Raises ``KeyError``, ``TypeError``,
    ``ValueError`` or ``IndexError`` for a state that does not parse (the channel
    reports them as corrupt)."""
    skew = cfg.max_clock_skew_ms
    log, trk, req, ans, est, nam = p.log, p.missing, p.requests, p.answers, p.estimates, p.naming

    def due(t: int, longest: int) -> int:
        """A deadline set by a clock that has since gone back (fixed between runs, or
        corrected by the application) lies further ahead than any wait the core sets:
        it runs at ``now_ms`` instead of hours late."""
        if now_ms is not None and t > now_ms + longest:
            return now_ms
        return t

    def seen(t: Any) -> int:
        """A time something was seen, in the future by the same clock: ``now_ms``."""
        return int(t) if now_ms is None else min(int(t), now_ms)

    if now_ms is not None:
        last_now = now_ms
        if lamport > now_ms + skew:  # pinned in the future: recovered
            lamport = now_ms
        req.next_sync_ms = now_ms
    recovery = d.get("recovery_ms")  # absent in states saved before it existed
    if recovery is not None:
        trk.paused_total = (
            now_ms - int(recovery) if now_ms is not None else int(d["paused_total_ms"])
        )
        if now_ms is None:
            last_now = int(recovery) + trk.paused_total
        if d.get("paused"):
            trk.paused_at = last_now
    rows = d["log"]
    # a state saved with a larger window (another configuration: a headless bot's
    # 10,000 opened in the TUI's 2,000) keeps its newest entries; the others leave as
    # if evicted now
    over = max(0, len(rows) - cfg.log_window)
    log.evicted = int(d["evicted"]) + over
    if over:
        rows = sorted(rows, key=lambda r: (int(r[0]), r[1]))[over:]
    for row in rows:
        lam, mid, sender, hint = row[:4]
        log.keys.add((int(lam), mid))
        le = log.entries[mid] = LogEntry(
            int(lam), sender, _bx(hint), withheld=len(row) > 4 and bool(row[4])
        )
        log.withheld += le.withheld
    if d["log"]:
        log.earliest_logged_ms = 0  # restored entries' logged_ms (unknown: settled)
    for item in d["bloom"]:
        p.filter.add(item)
    trk.met_elsewhere.update((m, None) for m in d["met_elsewhere"])
    trk.lost.update((m, None) for m in d["lost"])
    outgoing = p.outgoing
    for mid, data, lam, st, hits, attempts, next_resend in d["outgoing"]:
        outgoing.messages[mid] = Outgoing(
            mid, bytes.fromhex(data) if cfg.keep_outgoing_bytes else b"", int(lam),
            (), st, set(hits), int(attempts),  # positions: at the first ack check
            due(int(next_resend), cfg.resend_possibly_acknowledged_ms),
        )
        heapq.heappush(outgoing.heap, (outgoing.messages[mid].next_resend_ms, mid))
    for row in d["missing"]:
        info = Missing(_entry(row[0]), int(row[1]), set(), str(row[2]) if len(row) > 2 else "")
        if len(row) > 3 and row[3] is not None:  # optional: named by a live member
            info.named_ms = seen(row[3])
        trk.add(info)
        if cfg.lost_timeout_ms:
            heapq.heappush(trk.lost_heap, (info.noticed_ms + cfg.lost_timeout_ms,
                                           info.entry.message_id))
    for data_hex, hint, received_ms, lost_before in d["incoming"]:
        data = bytes.fromhex(data_hex)
        pb = parse_pb(data)
        if now_ms is not None and pb.lamport_timestamp > now_ms + skew:
            p.events.append(MessageDropped(
                p.channel_id, pb.message_id, pb.sender_id, DropReason.CLOCK_AHEAD,
                f"buffered with lamport {pb.lamport_timestamp}: dropped at restore",
            ))
            continue
        history_ids = usable_ids([h.message_id for h in pb.causal_history])
        w = Waiting(pb.message_id, pb.sender_id, pb.lamport_timestamp, pb.content,
                    history_ids, _bx(hint), data, int(received_ms), 0, int(lost_before))
        trk.incoming[w.message_id] = w
        ans.cache_for_repair(w.message_id, data)
    for w in trk.incoming.values():
        for mid in set(w.history_ids):
            if mid == w.message_id or trk.is_available(mid):
                continue
            known = trk.missing.get(mid)
            if known is None:  # waits for another buffered message
                rec = trk.recovery_ms(last_now)
                known = Missing(HistoryEntry(mid), rec, set(), w.sender_id)
                trk.add(known)
                if cfg.lost_timeout_ms:  # breaks a cycle (MissingTracker.due_lost)
                    trk.push_lost(rec + cfg.lost_timeout_ms, mid)
            known.waiting.add(w.message_id)
            w.unmet += 1
    repair_longest = max(cfg.repair_t_max_ms, cfg.repair_t_max_limit_ms)
    for row in d["repair_out"]:
        ent = _entry(row[0])
        req.out.restore(ent, due(int(row[1]), repair_longest), bool(row[2]))
        known = trk.missing.get(ent.message_id)
        fallback = known.by if known is not None else ASKED  # saved before it was kept
        req.file(ent.message_id, str(row[3]) if len(row) > 3 else fallback)
    for e, at, asked in d["repair_in"]:
        ans.due.restore(_entry(e), due(int(at), repair_longest), bool(asked))
    if "lost_wanted" in d:
        for row in d["lost_wanted"]:
            if trk.is_available(row[0][0]) and row[0][0] not in trk.lost:
                continue  # it arrived meanwhile (storage put it in the log)
            by = str(row[3]) if len(row) > 3 else ""
            at = due(int(row[1]), max(cfg.lost_retry_max_ms, repair_longest))
            req.want_lost(_entry(row[0]), 0, by, at, int(row[2]))
    elif cfg.repair_enabled:
        # a state saved before lost ids stayed wanted: want the most recent ones
        restart = now_ms if now_ms is not None else lamport
        for m in list(trk.lost)[-cfg.repair_buffer_size :]:
            req.want_lost(HistoryEntry(m), restart, "")
    outgoing.failed.update((m, None) for m in d.get("failed", ()))  # likewise
    ans.copy_seen.update((str(m), seen(t)) for m, t in d.get("copy_seen", ()))
    p.sync.heard_since_sent = bool(d.get("heard_since_sent", False))
    for s, t in d.get("heard", ())[-est.heard_kept :] if est.heard_kept else ():
        est.heard[str(s)] = seen(t)
    est.census.restore(d.get("census"), seen)
    nam.unnamed.update((str(m), None) for m in d.get("unnamed", ()))
    nam.rename.update((str(m), None) for m in d.get("rename", ()))
    nam.renamed_at.update((str(m), seen(t)) for m, t in d.get("renamed_at", ()))
    p.sync.next_ms = due(
        int(d["next_sync_ms"]), max(cfg.sync_interval_ms, cfg.sync_interval_limit_ms)
    )
    req.next_sync_ms = due(
        int(d.get("next_repair_sync_ms", req.next_sync_ms)), cfg.repair_sync_interval_ms
    )
    nsw = d["next_sweep_ms"]
    trk.next_sweep_ms = None if nsw is None else due(int(nsw), cfg.sweep_interval_ms)
    backoff = d.get("resend_backoff")  # optional: saved with the backoff on
    if isinstance(backoff, list) and len(backoff) == 3:
        longest = cfg.resend_backoff_max_ms or cfg.resend_unacknowledged_ms
        p.backoff.restore(int(backoff[0]), due(int(backoff[1]), longest), seen(backoff[2]))
    return lamport, last_now
