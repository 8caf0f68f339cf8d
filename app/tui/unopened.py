"""The TUI's warnings about envelopes that were refused on opening: one notice per
reason, and none where the refusal is expected.

An envelope of a public or passphrase channel that does not open was changed on the way
(its topic is a hash of the channel key, so another passphrase does not even reach us):
said at once. In a members channel it is expected for a
while: after a key change the first envelopes under the new key can arrive before our
key share, and after our own removal the envelope that removes us can be folded after
the first ones sealed to keys we were not given. So a members channel's refusal is held
for :data:`GRACE_S`; when it is due, nothing is said if we are out of the channel by then
(of course it does not open) or if envelopes of that channel opened again meanwhile (the
share came); otherwise the warning names a missed key change. The app calls
:meth:`UnopenedWarnings.rejected` for each :class:`~app.node.events.Rejected` and
:meth:`UnopenedWarnings.due` on its tick; nothing here imports the app.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from app.node.events import Rejected
from app.node.runtime import Node

__all__ = ["GRACE_S", "UnopenedWarnings"]

GRACE_S = 20.0
"""How long a members channel's unopened envelope waits for its key share (or our
removal) before it is worth a warning."""


@dataclass(slots=True)
class _Held:
    since: float
    rejected_then: int  # the node's wrong-key count when it was held


@dataclass(slots=True)
class UnopenedWarnings:
    """Which refusals to tell the person about, and when (see the module docstring)."""

    grace_s: float = GRACE_S
    _noted: set[str] = field(default_factory=set)
    _held: dict[str, _Held] = field(default_factory=dict)

    def rejected(self, node: Node | None, ev: Rejected, now: float) -> list[tuple[str, str]]:
        """(severity, text) of the notices ``ev`` makes now (often none)."""
        if ev.reason in self._noted:
            return []
        if ev.reason in ("bad_signature", "sender_mismatch"):
            self._noted.add(ev.reason)
            return [("warning", f"a forged envelope was refused ({ev.reason})")]
        if ev.reason != "wrong_key_or_tampered" or ev.channel is None:
            return []
        if node is not None and node.members_channel(ev.channel) is not None:
            if ev.channel not in self._held:
                self._held[ev.channel] = _Held(now, _wrong_keys(node))
            return []
        self._noted.add(ev.reason)
        return [("warning", f"an envelope for #{ev.channel} could not be opened: it "
                            "was changed on the way (or sealed with another key)")]  # fmt: skip

    def due(self, node: Node | None, now: float) -> list[tuple[str, str]]:
        """The held members-channel warnings whose grace is over and that still hold."""
        out: list[tuple[str, str]] = []
        for channel, held in list(self._held.items()):
            if now - held.since < self.grace_s:
                continue
            del self._held[channel]
            if node is None or self._quiet(node, channel, held):
                continue
            if "wrong_key_or_tampered" not in self._noted:
                self._noted.add("wrong_key_or_tampered")
                out.append(("warning", f"envelopes for #{channel} could not be opened: this "
                            "device missed a key change (it asks its peers again), or they "
                            "were tampered with"))  # fmt: skip
        return out

    @staticmethod
    def _quiet(node: Node, channel: str, held: _Held) -> bool:
        mc = node.members_channel(channel)
        if mc is None or (mc.roster.created and not mc.roster.is_member(node.sender_id)):
            return True  # left, or removed: sealed to keys we were not given, of course
        # no refusal since the first one: what could not be opened then opens now
        return _wrong_keys(node) == held.rejected_then


def _wrong_keys(node: Node) -> int:
    return int(node.counters["rejected_wrong_key_or_tampered"])
