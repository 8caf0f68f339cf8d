"""What a :class:`~app.node.Node` tells its UI: frozen event dataclasses and their JSON form.

Subscribe with ``node.subscribe(callback)`` or ``async for ev in node.events()``.
Every event has a ``ts`` (wall-clock seconds, float) taken when the node
published it. :func:`event_to_json` gives the object the headless mode prints
(one per line): its ``"event"`` key names the type (the ``name`` below).

========================  =================  =========================================
class                     ``"event"``        when
========================  =================  =========================================
:class:`Ready`            ``ready``          the node started (identity, data dir)
:class:`ChannelJoined`    ``channel``        joined (``public`` says anyone may read)
:class:`ChannelLeft`      ``channel``        left (``joined: false``)
:class:`Delivered`        ``delivered``      someone else's message entered our log
:class:`OwnMessage`       ``own``            own message state: ``queued`` (durable
                                             in the outbox, ``local_id``), ``logged``
                                             (the core made it: id, Lamport, position),
                                             ``sent``, ``possibly_acknowledged``,
                                             ``acknowledged``, ``failed``
:class:`Missing`          ``missing``        a received message waits for these ids
:class:`Lost`             ``lost``           a dependency was given up
:class:`Ephemeral`        ``ephemeral``      an ephemeral message (typing indicator)
:class:`PeerSeen`         ``peer``           a sender seen first (or under a new name)
:class:`ConnectionChanged` ``connection``    transport connected/disconnected/...
:class:`Rejected`         ``rejected``       an envelope was refused (``reason``)
:class:`Conflict`         ``conflict``       a second message under an id we hold, from
                                             another author or with other content
:class:`Peers`            ``peers``          answer to ``/who``
:class:`Info`             ``info``           answer to ``/help``, ``/stats``...
:class:`CatchUp`          ``catchup``        catching up from a store peer (progress)
:class:`LanPeer`          ``lan_peer``       a LAN gossip peer appeared, connected, went
:class:`NodeError`        ``error``          something failed (the node goes on)
:class:`ClockSkew`        ``clock``          our wall clock is far off the others' (or
                                             right again): ``text`` says so plainly
:class:`DiskFull`         ``disk``           the data directory's disk is ``full`` (lines
                                             refused, nothing received is kept) or
                                             ``ok`` again
:class:`DeviceCopied`     ``device_copy``    another process uses this device's key (a
                                             copied data dir): the front ends stop
:class:`DeviceTwins`      ``device_twins``   two processes sign as one member (told once
                                             per member and channel; lines kept)
:class:`Closed`           ``closed``         the node stopped (final counters)
========================  =================  =========================================
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "CatchUp",
    "ChannelJoined",
    "ChannelLeft",
    "ClockSkew",
    "Closed",
    "Conflict",
    "ConnectionChanged",
    "Delivered",
    "DeviceCopied",
    "DeviceTwins",
    "DiskFull",
    "Ephemeral",
    "Info",
    "InviteMade",
    "LanPeer",
    "LinkEvent",
    "Lost",
    "MembersEvent",
    "Missing",
    "NodeError",
    "NodeEvent",
    "OwnMessage",
    "PeerInfo",
    "PeerSeen",
    "Peers",
    "Ready",
    "Rejected",
    "event_to_json",
]


def _now_s() -> float:
    return time.time()


@dataclass(frozen=True, slots=True)
class Ready:
    """The node is running."""

    sender_id: str
    name: str
    data_dir: str
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class ChannelJoined:
    """A channel was joined (or resumed from storage at start)."""

    channel: str
    public: bool
    topic: str
    messages: int
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class ChannelLeft:
    """A channel was left (its history stays in storage)."""

    channel: str
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Delivered:
    """Someone else's message entered our log, exactly once.

    ``position`` is its index in the channel's log order ``(lamport, message_id)``
    (a lower bound when it sorts before the core's in-memory window);
    ``missing_before`` counts dependencies given up as lost before it;
    ``was_lost`` is true when this message itself had been reported lost
    (a ``lost`` event) and arrived afterwards: show it as recovered.
    ``recovered`` is true when it arrived late (named missing before it came, lost,
    or older than a message of its author that came first: ``app/node/late_arrivals.py``);
    the node stores it with the message, so a log read back marks it the same.
    ``name`` is the author's name: in a members channel the roster's (the name an
    admin admitted, or the member's own chained rename), never the one claimed in the
    content; elsewhere the claimed display name (``None`` for foreign content).
    ``label`` is how a person should see the author: ``name``, with the author's
    fingerprint when another author's name looks like it (``alice (3f9a2b1c)``,
    :mod:`app.chat.authors`). ``sender_id`` is the authenticated author. ``implausible_time`` says
    why its send time (``lamport``) cannot be true (before 2020, or not after a
    message it names: backdated), else ``None`` (:mod:`app.node.clock_guard`).
    ``person`` is the root id of the person whose device log certifies ``sender_id``
    as a current device (public and passphrase channels: ``name`` is then the person's
    and ``label`` carries the root's fingerprint when needed), ``device`` that device's
    name; both ``""`` otherwise (:mod:`app.members.device_labels`). A line of another
    device of our own person has ``own_device`` true and ``label`` ``bob · laptop``.
    """

    channel: str
    message_id: str
    sender_id: str
    name: str | None
    kind: str
    text: str
    lamport: int
    position: int
    missing_before: int = 0
    was_lost: bool = False
    recovered: bool = False
    implausible_time: str | None = None
    label: str = ""
    person: str = ""
    device: str = ""
    own_device: bool = False
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class OwnMessage:
    """A state change of one of our own messages (see the module table for ``state``).

    ``local_id`` is the outbox id (known for messages typed in this run or
    resumed from the outbox); ``message_id`` is ``None`` only for ``queued``.
    ``detail`` carries extras: ``hits``/``threshold``/``by`` (whose bloom filter) for
    ``possibly_acknowledged``, ``reason``/``attempts`` for ``failed``,
    ``by``/``causal`` for ``acknowledged``.
    """

    channel: str
    state: str
    local_id: int | None = None
    message_id: str | None = None
    lamport: int | None = None
    position: int | None = None
    text: str | None = None
    kind: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Missing:
    """``waiting`` (from ``sender_id``; empty for a periodic reminder) lacks these ids.

    When ``waiting`` is a content message that has just arrived, ``lamport``,
    ``name``, ``kind`` and ``text`` describe it (a UI shows it at once, marked
    as waiting); they are ``None`` for sync messages and reminders. ``recovered``: that
    message arrived late (``app/node/late_arrivals.py``; false without a preview).
    """

    channel: str
    waiting: str
    sender_id: str
    ids: tuple[str, ...]
    first: bool
    lamport: int | None = None
    name: str | None = None
    kind: str | None = None
    text: str | None = None
    recovered: bool = False
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Lost:
    """Dependencies could not be obtained in time; ``waiting`` messages were delivered anyway.

    One event per channel per round lists every id given up in it
    (``message_ids``; ``message_id`` is the first of them) and the union of
    their waiting messages: a hostile history naming a thousand ids is one
    report, not a thousand. The ids stay wanted: one that arrives later is
    delivered with ``Delivered.was_lost``.
    """

    channel: str
    message_id: str
    waiting: tuple[str, ...]
    message_ids: tuple[str, ...] = ()
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Ephemeral:
    """An SDS ephemeral message from ``sender_id`` (typing indicators): never logged.

    ``content`` is what the sender passed to ``Node.send_ephemeral`` (the TUI
    uses :mod:`app.tui.typing`'s format).
    """

    channel: str
    sender_id: str
    content: bytes
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class PeerInfo:
    """A participant we have heard from. Outside members channels a person's devices
    that its device log certifies are one participant: ``sender_id`` is then the
    person's root id, ``person`` the same, ``devices`` the names of the devices heard
    (app/node/device_glue.py); another device of our own person is listed on its own,
    named ``bob · laptop``."""

    sender_id: str
    name: str | None
    channels: tuple[str, ...]
    last_seen_ms: int
    messages: int
    person: str = ""
    devices: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class PeerSeen:
    """A sender was heard for the first time in ``channel`` (or announced a new name)."""

    channel: str
    sender_id: str
    name: str | None
    first: bool
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Peers:
    """The peers of ``channel`` (``None``: all channels), e.g. for ``/who``."""

    channel: str | None
    peers: tuple[PeerInfo, ...]
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class ConnectionChanged:
    """The transport's connection state (``connecting``, ``connected``, ``disconnected``...)."""

    state: str
    reason: str | None = None
    retry_in: float | None = None
    attempt: int = 0
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Rejected:
    """An envelope was refused before reaching the protocol core.

    ``reason`` is one of :data:`net.envelope.REJECTION_REASONS` (``oversized``,
    ``malformed``, ``unsupported_version``, ``wrong_topic``,
    ``wrong_key_or_tampered``, ``bad_signature``, ``sender_mismatch``) or
    ``unverifiable_id`` (a content message whose id is not the one its author,
    timestamp and content give: ``sds.ids``; refused by the core). An envelope
    received again byte for byte (a restarted sender republishing, a relay
    redelivering) is not a rejection: it is counted as ``duplicate_envelopes``.
    ``count`` is the running total for that reason.
    """

    reason: str
    channel: str | None
    detail: str
    count: int
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two messages under one id differ: the one in our log stays, this says it is disputed.

    ``message_id`` is the id; ``sender_id`` wrote the message we hold (the one
    shown), ``other_sender`` the copy we dropped; ``reason`` is ``"author"``
    (another author: js-waku ids are ``sha256(content)``, shared by two people
    typing the same text), ``"content"`` (other text under the id) or
    ``"timestamp"`` (the same text from the same author under one js-waku id at
    another Lamport timestamp: participants may place it differently). A UI marks
    the message ``message_id`` as disputed; ``sdschat history --json`` marks it
    with ``"conflict": true``. ``count`` is the node's running total.
    """

    channel: str
    message_id: str
    sender_id: str
    other_sender: str
    reason: str
    count: int
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Info:
    """Text for a person (command answers)."""

    text: str
    data: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class NodeError:
    """Something failed; the node keeps running."""

    message: str
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class Closed:
    """The node stopped; ``counters`` are its final counters."""

    counters: dict[str, int]
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class CatchUp:
    """Catching ``channel`` up from the store peer ``store`` (``net/store_sync.py``).

    ``state`` is ``started``, ``running`` (``done`` of ``total`` envelopes handed
    to the node so far), ``done`` or ``failed`` (``detail`` says why; the next
    connection tries again). ``text`` is what a UI shows:
    ``"catching up · 1,200 / 5,000"``.
    """

    channel: str
    state: str
    done: int
    total: int
    store: str
    text: str
    detail: str | None = None
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class LanPeer:
    """A LAN gossip peer changed (``net/lan``): ``discovered``, ``connected``,
    ``disconnected``, ``gone`` (its zeroconf record withdrawn) or ``incompatible``.

    ``peer`` is its random per-run node id (hex), not an SDS sender id;
    ``connected`` counts the connected LAN peers after the change.
    """

    state: str
    peer: str
    address: str | None
    role: str
    reason: str | None
    connected: int
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class MembersEvent:
    """A members channel (app/members): what changed, or what a command answered.

    ``what``: ``created``, ``joined`` (by invite), ``changed`` (``data`` has
    ``added``/``removed``/``rekeyed`` ids), ``members`` (the ``/members`` list in
    ``data["members"]``), ``removed_me``, ``refused`` (an invite refused,
    ``data["reason"]``), ``verify`` (a safety number).
    """

    channel: str
    what: str
    text: str
    data: dict[str, Any] = field(default_factory=dict)
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class ClockSkew:
    """Our wall clock is ``offset_ms`` off the time of the members heard (``state``:
    ``behind`` or ``ahead``: the node now runs on the corrected time), right again
    (``ok``, offset 0), or off the only other member heard (``differs``: nothing
    corrected, nobody can tell whose clock is wrong), or, right after a correction of a
    clock that was ahead, ``sent_ahead``: lines already sent carry the old time and the
    others hold them until it is within their bound (:func:`app.node.clock_guard.sent_ahead`)
    (:mod:`app.node.clock_guard`); ``text`` tells the person."""

    state: str
    offset_ms: int
    voters: int
    heard: int
    text: str
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class InviteMade:
    """``/invite`` made a one-line code for ``channel`` (valid until ``expires_ms``)."""

    channel: str
    code: str
    expires_ms: int
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class DiskFull:
    """The data directory's file system is ``full`` (a commit failed with SQLITE_FULL):
    typed lines are refused ("disk full", nothing of them sent), received envelopes are
    not kept (the protocol fetches them again); or ``ok`` again (state rebuilt from
    what is stored). ``free_bytes`` as the file system reported it."""

    state: str
    free_bytes: int
    detail: str
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class DeviceCopied:
    """Another process is using this device's key: a line signed with it that this data
    directory never sent arrived (app/members/device_copy.py). ``text`` says what
    happened and what to do; the front ends stop (exit status 7)."""

    channel: str
    message_id: str
    text: str
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class DeviceTwins:
    """Two processes sign as ``sender_id`` in ``channel`` (a copied data dir, or an old
    backup running): a line of theirs does not know their own earlier line
    (app/members/device_copy.py). Told once per sender and channel; every line is kept."""

    channel: str
    sender_id: str
    name: str
    text: str
    ts: float = field(default_factory=_now_s)


@dataclass(frozen=True, slots=True)
class LinkEvent:
    """A device link of ``/link`` (app/commands/link.py): ``state`` ``offered`` (``code``
    to type into the new device), ``sas`` (the six digits both screens show),
    ``linked`` (``device``, ``device_name``; ``recovery_words`` the first time) or
    ``failed`` (``reason``); ``text`` says it for a person."""

    state: str
    code: str
    text: str
    sas: str = ""
    device: str = ""
    device_name: str = ""
    reason: str = ""
    recovery_words: str = ""
    ts: float = field(default_factory=_now_s)


NodeEvent = (
    LinkEvent
    | DeviceTwins
    | DeviceCopied
    | MembersEvent
    | InviteMade
    | Ready
    | ChannelJoined
    | ChannelLeft
    | Delivered
    | OwnMessage
    | Missing
    | Lost
    | Ephemeral
    | PeerSeen
    | Peers
    | ConnectionChanged
    | Rejected
    | Conflict
    | Info
    | NodeError
    | Closed
    | CatchUp
    | LanPeer
    | DiskFull
    | ClockSkew
)

_NAMES: dict[type, str] = {
    MembersEvent: "members",
    InviteMade: "invite",
    Ready: "ready",
    ChannelJoined: "channel",
    ChannelLeft: "channel",
    Delivered: "delivered",
    OwnMessage: "own",
    Missing: "missing",
    Lost: "lost",
    Ephemeral: "ephemeral",
    PeerSeen: "peer",
    Peers: "peers",
    ConnectionChanged: "connection",
    Rejected: "rejected",
    Conflict: "conflict",
    Info: "info",
    NodeError: "error",
    Closed: "closed",
    CatchUp: "catchup",
    LanPeer: "lan_peer",
    DiskFull: "disk",
    DeviceCopied: "device_copy",
    DeviceTwins: "device_twins",
    LinkEvent: "link",
    ClockSkew: "clock",
}

_RENAMES = {"sender_id": "sender"}


_PLAIN = frozenset((str, int, float, bool, type(None)))
_FIELDS: dict[type, tuple[tuple[str, str], ...]] = {}  # dataclass -> ((key, field), ...)


def _fields_of(cls: type) -> tuple[tuple[str, str], ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(
            (_RENAMES.get(f.name, f.name), f.name) for f in dataclasses.fields(cls)
        )
    return names


def _jsonable(value: Any) -> Any:
    cls = type(value)
    if cls in _PLAIN:  # most fields: no conversion (one set lookup, ~0.05 us)
        return value
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {key: _jsonable(getattr(value, name)) for key, name in _fields_of(cls)}
    if isinstance(value, tuple | list):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, bytes):
        return value.hex()
    return value


def event_to_json(event: NodeEvent) -> dict[str, Any]:
    """The JSON object of ``event``: ``{"event": name, ...fields}``.

    ``sender_id`` fields are written as ``sender``.
    """
    out: dict[str, Any] = {"event": _NAMES[type(event)]}
    body = _jsonable(event)
    assert isinstance(body, dict)
    out.update(body)
    if isinstance(event, ChannelJoined):
        out["joined"] = True
    elif isinstance(event, ChannelLeft):
        out["joined"] = False
    return out
