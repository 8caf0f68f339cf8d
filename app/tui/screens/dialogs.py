"""Modal screens: help, details (``/info``, ``/who``, ``/stats``), passphrase, a multi-line
message (a paste), fatal errors."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import ClassVar

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Input, Static, TextArea

from app.commands.front import TUI
from app.commands.table import help_rows
from app.tui.config import TuiConfig, key_label
from app.tui.model import STATE_GLYPHS
from app.tui.render import state_label

__all__ = [
    "AsFile",
    "FatalScreen",
    "HelpScreen",
    "MultiLineScreen",
    "PassphraseScreen",
    "TextScreen",
    "help_grid",
    "help_text",
]

KEYS = (
    ("Enter", "send the line (or run the /command)"),
    ("Tab", "complete a /command, #channel or @name"),
    ("Up / Down", "previous / next line you typed"),
    ("paste", "several lines: one message, shown first (Ctrl+S sends)"),
    ("Ctrl+N / Ctrl+P", "next / previous channel"),
    ("Alt+1 … Alt+9", "go to channel 1…9"),
    ("PgUp / PgDn", "scroll back / forward (older history loads from disk)"),
    ("Ctrl+Home / Ctrl+End", "top of the loaded history (loads more) / newest"),
    ("Ctrl+Up / Ctrl+Down", "select a message (then /info); Esc clears"),
    ("Ctrl+F", "find as you type in this channel; ↑/↓ step, Esc leaves"),
    ("Alt+F", "search every channel: a list of results, Enter jumps there"),
    ("Ctrl+R", "retry messages that failed"),
    ("F1", "this help"),
    ("F2", "show / hide the peer list"),
    ("F3", "dark / light theme"),
    ("F4", "hide / show join, leave and nick lines"),
    ("Alt+A", "next channel with news (mentions first); /read marks all read"),
    ("Ctrl+Q, Ctrl+C", "quit (everything is saved)"),
)

KEY_ACTIONS: dict[str, tuple[str, ...]] = {
    "Ctrl+N / Ctrl+P": ("next_channel", "previous_channel"),
    "Alt+1 … Alt+9": tuple(f"channel_{i}" for i in range(1, 10)),
    "PgUp / PgDn": ("scroll_up", "scroll_down"),
    "Ctrl+Home / Ctrl+End": ("oldest", "newest"),
    "Ctrl+Up / Ctrl+Down": ("select_previous", "select_next"),
    "Ctrl+F": ("search",),
    "Alt+F": ("search_all",),
    "Ctrl+R": ("retry",),
    "F1": ("help",),
    "F2": ("peers",),
    "F3": ("theme",),
    "F4": ("events",),
    "Alt+A": ("hotlist",),
}
"""The rows of :data:`KEYS` that the config file's ``[keys]`` can change (action ids)."""


def key_rows(config: TuiConfig | None = None) -> list[tuple[str, str]]:
    """:data:`KEYS` with the keys in effect (the config file's ``[keys]``)."""
    rows = []
    for label, what in KEYS:
        ids = KEY_ACTIONS.get(label, ())
        if config is not None and any(i in config.keymap for i in ids):
            label = " / ".join(key_label(config.keys(i)) for i in ids)
        rows.append((label, what))
    return rows


MARKERS = (
    (STATE_GLYPHS["queued"], "queued", "yours, stored on disk, not sent yet (offline?)"),
    (STATE_GLYPHS["sent"], "sent", "yours, handed to the network"),
    (
        STATE_GLYPHS["possibly_acknowledged"],
        "possibly seen",
        "someone's bloom filter says they probably have it",
    ),
    (STATE_GLYPHS["acknowledged"], "acknowledged", "someone's causal history names it: received"),
    (STATE_GLYPHS["failed"], "failed", "resends exhausted: Ctrl+R or /retry sends it again"),
    ("⋯", "N earlier messages missing · fetching", "it arrived before messages it depends on"),
    ("✗", "N messages lost", "the protocol gave up on them (lost timeout)"),
    ("↺", "recovered", "arrived late: a resend, a repair or a sync filled the gap"),
    ("─", "── new ──", "where you left off"),
)


def help_text(config: TuiConfig | None = None) -> Text:
    """The F1 / ``/help`` text."""
    out = Text()
    out.append("Keys\n", "bold underline")
    for key, what in key_rows(config):
        out.append(f"  {key:<22}", "bold")
        out.append(f"{what}\n")
    out.append("\nCommands\n", "bold underline")
    for usage, what in help_rows(TUI):
        out.append(f"  {usage:<22}", "bold")
        out.append(f"{what}\n")
    out.append("  //text".ljust(24), "bold")
    out.append("send a line that starts with /\n")
    out.append("\nMarkers and states\n", "bold underline")
    for glyph, name, what in MARKERS:
        out.append(f"  {glyph} ", "bold")
        out.append(f"{name:<38}", "bold")
        out.append(f"{what}\n")
    return out


def help_grid(config: TuiConfig | None = None) -> Group:
    """The F1 / ``/help`` contents as two-column grids: a description that does not fit
    the dialog's width wraps under itself, never back to the left edge (an 80-column pane)."""

    def grid(rows: Sequence[tuple[str, str]]) -> Table:
        table = Table.grid(padding=(0, 2))
        table.add_column(no_wrap=True, style="bold")
        table.add_column(ratio=1)
        for left, right in rows:
            table.add_row(left, right)
        return table

    def title(text: str) -> Text:
        return Text(text, "bold underline")

    commands = [*help_rows(TUI), ("//text", "send a line that starts with /")]
    markers = [(f"{glyph} {name}", what) for glyph, name, what in MARKERS]
    return Group(
        title("Keys"),
        grid(key_rows(config)),
        Text(""),
        title("Commands"),
        grid(commands),
        Text(""),
        title("Markers and states"),
        grid(markers),
    )


class TextScreen(ModalScreen[None]):
    """A scrollable box of text; Esc, Enter or q closes it."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,q", "close", "close", show=False),
        Binding("f1", "close", "close", show=False),
    ]

    def __init__(
        self, title: str, body: Text | str | Group, *, id: str | None = None
    ) -> None:
        super().__init__(id=id)
        self.title_text = title
        self.body = body

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self.title_text, classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(self.body, id="dialog-text")
            yield Static("Esc closes", classes="dialog-hint")

    def action_close(self) -> None:
        self.dismiss(None)


class HelpScreen(TextScreen):
    """F1: keys, commands, markers."""

    def __init__(self, config: TuiConfig | None = None) -> None:
        super().__init__("sdschat help", help_grid(config), id="help")


class PassphraseScreen(ModalScreen[str | None]):
    """Asks for a channel passphrase (not echoed). Empty means a PUBLIC channel.

    ``error`` (a wrong passphrase) is shown above the field. With ``startup`` (the
    prompt sdschat opens with) Esc does not leave: it clears the field and shows the
    choices again (a passphrase, empty for PUBLIC, Ctrl+C quits); otherwise Esc cancels.
    """

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "cancel", "cancel", show=False)]

    def __init__(
        self, channel: str, *, purpose: str = "", error: str = "", startup: bool = False
    ) -> None:
        super().__init__(id="passphrase")
        self.channel = channel
        self.purpose = purpose
        self.error = error
        self.startup = startup

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            title = f"Passphrase for #{self.channel}" if self.channel else "Passphrase"
            yield Static(title, classes="dialog-title")
            yield Static(
                self.purpose
                or "Everyone in the channel uses the same passphrase. Leave it empty for a "
                "PUBLIC channel: anyone who knows its name can read it.",
                classes="dialog-body-text",
            )
            error = Static(f"✗ {self.error}", classes="error-text", id="passphrase-error")
            error.display = bool(self.error)
            yield error
            yield Input(password=True, placeholder="passphrase", id="passphrase-input")
            yield Static(
                "Enter accepts (empty: PUBLIC) · Esc clears · Ctrl+C quits"
                if self.startup
                else "Enter accepts · Esc cancels",
                classes="dialog-hint",
            )

    def on_mount(self) -> None:
        self.query_one(Input).focus()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.dismiss(event.value)

    def action_cancel(self) -> None:
        if not self.startup:
            self.dismiss(None)
            return
        self.query_one(Input).value = ""  # back to the choices; nothing is decided
        self.query_one("#passphrase-error", Static).display = False


@dataclass(frozen=True)
class AsFile:
    """The paste dialog's answer when the text is to be sent as a text file."""

    text: str


LONG_PASTE_LINES = 40
"""From this many lines on, the paste dialog offers the text as a file first (a log, a
stack trace: scrolled past as a message, kept whole and saved with /save as a file)."""


class MultiLineScreen(ModalScreen["str | AsFile | None"]):
    """A paste of several lines, to send as one message: editable (Enter is a line
    break here), Ctrl+S sends, Ctrl+F sends it as a text file instead, Esc cancels and
    leaves the input line as it was.

    ``check`` returns why the text cannot be sent as a message (too long) or None; the
    dialog stays open with the text when it cannot, so nothing pasted is lost, and says
    that Ctrl+F sends it as a file."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "send", "send", show=False, priority=True),
        Binding("ctrl+f", "send_file", "send as a file", show=False, priority=True),
        Binding("escape", "cancel", "cancel", show=False, priority=True),
    ]

    def __init__(self, channel: str, text: str, check: Callable[[str], str | None]) -> None:
        super().__init__(id="multiline")
        self.channel = channel
        self.text = text
        self.check = check

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(self._title(self.text), classes="dialog-title", id="multiline-title")
            yield TextArea(self.text, soft_wrap=True, show_line_numbers=False, id="multiline-text")
            error = Static("", classes="error-text", id="multiline-error")
            error.display = False
            yield error
            yield Static(self._hint(self.text), classes="dialog-hint", id="multiline-hint")

    def _title(self, text: str) -> str:
        lines = text.strip("\n").count("\n") + 1
        what = f"{lines} lines" if lines != 1 else "this line"
        return f"Send {what} as one message to #{self.channel}?"

    @staticmethod
    def _hint(text: str, too_long: bool = False) -> str:
        if too_long:
            return "Ctrl+F sends it as a file · Esc cancels"
        if text.strip("\n").count("\n") + 1 >= LONG_PASTE_LINES:
            return "Ctrl+F sends it as a file · Ctrl+S as one message · Esc cancels"
        return "Ctrl+S sends · Ctrl+F as a file · Esc cancels"

    def on_mount(self) -> None:
        area = self.query_one(TextArea)
        area.focus()
        area.move_cursor(area.document.end)
        self._show_problem(self.text)

    def on_text_area_changed(self, event: TextArea.Changed) -> None:
        text = event.text_area.text
        self.query_one("#multiline-title", Static).update(self._title(text))
        self._show_problem(text)

    def _show_problem(self, text: str) -> str | None:
        """Say at once, as the text is edited, why it cannot be sent (too long)."""
        problem = self.check(text.strip("\n")) if text.strip() else None
        error = self.query_one("#multiline-error", Static)
        if problem is not None:
            error.update(problem)
        error.display = problem is not None
        self.query_one("#multiline-hint", Static).update(self._hint(text, problem is not None))
        return problem

    def action_send(self) -> None:
        text = self.query_one(TextArea).text.strip("\n")
        if not text.strip():
            self.dismiss(None)
            return
        if self._show_problem(text) is not None:
            return
        self.dismiss(text)

    def action_send_file(self) -> None:
        text = self.query_one(TextArea).text.strip("\n")
        self.dismiss(AsFile(text) if text.strip() else None)

    def action_cancel(self) -> None:
        self.dismiss(None)


class FatalScreen(ModalScreen[None]):
    """An error sdschat cannot continue after; any key exits with ``code``."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape,enter,q,space", "leave", "exit", show=False)
    ]

    def __init__(self, title: str, message: str, hint: str, code: int) -> None:
        super().__init__(id="fatal")
        self.title_text = title
        self.message = message
        self.hint = hint
        self.code = code

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog error"):
            yield Static(f"✗ {self.title_text}", classes="dialog-title")
            yield Static(self.message, classes="dialog-body-text", id="fatal-message")
            if self.hint:
                yield Static(self.hint, classes="dialog-body-text", id="fatal-hint")
            yield Static(f"Press Enter to exit (status {self.code})", classes="dialog-hint")

    def action_leave(self) -> None:
        self.app.exit(return_code=self.code, message=f"sdschat: {self.message}")


def own_state_line(state: str | None) -> str:
    if state is None:
        return "—"
    return f"{STATE_GLYPHS.get(state, '?')} {state_label(state)}"
