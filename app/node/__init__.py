"""The node runtime: one participant driving the SDS core over a transport and storage.

:mod:`app.node.runtime` holds :class:`~app.node.Node`: its lifecycle, public API, worker
loop and timers. The node creates its parts, calls down into them, and they never
import it back (each gets what it needs at construction: the shared references of
:mod:`~app.node.context`, the other parts it calls, a few named callbacks):

* :mod:`~app.node.receiving`: received envelopes into the cores (open, gate, replay
  guard, carried copies, sync clocks);
* :mod:`~app.node.effects`: the core's events into the round (storage rows, node
  events, envelopes to publish), storage follow-ups, copies and conflicts; the peers
  heard, late arrivals, the ephemeral guard, the file quota;
* :mod:`~app.node.publishing`: envelopes onto the transport after the commit (paced),
  republishing, ``/retry``;
* :mod:`~app.node.joining`: join (restore + reconcile), leave, forget; the joined channels;
* :mod:`~app.node.members_glue`: members channels, invites, direct messages;
* :mod:`~app.node.own_messages`: own messages on their way (states, local ids, failed);
* :mod:`~app.node.envelope_memory`: recent and waiting envelopes, the replay guard, the
  carrier;
* :mod:`~app.node.inbox` (the worker's inputs and their bounded queue),
  :mod:`~app.node.round` (what one round produced), :mod:`~app.node.settings`
  (:class:`~app.node.NodeOptions`, :class:`~app.node.ChannelInfo`),
  :mod:`~app.node.errors`;

and the guards the parts apply (:mod:`~app.node.clock_guard`, :mod:`~app.node.disk_guard`,
:mod:`~app.node.ephemeral_guard`, :mod:`~app.node.carrying`, :mod:`~app.node.unheard`,
:mod:`~app.node.late_arrivals`, :mod:`~app.node.state_reconcile`,
:mod:`~app.node.db_pages`, :mod:`~app.node.heap_trim`), :mod:`app.node.events` what the
node tells its UI, and
:mod:`app.node.transport` how its envelopes leave and arrive.

``from app.node.runtime import Node`` (and the other names of ``app.node.runtime.__all__``)
keeps working; the runtime loads on first use, so importing a light part such as
:mod:`app.node.events` does not load the whole node.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from app.node.runtime import (
        ChannelInfo,
        IdentityMismatchError,
        Node,
        NodeClosedError,
        NodeOptions,
        PassphraseMismatchError,
        wall_ms,
    )

__all__ = [
    "ChannelInfo",
    "IdentityMismatchError",
    "Node",
    "NodeClosedError",
    "NodeOptions",
    "PassphraseMismatchError",
    "wall_ms",
]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from app.node import runtime

        return getattr(runtime, name)
    raise AttributeError(f"module 'app.node' has no attribute {name!r}")
