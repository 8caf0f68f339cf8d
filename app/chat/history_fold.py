"""The folded ``sdschat history``: a channel's log lines folded by
:class:`app.chat.content.ConversationView` (``app/chat/history.py``'s docstring describes the
output; ``docs/content.md`` the rules)."""

from __future__ import annotations

from dataclasses import dataclass, field

from app.chat.content import ConversationView, ViewItem
from app.chat.log_line import LogLine

__all__ = ["FoldedLine", "fold", "fold_lines"]


@dataclass(frozen=True, slots=True)
class FoldedLine(LogLine):
    """A line of the folded view: a :class:`LogLine` whose ``kind``/``text`` say what
    to show (``text`` is one line with "(edited)", the reactions and a file's progress;
    a reply's is ``"TARGET\nTEXT"`` as :mod:`app.chat.lines` writes typed kinds),
    and whose JSON adds the view's fields (module docstring)."""

    item: ViewItem | None = None
    names: dict[str, str] = field(default_factory=dict)
    """sender id -> name, as the lines name their authors (a reply's target's too)."""

    def to_json(self) -> dict[str, object]:
        obj = LogLine.to_json(self)
        if self.item is not None:
            obj.update(kind=self.item.kind, content=self.item.text, **self.item.to_json())
            reply = obj.get("reply_to")
            if isinstance(reply, dict) and reply.get("sender") in self.names:
                reply["name"] = self.names[reply["sender"]]  # the target's author, as labelled
        return obj


def fold(lines: list[LogLine]) -> tuple[ConversationView, list[tuple[LogLine, ViewItem]]]:
    """The conversation view of ``lines`` and each shown item with its log line."""
    view = ConversationView((x.message_id, x.sender_id, x.lamport, x.content) for x in lines)
    by_id = {x.message_id: x for x in lines}
    return view, [(by_id[item.message_id], item) for item in view.items()]


def fold_lines(lines: list[LogLine]) -> list[LogLine]:
    """``lines`` folded (module docstring): one :class:`FoldedLine` per shown item."""
    _view, items = fold(lines)
    names = {x.sender_id: str(x.label or x.name) for x in lines if x.label or x.name}
    out: list[LogLine] = []
    for line, item in items:
        out.append(
            FoldedLine(
                position=line.position,
                message_id=line.message_id,
                sender_id=line.sender_id,
                name=line.name,  # the roster's in a members channel (app/chat/authors.py)
                label=line.label,
                kind=item.kind,
                text=_folded_text(item, names),
                lamport=line.lamport,
                state=line.state,
                digest=line.digest,
                conflict=line.conflict,
                content=line.content,
                was_lost=line.was_lost,
                recovered=line.recovered,
                missing_before=line.missing_before,
                refused=line.refused,
                person=line.person,
                device=line.device,
                item=item,
                names=names,
            )
        )
    return out


def _folded_text(item: ViewItem, names: dict[str, str]) -> str:
    """The one-line text of a folded item (made visible by the printer)."""
    if item.deleted:
        return "(message deleted)"
    text = item.text
    if item.reply is not None:
        r = item.reply
        who = names.get(r.target_sender or "", r.target_name or "?")
        about = f"(re {who}: {r.quote}) " if r.present else ""
        text = f"{r.target_id}\n{about}{item.text}"
    elif item.file is not None:
        f = item.file
        status = "complete" if f.intact else "sha256 MISMATCH" if f.complete else "segments"
        text = f"[file {f.info.name} {f.info.size} bytes, {f.present}/{f.total} {status}]"
    if item.edited:
        text += " (edited)"
    if item.reactions:
        parts = [
            f"{e} " + ", ".join(names.get(s, s[:8]) for s in senders)
            for e, senders in item.reactions.items()
        ]
        text += "  [" + "  ".join(parts) + "]"
    return text
