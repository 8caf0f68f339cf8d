"""Naming: which ids our messages name, and naming again what peers lack.

The adaptive causal history (``Config.causal_history_floor``): each message names
the newest ``causal_history_floor`` log entries, then the ids to name again, then
the ids logged from others that none of our messages named yet, up to
``causal_history_size``. Every id we deliver is so named by at least one of our
messages, even one delivered long after it was sent; with sync suppression an id
another member named for the channel is no longer ours to name. A peer whose
bloom filter lacks entries we hold (back from an absence), or whose resend says
our naming was lost, gets them named again, soon.

Owned by :class:`sds.channel.Channel`. The checks that find ids to name again
return whether to bring our next sync forward; the owner's sync schedule
(:class:`sds.syncing.SyncSchedule`) does that. Reads the log and the estimates;
the only randomness is the estimates' (:meth:`sds.estimates.ChannelEstimates.one_of_few`).
"""

from __future__ import annotations

from collections import OrderedDict

from sds import sds_pb2
from sds.bloom import BloomParams, contains_positions, positions_in
from sds.config import Config
from sds.estimates import ChannelEstimates
from sds.log import ChannelLog, LogEntry
from sds.tuning import TAIL_ONE_NAMING_LOSS

__all__ = ["Naming"]


class Naming:
    """The ids still ours to name, those to name again, and when peers were checked."""

    def __init__(
        self,
        sender_id: str,
        config: Config,
        log: ChannelLog,
        estimates: ChannelEstimates,
        params: BloomParams,
    ) -> None:
        self.sender_id = sender_id
        self.config = config
        self._log = log
        self._entries = log.entries
        self._estimates = estimates
        self._params = params
        #: Adaptive causal history (causal_history_floor): ids logged from others
        #: that none of our messages named yet, in arrival order, each with ``None``,
        #: or when a sync of another member named it the first time (at scale, while
        #: we see loss, an id a sync names stays ours to name until a second sync
        #: names it or ``Config.sync_tail_quiet_ms`` passes: :meth:`strike`).
        self.unnamed: OrderedDict[str, int | None] = OrderedDict()
        #: Ids to name again (a peer's filter lacks them, or a resend said our naming
        #: was lost): named first, before the unnamed ones, oldest first.
        self.rename: OrderedDict[str, None] = OrderedDict()
        #: Ids named again (by us, or by others while we meant to) -> when: a peer's
        #: filter that still lacks one within ``sync_interval_ms`` does not get it named
        #: again (it lost that naming, or asks for it already; with suppression, only
        #: while the base interval lasts). Bounded like rename.
        self.renamed_at: OrderedDict[str, int] = OrderedDict()
        #: sender id -> (when its bloom filter was last checked for what it lacks, the
        #: arrival time up to which our entries were checked against it then).
        self.lack_checked: OrderedDict[str, tuple[int, int]] = OrderedDict()

    # ---------------------------------------------------- what a message names

    def history_ids(
        self, last_now: int, floor_override: int | None = None, content: bool = False
    ) -> list[str]:
        """The causal history to send (Config.causal_history_floor).

        Fixed: the newest ``causal_history_size`` log entries. Adaptive: the newest
        ``causal_history_floor`` log entries, then the ids to name again (a peer's
        filter lacks them: :meth:`name_lacking`, :meth:`rename_copy`), then the
        ids logged from others that none of our messages named yet, latest arrival
        first, up to ``causal_history_size`` in all. The ids to name again go first:
        behind a burst of newly arrived ids (a returning peer's republished messages)
        they would otherwise wait for a dozen messages. Every id we deliver is so named by at least
        one of our messages (content or sync), even one delivered long after it
        was sent (a released dependency, a slow link): others notice a gap, the
        sender gets its acknowledgement, however busy the channel. A ``content``
        message leaves out the ids delivered past lost ones
        (:meth:`sds.log.ChannelLog.withhold`): they wait for a sync. ``last_now``:
        the time of the channel's last call (when the ids named again were named).
        """
        cfg = self.config
        floor = cfg.causal_history_floor
        log = self._log.keys
        entries = self._entries
        skip = content and self._log.withheld > 0
        if floor is None:
            n = cfg.causal_history_size
            if not n:
                return []
            if skip:
                return [mid for _, mid in log.islice(-n) if not entries[mid].withheld]
            return [mid for _, mid in log.islice(-n)]
        if floor_override is not None:
            floor = min(floor, floor_override)
        floor = min(floor, cfg.causal_history_size)
        top = [mid for _, mid in log.islice(-floor)] if floor else []
        if skip:
            top = [mid for mid in top if not entries[mid].withheld]
        unnamed = self.unnamed
        rename = self.rename
        for mid in top:
            unnamed.pop(mid, None)
            rename.pop(mid, None)
        room = cfg.causal_history_size - len(top)
        extra: list[str] = []
        kept: list[str] = []  # withheld from this content message: left for a sync
        while rename and len(extra) < room:
            mid, _ = rename.popitem(last=False)
            le = entries.get(mid)
            if le is None:
                continue
            if skip and le.withheld:
                kept.append(mid)
                continue
            unnamed.pop(mid, None)
            extra.append(mid)
            self.note_renamed(mid, last_now)
        for mid in reversed(kept):
            rename[mid] = None
            rename.move_to_end(mid, last=False)
        kept = []
        while unnamed and len(extra) < room:
            mid, _ = unnamed.popitem(last=True)
            le = entries.get(mid)
            if le is None:
                continue
            if skip and le.withheld:
                kept.append(mid)
                continue
            extra.append(mid)
        for mid in reversed(kept):
            unnamed[mid] = None
        return top + extra

    def note_logged(self, message_id: str) -> None:
        """Another's message entered our log: ours to name (adaptive history only)."""
        unnamed = self.unnamed
        unnamed[message_id] = None
        if len(unnamed) > self.config.log_window:
            unnamed.popitem(last=False)

    def named_by_others(self, message_id: str) -> None:
        """We knew of delivered ``message_id`` because another participant named it:
        the channel has heard it named and its author has that acknowledgement.
        Naming it again cost one sync per late receiver (sdschat sim, 1,000
        participants: ~100 per repaired message, before suppression)."""
        self.unnamed.pop(message_id, None)

    # ------------------------------------------------------- naming again

    def rename_copy(self, message_id: str, sender_id: str, now_ms: int) -> bool:
        """A copy of ``message_id`` (held, delivered) arrived again: whether its id is
        named again, soon (our sync brought forward). See
        :meth:`sds.channel.Channel.note_copy`."""
        if (
            sender_id == self.sender_id
            or self.config.causal_history_floor is None
            or message_id not in self._entries
        ):
            return False
        cfg = self.config
        est = self._estimates
        if cfg.sync_rename_sparingly and est.at_scale(now_ms):
            # at scale the copy is a repair answer every member heard (Config.
            # sync_rename_sparingly): a holder's late answer made ~1 sync each after the
            # lines stopped (sdschat sim, 1,000 members); but its author's resend says
            # the namings missed it (Config.sync_tail_quiet_ms)
            if self.resent(message_id, now_ms) and est.one_of_few(now_ms):
                self.note_rename(message_id)
                return True
            return False
        if self.renamed_lately(message_id, now_ms) or not est.one_of_few(now_ms):
            # without: a few members name it again (for the author, if it was a
            # resend), not all
            return False
        self.note_rename(message_id)
        return True

    def resent(self, message_id: str, now_ms: int) -> bool:
        """Config.sync_tail_quiet_ms: whether a copy of ``message_id`` (which we hold) is
        its author's resend of the last line of a burst, not a repair answer: it is still
        the newest entry of our log (no later line named it), it comes a resend period
        (``resend_unacknowledged_ms``, less ``repair_t_min_ms`` for the latency) or more
        after the line reached us, and no request for it, nor a naming of it, was heard
        for ``repair_t_min_ms + repair_t_max_ms`` (a requester still lacking it asks
        again within that time; answers due after it are dropped,
        Config.repair_answer_expiry). Its author lacks the acknowledgement: the syncs
        that named the line (the last of a burst) missed it, and without this only a
        member that had missed them too named it again, at its next sync (33 and 197 s
        in 2 of 50 runs of sdschat sim, 1,000 members, 10% loss)."""
        cfg = self.config
        le = self._entries.get(message_id)
        if cfg.sync_tail_quiet_ms is None or le is None or self._log.keys[-1][1] != message_id:
            return False  # a later line names it (the newest ids of its author's log)
        if now_ms - le.logged_ms < cfg.resend_unacknowledged_ms - cfg.repair_t_min_ms:
            return False
        t = self.renamed_at.get(message_id)
        return t is None or now_ms - t >= cfg.repair_t_min_ms + cfg.repair_t_max_ms

    def name_lacking(self, pb: sds_pb2.SdsMessage, sender_id: str, now_ms: int) -> bool:
        """Adaptive history: ids a peer's bloom filter lacks are named again, soon
        (returns whether any were: the owner brings its sync forward).

        Each delivered id is named once; a peer that was offline then (restarted,
        partitioned) would otherwise hear of only the newest ``causal_history_floor``
        ids and never ask for the rest. Its filter says what it holds; naming what it
        lacks lets it notice the gap and ask (SDS-R). Two sets of our entries are
        checked against the filter:

        * the newest ``causal_history_size`` log entries;
        * every entry that entered our log since this peer's filter was last checked
          (not its own messages), oldest arrival last, at most ``bloom_capacity // 2``
          of them. Each entry is so checked once against each peer we keep hearing,
          early, while the peer's rolling filter still holds it if the peer has it.
          For a peer back after an absence these are the entries logged while it was
          away, wherever their Lamport timestamps put them in the log: a burst of
          older messages republished on its return cannot hide them from the check.

        Entries logged in the last sixteenth of ``sync_interval_ms`` are left out:
        they may still be on their way to it, and naming them again would only make
        messages longer on slow links (without this the CI profile study measured ack
        p99 1.42x the waku profile's; 1.25x is the bound). At most once per sender every
        quarter ``sync_interval_ms``, so the check (a few bit tests per id) stays off a
        busy channel's per-message path. A filter of another size says nothing here.
        The last 1,024 senders heard are remembered; one forgotten counts as new (its
        first check covers the newest entries only).
        """
        cfg = self.config
        if (
            cfg.causal_history_floor is None
            or sender_id == self.sender_id
            or not pb.HasField("bloom_filter")
            or len(pb.bloom_filter) != self._params.nbytes
        ):
            return False
        settled = now_ms - cfg.sync_interval_ms // 16  # newer ones may still be on the way
        if settled < self._log.earliest_logged_ms:
            # Nothing we logged is settled yet: the check below would skip every entry.
            # (sdschat sim scales the sync interval with N²: a whole run stays here,
            # and the loop over the newest entries of every received message took 23%
            # of its CPU at 2,000 participants, the per-sender times ~100 bytes each.)
            return False
        checked = self.lack_checked
        last = checked.get(sender_id)
        if last is not None and now_ms - last[0] < cfg.sync_interval_ms // 4:
            return False
        if not self._estimates.one_of_few(now_ms):
            # every member hears the same filter: about sync_interval_participants of
            # them check it, whatever the channel's size
            return False
        checked[sender_id] = (now_ms, settled)
        checked.move_to_end(sender_id)
        while len(checked) > 1_024:  # peers recently heard from
            checked.popitem(last=False)
        entries = self._entries
        # the settled ones of the newest log entries, then (newest arrival first) what
        # arrived since this peer's last check: not its own, at most bloom_capacity // 2
        # (each id tested once: the two sets mostly overlap on a busy channel)
        candidates: dict[str, LogEntry] = {}
        for _, mid in self._log.keys.islice(-cfg.causal_history_size):
            le = entries[mid]
            if le.logged_ms <= settled:
                candidates[mid] = le
        if last is not None:
            since = last[1]
            budget = max(cfg.bloom_capacity // 2, cfg.causal_history_size)
            for mid in reversed(entries):
                le = entries[mid]
                if le.logged_ms <= since or budget <= 0:
                    break
                if le.logged_ms <= settled and le.sender_id != sender_id:
                    candidates.setdefault(mid, le)
                    budget -= 1
        bloom = pb.bloom_filter
        params = self._params
        lacking = False
        # what it asks for it knows it lacks: naming it again tells it nothing
        asked = {r.message_id for r in pb.repair_request} if len(pb.repair_request) else ()
        renamed = self.renamed_at
        if cfg.sync_rename_sparingly and self._estimates.at_scale(now_ms):
            return self._name_lacked_runs(candidates, bloom, asked, now_ms)
        for mid, le in candidates.items():
            if mid in asked:
                continue
            if renamed and self.renamed_lately(mid, now_ms):
                continue
            pos = le.positions
            if pos is None:
                pos = le.positions = positions_in(mid, params)
            if not contains_positions(bloom, pos):
                self.note_rename(mid)
                lacking = True
        return lacking

    def _name_lacked_runs(
        self,
        candidates: dict[str, LogEntry],
        bloom: bytes,
        asked: set[str] | tuple[()],
        now_ms: int,
    ) -> bool:
        """Config.sync_rename_sparingly: of the entries a filter lacks, name again only runs
        of at least ``causal_history_floor`` that are consecutive in our log. Every
        message names the newest ``causal_history_floor`` entries: a peer that lacks
        fewer in a row, and holds the one after them, heard them named by it (it lost
        the messages, knows, and is repairing them); a peer back from an absence lacks
        everything logged while it was away. (sdschat sim, 1,000 members, 5% loss: 118
        of the 129 syncs of the quiet minute after the lines named one such id again,
        a peer's repair in progress.)"""
        params = self._params
        floor = max(1, self.config.causal_history_floor or 1)
        ordered = sorted(candidates.items(), key=lambda kv: (kv[1].lamport, kv[0]))
        runs: list[list[str]] = [[]]
        for mid, le in ordered:
            pos = le.positions
            if pos is None:
                pos = le.positions = positions_in(mid, params)
            if not contains_positions(bloom, pos):
                runs[-1].append(mid)
            elif runs[-1]:
                runs.append([])
        named = False
        for run in runs:
            if len(run) < floor:
                continue
            for mid in run:
                if mid not in asked and not self.renamed_lately(mid, now_ms):
                    self.note_rename(mid)
                    named = True
        return named

    def renamed_lately(self, message_id: str, now_ms: int) -> bool:
        t = self.renamed_at.get(message_id)
        return t is not None and now_ms - t < self.config.sync_interval_ms

    def note_rename(self, message_id: str) -> None:
        """Name ``message_id`` again in our next messages (before the unnamed ids)."""
        rename = self.rename
        if message_id not in rename:
            rename[message_id] = None
            if len(rename) > self.config.log_window:
                rename.popitem(last=False)

    def note_renamed(self, message_id: str, now_ms: int) -> None:
        """``message_id`` was named again at ``now_ms`` (by us, or by others while we
        meant to): its hold-off starts (sync suppression only)."""
        if not self.config.sync_suppression:
            return
        at = self.renamed_at
        at[message_id] = now_ms
        at.move_to_end(message_id)
        # only the hold-off still running is needed (oldest first): a 10,000-member
        # channel hears a request for every id it holds
        horizon = now_ms - self.config.sync_interval_ms
        while at:
            oldest = next(iter(at))
            if at[oldest] > horizon and len(at) <= self.config.log_window:
                break
            del at[oldest]

    # ------------------------------------------------------- struck by others

    def strike(self, history_ids: list[str], sender_id: str, now_ms: int, sync: bool) -> None:
        """Sync suppression: ids a message we heard names are named for the channel
        (their author has its acknowledgement, those who lack them hear of them), so we
        no longer have to name them (Config.sync_suppression). An author naming its own
        messages acknowledges nothing: those stay ours to name.

        ``sync``: the message is a sync (heard at ``now_ms``). At scale, while we see
        loss (Config.sync_tail_quiet_ms), an id nobody named before it stays ours to
        name until a second sync names it or ``sync_tail_quiet_ms`` passes: a content
        message's ids are named again by the next lines (``causal_history_floor``), but
        the last line of a burst is named by syncs alone, and one sync missed by its
        author (``loss`` of the time) left it unacknowledged until a member that had
        missed that sync too synced (33 s and more in 2 of 20 runs of sdschat sim,
        1,000 members, 10% loss)."""
        unnamed = self.unnamed
        rename = self.rename
        entries = self._entries
        hold = sync and unnamed and self._second_naming(now_ms)
        for mid in history_ids:
            le = entries.get(mid)
            if le is None or le.sender_id == sender_id:
                continue
            if hold and mid in unnamed and unnamed[mid] is None:
                unnamed[mid] = now_ms  # named once: one more sync names it
            else:
                unnamed.pop(mid, None)
            if rename and mid in rename:
                del rename[mid]
                self.note_renamed(mid, now_ms)

    def _second_naming(self, now_ms: int) -> bool:
        """Whether an id a sync names stays ours to name until a second sync names it
        (:meth:`strike`): at scale, with Config.sync_tail_quiet_ms, while more
        than :data:`~sds.tuning.TAIL_ONE_NAMING_LOSS` of the lines reach us only by
        repair."""
        return (
            self.config.sync_tail_quiet_ms is not None
            and self._estimates.loss_mean > TAIL_ONE_NAMING_LOSS
            and self._estimates.at_scale(now_ms)
        )

    def to_name(self, now_ms: int) -> bool:
        """Whether ids are still ours to name (Config.sync_suppression): one nobody
        named, or one a sync named once less than ``sync_tail_quiet_ms`` ago (those
        older are forgotten here)."""
        unnamed = self.unnamed
        if not unnamed:
            return False
        hold = self.config.sync_tail_quiet_ms or 0
        done = []
        found = False
        for mid, first in unnamed.items():
            if first is None or now_ms - first < hold:
                found = True
                break
            done.append(mid)
        for mid in done:
            del unnamed[mid]
        return found
