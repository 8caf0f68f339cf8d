"""What a typed command asks of the front end it was typed into.

The command table (:mod:`app.commands.table`) names one handler per command
(:mod:`app.commands.handlers`), written once for both front ends against
:class:`FrontEnd`: the TUI (``app/tui/commanding.py``) and headless mode
(``app/headless/front.py``) each implement it. What the two do alike (check the
arguments, call the node, decide what to say) is in the handler; what differs by
nature is behind a method here:

* **how a result is shown**: a notice or a dialog in the TUI, a JSON line in
  headless mode (:meth:`FrontEnd.report`, :meth:`~FrontEnd.show_peers`, ...);
* **which message a command is about**: the TUI's ``/reply`` answers the selected
  message, headless mode's names an id (:meth:`FrontEnd.about_message`,
  :meth:`~FrontEnd.file_to_save`);
* **what a channel change does to the screen** (:meth:`~FrontEnd.join`,
  :meth:`~FrontEnd.left`, :meth:`~FrontEnd.switch`, :meth:`~FrontEnd.entered`).

The commands only the TUI offers (``/info``, ``/search``, ``/theme``...) ask for
:class:`TuiFrontEnd`, which adds what they need. A handler never catches what the
node raises: ``ValueError`` and ``KeyError`` (a refused command, nothing changed) and
``NodeClosedError`` (shutting down) go to the front end's runner, which says so.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import date
from typing import TYPE_CHECKING, Any, Literal, Protocol

if TYPE_CHECKING:
    from app.node.events import NodeEvent
    from app.node.runtime import Node

__all__ = ["HEADLESS", "TUI", "Front", "FrontEnd", "TuiFrontEnd"]

Front = Literal["tui", "headless"]
TUI: Front = "tui"
HEADLESS: Front = "headless"


class FrontEnd(Protocol):
    """What every command may ask of the front end it runs in."""

    @property
    def front(self) -> Front:
        """Which front end this is (the table says which commands each offers)."""

    @property
    def node(self) -> Node:
        """The running node."""

    @property
    def current(self) -> str | None:
        """The current channel (where a line typed goes), if any."""

    @property
    def shortcodes(self) -> bool:
        """Whether ``:thumbsup:`` in a line is sent as the emoji (the TUI's)."""

    @property
    def no_channel(self) -> str:
        """The refusal of a command that needs a current channel when there is none."""

    @property
    def relays(self) -> Sequence[str]:
        """The relay URLs an ``/invite`` code names (none: LAN gossip)."""

    def joined(self) -> Collection[str]:
        """The channels one can ``/switch`` to."""

    def channel_ref(self, channel: str | None) -> str:
        """How a refusal names a channel (``#ops``; ``channel 'ops'``)."""

    def refuse(self, reason: str) -> None:
        """The command cannot be carried out: say why (nothing changed)."""

    def report(self, event: NodeEvent) -> None:
        """Show what a shared command found or did (``Info``, ``MembersEvent``, or a
        ``NodeError``: a refusal)."""

    async def say(self, channel: str, text: str, kind: str) -> None:
        """Send a typed line (``kind`` ``msg`` or ``me``) to ``channel``."""

    async def join(self, channel: str) -> None:
        """``/join``: join ``channel`` (or go there, if joined) and make it current."""

    async def leaving(self, channel: str) -> None:
        """``/leave``, before the node leaves ``channel`` (a last line can still go out)."""

    async def left(self, channel: str) -> None:
        """``/leave``: the node left ``channel``."""

    async def switch(self, channel: str) -> None:
        """``/switch``: make ``channel`` (joined) the current one."""

    async def entered(self, channel: str) -> None:
        """A command opened ``channel`` (``/create``, ``/query``): make it current."""

    def named(self, old: str, new: str) -> None:
        """``/nick``: our name is ``new`` now (``old`` when it did not change)."""

    def forgot(self, channel: str) -> None:
        """``/forget``: the node forgot ``channel`` (its history and keys)."""

    def show_peers(self, channel: str | None) -> None:
        """``/who``: the peers heard from in ``channel``."""

    def show_stats(self, stats: dict[str, Any]) -> None:
        """``/stats``: the node's counters and buffer sizes."""

    def retried(self, n: int) -> None:
        """``/retry``: ``n`` failed messages are being sent again."""

    def show_help(self) -> None:
        """``/help``: the commands this front end offers (from the table)."""

    async def quit(self) -> None:
        """``/quit``: stop (everything is saved)."""

    async def about_message(self, name: str, channel: str, arg: str) -> None:
        """``/reply``, ``/react``, ``/edit``, ``/delete`` in ``channel``: about the message
        the front end's way of pointing names."""

    async def topic(self, channel: str, arg: str) -> None:
        """``/topic [TEXT]``: set ``channel``'s topic, or (no text) show it."""

    def file_to_save(self, arg: str) -> str | None:
        """``/save``'s ``ID [PATH]`` for ``arg``; None: refused (said why)."""


class TuiFrontEnd(FrontEnd, Protocol):
    """What the TUI's own commands ask of it (the table offers them there only)."""

    def copy_selected(self) -> None:
        """``/copy``: the selected (or last) message's text to the clipboard."""

    async def show_info(self) -> None:
        """``/info``: the details of the selected message."""

    def show_names(self) -> None:
        """``/names``: the names in the current channel, online first."""

    async def show_mentions(self) -> None:
        """``/mentions``: the newest lines for you, in every channel."""

    def highlight(self, word: str) -> None:
        """``/highlight [WORD]``: add or remove ``word`` (empty: list them)."""

    def mark_all_read(self) -> None:
        """``/read``: every channel read."""

    async def away(self, text: str) -> None:
        """``/away [TEXT]``: away with ``text``; empty: back."""

    def set_level(self, channel: str | None, level: str) -> None:
        """``/mute [mentions]``, ``/unmute``: ``channel``'s notification level."""

    def desktop_notifications(self, on: bool | None) -> None:
        """``/notify [on|off]``: turn desktop notifications on or off (None: say which)."""

    def search(self, text: str, *, everywhere: bool) -> None:
        """``/search [-a] TEXT``: find in this channel (the find bar) or in all."""

    async def goto(self, channel: str, day: date) -> None:
        """``/goto DATE``: the first message of ``day`` or later in ``channel``."""

    def ask_passphrase(self, channel: str) -> None:
        """``/passphrase``: ask for the passphrase of the next ``/join``."""

    def toggle_theme(self) -> None:
        """``/theme``: dark <-> light."""
