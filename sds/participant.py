"""A participant's channels: one object that owns them and routes received bytes."""

from __future__ import annotations

import random

from sds.channel import Channel
from sds.config import Config
from sds.datagram import Datagram
from sds.events import DropReason, Event, MessageDropped
from sds.message import DecodeError, parse_pb
from sds.state import ChannelState

__all__ = ["Participant"]


class Participant:
    """All channels of one ``sender_id``.

    Received bytes are parsed once and routed to the channel named by their
    ``channel_id``; timers, events and datagrams of all channels are merged.
    Drive it exactly like a :class:`~sds.channel.Channel`: after every call,
    broadcast :meth:`datagrams_to_send` (pairs of channel id and datagram),
    handle :meth:`events` and re-arm the timer at :meth:`get_timer`.
    """

    def __init__(
        self, sender_id: str, config: Config | None = None, rng: random.Random | None = None
    ) -> None:
        if not sender_id:
            raise ValueError("sender_id must be non-empty")
        self.sender_id = sender_id
        self.config = config if config is not None else Config()
        self._rng = rng if rng is not None else random.Random(0)
        self._channels: dict[str, Channel] = {}
        self._events: list[Event] = []

    @property
    def channels(self) -> dict[str, Channel]:
        """Joined channels by id (read-only use)."""
        return self._channels

    def join(self, channel_id: str, now_ms: int, state: ChannelState | None = None) -> Channel:
        """Join ``channel_id`` (or resume it from ``state``); joining twice returns the channel."""
        ch = self._channels.get(channel_id)
        if ch is not None:
            return ch
        rng = random.Random(self._rng.getrandbits(64))
        if state is not None:
            ch = Channel.restore(state, self.config, rng, now_ms)
            if ch.channel_id != channel_id or ch.sender_id != self.sender_id:
                raise ValueError("state belongs to another channel or participant")
        else:
            ch = Channel(channel_id, self.sender_id, self.config, now_ms, rng)
        self._channels[channel_id] = ch
        return ch

    def set_connected(self, connected: bool, now_ms: int) -> None:
        """Tell every channel whether recovery can run (``Channel.set_connected``):
        lost timeouts count only connected time."""
        for ch in self._channels.values():
            ch.set_connected(connected, now_ms)

    def leave(self, channel_id: str) -> Channel | None:
        """Stop handling ``channel_id``; returns the channel (export its state first if needed)."""
        ch = self._channels.pop(channel_id, None)
        if ch is not None:
            self._events.extend(ch.events())
        return ch

    def channel(self, channel_id: str) -> Channel:
        """The joined channel ``channel_id`` (``KeyError`` if not joined)."""
        return self._channels[channel_id]

    def to_carry(self, channel_id: str, now_ms: int) -> list[tuple[str, bytes]]:
        """``Channel.to_carry`` of ``channel_id``: after ``channel(channel_id).send``,
        the ``(message id, SDS bytes)`` that ride on the new message's envelope."""
        return self._channels[channel_id].to_carry(now_ms)

    def receive(
        self,
        data: bytes,
        now_ms: int,
        retrieval_hint: bytes | None = None,
        carried: bool = False,
    ) -> str | None:
        """Route wire bytes to their channel; returns the channel id, or ``None`` if dropped.

        ``carried``: the bytes rode on another message (``Channel.receive``)."""
        try:
            pb = parse_pb(data)
        except DecodeError as exc:
            self._events.append(MessageDropped("", None, None, DropReason.MALFORMED, exc.detail))
            return None
        ch = self._channels.get(pb.channel_id)
        if ch is None:
            self._events.append(
                MessageDropped(
                    pb.channel_id,
                    pb.message_id or None,
                    pb.sender_id or None,
                    DropReason.UNKNOWN_CHANNEL,
                )
            )
            return None
        ch.receive_parsed(pb, bytes(data), now_ms, retrieval_hint, carried=carried)
        return ch.channel_id

    def events(self) -> list[Event]:
        """Drain events of every channel (participant-level drops first)."""
        out, self._events = self._events, []
        for ch in self._channels.values():
            out.extend(ch.events())
        return out

    def datagrams_to_send(self) -> list[tuple[str, Datagram]]:
        """Drain datagrams of every channel as ``(channel_id, datagram)``."""
        out: list[tuple[str, Datagram]] = []
        for cid, ch in self._channels.items():
            out.extend((cid, d) for d in ch.datagrams_to_send())
        return out

    def get_timer(self) -> int | None:
        """Earliest deadline over all channels."""
        best: int | None = None
        for ch in self._channels.values():
            t = ch.get_timer()
            if t is not None and (best is None or t < best):
                best = t
        return best

    def handle_timer(self, now_ms: int) -> None:
        """Run every channel's due work (channels with nothing due do nothing)."""
        for ch in self._channels.values():
            t = ch.get_timer()
            if t is not None and t <= now_ms:
                ch.handle_timer(now_ms)
