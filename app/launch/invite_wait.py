"""Redeeming an invite code at the start (``sdschat join --invite CODE``), bounded.

A code nobody answers (guessed, made by an admin whose sdschat is not running, revoked
with its admin's data directory) used to wait five minutes in silence. Now the front end
is told after :data:`NOTICE_S` that nobody has answered yet, and after
:data:`ANSWER_S` the start stops with "nobody answered" and what to do. An ``approve``
invite's admin has that long to type ``/approve``; the newcomer asks again every 2 s
meanwhile.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING

from app.members.invite import decode_invite

if TYPE_CHECKING:
    from app.node.runtime import ChannelInfo, Node

__all__ = ["ANSWER_S", "NOTICE_S", "redeem"]

ANSWER_S = 120.0
"""Seconds the newcomer asks before it says nobody answered."""
NOTICE_S = 15.0
"""Seconds without an answer before the front end says nobody has answered yet."""


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.0f} minutes" if seconds >= 120 else f"{seconds:.0f} s"


async def redeem(node: Node, code: str, notice: Callable[[str], None]) -> ChannelInfo:
    """``node.join_by_invite(code)`` within :data:`ANSWER_S`; ``notice`` gets one line
    once :data:`NOTICE_S` went by without an answer.

    Raises:
        ValueError: the code is refused, or nobody answered in time (the message says
            what to do).
    """
    channel = decode_invite(code).channel
    answer_s, notice_s = ANSWER_S, NOTICE_S
    timer = asyncio.get_running_loop().call_later(notice_s, notice, (
        f"nobody has answered the invite to #{channel} yet: the admin who made the code "
        "must have sdschat running (an 'approve' invite waits until they type /approve); "
        f"still asking, for up to {_minutes(answer_s)}"))  # fmt: skip
    try:
        return await asyncio.wait_for(node.join_by_invite(code, timeout_s=answer_s + 60),
                                      answer_s)  # fmt: skip
    except TimeoutError:
        raise ValueError(
            f"nobody answered the invite to #{channel} within {_minutes(answer_s)}: the "
            "code may be mistyped, guessed, used up or revoked, or its admin's sdschat is "
            "not running. Ask them to start it, or for a new code") from None
    finally:
        timer.cancel()
