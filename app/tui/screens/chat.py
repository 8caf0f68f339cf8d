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

from app.tui.widgets.chat_input import ChatInput, CompletionSource
from app.tui.widgets.find_bar import FindBar
from app.tui.widgets.message_log import MessageLog
from app.tui.widgets.panels import ChannelBar, ChannelList, PeerList, StatusBar, TypingLine

__all__ = ["ChatScreen"]


class ChatScreen(Screen[None]):
    """The chat layout (see the module docstring); its actions live on the app."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+n", "app.cycle(1)", "next channel", priority=True, show=False),
        Binding("ctrl+p", "app.cycle(-1)", "previous channel", priority=True, show=False),
        *[
            Binding(f"alt+{i}", f"app.goto({i})", f"channel {i}", priority=True, show=False)
            for i in range(1, 10)
        ],
        Binding("pageup", "app.page(-1)", "scroll up", priority=True, show=False),
        Binding("pagedown", "app.page(1)", "scroll down", priority=True, show=False),
        Binding("ctrl+home", "app.log_end(-1)", "oldest", priority=True, show=False),
        Binding("ctrl+end", "app.log_end(1)", "newest", priority=True, show=False),
        Binding("ctrl+up", "app.select(-1)", "select previous", priority=True, show=False),
        Binding("ctrl+down", "app.select(1)", "select next", priority=True, show=False),
        Binding("escape", "app.unselect", "clear selection", show=False),
        Binding("ctrl+f", "app.search", "search", priority=True, show=False),
        Binding("alt+f", "app.search_all", "search all channels", priority=True, show=False),
        Binding("ctrl+r", "app.retry", "retry failed", priority=True, show=False),
        Binding("f1", "app.help", "help", priority=True, show=False),
        Binding("f2", "app.toggle_peers", "peers", priority=True, show=False),
        Binding("f3", "app.toggle_theme", "theme", priority=True, show=False),
        Binding("f4", "app.toggle_events", "join/leave lines", priority=True, show=False),
        Binding("alt+a", "app.hotlist", "next channel with news", priority=True, show=False),
    ]

    def __init__(self, source: CompletionSource, tz: tzinfo | None) -> None:
        super().__init__(id="chat")
        self._source = source
        self._tz = tz

    def compose(self) -> ComposeResult:
        with Horizontal(id="main"):
            yield ChannelList(id="channels")
            with Vertical(id="center"):
                yield ChannelBar(id="channel-bar")
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
