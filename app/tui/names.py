"""Names nobody can fake: two authors whose names look alike are always told apart, and
two authors in a channel's window never share a colour (issue 25 item 4, TUI side).

A display name in a public or passphrase channel is only what an author claims (its
sender id is its key); in a members channel it is the roster's (``app/chat/authors.py``).
When two sender ids are seen with names that look alike (their TR39 skeletons meet,
:func:`app.names.confusable`: ``alice``, ``Alice`` and ``аlice`` with a Cyrillic а),
every line, the peer list (F2) and completion show each with a short fingerprint of
its id: ``alice (3f9a2b1c)``, ``аlice (77b2e410)``. One name alone is shown bare.

Colours: the first :data:`~app.tui.render` palette size of authors seen in a
channel each get their own colour (the hashed one when it is free, else the next
free one), kept for the session; only beyond that many authors can two share one.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.names import FINGERPRINT_HEX, NameBook, fingerprint, label

if TYPE_CHECKING:
    from app.members.roster import Roster
    from app.node.runtime import Node

__all__ = ["FINGERPRINT_HEX", "ColourSlots", "NameBook", "fingerprint", "label", "roster_of"]


def roster_of(node: Node) -> Callable[[str], Roster | None]:
    """What the model asks for a channel's roster: the node's, for a members channel."""

    def of(channel: str) -> Roster | None:
        mc = node.members_channel(channel)
        return mc.roster if mc is not None else None

    return of


class ColourSlots:
    """Author colours of one channel: a distinct palette index per sender id while the
    palette lasts (the id's hashed index when free)."""

    def __init__(self, size: int = 10) -> None:
        self.size = size
        self._slot: dict[str, int] = {}

    def slot(self, sender_id: str) -> int:
        got = self._slot.get(sender_id)
        if got is not None:
            return got
        digest = hashlib.sha256(sender_id.encode("utf-8", "replace")).digest()
        want = int.from_bytes(digest[:4], "big") % self.size  # as author_color chooses
        taken = set(self._slot.values())
        if len(taken) < self.size:
            while want in taken:
                want = (want + 1) % self.size
        self._slot[sender_id] = want
        return want
