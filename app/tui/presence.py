"""Presence as SDS ephemeral messages: ``/away [TEXT]`` and leaving when the TUI quits.

Like typing notices (:mod:`app.tui.typing`), never logged, acknowledged or resent::

    {"v": 1, "kind": "presence", "state": "away", "text": "lunch", "name": "bob"}

``state`` is ``away`` (with an optional text), ``back``, ``offline`` (sent to every
joined channel when the TUI quits, so the others show it offline at once instead of
after the online window of three sync intervals), or ``here``: a heartbeat, sent to a
channel of at most :data:`HEARTBEAT_MAX_PEERS` members heard every third of the
online window. SDS sync suppression leaves a quiet member's syncs unsent while
another member's syncs name what it would (one sync serves the channel), so without
it a connected member that does not write looked gone after the online window.
Receivers only count it as hearing the member (an ``away`` stays). Receivers show an away member as
``away: lunch`` in F2 and ``/who``; an ``offline`` member is not counted online until
it is heard again. Only members online at that moment hear it (an ephemeral message
is not stored): someone who comes later sees the member as heard from, not as away.
"""

from __future__ import annotations

import json

from app.names import clean_name

__all__ = ["HEARTBEAT_MAX_PEERS", "STATES", "decode_presence", "encode_presence"]

STATES = ("away", "back", "offline", "here")

HEARTBEAT_MAX_PEERS = 10
"""A channel with more members heard sends no heartbeat (their syncs are stretched
and suppressed for the bytes' sake: "online" is then only what was heard lately)."""

MAX_TEXT = 200
"""Longest away text kept (characters)."""


def encode_presence(state: str, name: str, text: str = "") -> bytes:
    if state not in STATES:
        raise ValueError(f"state must be one of {STATES}")
    obj = {"v": 1, "kind": "presence", "state": state, "name": clean_name(name)}
    if text:
        obj["text"] = text[:MAX_TEXT]
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def decode_presence(content: bytes) -> tuple[str, str] | None:
    """(state, text) if ``content`` is a presence notice, else None."""
    try:
        obj = json.loads(content)
    except (ValueError, UnicodeDecodeError, RecursionError):
        return None
    if not isinstance(obj, dict) or obj.get("kind") != "presence":
        return None
    state, text = obj.get("state"), obj.get("text", "")
    if state not in STATES or not isinstance(text, str):
        return None
    return state, text[:MAX_TEXT]
