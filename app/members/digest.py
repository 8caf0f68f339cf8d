"""Members compare their membership state, and say so when they cannot agree.

Every member sends, as an SDS *ephemeral* control message (inside the outer layer:
never an SDS field, so the wire stays that of ``@waku/sds``), a ``StateDigest``: the
heads of its chain and the hash of its resolved state (:meth:`Roster.state_hash`),
when its state changed and every :data:`DIGEST_INTERVAL_MS`. A member comparing a
peer's digest with its own:

* the same state hash: converged;
* heads it does not hold: it lacks events the peer has (SDS repair and the store
  bring them); still so after :data:`CONVERGE_MS`: a ``diverged`` notice naming the
  events it lacks;
* heads it holds all of: it resolves those events as the peer did; the same hash
  means the peer lacks events (named after :data:`CONVERGE_MS`, if still so: those
  of our heads the peer's closure does not hold); another hash means the same events
  give two states (a notice at once).

Both sides of a split see it (each compares the other's digest), and the notice
names the events that differ; nothing resolves silently. Pure: ``now_ms`` in.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from app.members import members_pb2 as pb
from app.members.events import CONTROL_MAGIC, CONTROL_VERSION

if TYPE_CHECKING:
    from app.members.roster import Roster

__all__ = ["CONVERGE_MS", "DIGEST_INTERVAL_MS", "DigestWatch", "Divergence"]

DIGEST_INTERVAL_MS: Final = 30_000
"""How often a member sends its digest when nothing changed."""

CONVERGE_MS: Final = 120_000
"""How long two members may differ before it is reported (SDS repair and the store
bring a missing event well within this)."""

MAX_HEADS: Final = 16
MAX_PEERS: Final = 4096


@dataclass(frozen=True, slots=True)
class Divergence:
    """Two members' membership states differ and did not converge."""

    peer: str
    events: tuple[bytes, ...]
    """The events that differ (hashes)."""
    side: str
    """``we_lack`` (the peer holds them), ``peer_lacks`` (we hold them) or
    ``other_state`` (the same events resolved to two states)."""


class DigestWatch:
    """One channel's digests: when to send ours, what the others' say."""

    def __init__(self, converge_ms: int = CONVERGE_MS,
                 interval_ms: int = DIGEST_INTERVAL_MS) -> None:  # fmt: skip
        self.converge_ms = converge_ms
        self.interval_ms = interval_ms
        self._sent: tuple[bytes, int] | None = None
        # peer -> (the differing events and side, since when, reported)
        self._differ: OrderedDict[str, tuple[tuple[bytes, ...], str, int, bool]] = OrderedDict()

    def due(self, roster: Roster, now_ms: int) -> bytes | None:
        """Our digest's ephemeral content, when it is time to send it."""
        if not roster.chained:
            return None
        state = roster.state_hash()
        if self._sent is not None:
            last, at = self._sent
            if (last == state and now_ms - at < self.interval_ms) or now_ms - at < 1000:
                return None
        self._sent = (state, now_ms)
        digest = pb.StateDigest(heads=roster.heads[:MAX_HEADS], state=state,
                                events=len(roster.chain.nodes))  # fmt: skip
        msg = pb.Control(version=CONTROL_VERSION, digest=digest)
        return CONTROL_MAGIC + msg.SerializeToString()

    def observe(self, roster: Roster, peer: str, digest: pb.StateDigest,
                now_ms: int) -> Divergence | None:  # fmt: skip
        """Compare a peer's digest with our state; a :class:`Divergence` to report."""
        if not roster.chained:
            return None
        theirs = bytes(digest.state)
        if theirs == roster.state_hash():
            self._differ.pop(peer, None)
            return None
        heads = [bytes(h) for h in digest.heads[:MAX_HEADS]]
        lacking = tuple(sorted(h for h in heads if h not in roster.chain.nodes))
        if lacking:
            return self._note(peer, lacking, "we_lack", now_ms)
        if roster.state_hash_at(heads) != theirs:
            return self._note(peer, tuple(sorted(heads)), "other_state", now_ms, at_once=True)
        closure = roster.chain.closure(heads)
        ahead = tuple(sorted(h for h in roster.heads if h not in closure))
        return self._note(peer, ahead, "peer_lacks", now_ms)

    def _note(self, peer: str, events: tuple[bytes, ...], side: str, now_ms: int, *,
              at_once: bool = False) -> Divergence | None:  # fmt: skip
        known = self._differ.pop(peer, None)
        if known is None or known[0] != events or known[1] != side:
            known = (events, side, now_ms, False)
        events_, side_, since, reported = known
        report = not reported and (at_once or now_ms - since >= self.converge_ms)
        self._differ[peer] = (events_, side_, since, reported or report)
        while len(self._differ) > MAX_PEERS:
            self._differ.popitem(last=False)
        return Divergence(peer, events, side) if report else None
