"""The texts of the TUI's detail dialogs, built from values alone (no Textual, no node,
no store): ``/info`` (one message), ``/who`` and ``/names`` (the peers of a channel),
``/mentions`` (the newest lines for you) and ``/stats`` (the node's counters).

The command that opens a dialog reads what it needs (the stored message, the
peers heard from, the search results; :mod:`app.tui.commanding`) and hands the
values to a function here, so each text is tested on its own
(tests/tui/test_tui_texts.py). Every text a peer chose (a name, a message, an id) is
passed through :func:`app.chat.lines.visible` where a terminal could act on it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, tzinfo

from rich.text import Text

from app.chat.content import decode_content
from app.chat.lines import visible
from app.tui.model import Row
from app.tui.readers import HaveIt
from app.tui.render import state_label
from storage import LogEntry, StoredMessage

__all__ = [
    "Holders",
    "PeerLine",
    "ago",
    "info_text",
    "mentions_text",
    "names_text",
    "short_id",
    "stats_text",
    "who_text",
]

Label = Callable[[str], str]
"""A sender id -> how the screen names it (a name another member shares: with its
fingerprint; :meth:`app.tui.model.ChatModel.label`)."""


def ago(seconds: float) -> str:
    """``12s ago``, ``5m ago``, ``3h ago``."""
    s = max(0, int(seconds))
    if s < 60:
        return f"{s}s ago"
    if s < 3600:
        return f"{s // 60}m ago"
    return f"{s // 3600}h ago"


def short_id(message_id: str, keep: int = 24) -> str:
    """A dependency's id on one row of ``/info`` (an 80-column pane): its first
    characters and ``…`` when longer (the message's own id is shown whole above)."""
    shown = visible(message_id)
    return shown if len(shown) <= keep else shown[: keep - 1] + "…"


# ---------------------------------------------------------------- /who, /names


@dataclass(frozen=True, slots=True)
class PeerLine:
    """A peer of a channel as ``/who`` and ``/names`` show it."""

    sender_id: str
    name: str
    """The name it sent (or the one from the history; its id's first 8 characters)."""
    label: str
    """``name``, with its fingerprint when another member shows the same name."""
    online: bool
    """Heard from within the online window, and not quit since."""
    away: str | None
    """``away`` or ``away: TEXT`` while it said so (``/away``), else None."""
    last_seen_ms: int
    messages: int


def who_text(me_name: str, me_id: str, peers: Sequence[PeerLine], now_ms: int) -> Text:
    """``/who``: you, then each peer heard from (most recently seen first): its id, online
    or away, when it was last heard from and how many messages it sent."""
    out = Text()
    out.append(f"{me_name}", "bold")
    out.append(f"  {me_id}  (you)\n")
    for p in peers:
        out.append(p.label, "bold")
        seen = ago((now_ms - p.last_seen_ms) / 1000.0)
        state = p.away or ("online" if p.online else "away")
        out.append(
            f"  {p.sender_id}  {state}, "
            f"heard from {seen}, {p.messages} message{'s' if p.messages != 1 else ''}\n"
        )
    if not peers:
        out.append("nobody else heard from yet\n", "dim")
    return out


def names_text(me_name: str, peers: Sequence[PeerLine]) -> Text:
    """``/names``: who is in the channel, online first (● online, ○ heard from), each
    group sorted by name; you count as online."""
    online = sorted(p.name for p in peers if p.online)
    away = sorted(p.name for p in peers if not p.online)
    out = Text()
    out.append(f"{len(online) + 1} online", "bold")
    out.append(f", {len(away)} heard from earlier\n" if away else "\n")
    out.append(f"● {me_name} (you)\n")
    for n in online:
        out.append(f"● {n}\n")
    for n in away:
        out.append(f"○ {n}\n", "dim")
    return out


# ---------------------------------------------------------------- /mentions


def mentions_text(found: Sequence[tuple[str, LogEntry]], me_name: str, tz: tzinfo | None) -> Text:
    """``/mentions``: one line per message for you (``found``: channel and stored
    message, newest first): when its author sent it, the channel, the author, and the
    text (a reply's without its quote) on one line of at most 200 characters."""
    out = Text()
    for channel, e in found:
        c = decode_content(e.content)
        when = datetime.fromtimestamp(e.lamport / 1000.0, tz)
        body = c.text.split("\n", 1)[-1] if c.kind == "reply" else c.text
        out.append(f"{when:%Y-%m-%d %H:%M} ", "dim")
        out.append(f"#{channel} ", "bold")
        out.append(f"{visible(c.name or e.sender_id[:8])}: ", "bold")
        out.append(visible(body.replace("\n", " ")[:200]) + "\n")
    if not found:
        out.append(f"nobody mentioned @{me_name} yet", "dim")
    return out


# ---------------------------------------------------------------- /info


@dataclass(frozen=True, slots=True)
class Holders:
    """What ``/info``'s "who has it" is built from."""

    members: Sequence[str]
    """The sender ids heard from in the channel but you (and the author, if not heard)."""
    found: HaveIt | None
    """Who showed they have it (:func:`app.tui.readers.who_has`); None: not read."""
    error: str = ""
    """Why it could not be read (a store error), if so."""


def info_text(
    row: Row,
    *,
    tz: tzinfo | None,
    me: str,
    label: Label,
    stored: StoredMessage | None = None,
    have: Collection[str] = (),
    holders: Holders | None = None,
) -> Text:
    """``/info`` of the message ``row``: author, times, ids, delivery state, reactions;
    from its ``stored`` copy (if any) the retrieval hint and the messages it depends
    on (✓: ``have`` them); else the dependencies it waits for; then who has it.
    ``me`` is your sender id."""
    out = Text()

    def field(name: str, value: str) -> None:
        out.append(f"{name:<18}", "bold")
        out.append(f"{visible(value)}\n")  # ids are a peer's: any text up to 256 chars

    sent = datetime.fromtimestamp(row.sent_ms / 1000.0, tz)
    arrived = datetime.fromtimestamp(row.time_ms / 1000.0, tz)
    field("author", row.who if row.name else "?")
    field("sender id", row.sender_id)
    field("sent", sent.strftime("%Y-%m-%d %H:%M:%S") + "  (author's clock)")
    field(
        "arrived" if not row.own else "typed",
        arrived.strftime("%Y-%m-%d %H:%M:%S") + "  (this screen's clock)",
    )
    field("message id", row.message_id or f"(not made yet: outbox line {row.local_id})")
    lamport = row.key[0] if row.message_id else None
    field("lamport", str(lamport) if lamport is not None else "—")
    if row.own:
        field("delivery", state_label(row.own_state))
    elif row.waiting:
        field("delivery", f"waiting for {len(row.waiting_for)} earlier message(s)")
    else:
        field("delivery", "delivered (in causal order)")
    if row.lost:
        field("lost before it", str(row.lost))
    if row.reactions and not row.deleted:  # who reacted with what (issue 27 item 9)
        field("reactions", "")
        for emoji, who in row.reactions.items():
            names = ", ".join("you" if sid == me else label(sid) for sid in who)
            out.append(f"  {emoji} {len(who)}  {visible(names)}\n")
    if stored is not None:
        field("retrieval hint", stored.retrieval_hint.hex() if stored.retrieval_hint else "—")
        field("depends on", f"{len(stored.causal_history)} message(s)")
        for dep in stored.causal_history[-12:]:
            out.append(f"  {'✓' if dep in have else '·'} {short_id(dep)}\n", "dim")
        if len(stored.causal_history) > 12:
            out.append(f"  … and {len(stored.causal_history) - 12} older\n", "dim")
    elif row.waiting_for:
        field("missing", "")
        for dep in sorted(row.waiting_for):
            state = "  (arrived, waits in its turn)" if dep in row.arrived else ""
            out.append(f"  ⋯ {short_id(dep)}{state}\n", "dim")
    if holders is not None:
        out.append_text(_who_has_text(row, holders, me, label))
    return out


def _who_has_text(row: Row, holders: Holders, me: str, label: Label) -> Text:
    """``/info``'s "who has it": the members whose causal histories (the messages after
    it in the store) or bloom filters show they have the message."""
    out = Text()
    if holders.found is None:  # a read error must not lose the rest of /info
        out.append(f"{'who has it':<18}", "bold")
        out.append(f"not known ({visible(holders.error)[:60]})\n", "dim")
        return out
    by_history: Mapping[str, str] = {
        **holders.found.by_history,
        **{sid: "" for sid in row.seen_by if sid not in holders.found.by_history},
    }  # an acknowledgement by a history beyond the scan
    shown = {**dict.fromkeys(by_history, "causal history"),
             **{s: "bloom filter" for s in holders.found.by_filter}}  # fmt: skip
    members = list(holders.members)
    for sid in shown:
        if sid not in members and sid != me:
            members.append(sid)
    others = [m for m in members if m != row.sender_id]
    if not others:  # nobody but the author and you heard from: nothing to say
        return out
    found = holders.found
    count = sum(1 for m in others if m in shown)
    out.append(f"{'who has it':<18}", "bold")
    out.append(f"{count} of {len(others)} other member{'s' if len(others) != 1 else ''}"
               f" (besides {'you' if row.own else 'the author and you'})\n")  # fmt: skip
    for sid in sorted(others, key=lambda m: (m not in shown, label(m))):
        name = visible(label(sid))
        how = shown.get(sid)
        if how is not None:
            out.append(f"  ✓ {name}  ", "")
            out.append(f"{how}\n", "dim")
        else:
            more = "" if found.complete else f" in the {found.scanned} messages after it"
            out.append(f"  · {name}  no sign yet{more}\n", "dim")
    return out


# ---------------------------------------------------------------- /stats

_STATS_ORDER = ("connected", "counters", "store", "channels")


def stats_text(stats: Mapping[str, object]) -> str:
    """``/stats`` as readable lines (``name: value``, a nested table indented below its
    name, a list on one line): connected, the counters, the store, then each channel;
    keys sorted at every depth, so the counters are on the first screen."""
    ordered = {k: _sorted(v) for k, v in sorted(stats.items(), key=_stats_order)}
    return "\n".join(_stats_lines(ordered))


def _stats_order(item: tuple[str, object]) -> tuple[int, str]:
    key = item[0]
    return (_STATS_ORDER.index(key) if key in _STATS_ORDER else len(_STATS_ORDER), key)


def _stats_lines(value: Mapping[str, object], depth: int = 0) -> list[str]:
    pad = "  " * depth
    out: list[str] = []
    for key, item in value.items():
        if isinstance(item, dict):
            if item:
                out.append(f"{pad}{key}:")
                out += _stats_lines(item, depth + 1)
            else:
                out.append(f"{pad}{key}: none")
        elif isinstance(item, list | tuple):
            out.append(f"{pad}{key}: {', '.join(str(x) for x in item) or 'none'}")
        elif item is None:
            out.append(f"{pad}{key}: -")
        else:
            out.append(f"{pad}{key}: {item}")
    return out


def _sorted(value: object) -> object:
    """``value`` with its dicts' keys sorted, at every depth."""
    if isinstance(value, dict):
        return {k: _sorted(value[k]) for k in sorted(value)}
    return value
