"""The store's retention rule: what an envelope archive keeps when it must let go.

One rule for every archive engine (the SQLite archive of :mod:`storage.archive`
today, a JetStream-backed store later). It sees an envelope only as ``(holder,
size, arrival time)``: the holder is the ``(topic, writer)`` the store attributes
the envelope to, the writer ``b""`` when it can attribute it to nobody. It never
reads an envelope.

**By age** (``max_age_ms``, 0 keeps forever): an envelope that arrived before
``now - max_age_ms`` goes, whoever holds it (:meth:`RetentionRule.age_cutoff`).

**By size** (``max_bytes``, 0 is unlimited), when the envelopes total more:

1. *Attributed envelopes come first.* Unattributed envelopes (writer ``b""``:
   garbage nobody signed, envelopes from relays and the LAN on a topic the store
   holds no key for) are kept only in the room the attributed ones leave; they
   never cost an attributed envelope its place, however many they are.
2. *Within each of the two tiers, max-min fairness per holder*
   (:func:`fair_cap`): the holders under the tier's fair share keep everything,
   the others are cut to it, so the biggest holders lose first and a flood
   (one writer's, or garbage on one topic) cannot push out what others hold.
   Attributed holders are ``(topic, writer)``; unattributed ones are one per topic.
3. *Within a holder, oldest first*: a holder cut to ``cap`` bytes keeps its
   newest envelopes whose sizes, added newest first, stay within ``cap``
   (arrival time, then the envelope hash, orders ties).

What a writer is comes from the store (``net/store_peer.py``): the verified
signer on a topic whose key is public, the sending host of a ``Put`` whose write
proof checked; never what an envelope merely claims.

The rule is pure: :meth:`RetentionRule.caps` turns bytes per holder into the
bytes each holder may keep (an engine deletes each capped holder's oldest
envelopes beyond it, as ``storage.archive`` does in one SQL statement per
holder); :meth:`RetentionRule.evict` applies the whole rule to a list of
envelopes (the reference the tests compare every engine with).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

__all__ = ["UNATTRIBUTED", "Held", "Holder", "RetentionRule", "fair_cap"]

UNATTRIBUTED = b""
"""The writer of an envelope the store can attribute to nobody."""


def fair_cap(sizes: Iterable[int], max_bytes: int) -> int | None:
    """The most bytes each holder may keep so that all keep at most ``max_bytes``, filling
    the smallest holders first (max-min fairness: a holder under the cap keeps
    everything, the others are cut to the cap). ``None`` when everything fits."""
    ordered = sorted(sizes)
    if sum(ordered) <= max_bytes:
        return None
    remaining = max_bytes
    for i, size in enumerate(ordered):
        share = remaining // (len(ordered) - i)
        if size > share:
            return share
        remaining -= size
    return 0  # unreachable: the sizes did not fit, so some holder is over its share


@dataclass(frozen=True, slots=True, order=True)
class Holder:
    """Whom the store attributes an envelope to: ``(topic, writer)``; ``writer`` is
    :data:`UNATTRIBUTED` (``b""``) when nobody."""

    topic: bytes
    writer: bytes = UNATTRIBUTED

    @property
    def attributed(self) -> bool:
        """Whether the store could attribute the envelopes to a writer."""
        return self.writer != UNATTRIBUTED


@dataclass(frozen=True, slots=True)
class Held:
    """One envelope as the rule sees it: who holds it, its size, when it arrived, and
    its hash (``key``: only to order envelopes that arrived in the same millisecond)."""

    holder: Holder
    size: int
    arrival_ms: int
    key: bytes = b""


@dataclass(frozen=True, slots=True)
class RetentionRule:
    """The store's retention limits (see the module docstring); 0 disables a limit.

    Raises:
        ValueError: a negative limit.
    """

    max_bytes: int = 0
    max_age_ms: int = 0

    def __post_init__(self) -> None:
        if self.max_bytes < 0 or self.max_age_ms < 0:
            raise ValueError("retention limits must be >= 0 (0 disables)")

    def age_cutoff(self, now_ms: int) -> int | None:
        """Envelopes that arrived before this go (``None``: no limit by age)."""
        return now_ms - self.max_age_ms if self.max_age_ms > 0 else None

    def caps(self, holdings: Mapping[Holder, int]) -> dict[Holder, int]:
        """The bytes each holder that must shrink may keep (its newest envelopes within
        it); holders absent from the answer keep everything. ``{}``: all fits."""
        if self.max_bytes <= 0 or sum(holdings.values()) <= self.max_bytes:
            return {}
        attributed = {h: n for h, n in holdings.items() if h.attributed}
        unattributed = {h: n for h, n in holdings.items() if not h.attributed}
        out: dict[Holder, int] = {}
        cap = fair_cap(attributed.values(), self.max_bytes)
        if cap is not None:  # attributed envelopes alone are too many: no room for the rest
            out.update({h: cap for h, n in attributed.items() if n > cap})
            out.update(dict.fromkeys(unattributed, 0))
            return out
        room = self.max_bytes - sum(attributed.values())
        cap = fair_cap(unattributed.values(), room)
        if cap is not None:
            out.update({h: cap for h, n in unattributed.items() if n > cap})
        return out

    def evict(self, items: Iterable[Held], now_ms: int = 0) -> list[Held]:
        """The envelopes of ``items`` the rule lets go (by age when ``now_ms`` is given
        and ``max_age_ms`` set, then by size), in no particular order."""
        cutoff = self.age_cutoff(now_ms) if now_ms else None
        gone: list[Held] = []
        by_holder: defaultdict[Holder, list[Held]] = defaultdict(list)
        for item in items:
            if cutoff is not None and item.arrival_ms < cutoff:
                gone.append(item)
            else:
                by_holder[item.holder].append(item)
        caps = self.caps({h: sum(i.size for i in held) for h, held in by_holder.items()})
        for holder, cap in caps.items():
            kept = 0
            newest_first = sorted(by_holder[holder], key=lambda i: (i.arrival_ms, i.key),
                                  reverse=True)  # fmt: skip
            for item in newest_first:
                kept += item.size
                if kept > cap:
                    gone.append(item)
        return gone
