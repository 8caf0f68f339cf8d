"""Several transports at once (LAN gossip and a relay), bridged.

:class:`BridgeTransport` has the node-transport shape and wraps two or more
transports (``LanTransport``, ``RelayTransport``...):

* publishing sends the envelope on every transport that is connected; it
  "left" if any of them took it;
* an envelope arriving on one transport is handed to the node once (a seen
  cache of envelope hashes drops the copy that arrives on the other path) and
  forwarded unchanged to every OTHER connected transport: people on the LAN
  and people on the relay are one channel. The relay never echoes to the
  publisher and LAN gossip never floods back to where it came from, so a
  bridged envelope does not loop; two bridges on one LAN may each forward it
  once, and the receivers' caches (and the node's replay guard) drop the copy;
* the status is ``connected`` while any transport is, and names which.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections import Counter
from collections.abc import Awaitable, Callable, Iterable, Sequence
from typing import Any

from net.lan.gossip import SeenCache
from net.lan.transport import LanStatus

__all__ = ["BridgeTransport"]

logger = logging.getLogger("sdschat.lan.bridge")


class BridgeTransport:
    """Bridges ``transports`` (see the module docstring).

    Args:
        transports: the transports, each with the node-transport shape.
        names: a label per transport for status reasons (``"lan"``, ``"relay"``).
        seen_ttl_s: how long an envelope hash suppresses a second delivery.
    """

    def __init__(
        self,
        transports: Sequence[Any],
        names: Sequence[str] | None = None,
        *,
        seen_ttl_s: float = 5.0,
    ) -> None:
        if len(transports) < 1:
            raise ValueError("a bridge needs at least one transport")
        self.transports = list(transports)
        self.names = list(names) if names is not None else [
            type(t).__name__ for t in self.transports
        ]
        if len(self.names) != len(self.transports):
            raise ValueError("one name per transport")
        self.seen = SeenCache(seen_ttl_s, 65_536)
        self.counters: Counter[str] = Counter()
        """``bridged_<from>_to_<to>``, ``duplicates``."""
        self._states: list[Any] = [None] * len(self.transports)
        self._on_status: Callable[[Any], None] | None = None
        self._last_state: tuple[str, str] | None = None

    @property
    def connected(self) -> bool:
        return any(t.connected for t in self.transports)

    def start(
        self, on_envelope: Callable[[bytes], Awaitable[None]], on_status: Callable[[Any], None]
    ) -> None:
        self._on_status = on_status
        for i, t in enumerate(self.transports):
            t.start(self._receiver(i, on_envelope), self._status_of(i))

    def _receiver(
        self, index: int, on_envelope: Callable[[bytes], Awaitable[None]]
    ) -> Callable[[bytes], Awaitable[None]]:
        async def receive(envelope: bytes) -> None:
            if not self.seen.check_and_add(hashlib.sha256(envelope).digest()):
                self.counters["duplicates"] += 1
                return
            for j, other in enumerate(self.transports):
                if j != index and other.connected:
                    try:
                        if await other.publish(envelope):
                            self.counters[f"bridged_{self.names[index]}_to_{self.names[j]}"] += 1
                    except Exception as exc:
                        logger.warning("bridging to %s failed: %s", self.names[j], exc)
            await on_envelope(envelope)

        return receive

    def _status_of(self, index: int) -> Callable[[Any], None]:
        def on_status(status: Any) -> None:
            self._states[index] = status
            self._report()

        return on_status

    def _report(self) -> None:
        if self._on_status is None:
            return
        up = [n for n, s in zip(self.names, self._states, strict=True)
              if s is not None and s.state == "connected"]
        if up:
            state, reason = "connected", "via " + " and ".join(up)
        elif all(s is not None and s.state == "closed" for s in self._states):
            state, reason = "closed", "; ".join(
                f"{n}: {s.reason}" for n, s in zip(self.names, self._states, strict=True)
            )
        else:
            state = "disconnected"
            reason = "; ".join(
                f"{n}: {s.reason or s.state}"
                for n, s in zip(self.names, self._states, strict=True)
                if s is not None
            )
        if (state, reason) == self._last_state:
            return
        self._last_state = (state, reason)
        retry = [s.retry_in for s in self._states if s is not None and s.retry_in is not None]
        self._on_status(LanStatus(state, reason, min(retry) if retry else None))

    async def publish(self, envelope: bytes) -> bool:
        self.seen.add(hashlib.sha256(envelope).digest())
        results = await asyncio.gather(
            *(t.publish(envelope) for t in self.transports if t.connected),
            return_exceptions=True,
        )
        return any(r is True for r in results)

    async def subscribe(self, topics: Iterable[bytes]) -> None:
        wanted = list(topics)
        for t in self.transports:
            await t.subscribe(wanted)

    async def unsubscribe(self, topics: Iterable[bytes]) -> None:
        gone = list(topics)
        for t in self.transports:
            await t.unsubscribe(gone)

    async def close(self) -> None:
        for t in self.transports:
            try:
                await t.close()
            except Exception as exc:
                logger.warning("closing a bridged transport failed: %s", exc)
