"""``/verify NAME``: the safety number in a dialog that stays until the person says the two
screens match (or cancels), as Signal's and Element's verification screens do.

The number is shown three ways, each enough on its own (docs/members.md, "Safety
numbers"): its 60 digits in 12 groups of 5 (to read aloud, or compare side by side), its
16 emoji with their names from Matrix's SAS table (to read aloud quickly; weaker: 48
bits per side), and a QR code of the digits (``segno``) drawn with half blocks, for the
other person to scan from the screen. ``c`` copies the digits (OSC 52, and tmux's paste
buffer inside tmux). ``y`` says they match: the member is marked verified (``✓`` in
``/members``; a later key change of theirs is a loud warning); ``n`` or Esc cancels and
marks nothing. The dialog closes on nothing else.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import ClassVar

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

from app.members.qr import qr_lines

__all__ = ["VerifyScreen", "emoji_grid", "qr_lines", "safety_text"]


def emoji_grid(pairs: Sequence[tuple[str, str]], per_row: int = 4) -> list[str]:
    """The emoji with their names, ``per_row`` to a line, in the number's order."""
    cells = [f"{emoji} {name:<10}" for emoji, name in pairs]
    return ["  ".join(cells[i : i + per_row]) for i in range(0, len(cells), per_row)]


def safety_text(who: str, number: str, pairs: Sequence[tuple[str, str]]) -> Text:
    """The dialog's body: what to do, the digits, the emoji, the QR code."""
    groups = number.split()
    out = Text()
    out.append(f"Compare this with {who}, out of band (in person, or on a call you trust).\n",
               "bold")  # fmt: skip
    out.append("The same on both screens: nobody sits between you. Any difference: do not "
               "confirm.\n\n", "dim")  # fmt: skip
    out.append("Safety number\n", "bold")
    for i in range(0, len(groups), 4):
        out.append("  " + "  ".join(groups[i : i + 4]) + "\n")
    out.append("\nOr read the emoji aloud (quicker; the digits are stronger)\n", "bold")
    for line in emoji_grid(pairs):
        out.append("  " + line.rstrip() + "\n")
    out.append("\nOr let them scan it (the digits above)\n", "bold")
    for line in qr_lines(number.replace(" ", "")):  # dark on light, whatever the theme
        out.append("  ")
        out.append(line, "#000000 on #ffffff")
        out.append("\n")
    return out


class VerifyScreen(ModalScreen[bool]):
    """The safety number with ``who``; dismissed with True (``y``: they match) or False
    (``n``, Esc). ``copy`` puts the digits on the clipboard and says where."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("y", "match", "they match", show=False),
        Binding("n,escape", "cancel", "cancel", show=False),
        Binding("c", "copy", "copy", show=False),
    ]

    def __init__(self, who: str, number: str, pairs: Sequence[tuple[str, str]],
                 copy: Callable[[str], str]) -> None:  # fmt: skip
        super().__init__(id="verify")
        self.who = who
        self.number = number
        self.pairs = list(pairs)
        self._copy = copy
        self.copied_to = ""
        """Where ``c`` put the digits (empty until then)."""

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog verify"):
            yield Static(f"Verify {self.who}", classes="dialog-title")
            with VerticalScroll(classes="dialog-body"):
                yield Static(safety_text(self.who, self.number, self.pairs), id="dialog-text")
            yield Static("y  they match: mark verified   ·   n / Esc  cancel   ·   c  copy "
                         "the digits", classes="dialog-hint", id="verify-hint")  # fmt: skip

    def action_match(self) -> None:
        self.dismiss(True)

    def action_cancel(self) -> None:
        self.dismiss(False)

    def action_copy(self) -> None:
        self.copied_to = self._copy(self.number)
        self.query_one("#verify-hint", Static).update(
            f"copied ({self.copied_to})   ·   y  they match   ·   n / Esc  cancel")
