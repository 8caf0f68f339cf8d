"""Own lines sent while nobody else was heard in their channel: they wait, they do not fail.

The SDS core gives up on an own message after ``max_resend_attempts`` resends
(``MessageSendFailed``, reason ``resends_exhausted``). When nobody else has been
heard in the channel for as long as the message was being resent, that says
nothing about the message: there was nobody to acknowledge it. Like Signal and
Matrix, the node then keeps it as sent (not failed), and when the next member is
heard in the channel it publishes the **identical envelope** again (same message
id: a member that has it already drops the copy), so it is delivered when others
come back. Its acknowledgement still comes through the core, which remembers the
messages it gave up on and reports them acknowledged once a member names them.

The same holds for a line pushed out of a full outgoing buffer
(``MessageSendFailed``, reason ``buffer_full``) while nobody is heard: a script
piping thousands of lines into an empty channel (issue 41 item 8) is not made to
wait for acknowledgements nobody can send (``app/headless/line_feed.py`` admits its
lines then), and the lines pushed out wait here like the others. (While nobody is
heard the core's resends back off too: ``sds.backoff``.)

A store peer, when one is used, archived the envelope when it was first sent, so
members who catch up from it get the line too.

Retry (Ctrl+R, ``/retry``) of a message that did fail publishes its identical
envelope too (:meth:`app.node.runtime.Node.retry`), never a new message: a member that had
it after all would otherwise see it twice.
"""

from __future__ import annotations

from collections.abc import Iterable

import sds

__all__ = ["WAITING_REASONS", "UnheardLines", "heard_since", "nobody_heard"]

WAITING_REASONS = ("resends_exhausted", "buffer_full")
"""Why the core gave up on a message that then waits, if nobody was heard."""

MAX_WAITING = 10_000
"""Most own lines kept waiting per node (the oldest are forgotten beyond it: they stay
"sent" in the log, and a member's repair still finds them through later lines)."""


def heard_since(config: sds.Config, attempts: int, now_ms: int, backoff_level: int = 0) -> int:
    """Since when someone must have been heard for a message given up after ``attempts``
    resends to count as failed rather than waiting: its resends, and a sync period
    before them (a member's periodic sync says it is there). While the channel's
    resends back off (``backoff_level`` quiet sweeps, :mod:`sds.backoff`) they were
    up to the current backoff period apart, not one resend period."""
    period = config.resend_unacknowledged_ms
    if backoff_level and config.resend_backoff_max_ms is not None:
        period = min(config.resend_backoff_max_ms, period << min(backoff_level, 62))
    return now_ms - period * (attempts + 1) - config.sync_interval_ms


def nobody_heard(
    heard: Iterable[tuple[str, set[str], int]], own_id: str, channel: str, since_ms: int
) -> bool:
    """Whether no participant but ``own_id`` was heard in ``channel`` at or after
    ``since_ms``; ``heard`` is (sender id, its channels, last heard at ms)."""
    return not any(
        sid != own_id and channel in channels and last >= since_ms
        for sid, channels, last in heard
    )


class UnheardLines:
    """The own lines waiting for someone to hear them, per channel, oldest first."""

    def __init__(self) -> None:
        self._waiting: dict[str, dict[str, None]] = {}
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def hold(self, channel: str, message_id: str) -> None:
        """Keep ``message_id`` until someone is heard in ``channel``."""
        ids = self._waiting.setdefault(channel, {})
        if message_id in ids:
            return
        ids[message_id] = None
        self._count += 1
        while self._count > MAX_WAITING:  # bounded: forget the oldest of the biggest
            biggest = max(self._waiting.values(), key=len)
            biggest.pop(next(iter(biggest)))
            self._count -= 1

    def heard(self, channel: str) -> list[str]:
        """Someone was heard in ``channel``: the lines to publish again (and forget)."""
        ids = self._waiting.pop(channel, None)
        if not ids:
            return []
        self._count -= len(ids)
        return list(ids)

    def acknowledged(self, channel: str, message_id: str) -> None:
        """It arrived after all (a store peer delivered it): nothing to publish again."""
        ids = self._waiting.get(channel)
        if ids is not None and message_id in ids:
            del ids[message_id]
            self._count -= 1

    def forget(self, channel: str) -> None:
        """The channel was left."""
        self._count -= len(self._waiting.pop(channel, {}))
