"""Bringing a saved core state up to date with the message log in storage.

Why this exists. The node writes every message (delivered or our own, with
its envelope) and every outbox transition synchronously, in the batch of the
core call that produced it; but it saves the core's exported state (up to
~2 MB with a full 10,000-entry log window: 30-40 ms to export) at most every
few hundred milliseconds, and at shutdown. After ``kill -9`` the saved state
can therefore be *older* than the ``messages`` table. What would be lost, and
how :func:`reconcile_state` restores it:

* messages delivered or sent after the save are missing from the core's log
  window, bloom filter and clock: our acks would not name them, a peer's
  causal history naming them would look "missing", positions would be off.
  -> the window is rebuilt from the newest ``log_window`` stored messages (in
  SDS order), their ids are added to the bloom filter, ``evicted`` becomes
  ``stored - window`` and the Lamport clock moves past the newest stored one.
* own messages recorded after the save are missing from the outgoing buffer:
  nobody would resend them. -> those still unacknowledged in storage are put
  back (their SDS bytes come from our own stored envelope), due for a resend,
  and the node republishes the whole outgoing buffer when it connects.
* own messages acknowledged (or failed) after the save are still in the
  outgoing buffer. -> removed.
* messages waiting in the incoming buffer or tracked as missing that storage
  now holds. -> dropped from the buffers, and ids storage holds beyond the
  window are vouched for (``met_elsewhere``).

What cannot be recovered: messages that were *waiting* for dependencies when
the process died after the save (they are only in memory). They were never
delivered, so no one relies on them being here; the protocol gets them back
(the sender resends unacknowledged messages, others' causal histories name
them and SDS-R repairs them).

The function edits the exported dict of ``sds.ChannelState`` format version 1
(``sds.STATE_VERSION``); for any other version it leaves the state alone and
says so in the report (the restart is then only as fresh as the saved state).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import sds
from sds import sds_pb2
from storage import OwnState, Store

__all__ = ["ReconcileReport", "reconcile_state"]

_SUPPORTED_VERSION = 1
_UNACKED = {OwnState.QUEUED, OwnState.SENT, OwnState.POSSIBLY_ACKNOWLEDGED}
_DONE = {OwnState.ACKNOWLEDGED, OwnState.FAILED}


@dataclass(slots=True)
class ReconcileReport:
    """What :func:`reconcile_state` changed (all zero: the saved state was current)."""

    stored: int = 0
    log_added: int = 0
    outgoing_added: int = 0
    outgoing_removed: int = 0
    incoming_removed: int = 0
    missing_removed: int = 0
    vouched: int = 0
    rebuilt: bool = False
    """There was no saved state: it was rebuilt from the stored log (the counts say
    what the log gave it)."""
    notes: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        """Whether the saved state was stale."""
        return bool(
            self.log_added
            or self.outgoing_added
            or self.outgoing_removed
            or self.incoming_removed
            or self.missing_removed
            or self.vouched
        )


def _message_id_of(data_hex: str) -> str | None:
    try:
        return str(sds_pb2.SdsMessage.FromString(bytes.fromhex(data_hex)).message_id)
    except Exception:
        return None


def _history_of(data_hex: str) -> list[str]:
    try:
        pb = sds_pb2.SdsMessage.FromString(bytes.fromhex(data_hex))
    except Exception:
        return []
    return [h.message_id for h in pb.causal_history]


async def reconcile_state(
    store: Store,
    channel: str,
    state: sds.ChannelState | None,
    *,
    sender_id: str,
    config: sds.Config,
    now_ms: int,
    open_own: Callable[[bytes], bytes | None],
) -> tuple[sds.ChannelState | None, ReconcileReport]:
    """Return ``state`` updated with what storage holds for ``channel`` (see the module doc).

    Args:
        store: the open store.
        channel: the channel (SDS ``channel_id``).
        state: the saved state, or ``None`` when none was saved (a state is then
            built from scratch if storage holds messages).
        sender_id: our SDS sender id (own messages are those with it).
        config: the protocol configuration the channel will run with.
        now_ms: wall-clock milliseconds.
        open_own: returns the SDS bytes inside one of our own stored envelopes
            (``None`` if it cannot be opened).

    Returns:
        The state to restore (``None`` only if ``state`` was ``None`` and storage
        has nothing) and a :class:`ReconcileReport`.
    """
    report = ReconcileReport()
    stored = await store.count_messages(channel)
    report.stored = stored
    if stored == 0 and state is None:
        return None, report
    if state is None:
        state = sds.Channel(channel, sender_id, config, now_ms).export_state()
        report.rebuilt = True
    d: dict[str, Any] = copy.deepcopy(state.data)
    if d.get("version") != _SUPPORTED_VERSION:
        report.notes.append(
            f"core state version {d.get('version')!r} is not reconciled (only "
            f"{_SUPPORTED_VERSION}); resuming from it as saved"
        )
        return state, report

    window = await store.page(channel, limit=config.log_window) if stored else []
    window_ids = {e.message_id for e in window}
    old_log: dict[str, list[Any]] = {row[1]: row for row in d["log"]}
    delta = [e for e in window if e.message_id not in old_log]

    # ---- log window, bloom filter, clock
    if delta:
        extra = await store.get_messages(channel, [e.message_id for e in delta])
        new_log = []
        for e in window:
            row = old_log.get(e.message_id)
            if row is None:
                hint = extra[e.message_id].retrieval_hint if e.message_id in extra else None
                row = [e.lamport, e.message_id, e.sender_id, None if hint is None else hint.hex()]
            new_log.append(row)
        d["log"] = new_log
        bloom = list(d["bloom"])
        in_bloom = set(bloom)
        bloom.extend(e.message_id for e in delta if e.message_id not in in_bloom)
        d["bloom"] = bloom
        report.log_added = len(delta)
        d["lost"] = [m for m in d["lost"] if m not in window_ids]
        d["met_elsewhere"] = [m for m in d["met_elsewhere"] if m not in window_ids]
    else:
        extra = {}
    d["evicted"] = max(int(d["evicted"]), stored - len(d["log"]))
    if window:
        d["lamport"] = max(int(d["lamport"]), max(e.lamport for e in window))

    # ---- outgoing buffer
    states = {e.message_id: e.state for e in window if e.sender_id == sender_id}
    out_ids = [row[0] for row in d["outgoing"]]
    unknown = [m for m in out_ids if m not in states]
    if unknown:
        for mid, msg in (await store.get_messages(channel, unknown)).items():
            states[mid] = msg.state
    kept = [row for row in d["outgoing"] if states.get(row[0]) not in _DONE]
    report.outgoing_removed = len(d["outgoing"]) - len(kept)
    in_out = {row[0] for row in kept}
    own_new = [
        e
        for e in delta
        if e.sender_id == sender_id and e.state in _UNACKED and e.message_id not in in_out
    ]
    for e in own_new:
        found = extra.get(e.message_id)
        if found is None or found.envelope is None:
            report.notes.append(f"own message {e.message_id[:12]} has no stored envelope")
            continue
        data = open_own(found.envelope)
        if data is None:
            report.notes.append(f"own message {e.message_id[:12]} could not be opened")
            continue
        st = (
            sds.OwnState.POSSIBLY_ACKNOWLEDGED
            if e.state is OwnState.POSSIBLY_ACKNOWLEDGED
            else sds.OwnState.UNACKNOWLEDGED
        )
        kept.append(
            [
                e.message_id,
                data.hex(),
                e.lamport,
                st,
                [],
                0,
                now_ms + config.resend_unacknowledged_ms,
            ]
        )
        report.outgoing_added += 1
    d["outgoing"] = kept

    # ---- incoming buffer and missing ids that storage now holds
    incoming_ids = [(_message_id_of(row[0]), row) for row in d["incoming"]]
    referenced: set[str] = set()
    for _, row in incoming_ids:
        referenced.update(_history_of(row[0]))
    missing_ids = [row[0][0] for row in d["missing"]]
    probe = {m for m, _ in incoming_ids if m} | referenced | set(missing_ids)
    have = await store.has_ids(channel, probe) if probe else set()
    new_incoming = [row for m, row in incoming_ids if m is None or m not in have]
    report.incoming_removed = len(d["incoming"]) - len(new_incoming)
    d["incoming"] = new_incoming
    new_missing = [row for row in d["missing"] if row[0][0] not in have]
    report.missing_removed = len(d["missing"]) - len(new_missing)
    d["missing"] = new_missing
    log_ids = {row[1] for row in d["log"]}
    met = list(d["met_elsewhere"])
    met_set = set(met)
    for mid in sorted(have - log_ids - met_set):
        met.append(mid)
        report.vouched += 1
    d["met_elsewhere"] = met[-config.log_window :]
    return sds.ChannelState(d), report
