"""Parsing what a person types: a message line or a slash command (headless mode and TUI).

=====================  ================================================
``text``               send ``text`` to the current channel
``//text``             send ``/text`` (a line that starts with a slash)
``/me waves``          send an action (shown as ``* alice waves``)
``/join NAME``         join channel NAME (same passphrase as at start; none = public); ``/j``
``/leave [NAME]``      leave NAME (default: the current channel); ``/part``
``/switch NAME``       make NAME the current channel
``/nick NAME``         change the display name sent with our messages
``/who``               list the participants heard from in the current channel
``/reply ID TEXT``     answer message ID (full id or a 4+ hex prefix)
``/react ID EMOJI``    react to message ID (the same again takes it off)
``/edit ID TEXT``      replace the text of your message ID
``/delete ID``         delete your message ID
``/topic [TEXT]``      set the channel's topic (no text: show it)
``/send PATH``         send a file (at most 16 MiB)
``/save ID [PATH]``    save received file ID (default: DATA_DIR/files/)
``/retry``             send again the messages that failed
``/create NAME``       create members channel NAME, with you as its admin
``/invite [TTL]``      a one-line invite code to the current members channel
``/members``           the current channel's members (role, fingerprint, online)
``/remove NAME``       remove a member (admin); the others get new keys
``/verify NAME``       a safety number to compare with NAME out of band
``/forget NAME``       forget a channel you left (its history and keys)
``/msg NAME TEXT``     a direct message to member NAME of the current channel
``/query NAME``        open the direct conversation with NAME (current channel)
``/stats``             show counters
``/help``              show this help
``/quit``              leave the program (everything is saved)
=====================  ================================================
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HELP", "Command", "parse_line"]

HELP = """\
text           send text to the current channel (//text sends /text)
/me ACTION     send an action
/join NAME     join channel NAME (also /j)
/leave [NAME]  leave NAME (default: current channel; also /part)
/switch NAME   make NAME the current channel
/nick NAME     change your display name
/who           participants heard from in the current channel
/reply ID TEXT answer message ID (full id or 4+ hex prefix)
/react ID EMOJI  react to message ID (again: take it off)
/edit ID TEXT  replace the text of your message ID
/delete ID     delete your message ID
/topic [TEXT]  set (or show) the channel's topic
/send PATH     send a file (at most 16 MiB)
/save ID [PATH]  save received file ID (default: DATA_DIR/files/)
/retry         send again the messages that failed
/create NAME   create members channel NAME (you are its admin)
/invite [TTL] [approve]  a one-line invite code to this members channel (TTL e.g. 2h;
               default 24h; approve: you let each newcomer in with /approve NAME)
/approve NAME  let in a newcomer who redeemed an 'approve' invite (/deny NAME refuses)
/members       the members of this channel: role, fingerprint, online
/remove NAME   remove a member (admin): the others get new keys
/verify NAME   a safety number to compare with NAME out of band (then /verify NAME yes)
/forget NAME   forget a channel you left (its history and keys); your identity stays
/msg NAME TEXT a direct message to NAME, a member of this channel (end-to-end encrypted)
/query NAME    open the direct conversation with NAME and make it current
/stats         counters
/help          this help
/quit          exit (everything is saved)"""

_COMMANDS = {
    "me": True,
    "join": True,
    "leave": False,
    "switch": True,
    "nick": True,
    "who": False,
    "reply": True,
    "react": True,
    "edit": True,
    "delete": True,
    "topic": False,
    "send": True,
    "save": True,
    "retry": False,
    "create": True,
    "invite": False,
    "members": False,
    "remove": True,
    "admin": True,
    "unadmin": True,
    "verify": True,
    "forget": True,
    "msg": True,
    "query": True,
    "approve": True,
    "deny": True,
    "stats": False,
    "help": False,
    "quit": False,
}


@dataclass(frozen=True, slots=True)
class Command:
    """A parsed line.

    ``name`` is ``"say"`` for an ordinary message (``arg`` is its text), a
    command name from the module table, or ``"error"`` (``arg`` says what is
    wrong).
    """

    name: str
    arg: str = ""


def parse_line(line: str) -> Command | None:
    """Parse one typed line; ``None`` for a blank line."""
    line = line.rstrip("\r\n")
    if not line.strip():
        return None
    if line.startswith("//"):
        return Command("say", line[1:])
    if not line.startswith("/"):
        return Command("say", line)
    word, _, rest = line[1:].partition(" ")
    name = {"j": "join", "part": "leave"}.get(word.lower(), word.lower())
    rest = rest.strip()
    if name not in _COMMANDS:
        return Command("error", f"unknown command /{word} (try /help)")
    if _COMMANDS[name] and not rest:
        return Command("error", f"/{name} needs an argument (try /help)")
    return Command(name, rest)
