"""Running one side of a device link (app/members/link.py) over relays, bounded in time.

Both sides subscribe to the code's rendezvous topic (:func:`~app.members.link.link_topic`)
through their own :class:`~net.relay_client.RelayClient` (a running node's transport is
not used: the link is a short exchange beside it) and carry the link frames as
envelopes (:func:`~app.members.invites.wrap`, as the invite handshake does). A relay
keeps nothing for a topic nobody listens to, and the two devices start minutes apart
(the code is read off one screen and typed into the other), so each side sends its
SPAKE2 message again every :data:`HELLO_S` until it hears the other's, and sends it
once more just before its confirmation (the other side may have subscribed after the
first copies went by). The protocol takes a copy of a message it holds as nothing.

Time limits: the old device waits until its code expires
(:data:`~app.members.link.LINK_TTL_MS`); the new one :data:`ANSWER_S` for a device
showing the code to answer; once both have spoken, the rest has :data:`STEPS_S`.

A failure is a :class:`LinkFailed` whose text says what happened and what to do; its
``reason`` is the protocol's (``wrong_code``, ``expired``, ``two_answers``,
``protocol``, ``not_a_device``) or ``no_answer``, ``unreachable``, ``timeout``.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from typing import Final

from app import AppError
from app.members.invites import unwrap, wrap
from app.members.link import LINK_TTL_MS, LinkJoin, LinkOffer, LinkState, link_topic
from net.relay_client import RelayClient

__all__ = ["ANSWER_S", "HELLO_S", "STEPS_S", "LinkFailed", "explain", "run_side"]

HELLO_S: Final = 1.0
ANSWER_S: Final = 60.0
STEPS_S: Final = 60.0
CONNECT_S: Final = 15.0

_AGAIN = "Nothing was changed on either device; make a new code (/link or sdschat link)."

_TEXTS: Final = {
    "wrong_code": "the link code is wrong (its words differ from the other device's "
                  "screen); the code is used up. " + _AGAIN,
    "expired": "the link code expired (a code is good for 10 minutes). " + _AGAIN,
    "two_answers": "two devices answered this link code, so neither gets it (someone "
                   "else may have seen the code). " + _AGAIN,
    "protocol": "the link broke in transit (a message was changed, replayed or lost on "
                "the way). " + _AGAIN,
    "not_a_device": "the other device is not one of this person's devices, or is one "
                    "already (a revoked device never comes back). " + _AGAIN,
    "no_answer": "no device answered this link code: check its 4 digits, and that the "
                 "other device still shows it (a code is good for 10 minutes and one "
                 "try, and both devices must reach the same relay). " + _AGAIN,
    "timeout": "the other device stopped answering in the middle of the link. " + _AGAIN,
    "unreachable": "cannot reach the relay to link through. Nothing was changed.",
}


class LinkFailed(AppError, RuntimeError):
    """A link that did not happen (``reason``; the message says what to do)."""

    def __init__(self, reason: str, text: str) -> None:
        super().__init__(text)
        self.reason = reason


def explain(reason: str) -> str:
    """What a failure ``reason`` means for the person."""
    if reason.startswith("aborted: "):
        theirs = reason.removeprefix("aborted: ")
        base = theirs if theirs in _TEXTS else "protocol"
        return "the other device ended the link: " + _TEXTS[base]
    return _TEXTS.get(reason, f"the link failed ({reason}). " + _AGAIN)


def _now_ms() -> int:
    return time.time_ns() // 1_000_000


async def run_side(side: LinkOffer | LinkJoin, relays: Sequence[str], *,
                   on_sas: Callable[[str], None] | None = None,
                   answer_s: float = ANSWER_S) -> None:  # fmt: skip
    """Run ``side`` until it is done (returns) or failed (raises :class:`LinkFailed`).
    ``on_sas`` gets the six digits both screens show, once the key is derived.

    The old device (a :class:`LinkOffer`) waits for an answer until its code expires;
    the new one (a :class:`LinkJoin`) ``answer_s`` seconds."""
    topic = link_topic(side.code.nameplate)
    inbox: asyncio.Queue[bytes] = asyncio.Queue(maxsize=256)

    def arrived(envelope: bytes) -> None:
        got = unwrap(envelope)
        if got is not None and got[0] == topic and not inbox.full():
            inbox.put_nowait(got[1])

    client = RelayClient(list(relays), [topic], arrived, backoff_max=2.0)
    loop = asyncio.get_running_loop()
    if isinstance(side, LinkOffer):
        answer_by = loop.time() + max(0.0, (side.started_ms + LINK_TTL_MS - _now_ms()) / 1000)
    else:
        answer_by = loop.time() + answer_s
    async with client:
        if not await client.wait_connected(CONNECT_S):
            raise LinkFailed("unreachable", f"{_TEXTS['unreachable']} ({client.last_reason})")
        hello = side.start()

        async def send(frames: Sequence[bytes]) -> None:
            for frame in frames:
                if not await client.publish(wrap(topic, frame)):
                    await client.wait_connected(CONNECT_S)
                    await client.publish(wrap(topic, frame))

        await send(hello)
        steps_by: float | None = None
        while side.state not in (LinkState.DONE, LinkState.FAILED):  # bounded by the deadlines
            deadline = answer_by if steps_by is None else steps_by
            left = deadline - loop.time()
            if left <= 0:
                if steps_by is not None:
                    raise LinkFailed("timeout", _TEXTS["timeout"])
                reason = "expired" if isinstance(side, LinkOffer) else "no_answer"
                raise LinkFailed(reason, _TEXTS[reason])
            try:
                frame = await asyncio.wait_for(inbox.get(), min(HELLO_S, left))
            except TimeoutError:
                if side.state is LinkState.WAITING:
                    await send(hello)  # the other side may have come since
                continue
            was_waiting = side.state is LinkState.WAITING
            out = side.receive(frame, _now_ms())
            if was_waiting and side.state is not LinkState.WAITING:
                steps_by = loop.time() + STEPS_S
                if side.sas is not None and on_sas is not None:
                    on_sas(side.sas)
                out = [*hello, *out]  # the other may have missed every earlier copy
            await send(out)
        if side.state is LinkState.FAILED:
            raise LinkFailed(side.error, explain(side.error))
