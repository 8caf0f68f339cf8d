"""SDS-R answers: rebroadcasting what others ask for, and the copies on the wire.

A holder of a requested message in the request's response group answers at its
``T_resp`` (PROTOCOL.md "SDS-R"), unless a copy was seen on the wire within
``repair_t_min_ms / 2`` (the request crossed it), the requester had its share of
rebroadcasts (``Config.repair_responses_per_sender``), or, where the response
window is stretched, the answer falls due after a silence in which a requester
still lacking it would have asked again (``Config.repair_answer_expiry``). At scale
more copies of an answer follow while someone more likely than not still lacks the
line (``Config.repair_answer_copies``). The bytes come from a cache of recent
messages, else from the application (``RepairDataNeeded``).

The copies of each message on the wire as far as we know (first, duplicates,
carried copies, answers) are counted here: answers and carrying
(:class:`sds.carrying.Carrying`) both stop when enough went out.

Owned by :class:`sds.channel.Channel`. Hearing a request postpones our own for the
same id (:class:`sds.requests.RepairRequests`) and counts as a naming of it
(:class:`sds.naming.Naming`). Reads the log and the estimates; events and datagrams
go to the channel's lists.
"""

from __future__ import annotations

from collections import OrderedDict

from sds import sds_pb2
from sds.config import Config
from sds.datagram import Datagram
from sds.estimates import ChannelEstimates
from sds.events import Event, RepairDataNeeded, RepairSent
from sds.log import LogEntry
from sds.message import HistoryEntry
from sds.naming import Naming
from sds.repair import IncomingRepairBuffer, in_response_group, t_req, t_resp
from sds.requests import RepairRequests
from sds.tuning import COPY_WHEN_LACKING

__all__ = ["RepairAnswers"]


class RepairAnswers:
    """Answers due, the bytes to answer with, and what we know of copies on the wire."""

    def __init__(
        self,
        channel_id: str,
        sender_id: str,
        config: Config,
        entries: dict[str, LogEntry],
        estimates: ChannelEstimates,
        requests: RepairRequests,
        naming: Naming,
        events: list[Event],
        datagrams: list[Datagram],
    ) -> None:
        self.channel_id = channel_id
        self.sender_id = sender_id
        self.config = config
        self._entries = entries
        self._estimates = estimates
        self._requests = requests
        self._naming = naming
        self._events = events
        self._datagrams = datagrams
        #: answers due: (id, its original sender) at T_resp
        self.due = IncomingRepairBuffer(config.repair_buffer_size)
        #: recent messages' wire bytes (not saved: after a restore, RepairDataNeeded)
        self.cache: OrderedDict[str, bytes] = OrderedDict()
        #: Repair responses per requester in the current window: (window start, count).
        self.responses_by: dict[str, tuple[int, int]] = {}
        #: Content ids -> when a copy of them was last on the wire as far as we know
        #: (a copy of one we held arrived, or we rebroadcast it): requests for them arriving
        #: within ``repair_t_min_ms / 2`` of it are not answered (see
        #: :meth:`hear_requests`). Bounded: the oldest are forgotten first.
        self.copy_seen: OrderedDict[str, int] = OrderedDict()
        #: Content ids we hold and will answer -> (when a request for them was last
        #: heard, the gap to the request before it when the same requester sent both,
        #: or -1, that requester): a pending answer due after a silence is dropped
        #: (Config.repair_answer_expiry). Kept while an answer is pending (holders
        #: outside the response group keep none); bounded, the oldest forgotten first.
        self.asked: OrderedDict[str, tuple[int, int, str]] = OrderedDict()
        self.expired = 0
        #: Content ids -> copies of our current answer sent so far (another is due:
        #: Config.repair_answer_copies). Bounded: the oldest are forgotten first.
        self.copies: OrderedDict[str, int] = OrderedDict()
        #: Content ids -> copies of them on the wire as far as we know, when more than
        #: the first (duplicates received, our answers): the members still lacking
        #: one are about ``participants x loss ** copies``. Bounded like copy_seen.
        self.wire_copies: OrderedDict[str, int] = OrderedDict()

    def cache_for_repair(self, message_id: str, data: bytes) -> None:
        cache = self.cache
        cache[message_id] = data
        while len(cache) > self.config.repair_cache_size:
            cache.popitem(last=False)

    # ------------------------------------------------------------ requests heard

    def hear_requests(
        self, pb: sds_pb2.SdsMessage, requester: str, now_ms: int
    ) -> tuple[list[str], list[str], list[sds_pb2.HistoryEntry], tuple[int, int]]:
        """The repair requests of ``requester``'s message: our own requests for the same
        ids wait, and the answers we owe are scheduled. Returns the ids asked for, those
        we answer, the requests for ids we do not hold (missing for us too:
        Config.repair_note_asked), and the window for follow-up requests."""
        cfg = self.config
        asked = []
        scheduled = []
        budget = self._response_budget(requester, now_ms)
        lo, hi = self._estimates.repair_window(now_ms)
        # Config.repair_follow_up_base_window: the answer to this request reaches all
        # but the lossy few of those who lack the id; they ask again within the base
        # window, not the stretched one (up to 120 s a round at 1,000 participants:
        # the stragglers of sdschat sim).
        follow = (cfg.repair_t_min_ms, cfg.repair_t_max_ms) if (
            cfg.repair_follow_up_base_window) else (lo, hi)
        quiet_ms = cfg.repair_t_min_ms // 2
        unheld: list[sds_pb2.HistoryEntry] = []
        requests = self._requests
        for req in pb.repair_request:
            mid = req.message_id
            if not mid:
                continue
            asked.append(mid)
            # Someone else asked for it: ours would be redundant now, so it waits
            # one more retry period (js-waku drops it, and the gap stays open if
            # that other request or its answer is lost).
            later = now_ms + t_req(self.sender_id, mid, 0, *follow)
            if cfg.repair_follow_up_base_window:
                requests.out.reschedule(mid, later)  # sooner, if ours was far off
            else:
                requests.out.postpone(mid, later)
            requests.lost_wanted.postpone(mid, later)
            le = self._entries.get(mid)
            if le is None and mid not in self.cache:
                unheld.append(req)
                requests.note_sdsr_asked(mid)
                continue
            # a request names the id too: its answer, a copy every member hears, needs
            # no naming again (note_copy), nor does the requester's filter (it knows)
            self._naming.note_renamed(mid, now_ms)
            if cfg.repair_answer_expiry and mid in self.due:
                self._note_answer_asked(mid, requester, now_ms)  # still asked for
            if budget <= 0:
                continue  # this requester had its share of rebroadcasts for now
            seen = self.copy_seen.get(mid)
            if seen is not None and now_ms - seen < quiet_ms:
                # A copy of m was on the wire moments ago (an answer to someone else's
                # request, or a resend): this request crossed it, and its sender has it
                # now unless that copy was lost to it, in which case it asks again no
                # sooner than repair_t_min_ms later, outside this window. Answering
                # anyway made every request of a burst cost one more broadcast to the
                # whole channel (sdschat sim, 1,000 participants, 5% loss: 8.5
                # rebroadcasts per repaired message, up to 75).
                continue
            original = req.sender_id if req.HasField("sender_id") else (le.sender_id if le else "")
            if not original:
                continue
            if not in_response_group(self.sender_id, original, mid, cfg.repair_response_groups):
                continue
            due = t_resp(self.sender_id, original, mid, now_ms, hi)
            if self.due.add(HistoryEntry(mid, None, original), due):
                self.copies.pop(mid, None)  # a new answer: its first copy
                if cfg.repair_answer_expiry:
                    self._note_answer_asked(mid, requester, now_ms)
                scheduled.append(mid)
                budget -= 1
        if scheduled:
            start, used = self.responses_by.get(requester, (now_ms, 0))
            self.responses_by[requester] = (start, used + len(scheduled))
        return asked, scheduled, unheld, follow

    def _note_answer_asked(self, message_id: str, requester: str, now_ms: int) -> None:
        """A request for ``message_id`` (which we hold) was heard now: the silence
        after it times our pending answer (Config.repair_answer_expiry)."""
        asked = self.asked
        before = asked.pop(message_id, None)
        gap = -1
        if before is not None and before[2] == requester:
            gap = now_ms - before[0]
        asked[message_id] = (now_ms, gap, requester)
        if len(asked) > 2 * self.config.repair_buffer_size:
            asked.popitem(last=False)

    def _response_budget(self, requester: str, now_ms: int) -> int:
        """Rebroadcasts ``requester`` may still cause in its current window of
        ``repair_response_window_ms`` (``Config.repair_responses_per_sender``)."""
        cfg = self.config
        window = cfg.repair_response_window_ms
        by = self.responses_by
        got = by.get(requester)
        if got is None or now_ms - got[0] >= window:
            if len(by) >= 1_024:  # forget finished windows (bounded by requesters)
                for r in [r for r, (t0, _) in by.items() if now_ms - t0 >= window]:
                    del by[r]
                if len(by) >= 1_024:
                    by.pop(next(iter(by)))
            by[requester] = got = (now_ms, 0)
        return cfg.repair_responses_per_sender - got[1]

    # ------------------------------------------------------------ answers due

    def run_due(self, now_ms: int) -> None:
        """Send the answers due by ``now_ms`` (or ask the application for their bytes)."""
        if not self.config.repair_enabled:
            return
        for entry in self.due.take_due(now_ms):
            mid = entry.message_id
            if self.answer_expired(mid, now_ms):
                # nobody asked again: a copy reached the requesters, and we missed it
                self.expired += 1
                continue
            # (noted before the bytes are at hand: the same whether they come from
            # the cache or from storage through RepairDataNeeded)
            self.note_copy_on_wire(mid, now_ms)
            data = self.cache.get(mid)
            if data is None:
                self._events.append(RepairDataNeeded(self.channel_id, mid))
                continue
            self._datagrams.append(Datagram(data, "repair", mid))
            self._events.append(RepairSent(self.channel_id, mid, entry.sender_id or ""))
            self.count_wire_copy(mid)
            self._copy_again(entry, now_ms)

    def answer_expired(self, message_id: str, now_ms: int) -> bool:
        """Config.repair_answer_expiry: whether our answer for ``message_id``, due now,
        follows a silence in which a requester still lacking it would have asked
        again (only where the response window is stretched: its spread exceeds the
        base window, so late holders answer long after the first answer)."""
        cfg = self.config
        asked = self.asked.pop(message_id, None)
        if not cfg.repair_answer_expiry or asked is None:
            return False
        last, gap, _ = asked
        silence = max(cfg.repair_t_min_ms + cfg.repair_t_max_ms, 2 * gap)
        if now_ms - last <= silence:
            return False
        _, hi = self._estimates.repair_window(now_ms)
        return hi > cfg.repair_t_max_ms

    def _copy_again(self, entry: HistoryEntry, now_ms: int) -> None:
        """Config.repair_answer_copies: after a copy of our answer, another goes out
        ``repair_t_min_ms / 2`` later (cancelled by any copy seen meanwhile) while
        someone more likely than not still lacks the line."""
        cfg = self.config
        mid = entry.message_id
        copies = self.copies.pop(mid, 0) + 1
        if not self._copy_wanted(mid, copies, copies + 1, now_ms):
            return
        if self.due.add(entry, now_ms + max(1, cfg.repair_t_min_ms // 2)):
            copied = self.copies
            copied[mid] = copies
            if len(copied) > cfg.repair_buffer_size:
                copied.popitem(last=False)

    def _copy_wanted(self, mid: str, copies: int, on_wire: int, now_ms: int) -> bool:
        """Whether one more copy of ``mid`` (``copies`` of ours sent, at least
        ``on_wire`` on the wire) is due: fewer than ``repair_answer_copies``, at scale,
        and someone more likely than not still lacks it."""
        cfg = self.config
        est = self._estimates
        if copies >= cfg.repair_answer_copies or not est.loss_mean:
            return False
        if not est.at_scale(now_ms):
            return False
        on_wire = max(on_wire, self.wire_copies.get(mid, 1))
        return est.participants(now_ms) * est.loss_mean ** on_wire >= COPY_WHEN_LACKING

    # ------------------------------------------------------- copies on the wire

    def note_copy_on_wire(self, message_id: str, now_ms: int) -> None:
        """A copy of content message ``message_id`` we hold was just broadcast (one
        reached us again, or we rebroadcast it): requests for it are not answered for
        ``repair_t_min_ms / 2``."""
        seen = self.copy_seen
        seen[message_id] = now_ms
        seen.move_to_end(message_id)
        # only the quiet period counts: older entries go (oldest first; at 10,000
        # members ~200 lines held by every member, each with an entry, were ~200 MB)
        quiet_ms = self.config.repair_t_min_ms // 2
        while seen:
            oldest = next(iter(seen))
            if now_ms - seen[oldest] < quiet_ms and len(seen) <= self.config.repair_buffer_size:
                break
            del seen[oldest]

    def count_wire_copy(self, message_id: str) -> None:
        """One more copy of ``message_id`` (which we hold) was on the wire."""
        copies = self.wire_copies
        copies[message_id] = copies.pop(message_id, 1) + 1
        if len(copies) > self.config.repair_buffer_size:
            copies.popitem(last=False)
