"""What the parts of one node share: :class:`NodeContext`.

:class:`~app.node.Node` (:mod:`app.node.runtime`) makes one context and hands it to
every part it creates (:mod:`~app.node.effects`, :mod:`~app.node.receiving`,
:mod:`~app.node.publishing`, :mod:`~app.node.joining`, :mod:`~app.node.members_glue`).
It holds references, not behaviour: the node's store, identity, transport and SDS
participant, its counters, the table of joined channels, and the two functions every
part calls (``emit`` an event, ``now`` the corrected clock). The few plain values that
change while the node runs (its display name, the store peer in use, whether the
transport is connected, whether the node is closing) are written by the runtime only;
the parts read them here, so that each has one place to read from.

Rules: the joined-channel table (``channels``, ``by_topic``) is written only by
:class:`~app.node.joining.Joiner`; a part keeps its own state in its own object and
reaches another part's only through the object the node handed it.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sds
    from app.node.events import NodeEvent
    from app.node.settings import ChannelInfo, NodeOptions
    from app.node.transport import Transport
    from net.identity import Identity
    from net.store_sync import StoreSync
    from storage import Store

__all__ = ["NodeContext"]


@dataclass(slots=True, eq=False)
class NodeContext:
    """The node's shared references (see the module's rules)."""

    options: NodeOptions
    store: Store
    identity: Identity
    transport: Transport
    participant: sds.Participant
    counters: Counter[str]
    emit: Callable[[NodeEvent], None]
    """Hand an event to the node's subscribers (at once: not after a commit)."""
    now: Callable[[], int]
    """The corrected wall clock in ms (the cores' ``now_ms``: app/node/clock_guard.py)."""
    name: str = ""
    """The display name our messages carry (``Node.name``)."""
    channels: dict[str, ChannelInfo] = field(default_factory=dict)
    """Joined channels by name."""
    by_topic: dict[bytes, str] = field(default_factory=dict)
    """Joined channels' names by topic (an envelope of another topic is not opened)."""
    store_sync: StoreSync | None = None
    """The store peer in use (``Node.use_store``), if any."""
    connected: bool = False
    """Whether the transport is connected (the runtime follows its status)."""
    closing: bool = False
    """Whether the node is closing (or closed): no new work is started."""

    @property
    def sender_id(self) -> str:
        """Our sender id (the identity's)."""
        return self.identity.sender_id
