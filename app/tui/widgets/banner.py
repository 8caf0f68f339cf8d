"""A lasting line above the log about the channel shown: why it is read-only (you were
removed from it, or left it), until another channel is shown."""

from __future__ import annotations

from rich.text import Text
from textual.widget import Widget

__all__ = ["Banner"]


class Banner(Widget):
    """Hidden while it has nothing to say."""

    DEFAULT_CSS = """
    Banner {
        height: auto;
        padding: 0 1;
        background: $error 20%;
        color: $text;
    }
    """

    def __init__(self, id: str | None = None) -> None:
        super().__init__(id=id)
        self.text = ""
        self.display = False

    def say(self, text: str | None) -> None:
        """Show ``text`` (None or "": hide)."""
        text = text or ""
        if text != self.text:
            self.text = text
            self.refresh(layout=True)
        self.display = bool(text)

    def render(self) -> Text:
        return Text(f"⊘ {self.text}", style="bold")
