"""Group keys of a members channel: one Megolm session per sender, shared with the members.

Every member encrypts what it sends to a members channel with its own outbound
Megolm session (vodozemac ``GroupSession``) and hands the session key to each
current member in a key share (``KeyShare`` in members.proto): one PyNaCl
``SealedBox`` per recipient, sealed to that member's X25519 *share key*, inside a
control message signed by the sender's identity (the envelope signature). A
receiver imports the key as an inbound session (vodozemac ``InboundGroupSession``)
bound to the share's author, and decrypts that sender's messages with it.

Why Megolm fits SDS: an inbound session decrypts any message index at or after
the index it was shared at, in any order and any number of times. SDS resends and
SDS-R repairs re-send the identical stored envelope, late and more than once, so a
scheme that consumed a key per message (a double ratchet) would break repair.

Rotation (:class:`RotationPolicy`): a sender starts a new session, shared only with
the members of that moment, when a member is removed (at once: the removed member
holds the old session key, so nothing after the removal may use it), after
at most ``max_messages`` messages (each session draws its own count, see
:class:`RotationPolicy`), or when the session is ``max_age_ms`` old. A member
added later gets the current session from its current index: it reads from the
moment it was added, not before.

Forward secrecy, bounded: every inbound session has a *read mark*, its low-water
index (the lowest index neither read nor given up). Once everything read below it
is stored (the node's commit: :meth:`GroupKeys.read_marks` before it,
:meth:`GroupKeys.forget_read` after it), the session is re-imported from its read
mark, so the key material of what was read is gone from memory and from the data
directory. An unread index below a read one (a message lost or late) holds the
mark back for ``repair_horizon_ms`` at most (:func:`repair_horizon_ms`: as long as
SDS may still bring it), then is given up (:meth:`GroupKeys.advance`). Nothing
lowers a read mark: a key share of a session already held never replaces it with
an earlier start once something of it was read, and a share of a session already
dropped is refused (``forgotten``) while a share key that could open it is held. A
session superseded by a newer one from the same sender is dropped
``keep_superseded_ms`` after that, and any session after ``max_keep_ms``. A share
key is replaced by a new one every ``share_key_max_age_ms`` (7 days:
:meth:`GroupKeys.share_rotation_due`, :meth:`GroupKeys.rotate_share_key`) and the
old private key deleted once nothing sealed to it can still come (see
:class:`RotationPolicy`): a captured key share opens with a share key the data
directory holds, whatever the session's read mark, so this is what bounds what a
stolen data directory with a capture reads (docs/security.md).

Pure apart from randomness (vodozemac and libsodium draw their own keys): no I/O,
no clock; ``now_ms`` comes from the caller. State is exported with
:meth:`GroupKeys.export` (vodozemac pickles encrypted with a 32-byte key).
"""

from __future__ import annotations

import json
import math
import secrets
from base64 import b64decode, b64encode
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

import vodozemac
from nacl.exceptions import CryptoError
from nacl.public import PrivateKey, PublicKey, SealedBox

import sds
from app.members import members_pb2 as pb
from app.members.events import SHARE_KEY_BYTES, encode_key_share, encode_share_key

__all__ = [
    "DECRYPT_REASONS",
    "FORGOTTEN_PER_SENDER",
    "Decrypted",
    "GroupKeys",
    "RotationPolicy",
    "ShareResult",
    "repair_horizon_ms",
]

DECRYPT_REASONS = (
    "unknown_session", "before_share", "already_read", "key_forgotten", "not_megolm",
    "bad_megolm")  # fmt: skip
"""Why :meth:`GroupKeys.decrypt` could not give plaintext (stable, for counters)."""

FORGOTTEN_PER_SENDER = 256
"""Dropped sessions remembered per sender (to refuse a replay of their key share);
beyond it the oldest is forgotten first. A sender's own flood of sessions then only
lets its own old sessions be imported again."""

_SKIPPED_RANGES = 16  # given-up index ranges remembered per session (for the reason)


def repair_horizon_ms(config: sds.Config) -> int:
    """How long an unread index below a read one is still waited for: as long as SDS
    may still bring the message (written down in docs/members.md).

    The sender resends an unacknowledged message up to ``max_resend_attempts``
    times, ``resend_possibly_acknowledged_ms`` apart at most; a receiver asks for a
    missing one (SDS-R, store fetches) until it declares it lost after
    ``lost_timeout_ms``; the answer to the last request comes within
    ``repair_t_min_ms + repair_t_max_limit_ms`` (the widest SDS-R window). Counted
    from the moment a later index of the same session was read (the missing one was
    sent before it), the later of the first two, plus the last.
    """
    period = max(config.resend_unacknowledged_ms, config.resend_possibly_acknowledged_ms)
    resends = config.max_resend_attempts * period
    window = config.repair_t_min_ms + max(config.repair_t_max_ms, config.repair_t_max_limit_ms)
    return max(config.lost_timeout_ms, resends) + window


@dataclass(frozen=True, slots=True)
class RotationPolicy:
    """When a sender starts a new session, and how long received ones are kept.

    Attributes:
        max_messages: messages per outbound session at most (Matrix's default is 100).
        spread: each outbound session ends after a count drawn uniformly from
            ``ceil(max_messages * (1 - spread))`` to ``max_messages`` (0.25: 75-100).
            Members who joined together and send at the same rate would otherwise
            all rotate on the same message, and every member would seal and open
            N key shares in the same instant (the p99 of bench/e2e_latency.py
            --profile members). Rotating earlier never weakens anything.
        max_age_ms: age of an outbound session after which the next message
            starts a new one (24 h).
        keep_superseded_ms: how long an inbound session is kept after a newer
            one from the same sender arrived (late messages and repairs of the
            old session still decrypt within it; 1 h).
        max_keep_ms: no inbound session is kept longer than this (7 days; a
            message of an older session that arrives later is unreadable); nor
            an old share key.
        share_key_max_age_ms: a member's share key is replaced after this long
            (7 days; :meth:`GroupKeys.share_rotation_due`). The old private key
            is kept while something sealed to it may still come: at least
            ``keep_superseded_ms``, then until every other member has sealed a
            key share to the new key (it knows the new one, so it seals nothing
            more to the old), at most ``max_keep_ms``.
        repair_horizon_ms: how long an unread index below a read one holds a
            session's read mark back (:func:`repair_horizon_ms` of the default
            SDS configuration, 721 s; the node passes its own to
            :meth:`GroupKeys.advance`).
    """

    max_messages: int = 100
    spread: float = 0.25
    max_age_ms: int = 24 * 3600 * 1000
    keep_superseded_ms: int = 3600 * 1000
    max_keep_ms: int = 7 * 24 * 3600 * 1000
    share_key_max_age_ms: int = 7 * 24 * 3600 * 1000
    repair_horizon_ms: int = field(default_factory=lambda: repair_horizon_ms(sds.Config()))

    def session_limit(self, draw: float) -> int:
        """How many messages an outbound session carries, for its ``draw`` in [0, 1)
        (see ``spread``; the draw is kept with the session, the policy may change)."""
        spread = min(max(self.spread, 0.0), 1.0)
        low = max(1, math.ceil(self.max_messages * (1.0 - spread)))
        high = max(low, self.max_messages)
        return min(high, low + int(min(max(draw, 0.0), 1.0) * (high - low + 1)))


@dataclass(frozen=True, slots=True)
class Decrypted:
    """A Megolm message opened: the plaintext, and which session and index it used."""

    plaintext: bytes
    session_id: str
    index: int


@dataclass(frozen=True, slots=True)
class ShareResult:
    """What a received key share gave us: a session, or why not (``reason``)."""

    session_id: str = ""
    reason: str = ""

    @property
    def accepted(self) -> bool:
        return not self.reason


@dataclass(slots=True)
class _Outbound:
    session: vodozemac.GroupSession
    created_ms: int
    shared_with: set[str] = field(default_factory=set)
    draw: float = 1.0  # in [0, 1): where its message count falls (RotationPolicy.session_limit)


@dataclass(slots=True)
class _Inbound:
    """A received session. ``low_water`` is its read mark: every index below it was
    read or given up; the key material below it goes at :meth:`GroupKeys.forget_read`.
    ``marks``: (when, index) each time an index above the read mark was read (the
    unread ones below it are waited for ``repair_horizon_ms`` from then);
    ``high``: the highest such index read since the last :meth:`GroupKeys.advance`
    (stamped by it); ``skipped``: index ranges given up, ``[start, end)``."""

    session: vodozemac.InboundGroupSession
    received_ms: int
    low_water: int
    shared_from: int
    read_above: set[int] = field(default_factory=set)
    superseded_ms: int | None = None
    marks: list[tuple[int, int]] = field(default_factory=list)
    high: int | None = None
    skipped: list[tuple[int, int]] = field(default_factory=list)

    @property
    def untouched(self) -> bool:
        """Nothing of it read or given up yet."""
        return self.low_water == self.shared_from and not self.read_above and (
            self.high is None and not self.marks)  # fmt: skip


class GroupKeys:
    """One member's group keys for one members channel.

    Args:
        channel_id: the channel's 32-byte id (bound into every key share).
        own_id: this member's id (its sender id).
        policy: rotation and retention.
        share_secret: this member's current X25519 share key (a fresh one when
            ``None``).
    """

    def __init__(
        self,
        channel_id: bytes,
        own_id: str,
        policy: RotationPolicy | None = None,
        share_secret: PrivateKey | None = None,
    ) -> None:
        self.channel_id = channel_id
        self.own_id = own_id
        self.policy = policy or RotationPolicy()
        self._share_secrets: list[tuple[PrivateKey, int | None]] = [
            (share_secret or PrivateKey.generate(), None)]  # fmt: skip
        self._out: _Outbound | None = None
        self._rotate_next = True
        self._in: dict[tuple[str, str], _Inbound] = {}
        self._newest: dict[str, str] = {}  # sender id -> its newest session id
        self._share_created_ms: int | None = None  # the current share key's start
        self._new_key_seen: set[str] = set()  # members who sealed to the current share key
        # sessions dropped -> the share key current then (their shares are refused
        # while it, or an older one, is held: nothing else can open them)
        self._forgotten: dict[tuple[str, str], bytes] = {}
        self.changes = 0
        """Counts every change of this state that is saved (the caller saves it when
        this moved); reads count once :meth:`forget_read` cuts their keys."""

    # -- share keys --------------------------------------------------------

    @property
    def share_secret(self) -> PrivateKey:
        """The current X25519 private share key (to open an invite's answer)."""
        return self._share_secrets[0][0]

    @property
    def share_key(self) -> bytes:
        """The current X25519 public share key (what others seal key shares to)."""
        return bytes(self._share_secrets[0][0].public_key)

    def rotate_share_key(self, now_ms: int) -> bytes:
        """Start a new share key; returns the control content announcing it.

        The old private key is kept until :meth:`advance` drops it
        ``keep_superseded_ms`` later (shares already sealed to it still open).
        """
        old, _ = self._share_secrets[0]
        self._share_secrets[0] = (old, now_ms)
        self._share_secrets.insert(0, (PrivateKey.generate(), None))
        self._share_created_ms = now_ms
        self._new_key_seen = set()
        self.changes += 1
        return encode_share_key(self.share_key)

    def share_rotation_due(self, now_ms: int) -> bool:
        """Whether the current share key is ``share_key_max_age_ms`` old (a key of
        unknown age, from before this was recorded, counts from now)."""
        if self._share_created_ms is None:
            self._share_created_ms = now_ms
            self.changes += 1
            return False
        return now_ms - self._share_created_ms >= self.policy.share_key_max_age_ms

    def open_sealed(self, box: bytes, author_id: str | None = None) -> bytes | None:
        """Open a sealed box made for one of our share keys (``None`` if none opens it);
        ``author_id``: who sealed it (noted when it used our current share key)."""
        for i, (secret, _) in enumerate(self._share_secrets):
            try:
                data = bytes(SealedBox(secret).decrypt(box))
            except CryptoError:
                continue
            if i == 0 and author_id is not None and author_id not in self._new_key_seen:
                self._new_key_seen.add(author_id)
                self.changes += 1
            return data
        return None

    # -- sending -----------------------------------------------------------

    def on_members_removed(self) -> None:
        """A member left or was removed: the next message starts a new session."""
        self._rotate_next = True

    def _needs_new(self, now_ms: int) -> bool:
        out = self._out
        return (
            out is None
            or self._rotate_next
            or out.session.message_index >= self.policy.session_limit(out.draw)
            or now_ms - out.created_ms >= self.policy.max_age_ms
        )

    def outbound_session_id(self, now_ms: int) -> str:
        """The session the next message will use (starting a new one if due)."""
        if self._needs_new(now_ms):
            session = vodozemac.GroupSession()
            self._out = _Outbound(session, now_ms, draw=secrets.randbelow(2**32) / 2**32)
            self._rotate_next = False
            # keep an inbound copy: our own envelopes must open for us too
            self._add_inbound(self.own_id, vodozemac.InboundGroupSession(session.session_key),
                              now_ms)  # fmt: skip
        assert self._out is not None
        return str(self._out.session.session_id)

    def unshared(self, members: Mapping[str, bytes], now_ms: int) -> dict[str, bytes]:
        """Members (id -> share key) that do not hold the current session yet."""
        self.outbound_session_id(now_ms)
        assert self._out is not None
        return {mid: key for mid, key in members.items()
                if mid != self.own_id and mid not in self._out.shared_with}  # fmt: skip

    def key_share(self, recipients: Mapping[str, bytes], now_ms: int,
                  from_index: int | None = None) -> bytes | None:  # fmt: skip
        """The control content sharing the current session with ``recipients``
        (member id -> X25519 share key), from the session's current index or from
        ``from_index`` (an earlier one); ``None`` when there is nobody to share with."""
        session_id = self.outbound_session_id(now_ms)
        assert self._out is not None
        session = self._out.session
        first = int(session.message_index)
        if from_index is not None and from_index < first:
            earlier = self._own_export(session_id, from_index)
            if earlier is not None:
                return self._seal_share(session_id, *earlier, True, recipients)
        key = session.session_key.to_base64().encode()
        return self._seal_share(session_id, first, key, False, recipients)

    def share_session(self, session_id: str, recipients: Mapping[str, bytes],
                      from_index: int) -> bytes | None:  # fmt: skip
        """A key share of one of OUR sessions (the current or an earlier one, from our
        inbound copy of it) from ``from_index``: for members owed messages we already
        sent in it (added while those were in flight). ``None`` if we hold no copy from
        that index, or nobody to share with."""
        earlier = self._own_export(session_id, from_index)
        if earlier is None:
            return None
        return self._seal_share(session_id, *earlier, True, recipients)

    def _own_export(self, session_id: str, from_index: int) -> tuple[int, bytes] | None:
        """Our session ``session_id`` exported from ``from_index`` (or the earliest index
        our inbound copy still has): ``(index, key text)``; ``None`` without a copy."""
        own = self._in.get((self.own_id, session_id))
        if own is None:
            return None
        start = max(from_index, int(own.session.first_known_index))
        exported = own.session.export_at(start)
        return None if exported is None else (start, exported.to_base64().encode())

    def _seal_share(self, session_id: str, first: int, key: bytes, exported: bool,
                    recipients: Mapping[str, bytes]) -> bytes | None:  # fmt: skip
        """The ``key_share`` control content: the session key sealed to each recipient."""
        plain = pb.SessionKeyPlain(channel_id=self.channel_id, sender_id=self.own_id,
                                   session_id=session_id, session_key=key,
                                   exported=exported).SerializeToString()  # fmt: skip
        sealed = {mid: SealedBox(PublicKey(share)).encrypt(plain)
                  for mid, share in recipients.items()
                  if mid != self.own_id and len(share) == SHARE_KEY_BYTES}  # fmt: skip
        if not sealed:
            return None
        if self._out is not None and self._out.session.session_id == session_id:
            self._out.shared_with.update(sealed)
        return encode_key_share(session_id, first, sealed)

    def next_index(self, now_ms: int) -> int:
        """The Megolm index the next :meth:`encrypt` will use."""
        self.outbound_session_id(now_ms)
        assert self._out is not None
        return int(self._out.session.message_index)

    def encrypt(self, plaintext: bytes, now_ms: int) -> tuple[str, bytes]:
        """Encrypt with the current outbound session: ``(session_id, megolm bytes)``.

        Share the session first (:meth:`unshared`, :meth:`key_share`): a
        member without it cannot read the message.
        """
        session_id = self.outbound_session_id(now_ms)
        assert self._out is not None
        self.changes += 1
        message = self._out.session.encrypt(plaintext)
        return session_id, bytes(message.to_bytes())

    # -- receiving ---------------------------------------------------------

    def receive_share(
        self, author_id: str, share: pb.KeyShare, now_ms: int, *, author_is_member: bool
    ) -> ShareResult:
        """Import the session a member shared with us (if we are among its recipients).

        ``author_is_member``: whether the share's author was a member at the
        share's position (the roster knows). Returns why a share was not used:
        ``not_a_member``, ``not_for_us`` (normal: a share for others),
        ``undecryptable`` (sealed to a share key we no longer or never held),
        ``wrong_channel``, ``wrong_sender`` (the session names another owner
        than the share's author), ``bad_session``, ``forgotten`` (a session we
        dropped: a replayed share), ``would_reopen`` (an earlier start of a
        session we already read from: taking it would bring back the keys of what
        was read). A share of a session we hold from as early or earlier changes
        nothing (the copy the node takes on arrival and again on delivery, a
        replay) and is accepted.
        """
        if not author_is_member:
            return ShareResult(reason="not_a_member")
        box = next((k.sealed for k in share.keys if k.recipient_id == self.own_id), None)
        if box is None:
            return ShareResult(reason="not_for_us")
        data = self.open_sealed(bytes(box), author_id)
        if data is None:
            return ShareResult(reason="undecryptable")
        plain = pb.SessionKeyPlain()
        try:
            plain.ParseFromString(data)
        except Exception:
            return ShareResult(reason="bad_session")
        if bytes(plain.channel_id) != self.channel_id:
            return ShareResult(reason="wrong_channel")
        if plain.sender_id != author_id or plain.session_id != share.session_id:
            return ShareResult(reason="wrong_sender")
        try:
            text = plain.session_key.decode()
            if plain.exported:
                session = vodozemac.InboundGroupSession.import_session(
                    vodozemac.ExportedSessionKey(text))
            else:
                session = vodozemac.InboundGroupSession(vodozemac.SessionKey(text))
        except Exception:
            return ShareResult(reason="bad_session")
        if session.session_id != plain.session_id:
            return ShareResult(reason="bad_session")
        key = (author_id, plain.session_id)
        if key in self._forgotten:
            return ShareResult(reason="forgotten")
        known = self._in.get(key)
        first = int(session.first_known_index)
        if known is not None and first >= known.shared_from:
            return ShareResult(session_id=plain.session_id)  # we can read as much already
        if known is not None and not known.untouched:
            return ShareResult(session_id=plain.session_id, reason="would_reopen")
        if known is not None:  # an earlier start of a session nothing was read from
            known.session, known.shared_from, known.low_water = session, first, first
            self.changes += 1
            return ShareResult(session_id=plain.session_id)
        self._add_inbound(author_id, session, now_ms)
        return ShareResult(session_id=plain.session_id)

    def _add_inbound(self, sender_id: str, session: vodozemac.InboundGroupSession,
                     now_ms: int) -> None:  # fmt: skip
        sid = str(session.session_id)
        first = int(session.first_known_index)
        self.changes += 1
        self._in[(sender_id, sid)] = _Inbound(session, now_ms, first, first)
        newest = self._newest.get(sender_id)
        if newest is not None and newest != sid:
            old = self._in.get((sender_id, newest))
            if old is not None and old.superseded_ms is None:
                old.superseded_ms = now_ms
        self._newest[sender_id] = sid

    def has_session(self, sender_id: str, session_id: str) -> bool:
        return (sender_id, session_id) in self._in

    def decrypt(self, sender_id: str, session_id: str, data: bytes) -> Decrypted | str:
        """Open one of ``sender_id``'s Megolm messages; a reason string when we cannot.

        ``unknown_session``: no share of that session reached us (yet, or ever:
        a message from before we joined); ``before_share``: the message is older
        than the index the session was shared with us at (sent before we were
        added); ``already_read``: its index is below
        the read mark (a copy of a message we read; the key is gone);
        ``key_forgotten``: the session was dropped, or the index was given up
        unread (it came after ``repair_horizon_ms``); ``not_megolm``: the bytes
        are not a Megolm message; ``bad_megolm``: the message does not
        authenticate under the session.
        """
        entry = self._in.get((sender_id, session_id))
        if entry is None:
            return "key_forgotten" if (sender_id, session_id) in self._forgotten else (
                "unknown_session")  # fmt: skip
        try:
            message = vodozemac.MegolmMessage.from_bytes(data)
        except Exception:
            return "not_megolm"
        index = int(message.message_index())
        if index < entry.shared_from:
            return "before_share"
        if index < entry.low_water:
            skipped = any(lo <= index < hi for lo, hi in entry.skipped)
            return "key_forgotten" if skipped else "already_read"
        try:
            plaintext = bytes(entry.session.decrypt(message).plaintext)
        except Exception:
            return "bad_megolm"
        # a read changes nothing to save: the saved state moves at forget_read (a
        # restart trusts no read that was not stored)
        if index > entry.low_water:
            entry.read_above.add(index)
            if entry.high is None or index > entry.high:
                entry.high = index
        else:
            entry.low_water += 1
            while entry.low_water in entry.read_above:
                entry.read_above.discard(entry.low_water)
                entry.low_water += 1
        return Decrypted(plaintext, session_id, index)

    # -- forward secrecy ---------------------------------------------------

    def advance(self, now_ms: int, others: Iterable[str] | None = None,
                repair_horizon_ms: int | None = None) -> int:  # fmt: skip
        """Forget sessions and share keys no longer needed, give up unread indexes
        SDS can no longer bring; returns how many sessions were dropped.

        Superseded sessions are dropped ``keep_superseded_ms`` after they were
        superseded, every session after ``max_keep_ms`` (remembered, to refuse a
        replay of their share, while a share key that could open it is held). An
        unread index below a read one is given up ``repair_horizon_ms`` (the
        policy's unless given) after that read: the read mark moves past it (the
        key material goes at the next :meth:`forget_read`). Not in our own
        sessions (their copy is what key shares for late-added members come from).
        Old share keys go ``keep_superseded_ms`` after they were replaced once
        every one of ``others`` (the other current members; ``None``: nobody to
        wait for) has sealed a key share to the current one, and after
        ``max_keep_ms`` anyway.
        """
        dropped = 0
        p = self.policy
        horizon = p.repair_horizon_ms if repair_horizon_ms is None else repair_horizon_ms
        current_key = self.share_key
        for key, entry in list(self._in.items()):
            own = key[0] == self.own_id
            own_current = own and self._out is not None and (
                key[1] == self._out.session.session_id)  # fmt: skip
            expired = now_ms - entry.received_ms >= p.max_keep_ms or (
                entry.superseded_ms is not None
                and now_ms - entry.superseded_ms >= p.keep_superseded_ms)
            if expired and not own_current:
                del self._in[key]
                if not own:
                    self._remember_forgotten(key, current_key)
                dropped += 1
                self.changes += 1
                continue
            if not own:
                self._give_up(entry, now_ms, horizon)
        held = len(self._share_secrets)
        waiting = others is not None and not set(others) <= self._new_key_seen | {self.own_id}

        def keep(since: int | None) -> bool:
            if since is None:
                return True
            age = now_ms - since
            return age < p.keep_superseded_ms or (waiting and age < p.max_keep_ms)

        self._share_secrets = [(s, since) for s, since in self._share_secrets if keep(since)]
        if len(self._share_secrets) != held:
            self.changes += held - len(self._share_secrets)
            publics = {bytes(s.public_key) for s, _ in self._share_secrets}
            self._forgotten = {k: v for k, v in self._forgotten.items() if v in publics}
        return dropped

    def _remember_forgotten(self, key: tuple[str, str], share_key: bytes) -> None:
        self._forgotten[key] = share_key
        mine = [k for k in self._forgotten if k[0] == key[0]]
        for old in mine[: max(0, len(mine) - FORGOTTEN_PER_SENDER)]:
            del self._forgotten[old]

    def _give_up(self, entry: _Inbound, now_ms: int, horizon: int) -> None:
        """Stamp the reads since the last call; move the read mark past unread indexes
        waited for ``horizon`` since a later one was read."""
        if entry.high is not None:
            if entry.high >= entry.low_water:
                entry.marks.append((now_ms, entry.high))
            entry.high = None
        floor = entry.low_water
        for when, index in entry.marks:
            if now_ms - when >= horizon:
                floor = max(floor, index + 1)
        if floor > entry.low_water:
            # the unread indexes in [low_water, floor), as ranges between the read ones
            # (never one by one: the sender chooses its indexes)
            start = entry.low_water
            for read in sorted(i for i in entry.read_above if i < floor):
                if read > start:
                    entry.skipped.append((start, read))
                start = read + 1
            if start < floor:
                entry.skipped.append((start, floor))
            del entry.skipped[:-_SKIPPED_RANGES]
            entry.read_above = {i for i in entry.read_above if i >= floor}
            entry.low_water = floor
            while entry.low_water in entry.read_above:
                entry.read_above.discard(entry.low_water)
                entry.low_water += 1
        entry.marks = [(w, i) for w, i in entry.marks if i >= entry.low_water]

    def read_marks(self) -> dict[tuple[str, str], int]:
        """Every inbound session's read mark now ((sender, session id) -> index).

        Take it when everything read so far is on its way to storage (the node: at
        a state save, with the round's batch), and hand it to :meth:`forget_read`
        once that is stored: forgetting a key before the line it opened is stored
        would lose the line in a crash (a copy repaired later no longer opens).
        """
        return {key: e.low_water for key, e in self._in.items()}

    def forget_read(self, marks: Mapping[tuple[str, str], int]) -> int:
        """Re-import every session in ``marks`` (:meth:`read_marks`, taken before
        what it covers was stored) from its mark: the keys of what was read below
        it are gone from this state and from what :meth:`export` writes. Returns
        how many sessions were cut."""
        cut = 0
        for key, mark in marks.items():
            entry = self._in.get(key)
            if entry is None:
                continue
            start = min(mark, entry.low_water)
            if start <= entry.session.first_known_index:
                continue
            exported = entry.session.export_at(start)
            if exported is None:
                continue
            entry.session = vodozemac.InboundGroupSession.import_session(
                vodozemac.ExportedSessionKey(exported.to_base64()))
            cut += 1
        self.changes += cut
        return cut

    # -- persistence -------------------------------------------------------

    def export(self, pickle_key: bytes) -> bytes:
        """This state as bytes, the Megolm sessions encrypted with ``pickle_key`` (32 bytes).

        The share secrets are written as they are: the caller keeps the result
        where it keeps the identity key (mode 0600).
        """
        out = None
        if self._out is not None:
            out = {"pickle": self._out.session.pickle(pickle_key),
                   "created_ms": self._out.created_ms,
                   "shared_with": sorted(self._out.shared_with),
                   "draw": self._out.draw}  # fmt: skip
        inbound = [
            {"sender": s, "pickle": e.session.pickle(pickle_key), "received_ms": e.received_ms,
             "shared_from": e.shared_from, "superseded_ms": e.superseded_ms,
             "skipped": [list(r) for r in e.skipped]}
            for (s, _), e in self._in.items()
        ]  # fmt: skip
        doc = {
            "version": 1,
            "channel_id": self.channel_id.hex(),
            "own_id": self.own_id,
            "rotate_next": self._rotate_next,
            "share_secrets": [[b64encode(bytes(s)).decode(), since]
                              for s, since in self._share_secrets],
            "out": out,
            "in": inbound,
            "newest": self._newest,
            "share_created_ms": self._share_created_ms,
            "new_key_seen": sorted(self._new_key_seen),
            "forgotten": [[s, sid, b64encode(k).decode()]
                          for (s, sid), k in self._forgotten.items()],
        }
        return json.dumps(doc, separators=(",", ":")).encode()

    @classmethod
    def restore(cls, data: bytes, pickle_key: bytes,
                policy: RotationPolicy | None = None) -> GroupKeys:  # fmt: skip
        """The state :meth:`export` wrote. Raises ``ValueError`` for bytes it did not write."""
        try:
            doc = json.loads(data)
            if doc.get("version") != 1:
                raise ValueError(f"not a group keys export: version {doc.get('version')!r}")
            secrets = [(PrivateKey(b64decode(s)), since) for s, since in doc["share_secrets"]]
            keys = cls(bytes.fromhex(doc["channel_id"]), doc["own_id"], policy, secrets[0][0])
            keys._share_secrets = secrets
            keys._rotate_next = bool(doc["rotate_next"])
            if doc["out"] is not None:
                o = doc["out"]
                keys._out = _Outbound(vodozemac.GroupSession.from_pickle(o["pickle"], pickle_key),
                                      int(o["created_ms"]), set(o["shared_with"]),
                                      float(o.get("draw", 1.0)))  # fmt: skip
            for e in doc["in"]:
                session = vodozemac.InboundGroupSession.from_pickle(e["pickle"], pickle_key)
                # The read mark restarts where the saved session starts: reads past it
                # may not have been stored (a crash before the commit); a copy of one
                # opens again and the core drops it as a duplicate.
                first = int(session.first_known_index)
                keys._in[(e["sender"], str(session.session_id))] = _Inbound(
                    session, int(e["received_ms"]), first, int(e["shared_from"]),
                    superseded_ms=e["superseded_ms"],
                    skipped=[(int(a), int(b)) for a, b in e.get("skipped", [])])  # fmt: skip
            keys._newest = dict(doc["newest"])
            created = doc.get("share_created_ms")  # absent in files of earlier versions
            keys._share_created_ms = None if created is None else int(created)
            keys._new_key_seen = set(doc.get("new_key_seen", []))
            keys._forgotten = {(s, sid): b64decode(k) for s, sid, k in doc.get("forgotten", [])}
            return keys
        except ValueError:
            raise
        except Exception as exc:
            raise ValueError(f"not a group keys export: {type(exc).__name__}: {exc}") from exc

    def stats(self) -> dict[str, int]:
        """Counts for ``/stats``: inbound sessions, share keys held, current index."""
        return {
            "inbound_sessions": len(self._in),
            "forgotten_sessions": len(self._forgotten),
            "share_keys_held": len(self._share_secrets),
            "outbound_index": int(self._out.session.message_index) if self._out else 0,
        }
