"""A channel's saved state: its format.

:meth:`sds.channel.Channel.export_state` snapshots everything the core holds as one
JSON-able dict (:class:`ChannelState`), which storage persists;
:meth:`sds.channel.Channel.restore` rebuilds a channel from it.
"""

from __future__ import annotations

import json
from typing import Any

import orjson

__all__ = ["STATE_VERSION", "ChannelState"]

#: Format version of :class:`ChannelState`.
STATE_VERSION = 1


class ChannelState:
    """A channel's exported state: a JSON-able dict, with a bytes form for storage."""

    __slots__ = ("data",)

    def __init__(self, data: dict[str, Any]) -> None:
        self.data = data

    def to_bytes(self) -> bytes:
        """Compact JSON (UTF-8).

        Encoded with orjson: a node saves its state every second or so and a
        full 10,000-entry window is ~2.5 MB of JSON, which the standard
        library encodes ~10x slower. Anything orjson refuses (an integer
        beyond 64 bits) falls back to the standard encoder; both read back
        the same with :meth:`from_bytes`.
        """
        try:
            return orjson.dumps(self.data)
        except (orjson.JSONEncodeError, TypeError):
            return json.dumps(self.data, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> ChannelState:
        """Parse :meth:`to_bytes`; ``ValueError`` if it is not such a state."""
        try:
            data = orjson.loads(raw)
        except (UnicodeDecodeError, orjson.JSONDecodeError) as exc:
            raise ValueError(f"corrupt channel state: {exc}") from None
        if not isinstance(data, dict):
            raise ValueError("corrupt channel state: not an object")
        return cls(data)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ChannelState) and other.data == self.data

    __hash__ = None  # type: ignore[assignment]
