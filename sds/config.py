"""Protocol configuration: every size and timing the SDS core uses, in one place."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

__all__ = ["PROFILES", "Config"]

#: Named protocol profiles (:meth:`Config.profile`): ``default`` (sdschat's sizes,
#: chosen by ``bench/profile_study.py``, docs/profiles.md) and ``waku`` (js-waku's
#: ``@waku/sds`` sizes, byte-compatible with it).
PROFILES = ("default", "waku")


@dataclass(frozen=True, slots=True)
class Config:
    """Sizes and timings of the SDS core. Times are milliseconds.

    The sizes (causal history, bloom filter) are sdschat's, chosen by measurement
    (``bench/profile_study.py``, docs/profiles.md); :meth:`waku` gives js-waku's
    (``@waku/sds``), which a channel shared with js-waku peers must use: js-waku
    throws on a filter of another size. The timings equal js-waku's wherever
    PROTOCOL.md lists one, except the SDS-R windows (seconds, sized by the
    channel: :attr:`repair_t_min_ms`); the others are ours and say why.
    """

    #: Most entries sent as ``causal_history`` (with :attr:`causal_history_floor`
    #: set, the cap of the adaptive history). 30: enough for what a participant
    #: delivered between two of its messages in a busy 10-person channel; beyond
    #: it the filter and the next messages carry the rest. js-waku: 200 (its
    #: history is the newest 200 log entries; 200 ids are ~14 KB per message).
    causal_history_size: int = 30
    #: Adaptive causal history (``None``: the newest ``causal_history_size``
    #: entries, js-waku's rule). When set, a message names the newest
    #: ``causal_history_floor`` log entries (at most ``causal_history_size``)
    #: plus the ids delivered from others that none of our messages named yet
    #: (latest arrival first), up to ``causal_history_size``. A message is then
    #: named by the next messages of those who got it, however late it arrived
    #: (a busy or bursty channel leaves the oldest unnamed ones to others): the study
    #: (docs/profiles.md) found fixed histories of 2-50 missing messages that
    #: arrived behind a slow link or a repaired dependency (nobody ever named
    #: them, so nobody noticed the gap); 5 keeps each message named by the next
    #: few messages of everyone as well.
    causal_history_floor: int | None = 5
    #: Bloom filter capacity (js-waku: 10,000). Our filter rolls over at this
    #: size (rebuilt from the newest half), so it only has to hold the ids whose
    #: senders may still wait for an acknowledgement (it gives most of them under
    #: loss; the adaptive history names every id as well). 250 ids (12-25 s of a
    #: 10 msg/s channel) are 472 bytes on every message instead of 18,752; the study
    #: (docs/profiles.md) measured the same convergence as 500 and 1,000 ids and
    #: 22-59x fewer bytes per message than js-waku's sizes.
    bloom_capacity: int = 250
    #: Bloom filter design false-positive rate (js-waku: 0.001). Kept: it keeps
    #: the derived acknowledgement threshold at 2 distinct senders (3 at 0.01,
    #: which a 3-person channel can never reach by filters).
    bloom_error_rate: float = 0.001
    #: Probability we accept that a message is wrongly taken as acknowledged from
    #: bloom-filter evidence alone. The possible-ack threshold is the number of
    #: *distinct* senders whose filters must contain the id:
    #: ``ceil(log(ack_certainty) / log(bloom_error_rate))`` (2 for the defaults,
    #: js-waku's hard-coded value; 3 at a 1% filter). See :attr:`ack_threshold`.
    ack_certainty: float = 1e-6
    #: Fixed threshold overriding the derived one (``None`` derives it).
    ack_threshold_override: int | None = None
    #: Resend period of an unacknowledged own message (js-waku: 30 s).
    resend_unacknowledged_ms: int = 30_000
    #: Resend period of a possibly-acknowledged own message: longer, because
    #: someone probably has it (the spec asks for distinct periods).
    resend_possibly_acknowledged_ms: int = 60_000
    #: Sends (first one excluded) before a message is reported failed (js-waku: 10).
    max_resend_attempts: int = 10
    #: Resends back off while nobody is heard (``sds.backoff``): when no other
    #: participant was heard for a whole ``resend_unacknowledged_ms``, a sweep
    #: resends a few of the messages due (``sds.tuning.QUIET_RESENDS``) and the
    #: next comes after twice the period before, at most this long; the first sign
    #: of a peer ends it. ``None``: every due message every period (the spec,
    #: js-waku). sdschat's node sets ``sds.tuning.RESEND_BACKOFF_MAX_MS`` (30 min).
    resend_backoff_max_ms: int | None = None
    #: Sync messages go out after a random delay in ``[0, sync_interval_ms)``
    #: (js-waku: 30 s), halved after content was received and while repair
    #: requests are pending.
    sync_interval_ms: int = 30_000
    #: The sync interval grows with the channel: with ``n`` participants heard in the
    #: last :attr:`sync_interval_limit_ms` (a sampled count, ``sds.census``; at least
    #: what :attr:`repair_response_groups` stands for) and ``n`` above this, every
    #: random sync delay is drawn from ``sync_interval_ms x n / this`` (up to
    #: :attr:`sync_interval_limit_ms`). The first of ``n`` timers then still fires
    #: within ``sync_interval_ms / this`` on average, and the others, suppressed by
    #: what it names (:attr:`sync_suppression`), stay about as few as in a channel of
    #: this size: ``n x latency / interval`` timers fire before its sync reaches them.
    #: ``None``: the fixed interval (js-waku).
    sync_interval_participants: int | None = 10
    #: Longest stretched sync interval (and the horizon of the participant count): a
    #: member posing as many participants can make syncs this rare, no rarer. (A
    #: ``sync_interval_ms`` above it is used as it is, never stretched.)
    sync_interval_limit_ms: int = 3_600_000
    #: SRM-style sync suppression (adaptive history only): a due sync is skipped when
    #: it carries no repair request, we heard another participant since our last
    #: message, and everything it would name beyond the newest
    #: :attr:`causal_history_floor` was named by messages heard since (ids another
    #: participant named are struck from what we still have to name). One sync then
    #: acknowledges a message and tells the others of an id for the whole channel,
    #: instead of one sync per member. ``False``: every due sync goes out (js-waku).
    sync_suppression: bool = True
    #: In a channel larger than :attr:`sync_interval_participants` (with
    #: :attr:`sync_suppression`), a due sync that would go out only to name ids (ids
    #: delivered that nobody named yet, ids a peer's filter lacks or that arrived
    #: again) waits while content flows: while we heard a new content message in the
    #: last ``sync_interval_ms / 2``. The next content message names the newest ids
    #: (and its author's ids to name) for the whole channel and strikes them from
    #: ours; what is still to name goes out in the first sync after the channel
    #: quiets, which suppresses the others'. A sync carrying repair requests, or one
    #: the application asked for, never waits. ``False``: such syncs go out at once.
    sync_defer_naming: bool = True
    #: With :attr:`sync_defer_naming`: a line nobody named yet (the last of a burst: no
    #: later line names it, and with carrying nobody lacking it asks for it) stops the
    #: wait once no new content was heard for this long, instead of
    #: ``sync_interval_ms / 2``. The members' sync timers then name it within about a
    #: second more: the first sync acknowledges it for its author and strikes it from
    #: the others' lists, which suppresses theirs (SRM-style: one member sends, not
    #: all). Longer than the gaps between the lines of a conversation, so that while
    #: content flows the next line still names it. Before, the last line of a burst
    #: waited for the first sync after ``sync_interval_ms / 2`` of quiet: its
    #: acknowledgement p99 was 16.7 s at 1,000 members (every other line ~1.1 s;
    #: sdschat sim, 10% loss, 40 lines at 1/s; docs/profiles.md). ``None``: the
    #: wait of ``sync_interval_ms / 2`` for every id.
    sync_tail_quiet_ms: int | None = 3_000
    #: In a channel larger than :attr:`sync_interval_participants` (adaptive history),
    #: ids are named again only where that tells someone something: the entries a
    #: peer's bloom filter lacks only in runs of at least :attr:`causal_history_floor`
    #: consecutive log entries (a peer back from an absence; fewer, followed by one it
    #: holds, were named to it by that one: it is repairing them), and a copy of a
    #: message we hold not at all (at scale it is a repair answer every member hears,
    #: and the author has its acknowledgement from the channel's filters).
    #: ``False``: every lacked entry and a few members per copy name them again.
    sync_rename_sparingly: bool = True
    #: How often the incoming buffer is checked for lost dependencies and
    #: ``MessagesMissing`` is repeated for the application (js-waku's store
    #: query interval: 10 s).
    sweep_interval_ms: int = 10_000
    #: A dependency missing this long (store fetches and several SDS-R request
    #: rounds of up to ``repair_t_max_ms`` each had their chance) is declared
    #: lost and the messages waiting for it are delivered anyway. ``0`` disables
    #: it (js-waku's default: messages then wait forever).
    lost_timeout_ms: int = 300_000
    #: SDS-R: enable repair requests and responses.
    repair_enabled: bool = True
    #: SDS-R: an id named in someone else's repair request that we do not hold is
    #: missing for us too, as if a causal history had named it (we may have lost the
    #: message and every message naming it). ``False``: only causal histories tell.
    repair_note_asked: bool = True
    #: SDS-R: after someone else's request for an id we lack, our own request waits
    #: one draw of the base window ``[repair_t_min_ms, repair_t_max_ms)``, not the
    #: stretched one (:attr:`repair_window_participants`): the answer to that request
    #: reaches all but the few it was lost to, and those few ask again within seconds.
    #: ``False``: the stretched window (up to 120 s a round at 1,000 participants).
    repair_follow_up_base_window: bool = True
    #: SDS-R: in a channel whose response window is stretched (more than
    #: :attr:`repair_window_participants` heard), a holder's pending answer that falls
    #: due after a silence is dropped: no request for the id heard for
    #: ``repair_t_min_ms + repair_t_max_ms`` (a follow-up request comes within the base
    #: window, :attr:`repair_follow_up_base_window`), or for twice the gap between the
    #: last two requests when one requester sent both (its own retries back off). A
    #: requester that still lacks the id asks again within that time, so the silence
    #: says an answer reached it; the holder missed that copy (which would have
    #: cancelled its answer) and would otherwise rebroadcast to the whole channel
    #: unasked (sdschat sim, 2,000 members, 5% loss: 207 of 661 answers, one per
    #: message). A request after the silence schedules the answer again. ``False``:
    #: every scheduled answer goes out unless a copy was seen.
    repair_answer_expiry: bool = True
    #: SDS-R: most copies a holder sends of one answer. After a copy, another goes out
    #: ``repair_t_min_ms / 2`` later (before the lacking members' follow-up requests,
    #: which wait at least ``repair_t_min_ms``), unless a copy was seen meanwhile, while
    #: the members expected to lack the line still, ``participants x loss ** copies``,
    #: are at least ln 2 (someone more likely than not): ``copies`` those on the wire
    #: as far as we know (the first broadcast, duplicates heard, ours), ``loss`` the
    #: share of the lines that reached us only through SDS-R (a running mean over 256
    #: lines; 0 where a store fetches them before a request is due), ``participants``
    #: the sync interval's count. Only in channels beyond
    #: :attr:`sync_interval_participants`. One answer reaches all but ``loss`` of the
    #: ~``loss x participants`` lacking the line: at 2,000 members and 5% loss ~5 are
    #: left, who would ask again (a request and an answer, both to all) where one more
    #: copy does. Up to ~270 members at 5% loss one copy is sent, as before (sdschat
    #: sim, 2,000 members, 5% loss: 4.93 deliveries per content delivery, 5.84 with
    #: one copy, both before :attr:`repair_first_request_capped`; 4.99 with it).
    #: ``1``: one copy per answer.
    repair_answer_copies: int = 3
    #: SDS-R: where the window is stretched, the first request for an id is drawn over
    #: the members expected to lack it, not over the whole channel: ``T_min`` plus up
    #: to ``loss x participants x repair_t_min_ms / 2`` (``loss`` as for
    #: :attr:`repair_answer_copies`; ``loss x participants`` at least 15, so that a
    #: few lacking members' requests do not cross each other and their answers: at
    #: 100 members and 10% loss 8.5 s; at least the base window, at most the
    #: stretched one), and at the latest four base windows (``4 x repair_t_max_ms``) plus one
    #: draw of the base window after the id was found missing. The ~``loss x
    #: participants`` first requests are spread so that one comes early and the others
    #: hear it (and then ask within the base window,
    #: :attr:`repair_follow_up_base_window`). Over the stretched 120 s alone the first
    #: of ~100 came ~1.2 s after ``T_min`` and in 1 line in 40 more than 4.4 s: those
    #: lines held back the later lines of the members lacking them and set the
    #: delivery p99 (sdschat sim, 1,000 members, 10% loss, seeds 1-5: p99 6.1-10.0 s,
    #: 4.2-5.2 s with the spread; docs/sim.md); and a member that heard neither that
    #: request nor any copy of the answer waited up to 120 s (1 of 1,000 still lacking
    #: a line at the end of the drain). ``False``: the stretched draw alone.
    repair_first_request_capped: bool = True
    #: Our due SDS-R requests go by what their namer costs us: the due ids of the
    #: namers with the fewest requests and missing ids first, then earliest-due first
    #: (:meth:`sds.requests.RepairRequests.take`). Earliest-due first alone, 11
    #: identities naming 1,000 invented ids each every 2 s held every due slot of our
    #: messages and syncs, and an honest member's missing line was asked for seconds
    #: later (bench/sim_flood.py, the hostile soak's shape in virtual time, 5 members,
    #: 20% loss each way: delivery p50 / p99 1.36 / 7.3 s quiet, 3.4-4.1 / 18-19 s under
    #: the flood; 1.45 / 6.7 s with this rule). ``False``: earliest-due first.
    repair_cheapest_namers_first: bool = True
    #: Whether the outgoing buffer keeps each own message's SDS bytes (and the saved state
    #: writes them) to put them in its ``resend`` :class:`~sds.Datagram`. ``False`` for
    #: an application that resends its own stored copy by ``Datagram.message_id`` (an
    #: application that signs envelopes must: sdschat's node republishes the signed
    #: envelope): resend datagrams then carry empty ``data``, and an own message waiting
    #: for its acknowledgement costs its id, times and filter positions only (5,000
    #: pending lines: about 8 MB less in memory and 15 of the saved state's 16 MB).
    #: Local policy: nothing on the wire changes.
    keep_outgoing_bytes: bool = True
    #: Proactive redundancy ("carrying", as FEC in reliable multicast): the most extra
    #: copies of one message that ride on later content messages. After
    #: :meth:`sds.Channel.send`, :meth:`sds.Channel.to_carry` names up to
    #: ``CARRY_MAX_IDS`` recent messages whose SDS bytes the transport attaches to the
    #: new message's envelope, so that a member that missed one gets it with the next
    #: line without asking. Only at scale (``participants x loss`` at least
    #: ``FIRST_REQUEST_MIN_LACKING``, ``loss`` as for :attr:`repair_answer_copies`): a
    #: message is carried while it entered our log within the base window
    #: (``repair_t_max_ms``), is at most ``CARRY_MAX_BYTES``, and its copies on the wire
    #: as far as we know are fewer than ``1 + k``, ``k`` the fewest with
    #: ``participants x loss ** (k + 1)`` below ``CARRY_WHEN_LACKING`` (0.1), capped
    #: by this. Without it, at 10,000 members and 5% loss every line was repaired by
    #: SDS-R broadcasts (a request and ~3 answers, each to all): 6.02 deliveries per
    #: content delivery, 1.63 with it, and fewer bytes (sdschat sim -n 10000 -m 200
    #: --loss 0.05; docs/sim.md). ``0``: nothing is carried.
    carry_copies: int = 3
    #: SDS-R: earliest and latest delay of a repair request (js-waku: 30 s, 120 s),
    #: and the latest delay of a repair response (the original sender answers at
    #: once, others spread over ``[0, repair_t_max_ms)``), for a channel of up to
    #: :attr:`repair_window_participants` participants; larger channels stretch
    #: them (see there). 1 s / 5 s: the study (docs/profiles.md) measured js-waku's
    #: 30-120 s holding every later message of a causal chain for minutes at 10-30%
    #: loss (delivery p50 60-145 s) and 1-5 s delivering in seconds at no extra
    #: bytes in small channels.
    repair_t_min_ms: int = 1_000
    repair_t_max_ms: int = 5_000
    #: SDS-R windows grow with the channel: with ``n`` participants heard from in
    #: the last three sync intervals (ourselves included) and ``n`` above this,
    #: ``repair_t_max_ms`` is multiplied by ``n / repair_window_participants`` (up to
    #: :attr:`repair_t_max_limit_ms`). Requesters and responders then stay as far
    #: apart in time as in a small channel, so the first request and the first
    #: answer come as early, and the others still see them and stand down instead
    #: of all answering at once (fixed 1-5 s windows cost 7x the bytes at 100
    #: participants). ``None``: fixed windows (js-waku).
    repair_window_participants: int | None = 10
    #: Longest stretched ``repair_t_max_ms`` (js-waku's 120 s): a member posing as
    #: many participants can slow repair down to js-waku's timings, no further. (A
    #: ``repair_t_max_ms`` above it is used as it is, never stretched.)
    repair_t_max_limit_ms: int = 120_000
    #: SDS-R: number of response groups (``participants / 128 + 1`` is the
    #: recommendation; 1 means everyone may answer).
    repair_response_groups: int = 1
    #: SDS-R: repair requests attached to one message (js-waku: 3).
    repair_requests_per_message: int = 3
    #: SDS-R: bound of each repair buffer (js-waku: 1,000). When full, the entry
    #: due last is evicted.
    repair_buffer_size: int = 1_000
    #: Number of delivered ids the core keeps for dependency checks and
    #: duplicate detection. Older ids are the application's (storage) business:
    #: it answers ``MessagesMissing`` with ``mark_dependencies_met``.
    log_window: int = 10_000
    #: Wire bytes of this many most recent delivered/sent messages are kept so
    #: that repair requests can be answered without storage. Older ones are
    #: asked for with a ``RepairDataNeeded`` event.
    repair_cache_size: int = 128
    #: Cap of the unacknowledged outgoing buffer. When full, the oldest entry
    #: is reported ``MessageSendFailed(reason="buffer_full")`` and dropped.
    outgoing_buffer_cap: int = 5_000
    #: Cap of the incoming buffer (messages waiting for dependencies). When
    #: full, the oldest waiting message is dropped (``MessageDropped``,
    #: reason ``"incoming_buffer_full"``); repair or storage can bring it back.
    incoming_buffer_cap: int = 10_000
    #: Cap of the dependencies tracked as missing. Peers can name ids nobody has
    #: (sync histories, evicted waiters), and with ``lost_timeout_ms = 0`` nothing
    #: else would ever forget them: beyond the cap the longest-missing id is
    #: declared lost early (``MessageLost``; its waiters are delivered).
    max_missing: int = 10_000
    #: Largest content accepted by :meth:`Channel.send` and on receipt.
    max_content_bytes: int = 64 * 1024
    #: Drop a received content message whose id is neither its sdschat id nor its
    #: js-waku id (``sds.ids``; ``DropReason.UNVERIFIABLE_ID``). sdschat's node turns
    #: it on (its envelopes bind ``sender_id`` to the signing key); off for cores
    #: fed hand-made ids.
    verify_message_ids: bool = False
    #: Largest distance (ms) a received Lamport timestamp may be ahead of our own
    #: wall clock (``now_ms``). Timestamps start at wall-clock ms and a clock adopts
    #: the largest it sees, so one message far in the future would move every
    #: participant's clock (and the order of every later message) there for good.
    #: A content or sync message further ahead is refused
    #: (``DropReason.CLOCK_AHEAD``) and never adopted; its author's resends are
    #: accepted once our clock has caught up. A restored state whose clock is
    #: beyond it is brought back to ``now_ms``. 10 minutes: far more than the
    #: wall-clock difference of honest machines (NTP keeps them within seconds).
    max_clock_skew_ms: int = 10 * 60_000
    #: Largest causal history accepted in one received message (js-waku sends 200;
    #: ours ``causal_history_size``). A message naming more is refused
    #: (``DropReason.HISTORY_TOO_LONG``): one message could otherwise make every
    #: node track and ask for thousands of ids nobody has. A channel whose own
    #: ``causal_history_size`` is larger accepts that many (peers with its settings).
    max_history_received: int = 1_000
    #: Largest number of SDS-R repair requests accepted in one received message
    #: (js-waku sends 3, our syncs up to ``repair_requests_per_sync``). A message
    #: asking for more is refused (``DropReason.TOO_MANY_REPAIR_REQUESTS``).
    max_repair_requests_received: int = 100
    #: Due SDS-R requests carried by one sync message (content messages carry
    #: ``repair_requests_per_message``): many due requests go out in a few syncs,
    #: not one sync per three.
    repair_requests_per_sync: int = 50
    #: Smallest spacing of sync messages sent because repair requests are due
    #: (the channel's repair budget: at most ``repair_requests_per_sync`` requests
    #: per this period, whatever the number of missing ids).
    repair_sync_interval_ms: int = 1_000
    #: Missing ids one sender's messages may have outstanding (first named by it,
    #: neither arrived nor given up). A message from that sender naming more
    #: unknown ids is refused (``DropReason.SENDER_BUDGET``) until some of them
    #: resolve; an honest sender's resends are then accepted. Bounds the repair
    #: requests and lost reports one member can cause.
    max_missing_per_sender: int = 1_000
    #: Repair responses one requester may cause per ``repair_response_window_ms``
    #: (rebroadcasts of messages we hold); requests beyond it are ignored.
    repair_responses_per_sender: int = 200
    #: The window of :attr:`repair_responses_per_sender` (200 per 10 s: a node back
    #: from a restart that asks for hundreds of ids is answered within seconds; one
    #: member asking for everything costs each holder at most 20 rebroadcasts a second,
    #: and the first answer on the wire cancels the others').
    repair_response_window_ms: int = 10_000
    #: A dependency declared lost stays wanted: it is asked for again by SDS-R
    #: (and reported in ``MessagesMissing`` reminders, for the store) with a
    #: backoff that doubles from ``repair_t_max_ms`` (stretched) up to this period, until it
    #: arrives. At most ``repair_buffer_size`` such ids (oldest forgotten first).
    lost_retry_max_ms: int = 30 * 60_000

    def __post_init__(self) -> None:
        problems = []
        for name in (
            "causal_history_size",
            "bloom_capacity",
            "log_window",
            "outgoing_buffer_cap",
            "incoming_buffer_cap",
            "max_missing",
            "repair_buffer_size",
            "max_content_bytes",
            "max_history_received",
            "max_repair_requests_received",
            "repair_requests_per_sync",
            "max_missing_per_sender",
            "repair_responses_per_sender",
            "repair_answer_copies",
        ):
            if getattr(self, name) < 1:
                problems.append(f"{name} must be >= 1")
        for name in (
            "resend_unacknowledged_ms",
            "resend_possibly_acknowledged_ms",
            "sync_interval_ms",
            "sweep_interval_ms",
            "repair_t_max_ms",
            "repair_t_max_limit_ms",
            "repair_response_window_ms",
            "max_clock_skew_ms",
            "repair_sync_interval_ms",
            "lost_retry_max_ms",
            "sync_interval_limit_ms",
        ):
            if getattr(self, name) <= 0:
                problems.append(f"{name} must be > 0")
        if self.repair_cache_size < 0:
            problems.append("repair_cache_size must be >= 0")
        if self.sync_tail_quiet_ms is not None and self.sync_tail_quiet_ms <= 0:
            problems.append("sync_tail_quiet_ms must be > 0 (or None)")
        if self.carry_copies < 0:
            problems.append("carry_copies must be >= 0")
        if self.max_resend_attempts < 0:
            problems.append("max_resend_attempts must be >= 0")
        if (
            self.resend_backoff_max_ms is not None
            and self.resend_backoff_max_ms < self.resend_unacknowledged_ms
        ):
            problems.append("resend_backoff_max_ms must be >= resend_unacknowledged_ms "
                            "(or None)")  # fmt: skip
        if self.lost_timeout_ms < 0:
            problems.append("lost_timeout_ms must be >= 0")
        if not 0 <= self.repair_t_min_ms < self.repair_t_max_ms:
            problems.append("need 0 <= repair_t_min_ms < repair_t_max_ms")
        if self.sync_interval_participants is not None and self.sync_interval_participants < 1:
            problems.append("sync_interval_participants must be >= 1 (or None)")
        if self.repair_window_participants is not None and self.repair_window_participants < 1:
            problems.append("repair_window_participants must be >= 1 (or None)")
        if self.repair_response_groups < 1:
            problems.append("repair_response_groups must be >= 1")
        if not 0.0 < self.bloom_error_rate < 1.0:
            problems.append("bloom_error_rate must be in (0, 1)")
        if not 0.0 < self.ack_certainty < 1.0:
            problems.append("ack_certainty must be in (0, 1)")
        if self.ack_threshold_override is not None and self.ack_threshold_override < 1:
            problems.append("ack_threshold_override must be >= 1")
        if self.causal_history_floor is not None and self.causal_history_floor < 0:
            problems.append("causal_history_floor must be >= 0 (or None)")
        if self.log_window < self.causal_history_size:
            problems.append("log_window must be >= causal_history_size")
        if self.max_repair_requests_received < max(
            self.repair_requests_per_sync, self.repair_requests_per_message
        ):
            problems.append(
                "max_repair_requests_received must be >= repair_requests_per_sync "
                "and repair_requests_per_message"
            )
        if problems:
            raise ValueError("invalid sds.Config: " + "; ".join(problems))

    @property
    def ack_threshold(self) -> int:
        """Distinct bloom-filter hits that make a message acknowledged.

        Each hit from a filter that does not really contain the id happens with
        probability ``bloom_error_rate`` (our rolling filter never exceeds it), so
        ``t`` independent hits are all false with probability ``rate ** t``; the
        threshold is the smallest ``t`` with ``rate ** t <= ack_certainty``.
        """
        if self.ack_threshold_override is not None:
            return self.ack_threshold_override
        t = math.log(self.ack_certainty) / math.log(self.bloom_error_rate)
        return max(1, math.ceil(t - 1e-9))

    def with_changes(self, **changes: Any) -> Config:
        """A copy with some fields changed (validated again)."""
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, for config files and persistence."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Config:
        """Build from a dict; unknown keys raise ``ValueError`` naming them."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown sds.Config keys: {', '.join(unknown)}")
        return cls(**data)

    @classmethod
    def fast(cls, scale_ms: int = 1_000, **changes: Any) -> Config:
        """Second-scale timings for demos and tests: every period becomes a few ``scale_ms``."""
        return replace(cls().with_fast_timings(scale_ms), **changes)

    def with_fast_timings(self, scale_ms: int = 1_000) -> Config:
        """This configuration with :meth:`fast`'s second-scale timings (sizes kept)."""
        return self.with_changes(
            resend_unacknowledged_ms=2 * scale_ms,
            resend_possibly_acknowledged_ms=4 * scale_ms,
            sync_interval_ms=2 * scale_ms,
            sweep_interval_ms=scale_ms,
            lost_timeout_ms=20 * scale_ms,
            repair_t_min_ms=scale_ms // 2,
            repair_t_max_ms=2 * scale_ms,
            repair_response_window_ms=2 * scale_ms,
            sync_tail_quiet_ms=None if self.sync_tail_quiet_ms is None else 3 * scale_ms // 2,
            resend_backoff_max_ms=(
                None if self.resend_backoff_max_ms is None else 60 * scale_ms
            ),
        )

    @classmethod
    def waku(cls, **changes: Any) -> Config:
        """js-waku's ``@waku/sds`` sizes: causal history 200, filter 10,000 / 0.001.

        Byte-compatible with js-waku: use it for a channel shared with js-waku
        peers (they throw on a filter of another size; we ignore such a filter
        for acknowledgements and still deliver), with js-waku's SDS-R windows
        (30-120 s, fixed). Timings do not affect the bytes: a channel may mix them.
        """
        sizes: dict[str, Any] = {
            "causal_history_size": 200,
            "causal_history_floor": None,
            "bloom_capacity": 10_000,
            "bloom_error_rate": 0.001,
            "repair_t_min_ms": 30_000,
            "repair_t_max_ms": 120_000,
            "repair_window_participants": None,
            "sync_interval_participants": None,
            "sync_suppression": False,
            "repair_answer_copies": 1,
            "carry_copies": 0,
        }
        return replace(cls(), **{**sizes, **changes})

    @classmethod
    def profile(cls, name: str, **changes: Any) -> Config:
        """The named profile (:data:`PROFILES`): ``default`` or ``waku``.

        Raises:
            ValueError: an unknown name (the message lists the known ones).
        """
        if name == "default":
            return replace(cls(), **changes)
        if name == "waku":
            return cls.waku(**changes)
        raise ValueError(f"unknown protocol profile {name!r} (known: {', '.join(PROFILES)})")
