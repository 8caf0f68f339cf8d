"""What a node is set up with: :class:`NodeOptions` (its tunables), :class:`ChannelInfo`
(a joined channel), the state-save constants and the wall clock.

A leaf of :mod:`app.node`: every part of the node reads these, none of them writes them.
``app.node.runtime`` re-exports the names (``from app.node.runtime import NodeOptions``
keeps working).
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import sds
from app.chat.file_quota import DEFAULT_CHANNEL_FILE_BYTES, DEFAULT_FILE_QUOTA_BYTES
from net.channel_key import DEFAULT_KDF, ChannelKey, KdfParams
from sds.tuning import RESEND_BACKOFF_MAX_MS
from storage.schema import DEFAULT_RECENT_WINDOW

__all__ = [
    "DEFAULT_STATE_SAVE_MS",
    "IDENTITY_FILE",
    "STATE_SAVE_COST_FACTOR",
    "ChannelInfo",
    "NodeOptions",
    "core_config",
    "wall_ms",
]

DEFAULT_STATE_SAVE_MS = 2000
"""Default least interval between two saves of the exported core state.

The saved state only shortens the reconciliation at start
(:mod:`app.node.state_reconcile` rebuilds the window, clock and outgoing buffer
from the message log, which every round commits), so saving it more often
buys little: at 200 ms a node at 25 msg/s spent about a fifth of its CPU
exporting, encoding and writing its state (``bench/e2e_latency.py``).
"""

STATE_SAVE_COST_FACTOR = 100
"""The state-save interval is at least this many times the last export's duration.

Exporting is O(log window) (4.5 ms at 1,500 entries, 40 ms at 10,000) and
blocks the round that carries it; the saved state only shortens the
reconciliation at start (:mod:`app.node.state_reconcile` rebuilds the rest from
storage), so it need not be fresher than that."""

IDENTITY_FILE = "identity.pem"
"""Name of the identity key file inside a data directory."""


def wall_ms() -> int:
    """Wall-clock milliseconds (the core's ``now_ms``; also seeds Lamport clocks)."""
    return time.time_ns() // 1_000_000


@dataclass(frozen=True)
class NodeOptions:
    """Tunables of a :class:`~app.node.Node` (protocol timings live in ``config``).

    Attributes:
        config: the SDS protocol configuration (``sds.Config.fast()`` for demos).
        state_save_interval_ms: least time between two saves of the exported
            core state (it is also saved at shutdown). The interval grows to
            ``STATE_SAVE_COST_FACTOR`` (100) times the last export's duration when
            exporting is slow, so exports take at most ~1% of the node's time.
        max_round: inputs handled per round (one storage commit per round).
        max_queued_envelopes: received envelopes waiting for the worker; beyond
            it the transport is made to wait (backpressure).
        envelope_cache: recent envelopes kept in memory for resends/repairs.
        waiting_envelope_cache: envelopes of received messages still waiting for
            dependencies (stored with the message when it is delivered; one evicted
            here is stored without its envelope and cannot be served for repair).
        publish_rate, publish_burst: token bucket for publishing (the relay
            disconnects clients that exceed its rate: 200 frames/s by default).
        republish_cap: at most this many unacknowledged own messages (the most
            recent) are republished per channel on each (re)connection.
        kdf: Argon2id parameters of channel keys (``TEST_KDF`` in unit tests only).
        clock: wall-clock milliseconds (injectable for tests).
        rng: randomness for the core (sync jitter, ids).
        store_url: a store peer (``sdschat store``) to catch up from and to fetch
            missing dependencies from (:mod:`net.store_sync`), or several (failover);
            see :meth:`~app.node.Node.use_store`.
        recent_window: how many of each channel's newest messages keep their
            envelope and causal history in storage (repair answers, export);
            older ones keep a compact row (:class:`storage.batch.RecentWindow`).
        new_history: start a new, empty history when the database is missing but
            the identity key file is there (``--new-history``); refused otherwise.
        inline_commit_messages: a round's batch of at most this many messages
            (and no exported core state) is committed on the loop's thread
            (:meth:`storage.Store.commit_batch_now`) instead of aiosqlite's: the
            two thread switches cost more latency than the small commit; larger
            rounds (a catch-up) overlap their commit with the next round. 0: never.
        nobody_heard_ms: after the first join of a passphrase channel, how long to wait
            for anyone to be heard before saying so (a mistyped passphrase makes a
            different, empty channel).
        file_quota_bytes: file segment bytes kept per sender and channel (across restarts);
            beyond it (and for files above the 16 MiB limit) segments are stored as
            empty placeholders (:mod:`app.chat.file_quota`).
        file_channel_bytes: file segment bytes held per public or passphrase channel, all
            senders together; beyond it the biggest holder's oldest file is emptied
            (:mod:`app.chat.file_quota`). Members channels are not capped (only admitted
            members send; each has the per-sender quota).
    """

    config: sds.Config = field(default_factory=sds.Config)
    state_save_interval_ms: int = DEFAULT_STATE_SAVE_MS
    max_round: int = 256
    max_queued_envelopes: int = 4096
    envelope_cache: int = 512
    waiting_envelope_cache: int = 1024
    publish_rate: float = 160.0
    publish_burst: int = 320
    republish_cap: int = 512
    kdf: KdfParams = DEFAULT_KDF
    clock: Callable[[], int] = wall_ms
    rng: random.Random | None = None
    store_url: str | tuple[str, ...] | None = None
    recent_window: int = DEFAULT_RECENT_WINDOW
    new_history: bool = False
    inline_commit_messages: int = 8
    nobody_heard_ms: int = 8000
    file_quota_bytes: int = DEFAULT_FILE_QUOTA_BYTES
    file_channel_bytes: int = DEFAULT_CHANNEL_FILE_BYTES


@dataclass(frozen=True, slots=True)
class ChannelInfo:
    """A joined channel."""

    name: str
    key: ChannelKey
    public: bool
    topic: bytes


def core_config(config: sds.Config) -> sds.Config:
    """The SDS configuration a node runs its cores with: ``config``, with message ids
    checked (envelopes bind ``sender_id`` to a key) and resends backing off while
    nobody is heard (:mod:`sds.backoff`, capped at
    :data:`~sds.tuning.RESEND_BACKOFF_MAX_MS`) unless ``config`` chose otherwise, and
    own messages' bytes left out of the outgoing buffer (a resend republishes the
    stored signed envelope: :mod:`app.node.effects`)."""
    if not config.verify_message_ids:
        config = config.with_changes(verify_message_ids=True)
    if config.resend_backoff_max_ms is None:
        longest = max(RESEND_BACKOFF_MAX_MS, config.resend_unacknowledged_ms)
        config = config.with_changes(resend_backoff_max_ms=longest)
    if config.keep_outgoing_bytes:
        config = config.with_changes(keep_outgoing_bytes=False)
    return config
