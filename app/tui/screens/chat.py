"""The main screen: channels | channel bar, log, typing line, input | peers; status bar.

Its key bindings are ``priority`` bindings so they work while the input line
has focus; they belong to this screen, so they are inactive under a modal
(search, help...), where keys go to the modal.
"""

from __future__ import annotations

from datetime import tzinfo
from typing import ClassVar

from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, Vertical
from textual.screen import Screen

from app.tui.config import ACTIONS, BINDING_PREFIX, NOT_PRIORITY
from app.tui.widgets.banner import Banner
from app.tui.widgets.chat_input import ChatInput, CompletionSource
from app.tui.widgets.find_bar import FindBar
from app.tui.widgets.message_log import MessageLog
from app.tui.widgets.panels import ChannelBar, ChannelList, PeerList, StatusBar, TypingLine

__all__ = ["ChatScreen"]


class ChatScreen(Screen[None]):
    """The chat layout (see the module docstring); its actions live on the app."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding(
            keys, action, what, priority=name not in NOT_PRIORITY, show=False,
            id=f"{BINDING_PREFIX}{name}",
        )
        for name, (keys, action, what) in ACTIONS.items()
    ]
    """Every key of :data:`app.tui.config.ACTIONS`; the ids are ``sdschat.`` and the
    config file's ``[keys]`` names (the app applies them as Textual's keymap)."""

    def __init__(self, source: CompletionSource, tz: tzinfo | None) -> None:
        super().__init__(id="chat")
        self._source = source
        self._tz = tz

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield ChannelList(id="channels")
            with Vertical(id="center"):
                yield ChannelBar(id="channel-bar")
                yield Banner(id="banner")  # a channel we are out of: why it is read-only
                yield MessageLog(tz=self._tz, id="log")
                yield TypingLine(id="typing")
                yield FindBar(id="find")
                yield ChatInput(
                    self._source,
                    placeholder="Type a message, /help for commands",
                    id="input",
                )
            yield PeerList(id="peers")
        yield StatusBar(id="status")

    def on_mount(self) -> None:
        self.query_one(ChatInput).focus()
