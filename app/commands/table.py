"""The TUI's slash commands: their table, parsing, and tab completion.

The headless mode's commands (:mod:`app.commands.line`) plus the interactive ones
(``/info``, ``/search``, ``/passphrase``, ``/theme``). ``//text`` sends a line
that starts with a slash.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from app.commands.emoji import complete_shortcode

__all__ = ["COMMANDS", "Command", "CommandSpec", "complete", "parse"]


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One slash command."""

    name: str
    usage: str
    help: str
    needs_arg: bool = False
    completes: str | None = None
    """What its argument completes to: ``"channel"``, ``"joined"``, ``"name"`` or None."""


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("join", "/join NAME", "join channel NAME (with the /passphrase, if set; /j)",
                True, "channel"),
    CommandSpec("leave", "/leave [NAME]", "leave NAME (default: this channel; /part)", False,
                "joined"),
    CommandSpec("switch", "/switch NAME", "go to channel NAME (also Ctrl+N/P, Alt+1..9)", True,
                "joined"),
    CommandSpec("nick", "/nick NAME", "change the name shown with your messages", True),
    CommandSpec("me", "/me ACTION", "send an action: * alice waves", True),
    CommandSpec("reply", "/reply TEXT", "answer the selected message (Ctrl+Up), quoted above",
                True),
    CommandSpec("react", "/react EMOJI", "react to the selected (or last) message; again: undo",
                True),
    CommandSpec("edit", "/edit TEXT", "new text for your selected (or last) message", True),
    CommandSpec("delete", "/delete", "withdraw your selected message: 'message deleted'"),
    CommandSpec("copy", "/copy", "put the selected (or last) message's text on the clipboard "
                "(OSC 52: works over ssh; tmux needs set-clipboard on)"),
    CommandSpec("send", "/send PATH", "send a file (at most 16 MiB) to this channel", True),
    CommandSpec("save", "/save [PATH]", "keep the selected (or last) file received, in "
                "DATA_DIR/files or at PATH"),
    CommandSpec("who", "/who", "who is here: peers heard from, last seen (F2 toggles the list)"),
    CommandSpec("names", "/names", "the names in this channel, online first"),
    CommandSpec("topic", "/topic [TEXT]", "set this channel's topic (without TEXT: show it)"),
    CommandSpec("mentions", "/mentions", "the newest lines for you, in every channel"),
    CommandSpec("highlight", "/highlight [WORD]", "add (or remove) a word that highlights a line"),
    CommandSpec("read", "/read", "mark every channel read (Alt+A: next channel with news)"),
    CommandSpec("away", "/away [TEXT]", "tell the channels you are away (with TEXT); "
                "without TEXT: back"),
    CommandSpec("mute", "/mute [mentions]", "this channel: no unread count, bell or "
                "notification (mentions: only lines for you); marked ⊘ / ⊙"),
    CommandSpec("unmute", "/unmute", "this channel: every message counts again"),
    CommandSpec("notify", "/notify [on|off]", "desktop notifications of mentions elsewhere"),
    CommandSpec("info", "/info", "details of the selected message (Ctrl+Up/Down select)"),
    CommandSpec("search", "/search [-a] TEXT", "find in this channel (Ctrl+F); -a: in all "
                "channels (Alt+F)", False),
    CommandSpec("goto", "/goto DATE", "the first message of DATE (YYYY-MM-DD) in this "
                "channel (Ctrl+Home: the very first, Ctrl+End: the newest)", True),
    CommandSpec("retry", "/retry", "send again the messages that failed (also Ctrl+R)"),
    CommandSpec("create", "/create NAME", "create members channel NAME: you are its admin",
                True),
    CommandSpec("invite", "/invite [TTL] [approve]", "a one-line invite code to this members "
                "channel (single use, 24 h; approve: you let each newcomer in)"),
    CommandSpec("approve", "/approve NAME", "let in a newcomer waiting on an 'approve' invite",
                True),
    CommandSpec("deny", "/deny NAME", "refuse a newcomer waiting on an 'approve' invite", True),
    CommandSpec("members", "/members", "this members channel's members: role, fingerprint, "
                "online, verified"),
    CommandSpec("remove", "/remove NAME", "remove a member (admin): the others get new keys",
                True, "name"),
    CommandSpec("admin", "/admin NAME", "make a member an admin (admin)", True, "name"),
    CommandSpec("unadmin", "/unadmin NAME", "make an admin a plain member (admin)", True,
                "name"),
    CommandSpec("verify", "/verify NAME [yes]", "a safety number to compare with NAME out of "
                "band; 'yes' marks NAME verified", True, "name"),
    CommandSpec("msg", "/msg NAME TEXT", "a direct message to NAME, a member of this channel",
                True, "name"),
    CommandSpec("query", "/query NAME", "open the direct conversation with NAME", True, "name"),
    CommandSpec("forget", "/forget NAME", "forget a channel you left (history and keys; your "
                "identity stays)", True),
    CommandSpec("passphrase", "/passphrase", "set the passphrase for the next /join"),
    CommandSpec("theme", "/theme", "switch between dark and light (also F3)"),
    CommandSpec("stats", "/stats", "protocol counters and buffer sizes"),
    CommandSpec("help", "/help", "keys, commands and what the markers mean (also F1)"),
    CommandSpec("quit", "/quit", "leave sdschat; everything is saved (also Ctrl+Q)"),
)  # fmt: skip

_BY_NAME = {c.name: c for c in COMMANDS}

ALIASES = {"j": "join", "part": "leave"}
"""Other names people type, as in IRC clients (``/j``, ``/part``)."""


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed input line: ``name`` is ``"say"``, a command name, or ``"error"``."""

    name: str
    arg: str = ""


def parse(line: str) -> Command | None:
    """Parse a typed line; ``None`` for a blank one."""
    line = line.rstrip("\r\n")
    if not line.strip():
        return None
    if line.startswith("//"):
        return Command("say", line[1:])
    if not line.startswith("/"):
        return Command("say", line)
    word, _, rest = line[1:].partition(" ")
    name = ALIASES.get(word.lower(), word.lower())
    rest = rest.strip()
    spec = _BY_NAME.get(name)
    if spec is None:
        return Command("error", f"unknown command /{word} (try /help)")
    if spec.needs_arg and not rest:
        return Command("error", f"usage: {spec.usage}")
    return Command(name, rest)


def _bare(candidate: str) -> str:
    """A completion candidate without the fingerprint of a shared name (``bob (3f9a)``)."""
    name, sep, rest = candidate.partition(" (")
    return name if sep and rest.endswith(")") else candidate


def _common_prefix(words: list[str]) -> str:
    if not words:
        return ""
    first, last = min(words), max(words)
    i = 0
    while i < len(first) and i < len(last) and first[i] == last[i]:
        i += 1
    return first[:i]


def complete(
    line: str,
    cursor: int,
    *,
    names: Iterable[str] = (),
    joined: Iterable[str] = (),
    known_channels: Iterable[str] = (),
) -> tuple[str, int, list[str]] | None:
    """Tab completion of the word before ``cursor``.

    Completes command names (``/jo`` -> ``/join ``), channel names after
    ``/join``, ``/leave`` and ``/switch``, and participant names anywhere else
    (``@bo`` -> ``@bob ``; a bare name at the start of the line gets ``": "``).
    Returns ``(new_line, new_cursor, candidates)`` or ``None`` when nothing
    matches; with several candidates the word is extended to their common prefix.
    """
    before, after = line[:cursor], line[cursor:]
    start = max(before.rfind(" "), -1) + 1
    word = before[start:]
    head = before[:start]
    candidates: list[str]
    suffix = " "
    if start == 0 and word.startswith("/") and not word.startswith("//"):
        stem = word[1:].lower()
        candidates = ["/" + c.name for c in COMMANDS if c.name.startswith(stem)]
    elif word.startswith(":") and complete_shortcode(word):  # :thu -> :thumbs_up:
        candidates = complete_shortcode(word)
    else:
        cmd = head.split(" ", 1)[0].lower() if head.startswith("/") else ""
        spec = _BY_NAME.get(ALIASES.get(cmd[1:], cmd[1:])) if cmd else None
        if spec is not None and spec.completes in ("channel", "joined") and head.count(" ") == 1:
            pool = set(joined)
            if spec.completes == "channel":
                pool |= set(known_channels)
            stem = word.lstrip("#")
            candidates = sorted(c for c in pool if c.startswith(stem))
        else:
            at = word.startswith("@")
            stem = word[1:] if at else word
            if not stem and not at:
                return None
            pool_names = sorted({n for n in names if n})
            matches = [n for n in pool_names if n.lower().startswith(stem.lower())]
            candidates = [("@" if at else "") + n for n in matches]
            if start == 0 and not at:
                suffix = ": "
    if not candidates:
        return None
    if after.startswith(" "):
        suffix = suffix.rstrip()
    # a name two members share comes as "bob (3f9a)", "bob (77b2)": listed so, typed "bob"
    inserts = sorted({_bare(c) for c in candidates})
    if len(inserts) == 1:
        new_word = inserts[0] + suffix
    else:
        prefix = _common_prefix(inserts)
        new_word = prefix if len(prefix) > len(word) else word
    new_line = head + new_word + after
    return new_line, len(head + new_word), candidates
