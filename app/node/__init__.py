"""The node runtime: one participant driving the SDS core over a transport and storage.

:mod:`app.node.runtime` holds :class:`~app.node.Node` (lifecycle, public API,
worker loop, timers); the other modules here are the parts it owns and the guards it
applies (clock, disk, ephemeral messages, carried copies, unheard lines, late arrivals,
state reconciliation, database pages), :mod:`app.node.events` what it tells its UI, and
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
