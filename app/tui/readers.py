"""Who has a message: the ``/info`` section "who has it" (issue 27, item 9).

SDS delivers in causal order, so a member who sent a message naming M in its causal
history had M; one who named a message that (at any depth) names M had it too. The
store keeps each message's causal history while it is in the recent window, so the
messages after M there say, member by member, who showed they have it. Bloom
filters add what histories cannot say yet: the members whose filter held one of our
own messages (the acknowledgement data, recorded live on the row as ``seen_by``).

Bounded: at most :data:`SCAN_LIMIT` messages after M are read (two SQLite queries a
page), and the search stops once every member heard from has shown it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Protocol

SCAN_LIMIT = 2_000
PAGE = 250
PASSES = 4  # a peer's wrong Lamport time can put a message before what it names


class _Entry(Protocol):
    @property
    def message_id(self) -> str: ...

    @property
    def sender_id(self) -> str: ...

    @property
    def cursor(self) -> tuple[int, str]: ...


class _Full(Protocol):
    @property
    def causal_history(self) -> tuple[str, ...]: ...


class LogStore(Protocol):
    """The two reads of ``storage.Store`` used here."""

    async def page(
        self,
        channel: str,
        *,
        before: tuple[int, str] | None = None,
        after: tuple[int, str] | None = None,
        limit: int = 50,
    ) -> Sequence[_Entry]: ...

    async def get_messages(
        self, channel: str, message_ids: Iterable[str]
    ) -> Mapping[str, _Full]: ...


@dataclass
class HaveIt:
    """Who showed they have one message, and how."""

    by_history: dict[str, str] = field(default_factory=dict)
    """sender id -> the first of their messages whose causal history reaches it."""
    by_filter: list[str] = field(default_factory=list)
    """sender ids whose bloom filter held it (own messages only; not in ``by_history``)."""
    scanned: int = 0
    """Messages after it that were read."""
    complete: bool = True
    """False when the scan stopped at :data:`SCAN_LIMIT` with members still unshown."""


async def who_has(
    store: LogStore,
    channel: str,
    message_id: str,
    lamport: int,
    *,
    members: Iterable[str] = (),
    filters: Iterable[str] = (),
    limit: int = SCAN_LIMIT,
) -> HaveIt:
    """Who, of the channel's members, showed they have ``message_id`` (at ``lamport``).

    ``members``: the sender ids to look for (the search stops when all are found);
    ``filters``: the sender ids whose bloom filter held it (``Row.seen_by``).
    """
    wanted = set(members)
    out = HaveIt()
    later: list[tuple[str, str, tuple[str, ...]]] = []  # (id, sender, history) in SDS order
    cursor = (lamport, message_id)
    found_all = False
    while out.scanned < limit:  # bounded by limit / PAGE queries
        ask = min(PAGE, limit - out.scanned)
        rows = await store.page(channel, after=cursor, limit=ask)
        out.scanned += len(rows)
        if rows:
            cursor = rows[-1].cursor
            full = await store.get_messages(channel, [r.message_id for r in rows])
            for r in rows:
                m = full.get(r.message_id)
                later.append((r.message_id, r.sender_id, m.causal_history if m else ()))
            _close(message_id, later, out.by_history)
        found_all = bool(wanted) and wanted <= out.by_history.keys()
        if found_all or len(rows) < ask:  # every member shown, or the end of the log
            break
    else:
        out.complete = found_all or not wanted
    out.by_filter = [s for s in dict.fromkeys(filters) if s not in out.by_history]
    return out


def _close(
    message_id: str, later: list[tuple[str, str, tuple[str, ...]]], found: dict[str, str]
) -> None:
    """Messages of ``later`` that reach ``message_id`` through causal histories; their
    senders into ``found`` (sender -> their first such message)."""
    reach = {message_id}
    for _ in range(PASSES):  # one pass when Lamport times follow causality
        grew = False
        for mid, sender, history in later:
            if mid in reach or not history or reach.isdisjoint(history):
                continue
            reach.add(mid)
            grew = True
            if sender not in found:
                found[sender] = mid
        if not grew:
            return
