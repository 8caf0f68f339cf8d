"""The slash commands, once for both front ends: their table, the parser of a typed
line, tab completion, both ``/help`` texts, and :func:`run_command`.

Each :class:`CommandSpec` of :data:`COMMANDS` holds a command's name, aliases, what
its argument completes to, whether a mistyped line can wait for the start (``/quit``
while sdschat is still joining), its handler (:mod:`app.commands.handlers`), and, per
front end that offers it, a :class:`Usage`: the usage line, the help text and whether
it needs an argument. The two front ends differ where they differ by nature: the
TUI's ``/reply TEXT`` answers the selected message where headless mode's
``/reply ID TEXT`` names one; ``/info``, ``/search`` or ``/theme`` are the TUI's only.

A line is parsed for one front end (:func:`parse`): ``text`` is a message (``say``),
``//text`` the message ``/text``, ``/name arg`` a command of that front end, and
anything else a ``Command("error", why)``. :func:`run_command` carries out a parsed
line through the handler, against the front end's :class:`~app.commands.front.FrontEnd`.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from typing import TypedDict

from app.commands import handlers as h
from app.commands.emoji import complete_shortcode
from app.commands.emoji import expand as expand_emoji
from app.commands.front import HEADLESS, TUI, Front, FrontEnd

__all__ = [
    "ALIASES",
    "COMMANDS",
    "HEADLESS_HELP",
    "Command",
    "CommandSpec",
    "Usage",
    "complete",
    "help_rows",
    "parse",
    "run_command",
    "spec_of",
]

Handler = Callable[[FrontEnd, str, str], Awaitable[None]]
"""``handler(front_end, name, arg)``: carries out command ``name`` (see handlers.py)."""


@dataclass(frozen=True, slots=True)
class Usage:
    """How one front end offers a command."""

    usage: str
    help: str
    """One line in /help (headless mode: ``\\n`` continues it, indented); "": unlisted."""
    needs_arg: bool = False


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """One slash command."""

    name: str
    handler: Handler
    tui: Usage | None = None
    """How the TUI offers it (None: it does not)."""
    headless: Usage | None = None
    """How headless mode offers it (None: it does not)."""
    aliases: tuple[str, ...] = ()
    completes: str | None = None
    """What its argument completes to: ``"channel"``, ``"joined"``, ``"name"`` or None."""
    shortcodes: bool = False
    """``:thumbsup:`` in its argument is sent as the emoji (where the front end does)."""
    at_start: bool = False
    """Carried out at once, also while sdschat starts (no node needed)."""

    def usage_in(self, front: Front) -> Usage | None:
        """How ``front`` offers it, or None."""
        return self.tui if front == TUI else self.headless

    @property
    def usage(self) -> str:
        """The TUI's usage line (the completion list and the help screen show it)."""
        return self.tui.usage if self.tui is not None else ""

    @property
    def help(self) -> str:
        return self.tui.help if self.tui is not None else ""

    @property
    def needs_arg(self) -> bool:
        return self.tui is not None and self.tui.needs_arg


class _Fronts(TypedDict):
    tui: Usage
    headless: Usage


def _both(usage: str, help_tui: str, help_headless: str, needs_arg: bool = False,
          headless_usage: str | None = None) -> _Fronts:  # fmt: skip
    """A command both front ends offer: its usage (the same but where given), each
    one's help text, whether it needs an argument."""
    return {"tui": Usage(usage, help_tui, needs_arg),
            "headless": Usage(headless_usage or usage, help_headless, needs_arg)}  # fmt: skip


COMMANDS: tuple[CommandSpec, ...] = (
    CommandSpec("join", h.join, aliases=("j",), completes="channel", **_both(
        "/join NAME", "join channel NAME (asks its passphrase unless /passphrase set one; /j)",
        "join channel NAME (also /j)", True)),
    CommandSpec("leave", h.leave, aliases=("part",), completes="joined", **_both(
        "/leave [NAME]", "leave NAME (default: this channel; /part)",
        "leave NAME (default: current channel; also /part)")),
    CommandSpec("switch", h.switch, completes="joined", **_both(
        "/switch NAME", "go to channel NAME (also Ctrl+N/P, Alt+1..9)",
        "make NAME the current channel", True)),
    CommandSpec("nick", h.nick, **_both(
        "/nick NAME", "change the name shown with your messages", "change your display name",
        True)),
    CommandSpec("me", h.say, shortcodes=True, **_both(
        "/me ACTION", "send an action: * alice waves", "send an action", True)),
    CommandSpec("reply", h.about_message, shortcodes=True,
        tui=Usage("/reply TEXT", "answer the selected message (Ctrl+Up), quoted above", True),
        headless=Usage("/reply ID TEXT", "answer message ID (full id or 4+ hex prefix)", True)),
    CommandSpec("react", h.about_message, shortcodes=True,
        tui=Usage("/react EMOJI", "react to the selected (or last) message; again: undo", True),
        headless=Usage("/react ID EMOJI", "react to message ID (again: take it off)", True)),
    CommandSpec("edit", h.about_message, shortcodes=True,
        tui=Usage("/edit TEXT", "new text for your selected (or last) message", True),
        headless=Usage("/edit ID TEXT", "replace the text of your message ID", True)),
    CommandSpec("delete", h.about_message,
        tui=Usage("/delete", "withdraw your selected message: 'message deleted'"),
        headless=Usage("/delete ID", "delete your message ID", True)),
    CommandSpec("copy", h.copy, tui=Usage("/copy", "put the selected (or last) message's text "
        "on the clipboard (OSC 52: works over ssh; tmux needs set-clipboard on)")),
    CommandSpec("send", h.send, **_both(
        "/send PATH", "send a file (at most 16 MiB) to this channel",
        "send a file (at most 16 MiB)", True)),
    CommandSpec("save", h.save,
        tui=Usage("/save [PATH]", "keep the selected (or last) file received, in "
                  "DATA_DIR/files or at PATH"),
        headless=Usage("/save ID [PATH]", "save received file ID (default: DATA_DIR/files/)",
                       True)),
    CommandSpec("who", h.who, **_both(
        "/who", "who is here: peers heard from, last seen (F2 toggles the list)",
        "participants heard from in the current channel")),
    CommandSpec("names", h.names, tui=Usage("/names", "the names in this channel, online first")),
    CommandSpec("topic", h.topic, shortcodes=True, **_both(
        "/topic [TEXT]", "set this channel's topic (without TEXT: show it)",
        "set (or show) the channel's topic")),
    CommandSpec("mentions", h.mentions,
        tui=Usage("/mentions", "the newest lines for you, in every channel")),
    CommandSpec("highlight", h.highlight,
        tui=Usage("/highlight [WORD]", "add (or remove) a word that highlights a line")),
    CommandSpec("read", h.read,
        tui=Usage("/read", "mark every channel read (Alt+A: next channel with news)")),
    CommandSpec("away", h.away, tui=Usage("/away [TEXT]", "tell the channels you are away "
        "(with TEXT); without TEXT: back")),
    CommandSpec("mute", h.mute, tui=Usage("/mute [mentions]", "this channel: no unread count, "
        "bell or notification (mentions: only lines for you); marked ⊘ / ⊙")),
    CommandSpec("unmute", h.mute,
        tui=Usage("/unmute", "this channel: every message counts again")),
    CommandSpec("notify", h.notify,
        tui=Usage("/notify [on|off]", "desktop notifications of mentions elsewhere")),
    CommandSpec("info", h.info,
        tui=Usage("/info", "details of the selected message (Ctrl+Up/Down select)")),
    CommandSpec("search", h.search, tui=Usage("/search [-a] TEXT", "find in this channel "
        "(Ctrl+F); -a: in all channels (Alt+F)")),
    CommandSpec("goto", h.goto, tui=Usage("/goto DATE", "the first message of DATE "
        "(YYYY-MM-DD) in this channel (Ctrl+Home: the very first, Ctrl+End: the newest)",
        True)),
    CommandSpec("retry", h.retry, **_both(
        "/retry", "send again the messages that failed (also Ctrl+R)",
        "send again the messages that failed")),
    CommandSpec("create", h.members, **_both(
        "/create NAME", "create members channel NAME: you are its admin",
        "create members channel NAME (you are its admin)", True)),
    CommandSpec("invite", h.members, **_both(
        "/invite [TTL] [approve]", "a one-line invite code to this members channel (single "
        "use, 24 h; approve: you let each newcomer in)", "a one-line invite code to this "
        "members channel (TTL e.g. 2h;\ndefault 24h; approve: you let each newcomer in with "
        "/approve NAME)")),
    CommandSpec("approve", h.members, **_both(
        "/approve NAME", "let in a newcomer waiting on an 'approve' invite",
        "let in a newcomer who redeemed an 'approve' invite (/deny NAME refuses)", True)),
    CommandSpec("deny", h.members, **_both(
        "/deny NAME", "refuse a newcomer waiting on an 'approve' invite", "", True)),
    CommandSpec("members", h.members, **_both(
        "/members", "this members channel's members: role, fingerprint, online, verified",
        "the members of this channel: role, fingerprint, online")),
    CommandSpec("remove", h.members, completes="name", **_both(
        "/remove NAME", "remove a member (admin): the others get new keys",
        "remove a member (admin): the others get new keys", True)),
    CommandSpec("admin", h.members, completes="name", **_both(
        "/admin NAME", "make a member an admin (admin)", "make a member an admin (admin)",
        True)),
    CommandSpec("unadmin", h.members, completes="name", **_both(
        "/unadmin NAME", "make an admin a plain member (admin)",
        "make an admin a plain member (admin)", True)),
    CommandSpec("verify", h.members, completes="name", **_both(
        "/verify NAME [yes]", "a safety number to compare with NAME out of band; 'yes' marks "
        "NAME verified", "a safety number to compare with NAME out of band (then /verify "
        "NAME yes)", True, headless_usage="/verify NAME")),
    CommandSpec("msg", h.members, completes="name", **_both(
        "/msg NAME TEXT", "a direct message to NAME, a member of this channel",
        "a direct message to NAME, a member of this channel (end-to-end encrypted)", True)),
    CommandSpec("query", h.members, completes="name", **_both(
        "/query NAME", "open the direct conversation with NAME",
        "open the direct conversation with NAME and make it current", True)),
    CommandSpec("link", h.link, **_both(
        "/link", "link a new device of yours: a code (and QR code) to type into it",
        "link a new device of yours: a code for\nsdschat join --link CODE on it")),
    CommandSpec("unlink", h.unlink, **_both(
        "/unlink DEVICE", "revoke another device of yours (its name or the start of its id)",
        "revoke another device of yours (its name or\nthe start of its id)", True)),
    CommandSpec("forget", h.forget, **_both(
        "/forget NAME", "forget a channel you left (history and keys; your identity stays)",
        "forget a channel you left (its history and keys); your identity stays", True)),
    CommandSpec("passphrase", h.passphrase, at_start=True,
        tui=Usage("/passphrase", "set the passphrase for the next /join")),
    CommandSpec("theme", h.theme, at_start=True,
        tui=Usage("/theme", "switch between dark and light (also F3)")),
    CommandSpec("stats", h.stats, **_both(
        "/stats", "protocol counters and buffer sizes", "counters")),
    CommandSpec("help", h.help_, at_start=True, **_both(
        "/help", "keys, commands and what the markers mean (also F1)", "this help")),
    CommandSpec("quit", h.quit_, at_start=True, **_both(
        "/quit", "leave sdschat; everything is saved (also Ctrl+Q)",
        "exit (everything is saved)")),
)  # fmt: skip
"""Every command, in the order both /help texts list them."""

SAY = CommandSpec("say", h.say, shortcodes=True)
"""A line that is no command: a message to the current channel."""

PASTE = CommandSpec("paste", h.paste)
"""A paste sent as a text file: nobody types it; the TUI's paste dialog makes it."""

_UNLISTED = {c.name: c for c in (SAY, PASTE)}
"""The commands nobody types by name (no usage, not in /help)."""

_BY_NAME = {c.name: c for c in COMMANDS}

ALIASES = {alias: c.name for c in COMMANDS for alias in c.aliases}
"""Other names people type, as in IRC clients (``/j``, ``/part``)."""


def spec_of(name: str) -> CommandSpec | None:
    """The command ``name`` (``say`` for a message line), or None."""
    return _UNLISTED.get(name) or _BY_NAME.get(name)


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed input line: ``name`` is ``"say"``, a command name, or ``"error"`` (``arg``
    then says what is wrong)."""

    name: str
    arg: str = ""


def _missing_arg(front: Front, spec: CommandSpec, usage: Usage) -> str:
    if front == HEADLESS:
        return f"/{spec.name} needs an argument (try /help)"
    return f"usage: {usage.usage}"


def parse(line: str, front: Front = TUI) -> Command | None:
    """Parse a typed line for ``front`` (the commands it offers); ``None`` for a blank
    one."""
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
    usage = spec.usage_in(front) if spec is not None else None
    if spec is None or usage is None:
        return Command("error", f"unknown command /{word} (try /help)")
    if usage.needs_arg and not rest:
        return Command("error", _missing_arg(front, spec, usage))
    return Command(name, rest)


async def run_command(fe: FrontEnd, cmd: Command) -> None:
    """Carry out the parsed line ``cmd`` in front end ``fe`` through its handler; an
    ``error`` line is refused. Raises what the handler raises (see
    :mod:`app.commands.front`)."""
    spec = spec_of(cmd.name)
    if spec is None:  # "error", or a name the table does not know
        fe.refuse(cmd.arg if cmd.name == "error" else f"unknown command /{cmd.name}")
        return
    assert spec.name in _UNLISTED or spec.usage_in(fe.front) is not None, cmd.name
    arg = cmd.arg
    if spec.shortcodes and fe.shortcodes:
        arg = expand_emoji(arg)  # :thumbsup: -> 👍, sent as the emoji (app/commands/emoji.py)
    await spec.handler(fe, spec.name, arg)


# ---------------------------------------------------------------- help


def help_rows(front: Front) -> list[tuple[str, str]]:
    """(usage, help) of every command ``front`` lists in /help, in table order."""
    rows = []
    for c in COMMANDS:
        usage = c.usage_in(front)
        if usage is not None and usage.help:
            rows.append((usage.usage, usage.help))
    return rows


def _headless_help() -> str:
    """Headless mode's ``/help``: one command a line, the help at column 16."""
    lines = ["text           send text to the current channel (//text sends /text)"]
    for usage, text in help_rows(HEADLESS):
        head = usage.ljust(14) + " " if len(usage) <= 14 else usage + "  "
        first, *more = text.split("\n")
        lines += [head + first, *(" " * 15 + m for m in more)]
    return "\n".join(lines)


HEADLESS_HELP = _headless_help()
"""What ``/help`` answers in headless mode (an ``info`` event)."""


# ---------------------------------------------------------------- completion


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
    """Tab completion (in the TUI) of the word before ``cursor``.

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
        candidates = ["/" + c.name for c in COMMANDS
                      if c.tui is not None and c.name.startswith(stem)]  # fmt: skip
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
