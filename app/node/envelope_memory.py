"""The envelopes a node keeps in memory, and the hashes it has seen: :class:`EnvelopeMemory`.

* ``recent``: the newest envelopes by ``(channel, message id)``, own and received
  (``NodeOptions.envelope_cache``), so that a resend or a repair answer is the
  identical stored envelope without a storage look-up (and what rides on our lines:
  :mod:`app.node.carrying`);
* ``waiting``: envelopes of received messages still waiting for their dependencies,
  by ``(channel, envelope hash)`` (``NodeOptions.waiting_envelope_cache``), stored
  with the message when it is delivered; one evicted here is stored without its
  envelope and cannot be served for repair;
* ``seen``: the replay guard of envelope hashes (:class:`net.envelope.ReplayGuard`):
  the same bytes again are a counted duplicate, not a second delivery. A hash is
  forgotten again when the bytes will be welcome later (a message the core refused
  for now, held for its key share, or taken in by a round that could not be stored);
* ``carrier``: which envelope hashes name which message, and the bare envelopes that
  ride on a new line (:class:`~app.node.carrying.Carrier`).

Written by the receive path (:mod:`app.node.receiving`), the core's effects
(:mod:`app.node.effects`) and the members glue; read by publishing. A full disk
clears ``recent`` and ``waiting`` (:meth:`clear`): own envelopes of refused lines
must never leave.
"""

from __future__ import annotations

from collections import OrderedDict

from app.node.carrying import IDS_REMEMBERED, Carrier
from net.envelope import ReplayGuard

__all__ = ["EnvelopeMemory"]


class EnvelopeMemory:
    """Recent and waiting envelopes, the replay guard, the carrier (module docstring)."""

    def __init__(self, recent: int, waiting: int) -> None:
        self._recent_cap = recent
        self._waiting_cap = waiting
        self.recent: OrderedDict[tuple[str, str], bytes] = OrderedDict()
        self.waiting: OrderedDict[tuple[str, bytes], bytes] = OrderedDict()
        self.seen = ReplayGuard()
        self.carrier = Carrier(IDS_REMEMBERED)  # app/node/carrying.py

    def remember(self, channel: str, message_id: str, envelope: bytes) -> None:
        """Keep ``envelope`` of ``message_id`` among the recent ones (oldest forgotten)."""
        cache = self.recent
        cache[(channel, message_id)] = envelope
        cache.move_to_end((channel, message_id))
        while len(cache) > self._recent_cap:
            cache.popitem(last=False)

    def wait(self, channel: str, digest: bytes, envelope: bytes) -> None:
        """Keep the envelope (hash ``digest``) of a message that waits for dependencies."""
        cache = self.waiting
        cache[(channel, digest)] = envelope
        while len(cache) > self._waiting_cap:
            cache.popitem(last=False)

    def clear(self) -> None:
        """Forget every recent and waiting envelope (the replay guard stays)."""
        self.recent.clear()
        self.waiting.clear()
