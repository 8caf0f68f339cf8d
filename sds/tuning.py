"""Limits on what a peer may send, and the tuning constants of the SDS core.

Every number here was chosen by measurement (the reasons are beside each one);
:class:`sds.Config` holds what a channel may choose, this module what it may not.
The parts of :class:`sds.channel.Channel` read them; nothing here has state.
"""

from __future__ import annotations

__all__ = [
    "CARRY_MAX_BYTES",
    "CARRY_MAX_IDS",
    "CARRY_SCAN",
    "CARRY_WHEN_LACKING",
    "COPY_WHEN_LACKING",
    "FAILED_KEPT",
    "FIRST_REQUEST_CAP_WINDOWS",
    "FIRST_REQUEST_MIN_LACKING",
    "FIRST_REQUEST_SPACING",
    "HEARD_KEPT",
    "LOSS_MEAN_LINES",
    "MAX_ID_LENGTH",
    "MAX_LAMPORT",
    "PARTICIPANTS_PER_RESPONSE_GROUP",
    "QUIET_RESENDS",
    "RESEND_BACKOFF_MAX_MS",
    "SYNC_FLOOR_AT_SCALE",
    "TAIL_ONE_NAMING_LOSS",
]

#: Largest Lamport timestamp the wire (``uint64``) carries.
MAX_LAMPORT = 1 << 62
"""Largest Lamport timestamp accepted from a peer or reached by our own clock.

The wire field is a uint64, but a clock is adopted from what peers send
(``max(own, received)``), so one message with a timestamp near 2**64 would
push every participant's clock there for good, past what SQLite's signed
64-bit integers store. Timestamps start at wall-clock milliseconds (~1.8e12
in 2026), so 2**62 (~4.6e18) is never reached honestly; a message above it is
dropped (``DropReason.LAMPORT_OUT_OF_RANGE``) and our own clock stops there.
"""


MAX_ID_LENGTH = 256
"""Longest ``message_id`` or ``sender_id`` accepted from a peer, in characters.

The spec leaves ids opaque strings and only the envelope size bounds them; ids
are kept in the log window, buffers, bloom filters, every later causal history
and the database. sdschat and js-waku ids are 64 hex characters (sender ids
here 32), so 256 refuses no real peer while one message cannot plant a
near-envelope-sized id that every participant then stores and repeats. A
message with a longer id is dropped (``DropReason.ID_TOO_LONG``); a longer id in a
causal history names nothing that can arrive and is not waited or asked for.
"""


#: Own messages given up on that a late acknowledgement can still resolve.
FAILED_KEPT = 1_000

QUIET_RESENDS = 8
"""Most resends of one sweep while nobody is heard (:mod:`sds.backoff`). Any one of
them reaching a peer is enough to end the quiet (its sync answers, and the others are
resent then); a few rather than one, so that a lossy link does not make the first
peer back wait a whole backoff period. A bot's 5,000 lines in an empty channel cost
8 resends per sweep instead of 5,000."""

RESEND_BACKOFF_MAX_MS = 30 * 60_000
"""Longest period between two resend sweeps while nobody is heard, as sdschat's node
sets ``Config.resend_backoff_max_ms``: the periods double from the resend period
(30 s, 1, 2, 4, 8, 16 min) up to this, 30 min; a peer that comes back is heard at once
anyway (its syncs), which ends the backoff."""
#: Most senders remembered for :meth:`sds.channel.Channel.active_participants`. A channel
#: remembers only as many as its stretched SDS-R window needs to reach its limit
#: (``repair_window_participants x repair_t_max_limit_ms / repair_t_max_ms``: 600
#: with the fast preset, 240 by default) and none with fixed windows: beyond, the
#: count changes nothing, and at 10,000 participants 4,096 remembered senders
#: each cost ~4 GB (~100 bytes an entry) in ``sdschat sim``.
HEARD_KEPT = 4_096

#: Newest log entries a sync names in a channel larger than
#: ``Config.sync_interval_participants`` (``causal_history_floor`` otherwise).
SYNC_FLOOR_AT_SCALE = 1

#: SDS-R's recommendation: one response group per 128 participants (js-waku's
#: ``PARTICIPANTS_PER_RESPONSE_GROUP``); ``Config.repair_response_groups`` = g thus
#: stands for a channel of at least ``128 x (g - 1)`` participants.
PARTICIPANTS_PER_RESPONSE_GROUP = 128


#: Lines in the running mean of the share of lines that reached us only through
#: SDS-R (Config.repair_answer_copies): the mean of the first ones, then about the
#: last 256 (at 5% loss a 64-line mean fell below a third of it for 16% of members).
LOSS_MEAN_LINES = 256

#: Base windows (``repair_t_max_ms``) after which a member at scale asks for an id it
#: misses at the latest, plus one draw of the base window
#: (Config.repair_first_request_capped).
FIRST_REQUEST_CAP_WINDOWS = 4

#: Spacing of the expected lacking members' first requests for an id, in
#: ``repair_t_min_ms`` (Config.repair_first_request_capped): a request reaches the
#: others within one network latency (~0.1 s), so at half of ``T_min`` (the copies'
#: spacing) about one request in five has a twin.
FIRST_REQUEST_SPACING = 0.5

#: Fewest members the first requests for an id are spread over, however few are
#: expected to lack it (Config.repair_first_request_capped): the draw spans at least
#: ``T_min + 15 x FIRST_REQUEST_SPACING x repair_t_min_ms`` (8.5 s by default). At
#: 100 members and 10% loss ~10 lack an id; drawn over 6 s (0.5 s apart) more of them
#: asked before the first answer or a copy reached them, and each request (on a sync)
#: drew answers: sdschat sim, seeds 1-5, 50 -> 57 requests and 107 -> 112 answers per
#: run, bytes per content message +4.9% (+12.7% at seed 4) against the stretched 50 s
#: draw; with the floor +1.6% (-5.3% to +6.8%), the delivery p99 4.6-6.0 s instead of
#: 7.3-10.3 s (3.6-4.4 s without the floor). At 1,000 members (~100 lacking) nothing
#: changes (docs/sim.md).
FIRST_REQUEST_MIN_LACKING = 15

#: Expected members still lacking a line at which one more copy of an answer goes out
#: (Config.repair_answer_copies): ln 2, where someone lacks it more likely than not.
COPY_WHEN_LACKING = 0.693

#: Most messages one content message carries (Config.carry_copies): a line is
#: carried by the next ~k lines, so each carries the ~k before it, and one more for
#: the lines a carrier missed or counted fewer copies of (sdschat sim, 2,000
#: members, 200 lines, 5% loss, with CARRY_WHEN_LACKING = 0.1: 65 repair answers and
#: 1.79 deliveries per content delivery with 3 ids, 40 and 1.51 with 4).
CARRY_MAX_IDS = 4

#: Largest message carried (Config.carry_copies), in bytes: chat lines (1-2 KB with
#: their history and filter), not file segments (up to 64 KB each), which a member
#: that lacks one fetches or asks for.
CARRY_MAX_BYTES = 4_096

#: Expected members still lacking a line below which no further copy is carried
#: (Config.carry_copies). A carried copy costs bytes on a broadcast that goes out
#: anyway; a line still lacked costs a request and an answer, each a broadcast to
#: all. With ln 2 (as for copies of answers) members whose loss estimate was a
#: little low carried 2 copies at 10,000 members and 5% loss, 42% of the lines were
#: still repaired, and 2.67 deliveries per content delivery; with 0.1 every member
#: carries 3 there: 1.63, and fewer bytes too (5,252 against 5,635 per content
#: message; sdschat sim -n 10000 -m 200 --loss 0.05, docs/sim.md).
CARRY_WHEN_LACKING = 0.1

#: Newest entries of the repair cache looked at for something to carry.
CARRY_SCAN = 16

#: Share of lines reaching us only by repair (our loss estimate) above which an id
#: a sync names stays ours to name until a second sync names it
#: (Config.sync_tail_quiet_ms, :meth:`sds.naming.Naming.strike`): the author of the last
#: line of a burst misses one naming sync ``loss`` of the time, two ``loss ** 2``.
TAIL_ONE_NAMING_LOSS = 0.01
