"""What the core hands its caller to broadcast (``Channel.datagrams_to_send``)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Datagram"]


@dataclass(frozen=True, slots=True)
class Datagram:
    """Bytes the core wants broadcast, and why.

    ``kind`` is ``"resend"`` (an own unacknowledged message again), ``"sync"``
    or ``"repair"`` (a rebroadcast answering a repair request; ``message_id``
    names the original message, whose stored envelope an application that signs
    envelopes should send instead of re-wrapping ``data``).
    """

    data: bytes
    kind: str
    message_id: str
